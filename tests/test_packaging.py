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


# --- built distributions ------------------------------------------------------------------

import os  # noqa: E402
import shutil  # noqa: E402
import subprocess  # noqa: E402
import zipfile  # noqa: E402

import pytest  # noqa: E402

MODEL = "from torch.utils.checkpoint import checkpoint\ny = checkpoint(block, x)\n"


def source_copy(destination: Path) -> Path:
    """The repository's tracked files (what a clone holds), nothing built or cached."""
    files = subprocess.run(["git", "ls-files", "-z"], cwd=REPO_ROOT, capture_output=True, check=True).stdout
    for name in files.decode().split("\0"):
        if name and (REPO_ROOT / name).is_file():
            (destination / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO_ROOT / name, destination / name)
    return destination


def pip(*args: str, cwd: Path, python: str = sys.executable) -> subprocess.CompletedProcess:
    return subprocess.run([python, "-m", "pip", *args], cwd=cwd, capture_output=True, text=True, timeout=900)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """`pip wheel .` of a clean copy of the repository (the build backend in isolation)."""
    source = source_copy(tmp_path_factory.mktemp("source"))
    out = tmp_path_factory.mktemp("dist")
    built = pip("wheel", ".", "--no-deps", "--quiet", "--wheel-dir", str(out), cwd=source)
    assert built.returncode == 0, built.stderr
    [found] = out.glob("ckptlint-*.whl")
    return found


def test_the_wheel_holds_the_namespaced_packages_and_the_console_script(wheel):
    from ckptlint import __version__

    assert wheel.name == f"ckptlint-{__version__}-py3-none-any.whl"
    names = zipfile.ZipFile(wheel).namelist()
    assert "ckptlint/rules/__init__.py" in names and "ckptlint/runtime_check/__init__.py" in names
    assert "ckptlint/reporters/gitlab.py" in names and "ckptlint/rule_manifest.py" in names
    assert not any(name.startswith(("rules/", "runtime_check/", "tests/", "fixtures/")) for name in names)
    info = f"ckptlint-{__version__}.dist-info"
    entry_points = zipfile.ZipFile(wheel).read(f"{info}/entry_points.txt").decode()
    assert "[console_scripts]\nckptlint = ckptlint.cli:run\n" in entry_points
    metadata = zipfile.ZipFile(wheel).read(f"{info}/METADATA").decode()
    declared = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    requires = [line.split(": ", 1)[1] for line in metadata.splitlines() if line.startswith("Requires-Dist: ") and "extra ==" not in line]
    assert [r.replace(" ", "") for r in requires] == [d.replace(" ", "").replace("'", '"') for d in declared]


@pytest.mark.slow
def test_the_sdist_and_the_wheel_install_and_run_in_a_fresh_environment(wheel, tmp_path):
    """What the docs tell users to do without a package index release: build, install in a
    new virtual environment (dependencies resolved by pip), run on a file."""
    source = source_copy(tmp_path / "source")
    builder = tmp_path / "builder"
    subprocess.run([sys.executable, "-m", "venv", str(builder)], check=True)
    python = str(builder / "bin" / "python")
    assert pip("install", "--quiet", "setuptools>=77", cwd=tmp_path, python=python).returncode == 0
    sdist = subprocess.run(
        [python, "-c", f"from setuptools import build_meta; print(build_meta.build_sdist({str(tmp_path / 'dist')!r}))"],
        cwd=source, capture_output=True, text=True, check=True,
    ).stdout.split()[-1]
    from ckptlint import __version__

    assert sdist == f"ckptlint-{__version__}.tar.gz"
    project = tmp_path / "project"
    project.mkdir()
    (project / "pyproject.toml").write_text("[project]\nname = 'demo'\ndependencies = ['torch>=2.1']\n")
    (project / "model.py").write_text(MODEL)
    for distribution in (tmp_path / "dist" / sdist, wheel):
        environment = tmp_path / f"env-{distribution.suffix}"
        subprocess.run([sys.executable, "-m", "venv", str(environment)], check=True)
        installed = pip("install", "--quiet", str(distribution), cwd=tmp_path, python=str(environment / "bin" / "python"))
        assert installed.returncode == 0, installed.stderr
        run = subprocess.run(
            [str(environment / "bin" / "ckptlint"), ".", "--no-cache", "-q"], cwd=project, capture_output=True, text=True,
            env={k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "CLICOLOR_FORCE")},
        )
        assert (run.returncode, run.stdout.split(" ")[:2]) == (1, ["model.py:2:5:", "CKPT001"]), distribution.name
        version = subprocess.run([str(environment / "bin" / "ckptlint"), "--version"], capture_output=True, text=True)
        assert version.stdout == f"ckptlint {__version__}\n"
