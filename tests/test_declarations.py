"""Declared dependencies (ckptlint/declarations.py, ckptlint/setup_py.py): which files are
read, what a pin or range means for the target, which declaration wins, and the warnings
for files that cannot be read and declarations that contradict each other."""

from __future__ import annotations

import importlib.metadata
import json
import textwrap
from pathlib import Path

import pytest

from ckptlint.declarations import poetry_range, read_declarations
from ckptlint.environment_files import conda_range
from ckptlint.versions import VersionRange, admitted_range

MODEL = """\
from torch.utils.checkpoint import checkpoint
def forward(self, h, mask):
    h = checkpoint(self.layer, h)
    return checkpoint(self.layer, h, attention_mask=mask)
"""


@pytest.fixture(autouse=True)
def nothing_installed(monkeypatch):
    def version(name: str) -> str:
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "version", version)


def write(root: Path, files: dict[str, str]) -> Path:
    for relative, text in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip("\n"))
    return root


def declared(root: Path) -> dict[str, str]:
    return {name: target.describe() for name, target in read_declarations(root).versions.items()}


def warnings(root: Path) -> list[str]:
    return [warning.message for warning in read_declarations(root).warnings]


# --- what a pin or a range admits ------------------------------------------------------


def bounds(admitted: VersionRange) -> tuple[str | None, str | None]:
    return (str(admitted.min) if admitted.min else None, str(admitted.max) if admitted.max else None)


@pytest.mark.parametrize(
    "specifier, low, high",
    [
        ("~=4.53.0", "4.53", "4.54"),
        ("==4.53.*", "4.53", "4.54"),
        (">=4.40,<4.54", "4.40", "4.54"),
        ("~=4.53", "4.53", "5.0"),
        ("==2.*", "2.0", "3.0"),
        (">=4.40", "4.40", None),
        ("<5", None, "5.0"),
        (">=2.1, !=2.2.0, <3", "2.1", "3.0"),
        ("==4.53.1", "4.53.1", "4.53.1.0.1"),  # just after: the pin itself is admitted
        ("<=4.53", None, "4.53.0.1"),
        ("", None, None),
    ],
)
def test_admitted_range(specifier, low, high):
    assert bounds(admitted_range("transformers", specifier)) == (low, high)


@pytest.mark.parametrize(
    "constraint, low, high",
    [
        ("^2.1", "2.1", "3.0"),
        ("^0.4.1", "0.4.1", "0.5"),
        ("~2.1.3", "2.1.3", "2.2"),
        ("~2", "2.0", "3.0"),
        ("2.1", "2.1", "2.1.0.1"),
        ("2.1.*", "2.1", "2.2"),
        (">=4.40,<4.54", "4.40", "4.54"),
        ("*", None, None),
        ("^1.13 || ^2.1", "1.13", "3.0"),
    ],
)
def test_poetry_range(constraint, low, high):
    assert bounds(poetry_range("torch", constraint)) == (low, high)


@pytest.mark.parametrize(
    "requirement, could_be_5",
    [("transformers~=4.53.0", False), ("transformers==4.53.*", False), ("transformers>=4.40,<4.54", False),
     ("transformers>=4.40", True), ("transformers>=4.40,<6", True)],
)
def test_a_range_targets_its_lower_bound_and_says_whether_it_could_be_another(tmp_path, requirement, could_be_5):
    write(tmp_path, {"requirements.txt": requirement + "\n"})
    target = read_declarations(tmp_path).versions["transformers"]
    assert str(target.version) == "4.53" if "4.53" in requirement else str(target.version) == "4.40"
    assert target.could_be(VersionRange.of("transformers", min="5.0")) is could_be_5
    assert target.could_be(VersionRange.of("transformers", max="5.0")) is True


# --- requirement files -----------------------------------------------------------------


