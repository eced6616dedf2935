"""The wheel holds every package of the source tree: an installed ckptlint (`pip install .`,
not editable) must import what the repository imports."""

from __future__ import annotations

import sys
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

REPO_ROOT = Path(__file__).resolve().parent.parent


def test_every_package_directory_is_listed_in_pyproject():
    setuptools = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(setuptools["packages"])
    found = set()
    for package, directory in setuptools["package-dir"].items():
        base = REPO_ROOT / directory
        for init in base.rglob("__init__.py"):
            relative = init.parent.relative_to(base).parts
            found.add(".".join((package, *relative)))
    assert found <= listed, sorted(found - listed)


def test_runtime_extra_installs_what_torch_needs_to_start_quietly():
    """Without NumPy, `import torch` warns "Failed to initialize NumPy" on every `ckptlint
    verify` run; the `runtime` extra brings it."""
    extras = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    names = {requirement.split(">")[0].split("=")[0].split(";")[0].strip() for requirement in extras["runtime"]}
    assert names == {"torch", "numpy"}
