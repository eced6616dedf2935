#!/usr/bin/env bash
# The verifier's cases on CUDA (see benchmarks/gpu_check.py): one table, a few minutes.
# Runs from a checkout on a GPU machine whose python3 holds torch (and, for the Hugging Face
# case, transformers); ckptlint itself is installed into a scratch folder, without its
# dependencies (the verifier needs none beyond torch), so nothing is fetched.
set -euo pipefail
cd "$(dirname "$0")/.."
export PYTHONUNBUFFERED=1
python3 -c "import torch; assert torch.cuda.is_available(), 'no CUDA device'; print('torch', torch.__version__, torch.cuda.get_device_name(0), torch.cuda.device_count(), 'GPU(s)')"
site="$(mktemp -d)/site"
python3 -m pip install -q --no-deps --no-build-isolation --no-cache-dir --target "$site" . >/dev/null
export PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}"
timeout 300 python3 benchmarks/gpu_check.py "$@"