def test_requirement_files_in_directories_and_includes(tmp_path):
    write(
        tmp_path,
        {
            # OpenMMLab: the root file only includes the others.
            "requirements.txt": "-r requirements/build.txt\n-r requirements/runtime.txt\n",
            "requirements/build.txt": "# before building\nnumpy\ntorch>=1.8\n",
            "requirements/runtime.txt": "transformers ~= 4.53.0 ; python_version >= '3.9'\n",
            "requirements/docs.txt": "torch==1.6\naccelerate==0.20\n",
            "requirements/multimodal.txt": "accelerate>=0.30\n",
            "docker/requirements-gpu.txt": "peft==0.13.2 \\\n    --hash=sha256:0123\n",
            "docs/requirements.txt": "trl==0.1\n",  # a docs file further down: after the others
            "examples/requirements.txt": "trl==0.20\n",
        },
    )
    assert declared(tmp_path) == {
        "torch": "1.8 (declared dependency: requirements.txt -> requirements/build.txt: torch>=1.8)",
        "transformers": "4.53 (declared dependency: requirements.txt -> requirements/runtime.txt: "
        "transformers ~= 4.53.0 ; python_version >= '3.9')",
        # requirements/docs.txt serves the docs: after requirements/multimodal.txt.
        "accelerate": "0.30 (declared dependency: requirements/multimodal.txt: accelerate>=0.30)",
        "peft": "0.13.2 (declared dependency: docker/requirements-gpu.txt: peft==0.13.2 --hash=sha256:0123)",
        "trl": "0.20 (declared dependency: examples/requirements.txt: trl==0.20)",
    }
    torch = read_declarations(tmp_path).versions["torch"]
    assert torch.also_declared == ("requirements/docs.txt: torch==1.6",)
    assert warnings(tmp_path) == []


def test_requirement_files_not_read(tmp_path):
    write(
        tmp_path,
        {
            "a/b/c/requirements.txt": "torch==1.1\n",  # three directories down
            ".ci/requirements.txt": "torch==1.2\n",  # hidden
            "node_modules/x/requirements.txt": "torch==1.3\n",
            "sub/pyproject.toml": "[project]\nname = 'sub'\n",  # a nested project: its own versions
            "sub/requirements.txt": "torch==1.4\n",
            "notes.txt": "torch==1.5\n",
        },
    )
    assert declared(tmp_path) == {}
    assert declared(tmp_path / "sub") == {"torch": "1.4 (declared dependency: requirements.txt: torch==1.4)"}


def test_includes_that_loop_or_are_missing(tmp_path):
    write(
        tmp_path,
        {
            "requirements.txt": "-r requirements-base.txt\n--requirement=missing.txt\n",
            "requirements-base.txt": "-rrequirements.txt\n-c constraints.txt\n",
            "constraints.txt": "torch==2.1.2\n",
        },
    )
    assert declared(tmp_path) == {
        "torch": "2.1.2 (declared dependency: requirements.txt -> requirements-base.txt -> constraints.txt: torch==2.1.2)"
    }
    assert warnings(tmp_path) == ["requirements.txt:2: `--requirement=missing.txt` names no file; it is not read"]


def test_a_version_that_cannot_be_read(tmp_path):
    (tmp_path / "requirements.txt").write_bytes(b"torch>=latest\n\xff\xfe\ntransformers==4.46\n")
    assert declared(tmp_path) == {"transformers": "4.46 (declared dependency: requirements.txt: transformers==4.46)"}
    assert warnings(tmp_path) == []  # no digit: nothing that looks like a version was lost
    (tmp_path / "requirements.txt").write_text("torch>=x2.1\n")
    assert declared(tmp_path) == {}
    assert warnings(tmp_path) == ["requirements.txt:1: cannot read a version from `torch>=x2.1`; it is not used"]


# --- conda environment files -----------------------------------------------------------


@pytest.mark.parametrize(
    "spec, package, low, high",
    [
        ("pytorch=1.11.0", "torch", "1.11", "1.11.1"),  # conda's `=`: 1.11.0, 1.11.0.post1, ...
        ("pytorch::pytorch=2.5", "torch", "2.5", "2.6"),  # a channel, then the name
        ("pytorch=1.12.*", "torch", "1.12", "1.13"),
        ("pytorch=1.11.0=py3.9_cuda11.3_cudnn8.2.0_0", "torch", "1.11", "1.11.1"),  # a build string
        ("pytorch 1.11.0 py3.9_0", "torch", "1.11", "1.11.1"),  # name, version, build
        ("pytorch==1.12.1", "torch", "1.12.1", "1.12.1.0.1"),
        ("pytorch >=1.10,<2", "torch", "1.10", "2.0"),
        ("conda-forge::transformers=4.30", "transformers", "4.30", "4.31"),
        ("pytorch-gpu", "torch", None, None),
        ("pytorch-cuda=11.7", "pytorch-cuda", "11.7", "11.8"),  # not torch
    ],
)
def test_conda_range(spec, package, low, high):
    admitted, _ = conda_range(spec)
    assert admitted.package == package
    assert bounds(admitted) == (low, high)


