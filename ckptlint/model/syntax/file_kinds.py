"""Which files of a project, besides its Python code, the index reads facts from."""

from __future__ import annotations

# Shell launch scripts (`scripts/run.sh`, a Slurm batch file).
SHELL_SUFFIXES = (".sh", ".bash", ".slurm", ".sbatch")
# Configuration files: YAML, for the defaults of options that decide reentrancy
# (`use_reentrant: true` in a Hydra / OmegaConf YAML) and accelerate's FSDP configs, and
# launch scripts, for the files they run under them (`accelerate launch --config_file
# fsdp.yaml train.py`). accelerate reads a config that is not `.json` as YAML whatever its
# suffix (`load_config_from_file`): `.conf` is one projects use.
CONFIGURATION_SUFFIXES = (".yaml", ".yml", ".conf", *SHELL_SUFFIXES)
