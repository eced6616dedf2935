"""ckptlint: finds, fixes and verifies misuse of activation checkpointing."""

from pathlib import Path as _Path

__version__ = "0.1.0"

# Installed, the rule pack and the verifier live inside this package (`ckptlint.rules`,
# `ckptlint.runtime_check`). In a source checkout they are the top-level `rules/` and
# `runtime_check/` directories beside this one; when Python imports this package from the
# checkout itself (`python -m ckptlint` run from the repository root), let it find them.
_checkout = _Path(__file__).resolve().parent.parent
if not (_Path(__file__).resolve().parent / "rules").is_dir() and (_checkout / "rules" / "__init__.py").is_file():
    __path__.append(str(_checkout))  # noqa: F821 - a package's __path__
del _Path, _checkout