def test_conda_environment_files(tmp_path):
    write(
        tmp_path,
        {
            # A research repository's only pins (MiniGPT-4, stable-diffusion, openfold).
            "environment.yml": """
                name: demo
                channels: [pytorch, defaults]
                dependencies:
                  - python=3.9
                  - pytorch::pytorch=1.12.*
                  - pytorch-cuda=11.7
                  - pip
                  - pip:
                    - transformers==4.30.0
                    - -r pip-extra.txt
                    - -r file:missing.txt
                """,
            "pip-extra.txt": "peft==0.3.0\n",
            "docker/environment-cuda.yaml": "dependencies:\n  - pytorch=2.1.0\n  - accelerate>=0.20\n",
            # Named like one, but a configuration: not an environment file.
            "configs/env.yaml": "model:\n  dependencies: {torch: 9.9}\n",
            "conda.yaml": "dependencies: [trl=0.7\n",  # broken: said, the rest is read
        },
    )
    assert declared(tmp_path) == {
        "torch": "1.12 (declared dependency: environment.yml: pytorch::pytorch=1.12.*)",
        "transformers": "4.30 (declared dependency: environment.yml [pip]: transformers==4.30.0)",
        "peft": "0.3 (declared dependency: environment.yml [pip] -> pip-extra.txt: peft==0.3.0)",
        "accelerate": "0.20 (declared dependency: docker/environment-cuda.yaml: accelerate>=0.20)",
    }
    assert read_declarations(tmp_path).versions["torch"].also_declared == ("docker/environment-cuda.yaml: pytorch=2.1.0",)
    messages = warnings(tmp_path)
    assert messages[0].startswith("conda.yaml: invalid YAML (") and messages[0].endswith("); its dependencies are not read")
    assert messages[1:] == ["environment.yml:11: `-r file:missing.txt` names no file; it is not read"]


def test_requirement_files_come_before_an_environment_file(tmp_path):
    write(
        tmp_path,
        {
            "environment.yml": "dependencies:\n  - pytorch=1.8\n",
            "requirements-gpu.txt": "torch>=2.0\n",
        },
    )
    assert declared(tmp_path) == {"torch": "2.0 (declared dependency: requirements-gpu.txt: torch>=2.0)"}
    assert warnings(tmp_path) == [
        "environment.yml:2: `pytorch=1.8` admits no version that requirements-gpu.txt:1 (`torch>=2.0`) admits; the "
        "target torch is 2.0, from requirements-gpu.txt (set `target-versions` to choose)"
    ]


# --- install scripts -------------------------------------------------------------------

INSTALL_SH = """
#!/bin/bash
conda create --name halos python=3.10.14
conda install pytorch=2.4.0 pytorch-cuda=12.1 -c pytorch -c nvidia
pip install flash-attn==2.6.3 --no-build-isolation
pip install transformers==4.51.3
python -m pip install --index-url https://example.org/simple 'peft>=0.12,<0.13'
uv pip install -U accelerate
pip install -e ./vendor/trl git+https://github.com/huggingface/trl
"""


def test_an_install_script_declares_what_the_environment_gets(tmp_path):
    """HALOs pins its libraries only in `install.sh`: `pip install`, `python -m pip install`,
    `uv pip install` and `conda install` commands declare, last of all sources; options'
    values, paths, URLs and VCS requirements do not."""
    write(tmp_path, {"install.sh": INSTALL_SH})
    assert declared(tmp_path) == {
        "torch": "2.4 (declared dependency: install.sh: pytorch=2.4.0)",
        "transformers": "4.51.3 (declared dependency: install.sh: transformers==4.51.3)",
        "peft": "0.12 (declared dependency: install.sh: peft>=0.12,<0.13)",
    }
    assert warnings(tmp_path) == []


