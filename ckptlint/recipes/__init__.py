"""Training recipes and launch scripts: the FSDP and Hugging Face rules applied to what YAML /
JSON configuration files (accelerate configs, Trainer / TRL argument files, axolotl,
LLaMA-Factory) and shell launch scripts say, with positions in those files.

This module is imported on every run; the parsing (the model's readers of these files:
`ckptlint.model.syntax.recipe_documents`, `shell_scripts`, `launch_commands`, `fsdp_settings`) and
the checks are imported only when a recipe file is linted.
"""

from __future__ import annotations

import re
from pathlib import Path

from ckptlint.model.syntax.file_kinds import SHELL_SUFFIXES

DATA_SUFFIXES = (".yaml", ".yml", ".json")
RECIPE_SUFFIXES = DATA_SUFFIXES + SHELL_SUFFIXES
# Larger YAML / JSON / shell files are data (tokenizers, datasets), not training recipes.
MAX_RECIPE_BYTES = 1 << 20


# A recipe without one of these words cannot hold a finding: it is not parsed.
TRIGGERS = ("gradient_checkpointing", "fsdp", "FSDP", "activation_checkpointing", "use_reentrant")
# A launch script combines files that may say nothing alone (a LLaMA-Factory or TRL recipe
# turns checkpointing on by default): its launchers are triggers too.
LAUNCHERS = ("accelerate", "torchrun", "torch.distributed", "deepspeed", "llamafactory-cli", "lmf ", "axolotl", "trl ")
_BYTES_TRIGGERS = tuple(word.encode() for word in TRIGGERS)
_BYTES_LAUNCHERS = tuple(word.encode() for word in LAUNCHERS)


def may_hold_findings(content: str | bytes, *, shell: bool) -> bool:
    if isinstance(content, bytes):
        words = _BYTES_TRIGGERS + (_BYTES_LAUNCHERS if shell else ())
    else:
        words = TRIGGERS + (LAUNCHERS if shell else ())
    return any(word in content for word in words)


_SHELL_SHEBANG = re.compile(r"\A#![ \t]*\S*(?:/|env[ \t]+)(?:ba|z|k|da)?sh\b")


def is_recipe_path(path: Path | str) -> bool:
    return str(path).lower().endswith(RECIPE_SUFFIXES)


def recipe_kind(path: Path | str, text: str) -> str | None:
    """"yaml", "json" or "shell" for a recipe or launch script (a file without a Python
    suffix whose shebang names a shell counts: pre-commit passes those by type); None for
    Python."""
    name = str(path).lower()
    if name.endswith((".yaml", ".yml")):
        return "yaml"
    if name.endswith(".json"):
        return "json"
    if name.endswith(SHELL_SUFFIXES):
        return "shell"
    if not name.endswith((".py", ".pyi")) and _SHELL_SHEBANG.match(text):
        return "shell"
    return None
