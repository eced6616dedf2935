"""The verifier's cases on CUDA, in one table: what CPU CI cannot check.

    bash benchmarks/gpu_check.sh            # on a machine with a GPU (about 2-4 minutes)
    python benchmarks/gpu_check.py --device cpu   # the same cases on CPU (a dry run of this script)

Each `fixtures/verify` case (`make_case()`) is moved to the device and verified in float32
and bfloat16 (the model cast, float inputs cast; the loss as the case defines it), plus a
larger GPT (TinyGPT, 6 blocks, width 256, 512 tokens) where the memory figures are more than
noise. The CUDA half of the verifier is what this exercises: CUDA events for the step and
recompute times, `torch.cuda.max_memory_allocated` for the peak, the dtype tolerances. With
two or more GPUs, the FSDP2 case also runs under `--nproc 2 --backend nccl`.

One row per run: the case, dtype, the verdict against the expected one, the error codes,
activation memory saved, the peak (metric, without -> with checkpointing), the step-time
overhead, seconds. Exit status 1 when a verdict is not the expected one.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import torch

from ckptlint.runtime_check import VerifyError, verify

REPO = Path(__file__).resolve().parent.parent
VERIFY = REPO / "fixtures" / "verify"
# case -> the verdict and error codes expected (as tests/test_verify_cli.py on CPU)
EXPECTED: dict[str, tuple[str, frozenset[str]]] = {
    "transformer_stack": ("pass", frozenset()),
    "batchnorm_in_checkpoint": ("fail", frozenset({"CKPT010"})),
    "late_binding_lambda": ("fail", frozenset({"CKPT030"})),
    "dropout_without_rng_state": ("fail", frozenset({"CKPT033"})),
    "reentrant_frozen_input": ("fail", frozenset({"CKPT021"})),
    "stateful_counter": ("fail", frozenset({"CKPT011"})),
    "hf_tiny_llama": ("pass", frozenset()),
}


def load(name: str) -> Any:
    sys.path.insert(0, str(VERIFY))
    spec = importlib.util.spec_from_file_location(f"gpu_check_{name}", VERIFY / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def moved(value: Any, device: torch.device, dtype: torch.dtype) -> Any:
    if isinstance(value, torch.Tensor):
        return value.to(device, dtype) if value.is_floating_point() else value.to(device)
    if isinstance(value, tuple):
        return tuple(moved(v, device, dtype) for v in value)
    if isinstance(value, list):
        return [moved(v, device, dtype) for v in value]
    if isinstance(value, dict):
        return {k: moved(v, device, dtype) for k, v in value.items()}
    return value


def case_on(name: str, device: torch.device, dtype: torch.dtype) -> tuple[torch.nn.Module, Any, Any]:
    module = load(name)
    case = module.make_case()
    field = (lambda key: case.get(key)) if isinstance(case, dict) else (lambda key: getattr(case, key, None))
    model = field("model").to(device=device, dtype=dtype)
    loss_fn = field("loss_fn")
    if loss_fn is not None and getattr(loss_fn, "__closure__", None):
        for cell in loss_fn.__closure__:  # the targets a case's loss closes over
            if isinstance(cell.cell_contents, torch.Tensor):
                cell.cell_contents = moved(cell.cell_contents, device, dtype)
    return model, moved(field("inputs"), device, dtype), loss_fn


def large_gpt(device: torch.device, dtype: torch.dtype) -> tuple[torch.nn.Module, Any, Any]:
    sys.path.insert(0, str(VERIFY))
    from transformer_stack import TinyGPT

    torch.manual_seed(0)
    model = TinyGPT(layers=6, width=256, heads=8, context=512).train().to(device=device, dtype=dtype)
    tokens = torch.randint(0, 96, (8, 512), device=device)
    targets = torch.randint(0, 96, (8, 512), device=device)
    return model, tokens, lambda logits: torch.nn.functional.cross_entropy(logits.flatten(0, 1).float(), targets.flatten())


def row(name: str, dtype: torch.dtype, expected: tuple[str, frozenset[str]] | None, build: Any, device: torch.device) -> dict[str, Any]:
    started = time.perf_counter()
    label = str(dtype).replace("torch.", "")
    try:
        model, inputs, loss_fn = build(device, dtype)
        if device.type == "cuda":
            torch.cuda.manual_seed_all(0)
        report = verify(model, inputs, loss_fn, repeat=3)
    except VerifyError as error:
        return {"case": name, "dtype": label, "verdict": "error", "ok": False, "codes": "", "note": str(error)[:120], "s": time.perf_counter() - started}
    codes = frozenset(f.code for f in report.errors if f.code)
    ok = expected is None or (report.verdict == expected[0] and codes == expected[1])
    peak = report.memory.peak
    return {
        "case": name,
        "dtype": label,
        "verdict": report.verdict + ("" if expected is None else f" ({expected[0]})"),
        "ok": ok,
        "codes": ",".join(sorted(codes)),
        "saved": f"{report.memory.activations.saving:.1%}",
        "peak": f"{peak.metric}: {peak.baseline_bytes / 2**20:.1f} -> {peak.checkpointed_bytes / 2**20:.1f} MiB" if peak else "-",
        "overhead": f"x{report.time.overhead:.2f}" + ("" if report.time.resolved else " (noise)"),
        "tolerance": report.tolerance.source,
        "s": time.perf_counter() - started,
    }


def fsdp2_nccl() -> dict[str, Any]:
    started = time.perf_counter()
    result = subprocess.run(
        [sys.executable, "-m", "ckptlint", "verify", str(REPO / "fixtures/verify_distributed/fsdp2_checkpoint_then_shard.py:make_case"),
         "--nproc", "2", "--backend", "nccl", "--json", "--repeat", "3"],
        capture_output=True, text=True, timeout=240,
    )  # fmt: skip
    try:
        payload = json.loads(result.stdout)
    except json.JSONDecodeError:
        return {"case": "fsdp2 --nproc 2 nccl", "dtype": "float32", "verdict": f"exit {result.returncode}", "ok": False, "codes": "", "note": result.stderr[-160:], "s": time.perf_counter() - started}
    return {
        "case": "fsdp2 --nproc 2 nccl",
        "dtype": "float32",
        "verdict": f"{payload['verdict']} (pass)",
        "ok": payload["verdict"] == "pass",
        "codes": ",".join(sorted({f["code"] for f in payload["findings"] if f["severity"] == "error" and f["code"]})),
        "saved": f"{payload['memory']['saving']:.1%}",
        "peak": "-",
        "overhead": f"x{payload['time']['overhead']}",
        "s": time.perf_counter() - started,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cuda")
    options = parser.parse_args()
    device = torch.device(options.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        print("no CUDA device: nothing to check (use --device cpu for a dry run)")
        return 2
    where = torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU"
    print(f"torch {torch.__version__} on {where}", flush=True)
    rows = []
    for dtype in (torch.float32, torch.bfloat16):
        for name, expected in EXPECTED.items():
            if name.startswith("hf_") and importlib.util.find_spec("transformers") is None:
                continue
            rows.append(row(name, dtype, expected, lambda d, t, n=name: case_on(n, d, t), device))
            print(f"  {rows[-1]['case']} {rows[-1]['dtype']}: {rows[-1]['verdict']} {rows[-1].get('note', '')}", flush=True)
        rows.append(row("TinyGPT 6x256, 512 tokens", dtype, EXPECTED["transformer_stack"], large_gpt, device))
    if device.type == "cuda" and torch.cuda.device_count() >= 2:
        rows.append(fsdp2_nccl())
    columns = ("case", "dtype", "verdict", "codes", "saved", "peak", "overhead", "tolerance", "s")
    print()
    print("| " + " | ".join(columns) + " |")
    print("|" + "---|" * len(columns))
    for r in rows:
        print("| " + " | ".join(f"{r[c]:.1f}" if c == "s" else str(r.get(c, "")) for c in columns) + " |")
    wrong = [r for r in rows if not r["ok"]]
    for r in wrong:
        print(f"unexpected: {r['case']} {r['dtype']}: {r['verdict']} {r.get('note', '')}")
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