def test_install_scripts_come_last_and_never_conflict(tmp_path):
    """A requirement file wins over an install script (which may install something else for
    another purpose, without a warning); the requirement files a script names (`-r`) are
    read with it; a shell script not named for set-up (`train.sh`) declares nothing."""
    write(
        tmp_path,
        {
            "requirements.txt": "transformers==4.46.3\n",
            "scripts/setup_env.sh": "pip install transformers==4.40.0\npip install -r ../deps/base.txt\n",
            "deps/base.txt": "torch>=2.3\n",
            "train.sh": "pip install accelerate==1.6.0\n",
        },
    )
    assert declared(tmp_path) == {
        "torch": "2.3 (declared dependency: scripts/setup_env.sh:2 -> deps/base.txt: torch>=2.3)",
        "transformers": "4.46.3 (declared dependency: requirements.txt: transformers==4.46.3)",
    }
    assert warnings(tmp_path) == []


def test_an_upper_bound_alone_is_kept_as_a_range(tmp_path):
    """`transformers<4.46.0` declares no version to target (no lower bound) but a range the
    project runs in (`TargetVersions` then rules out an installed version outside it); a
    docs or CI file's bound is not the project's."""
    write(tmp_path, {"requirements.txt": "transformers<4.46.0\n", "requirements-docs.txt": "torch<2.0\n"})
    declarations = read_declarations(tmp_path)
    assert declarations.versions == {}
    assert {name: r.describe() for name, r in declarations.ranges.items()} == {
        "transformers": "unknown, below 4.46 (declared dependency: requirements.txt: transformers<4.46.0)"
    }


# --- setup.py, setup.cfg, pyproject.toml ------------------------------------------------

SETUP_PY = '''
from setuptools import setup
BASE = ["numpy", "torch>=2.1"]
extras = {}
extras["hf"] = ["transformers~=4.53.0"]
extras["all"] = extras["hf"] + ["peft>=0.13"]
setup(
    name="demo",
    install_requires=BASE + ["accelerate>=0.30"],
    extras_require=extras,
)
'''

HF_SETUP_PY = '''
import re
from setuptools import setup
_deps = [
    "accelerate>=1.9.0",
    "torch>=2.6.0",
    "transformers>=4.53.3",
]
deps = {b: a for a, b in (re.findall(r"^(([^!=<>~ ]+)(?:[!=<>~ ].*)?$)", x)[0] for x in _deps)}
def deps_list(*pkgs):
    return [deps[pkg] for pkg in pkgs]
extras = {}
extras["torch"] = deps_list("torch")
install_requires = [deps["accelerate"], deps["transformers"]]
setup(name="handbook", install_requires=install_requires, extras_require=extras)
'''


def test_setup_py_literals_names_and_extras(tmp_path):
    write(tmp_path, {"setup.py": SETUP_PY})
    assert declared(tmp_path) == {
        "torch": "2.1 (declared dependency: setup.py: torch>=2.1)",
        "transformers": "4.53 (declared dependency: setup.py [all]: transformers~=4.53.0)",
        "peft": "0.13 (declared dependency: setup.py [all]: peft>=0.13)",
        "accelerate": "0.30 (declared dependency: setup.py: accelerate>=0.30)",
    }


def test_setup_py_in_the_hugging_face_style(tmp_path):
    write(tmp_path, {"setup.py": HF_SETUP_PY})
    assert declared(tmp_path) == {
        "torch": "2.6 (declared dependency: setup.py [torch]: torch>=2.6.0)",
        "transformers": "4.53.3 (declared dependency: setup.py: transformers>=4.53.3)",
        "accelerate": "1.9 (declared dependency: setup.py: accelerate>=1.9.0)",
    }


def test_setup_py_that_is_computed_or_broken(tmp_path):
    write(tmp_path, {"setup.py": "from setuptools import setup\nsetup(install_requires=parse('requirements/runtime.txt'))\n"})
    assert (declared(tmp_path), warnings(tmp_path)) == ({}, [])
    write(tmp_path, {"setup.py": "from setuptools import setup\nsetup(install_requires=['torch>=2.1'\n", "requirements.txt": "torch==1.13\n"})
    # Nothing else is lost: requirements.txt is still read.
    assert declared(tmp_path) == {"torch": "1.13 (declared dependency: requirements.txt: torch==1.13)"}
    assert warnings(tmp_path) == ["setup.py:2: cannot be parsed ('[' was never closed); its dependencies are not read"]


def test_setup_cfg(tmp_path):
    write(
        tmp_path,
        {
            "setup.cfg": """
                [metadata]
                name = demo
                [options]
                install_requires =
                    numpy
                    torch>=2.2
                [options.extras_require]
                hf =
                    transformers==4.53.*
                lora = file: requirements/lora.txt
                """,
            "requirements/lora.txt": "peft~=0.13.0\n",
        },
    )
    assert declared(tmp_path) == {
        "torch": "2.2 (declared dependency: setup.cfg: torch>=2.2)",
        "transformers": "4.53 (declared dependency: setup.cfg [hf]: transformers==4.53.*)",
        "peft": "0.13 (declared dependency: setup.cfg [lora] -> requirements/lora.txt: peft~=0.13.0)",
    }
    write(tmp_path, {"setup.cfg": "[options\ninstall_requires = torch>=2.2\n"})
    assert warnings(tmp_path) == [
        "setup.cfg: invalid (File contains no section headers.); its dependencies are not read"
    ]


def test_pyproject_tables(tmp_path):
    write(
        tmp_path,
        {
            "pyproject.toml": """
                [project]
                name = "demo"
                dynamic = ["dependencies"]
                [project.optional-dependencies]
                train = ["accelerate>=0.30"]
                [tool.setuptools.dynamic]
                dependencies = {file = ["requirements/main.txt"]}
                [tool.poetry.dependencies]
                python = "^3.10"
                transformers = "^4.53"
                peft = {version = "~0.13.1", optional = true}
                [tool.poetry.group.cuda.dependencies]
                torch = "2.0.1"
                [dependency-groups]
                rl = ["trl>=0.19", {include-group = "other"}]
                """,
            "requirements/main.txt": "torch>=2.4\n",
        },
    )
    assert declared(tmp_path) == {
        "torch": "2.4 (declared dependency: pyproject.toml [tool.setuptools.dynamic] -> requirements/main.txt: torch>=2.4)",
        "transformers": '4.53 (declared dependency: pyproject.toml [tool.poetry.dependencies]: transformers = "^4.53")',
        "peft": '0.13.1 (declared dependency: pyproject.toml [tool.poetry.dependencies]: peft = "~0.13.1")',
        "accelerate": "0.30 (declared dependency: pyproject.toml [train]: accelerate>=0.30)",
        "trl": "0.19 (declared dependency: pyproject.toml [dependency-groups] rl: trl>=0.19)",
    }
    # The group's pin loses to the range that comes first, and admits none of its versions.
    assert warnings(tmp_path) == [
        "pyproject.toml: `torch = \"2.0.1\"` admits no version that requirements/main.txt:1 (`torch>=2.4`) "
        "admits; the target torch is 2.4, from pyproject.toml [tool.setuptools.dynamic] -> requirements/main.txt "
        "(set `target-versions` to choose)"
    ]


def test_broken_pyproject_loses_nothing_else(tmp_path):
    write(tmp_path, {"pyproject.toml": "[project\n", "setup.py": SETUP_PY})
    assert declared(tmp_path)["torch"] == "2.1 (declared dependency: setup.py: torch>=2.1)"
    assert warnings(tmp_path) == [
        "pyproject.toml: invalid TOML (Expected ']' at the end of a table declaration (at line 1, column 9)); "
        "its dependencies are not read"
    ]


# --- which declaration wins, and conflicts ----------------------------------------------


def test_package_metadata_then_root_requirements_then_extras_then_nested_files(tmp_path):
    write(
        tmp_path,
        {
            "pyproject.toml": """
                [project]
                name = "demo"
                dependencies = ["torch>=2.1"]
                [project.optional-dependencies]
                hf = ["transformers>=4.40", "torch>=2.3"]
                """,
            "requirements-dev.txt": "transformers==4.46.1\ntorch==2.4\n",
            "requirements.txt": "transformers>=4.44\n",
            "docker/requirements-gpu.txt": "transformers==4.50\npeft==0.13\n",
        },
    )
    assert declared(tmp_path) == {
        "torch": "2.1 (declared dependency: pyproject.toml: torch>=2.1)",
        # requirements.txt before requirements-dev.txt, both before the extras.
        "transformers": "4.44 (declared dependency: requirements.txt: transformers>=4.44)",
        "peft": "0.13 (declared dependency: docker/requirements-gpu.txt: peft==0.13)",
    }
    transformers = read_declarations(tmp_path).versions["transformers"]
    assert transformers.also_declared == (
        "requirements-dev.txt: transformers==4.46.1",
        "pyproject.toml [hf]: transformers>=4.40",
        "docker/requirements-gpu.txt: transformers==4.50",
    )
    assert warnings(tmp_path) == []


def test_conflicts_warn_and_an_upper_bound_keeps_out_what_it_excludes(tmp_path):
    write(
        tmp_path,
        {
            "setup.py": "from setuptools import setup\nsetup(install_requires=['transformers>=5.0', 'accelerate<1'])\n",
            "requirements.txt": "transformers==4.53.0\ntorch==2.1; python_version < '3.12'\ntorch==2.4; python_version >= '3.12'\n",
            "docker/requirements.txt": "accelerate==1.9.0\ntransformers==4.46\n",  # nested: no warning
        },
    )
    assert declared(tmp_path) == {
        "torch": "2.1 (declared dependency: requirements.txt: torch==2.1; python_version < '3.12')",
        "transformers": "5.0 (declared dependency: setup.py: transformers>=5.0)",
    }
    assert warnings(tmp_path) == [
        "requirements.txt:1: `transformers==4.53.0` admits no version that setup.py:2 (`transformers>=5.0`) "
        "admits; the target transformers is 5.0, from setup.py (set `target-versions` to choose)"
    ]


def test_warnings_reach_the_user_and_the_run_goes_on(cli, tmp_path):
    root = write(
        tmp_path,
        {
            "pyproject.toml": "[project]\nname = 'demo'\ndependencies = ['transformers>=5.0']\n",
            "requirements.txt": "transformers==4.53.0\n-r missing.txt\n",
            "setup.py": "setup(\n",
            "model.py": MODEL,
        },
    )
    expected = [
        "warning: setup.py:1: cannot be parsed ('(' was never closed); its dependencies are not read",
        "warning: requirements.txt:2: `-r missing.txt` names no file; it is not read",
        "warning: requirements.txt:1: `transformers==4.53.0` admits no version that pyproject.toml "
        "(`transformers>=5.0`) admits; the target transformers is 5.0, from pyproject.toml (set "
        "`target-versions` to choose)",
    ]
    shown = cli(["--show-settings", "."], cwd=root)
    assert shown.exit_code == 0
    assert shown.stderr.splitlines() == expected
    assert "  transformers   5.0 (declared dependency: pyproject.toml: transformers>=5.0)" in shown.stdout.splitlines()
    assert "                   also declared: requirements.txt: transformers==4.53.0" in shown.stdout.splitlines()
    run = cli(["--output-format", "json", "--no-cache", "."], cwd=root)
    assert run.exit_code == 1
    # setup.py is linted too: a parse error (CKPT900) beside the model's findings.
    assert [d["code"] for d in json.loads(run.stdout)] == ["CKPT001", "CKPT032", "CKPT900"]
    assert run.stderr.splitlines() == expected
    # Setting the version resolves the conflict: only the files' own problems remain.
    pinned = cli(["--show-settings", "--target-version", "transformers=4.53", "."], cwd=root)
    assert pinned.stderr.splitlines() == expected[:2]


def test_nested_projects_warnings_name_their_directory(cli, make_project):
    root = make_project({"model.py": MODEL, "examples/demo/setup.py": "setup(\n", "examples/demo/train.py": MODEL})
    run = cli(["--output-format", "json", "--no-cache", "."], cwd=root)
    assert run.stderr.splitlines() == [
        "warning: examples/demo/setup.py:1: cannot be parsed ('(' was never closed); its dependencies are not read"
    ]


def test_an_exclusion_alone_is_a_dependency_without_a_range(tmp_path):
    # trl's pyproject.toml: `deepspeed = ["deepspeed>=0.14.4", "transformers!=5.1.0"]`
    (tmp_path / "requirements.txt").write_text("transformers!=5.1.0\ntorch!=2.0.0,>=1.13\n")
    assert declared(tmp_path) == {"torch": "1.13 (declared dependency: requirements.txt: torch!=2.0.0,>=1.13)"}
    assert warnings(tmp_path) == []


# --- lock files ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name, lock",
    [
        ("uv.lock", 'version = 1\n[[package]]\nname = "Transformers"\nversion = "4.51.3"\nsource = { registry = "https://pypi.org/simple" }\n'),
        ("poetry.lock", '[[package]]\nname = "transformers"\nversion = "4.51.3"\noptional = false\n[package.dependencies]\ntorch = ">=2.0"\n'),
        ("pdm.lock", '[metadata]\ngroups = ["default"]\n[[package]]\nname = "transformers"\nversion = "4.51.3"\n'),
    ],
)
def test_a_lock_file_refines_the_pyproject_range(tmp_path, name, lock):
    write(tmp_path, {"pyproject.toml": '[project]\ndependencies = ["transformers>=4.40"]\n', name: lock})
    written = "Transformers" if name == "uv.lock" else "transformers"  # the lock's own spelling
    assert declared(tmp_path) == {"transformers": f"4.51.3 (declared dependency: {name}: {written}==4.51.3)"}
    assert read_declarations(tmp_path).versions["transformers"].also_declared == ("pyproject.toml: transformers>=4.40",)
    assert warnings(tmp_path) == []


def test_a_lock_file_that_contradicts_pyproject_is_said(tmp_path):
    write(
        tmp_path,
        {
            "pyproject.toml": '[project]\ndependencies = ["transformers>=4.40,<5"]\n',
            "uv.lock": '[[package]]\nname = "transformers"\nversion = "5.1.0"\n',
        },
    )
    assert declared(tmp_path) == {"transformers": "5.1 (declared dependency: uv.lock: transformers==5.1.0)"}
    assert warnings(tmp_path) == [
        "pyproject.toml: `transformers>=4.40,<5` admits no version that uv.lock:2 (`transformers==5.1.0`) admits; "
        "the target transformers is 5.1, from uv.lock (set `target-versions` to choose)"
    ]


def test_a_malformed_lock_file_is_said_and_the_rest_is_read(tmp_path):
    write(
        tmp_path,
        {
            "pyproject.toml": '[project]\ndependencies = ["torch>=2.1"]\n',
            "uv.lock": '[[package]\nname = "torch"\n',
            "poetry.lock": '[[package]]\nname = "peft"\nversion = "0.13.2"\n',
        },
    )
    assert declared(tmp_path) == {
        "torch": "2.1 (declared dependency: pyproject.toml: torch>=2.1)",
        "peft": "0.13.2 (declared dependency: poetry.lock: peft==0.13.2)",
    }
    messages = warnings(tmp_path)
    assert len(messages) == 1
    assert messages[0].startswith("uv.lock: invalid TOML (") and messages[0].endswith("); its versions are not read")


def test_lock_names_are_normalised_and_local_versions_parse(tmp_path):
    write(
        tmp_path,
        {
            "uv.lock": '[[package]]\nname = "Torch"\nversion = "2.5.1+cu121"\n[[package]]\nname = "torch_xla"\nversion = "2.5.0"\n',
            "requirements.lock": "# generated by rye\n-e file:.\naccelerate==1.2.1\n    # via my-project\n",
        },
    )
    assert declared(tmp_path) == {
        "torch": "2.5.1 (declared dependency: uv.lock: Torch==2.5.1+cu121)",
        "accelerate": "1.2.1 (declared dependency: requirements.lock: accelerate==1.2.1)",
    }


def test_a_lock_file_below_the_root_is_not_read(tmp_path):
    write(tmp_path, {"pyproject.toml": "[project]\n", "docs/uv.lock": '[[package]]\nname = "torch"\nversion = "1.8.0"\n'})
    assert declared(tmp_path) == {}


_TRAINED_BY_HAND = """
from transformers import AutoModelForCausalLM

model = AutoModelForCausalLM.from_pretrained("gpt2")
model.gradient_checkpointing_enable()
for batch in loader:
    model(**batch).loss.backward()
"""


@pytest.mark.parametrize(("locked", "codes"), [("4.51.3", ["CKPT020"]), ("5.1.0", [])])
def test_the_version_a_lock_pins_decides_a_version_gated_rule(cli, make_project, locked, codes):
    # pyproject.toml admits both sides of CKPT020's `transformers<5.0`; uv.lock says which runs.
    root = make_project({"train.py": _TRAINED_BY_HAND}, pyproject="[project]\nname = 'demo'\ndependencies = ['transformers>=4.40']\n")
    (root / "uv.lock").write_text(f'version = 1\n\n[[package]]\nname = "transformers"\nversion = "{locked}"\n')
    result = cli(["train.py", "--no-cache", "--output-format", "json", "--select", "CKPT020"], cwd=root)
    assert [finding["code"] for finding in json.loads(result.stdout)] == codes
