"""Target versions (DESIGN.md, "Target versions"): parsing versions and requirement
specifiers, and the resolution order CLI > config > declared dependencies > installed
metadata > unknown, as rules see it and as `--show-settings` shows it."""

from __future__ import annotations

import importlib.metadata
import json
import os
from pathlib import Path

import pytest

from ckptlint.config import resolve_settings
from ckptlint.declarations import declared_versions
from ckptlint.versions import (
    Applies,
    DeclaredRange,
    TargetVersion,
    TargetVersions,
    Version,
    VersionRange,
    VersionSource,
    lower_bound,
    parse_requirement,
)

MODEL = """\
from torch.utils.checkpoint import checkpoint
def forward(self, h, mask):
    h = checkpoint(self.layer, h)
    return checkpoint(self.layer, h, attention_mask=mask)
"""
BOTH = [("model.py", 3, 9, "CKPT001"), ("model.py", 4, 12, "CKPT032")]
# Before the flag existed: no CKPT001, and CKPT032 without its fix (any keyword raised).
BEFORE_THE_FLAG = [("model.py", 4, 12, "CKPT032")]
UNKNOWN_NOTE = " (affects torch>=1.11; target version unknown)"


@pytest.fixture
def installed(monkeypatch):
    """Pretend these distributions (name -> version) are installed, and no others."""
    versions: dict[str, str] = {}

    def version(name: str) -> str:
        if name in versions:
            return versions[name]
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "version", version)
    return versions


def findings(result, root: Path) -> list[tuple[str, int, int, str]]:
    assert "Traceback" not in result.stderr, result.stderr
    return [
        (Path(os.path.relpath(d["filename"], root)).as_posix(), d["location"]["row"], d["location"]["column"], d["code"])
        for d in json.loads(result.stdout)
    ]


def lint(cli, root: Path, *args: str):
    return cli(["--output-format", "json", "--no-cache", *args], cwd=root)


def shown_versions(cli, root: Path, *args: str) -> dict[str, str]:
    result = cli(["--show-settings", *args, "."], cwd=root)
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    start = lines.index("target versions:")
    return dict(line.split(None, 1) for line in lines[start + 1 :])


# --- versions and specifiers -----------------------------------------------------------


@pytest.mark.parametrize(
    "text, parts, shown",
    [
        ("2.4", (2, 4), "2.4"),
        ("2.4.0", (2, 4), "2.4"),
        ("2", (2,), "2.0"),
        ("2.0.0", (2,), "2.0"),
        ("1.10.2", (1, 10, 2), "1.10.2"),
        ("v1.13", (1, 13), "1.13"),
        (" 4.46.1 ", (4, 46, 1), "4.46.1"),
        ("2.1.0+cu118", (2, 1), "2.1"),
        ("2.5.0rc1", (2, 5), "2.5"),
        ("2.6.0.dev20240101", (2, 6), "2.6"),
    ],
)
def test_version_parse(text, parts, shown):
    version = Version.parse(text)
    assert version.parts == parts
    assert str(version) == shown


@pytest.mark.parametrize("text", ["", "abc", "x2.4", ".5", "=2.4"])
def test_version_parse_rejects(text):
    with pytest.raises(ValueError, match="not a version"):
        Version.parse(text)


def test_version_ordering_is_numeric():
    assert Version.parse("1.10") > Version.parse("1.9")
    assert Version.parse("2.0") == Version.parse("2")
    assert Version.parse("1.11") > Version.parse("1.10.2")
    assert sorted(Version.parse(v) for v in ["2.1", "1.10", "1.9.1", "2"]) == [
        Version.parse(v) for v in ["1.9.1", "1.10", "2", "2.1"]
    ]


@pytest.mark.parametrize(
    "specifier, bound",
    [
        (">=2.1,<3", "2.1"),
        ("==1.10.2", "1.10.2"),
        ("~=2.3", "2.3"),
        ("~=2.3.1", "2.3.1"),
        ("===2.2.0", "2.2"),
        (">2.0", "2.0"),
        ("==2.*", "2.0"),
        ("==2.1.*", "2.1"),
        (">=1.8, >=2.0", "2.0"),
        ("<3", None),
        ("!=2.0", None),
        ("<=2.4", None),
        ("", None),
        (">=2.1, !=2.2.0, <3", "2.1"),
    ],
)
def test_lower_bound(specifier, bound):
    result = lower_bound(specifier)
    assert (str(result) if result is not None else None) == bound


@pytest.mark.parametrize(
    "line, expected",
    [
        ("torch>=2.1,<3", ("torch", "2.1")),
        ("torch==1.10.2", ("torch", "1.10.2")),
        ("torch~=2.3", ("torch", "2.3")),
        ("Torch >= 2.0", ("torch", "2.0")),
        ("torch[cuda]>=2.2 ; sys_platform == 'linux'", ("torch", "2.2")),
        ("torch==2.1.0+cu118  # pinned for CUDA 11.8", ("torch", "2.1")),
        ("torch (>=2.1)", ("torch", "2.1")),
        ("transformers>=4.30,!=4.31.0", ("transformers", "4.30")),
        ("Py_Torch.Thing==1.0", ("py-torch-thing", "1.0")),
        ("torch", ("torch", None)),
        ("torch<2", ("torch", None)),
        ("torch==2.2.0 --hash=sha256:0123abcd", ("torch", "2.2")),
        ("# torch==1.0", None),
        ("", None),
        ("   ", None),
        ("-r requirements-base.txt", None),
        ("--extra-index-url https://download.pytorch.org/whl/cu118", None),
        ("-e .", None),
        ("torch @ https://download.pytorch.org/whl/torch-2.1.0.whl", None),
        ("git+https://github.com/huggingface/transformers", None),
    ],
)
def test_parse_requirement(line, expected):
    parsed = parse_requirement(line)
    if expected is None:
        assert parsed is None
    else:
        name, version = parsed
        assert (name, str(version) if version is not None else None) == expected


def test_version_range():
    torch_1_11_up = VersionRange.of("torch", min="1.11")
    assert torch_1_11_up.contains(Version.parse("1.11"))
    assert torch_1_11_up.contains(Version.parse("2.13"))
    assert not torch_1_11_up.contains(Version.parse("1.10.2"))
    assert str(torch_1_11_up) == "torch>=1.11"
    before_5 = VersionRange.of("transformers", max="5.0")
    assert before_5.contains(Version.parse("4.46.1"))
    assert not before_5.contains(Version.parse("5"))
    assert str(before_5) == "transformers<5.0"
    assert str(VersionRange.of("peft", "0.5", "0.10")) == "peft>=0.5,<0.10"
    assert str(VersionRange.of("accelerate")) == "accelerate (all versions)"


def test_applies(installed):
    torch = TargetVersion(Version.parse("2.4"), VersionSource.CLI, "--target-version torch=2.4")
    versions = TargetVersions({"torch": torch})
    assert versions.applies([VersionRange.of("torch", min="1.11")]) is Applies.YES
    assert versions.applies([VersionRange.of("torch", max="2.0")]) is Applies.NO
    assert versions.applies([VersionRange.of("transformers", max="5.0")]) is Applies.UNKNOWN
    # A range that excludes a known version decides, whatever the unknown ones.
    assert (
        versions.applies([VersionRange.of("transformers", max="5.0"), VersionRange.of("torch", max="2.0")])
        is Applies.NO
    )
    assert versions.applies([]) is Applies.YES


def test_installed_metadata_is_read_lazily_and_once(monkeypatch):
    calls: list[str] = []

    def version(name: str) -> str:
        calls.append(name)
        if name == "torch":
            return "2.5.1"
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "version", version)
    versions = TargetVersions({})
    assert calls == []
    assert versions.get("torch").describe() == "2.5.1 (installed distribution: torch 2.5.1)"
    assert versions.get("torch").source is VersionSource.INSTALLED
    assert versions.get("peft") is None
    versions.get("peft")
    assert calls == ["torch", "peft"]
    # Resolved versions are never looked up.
    explicit = TargetVersion(Version.parse("2.1"), VersionSource.DECLARED, "pyproject.toml: torch>=2.1")
    TargetVersions({"torch": explicit}).get("torch")
    assert calls == ["torch", "peft"]


def test_unparsable_installed_version_is_unknown(installed):
    installed["torch"] = "unknown-build"
    assert TargetVersions({}).get("torch") is None


# --- declared dependencies -------------------------------------------------------------


def test_declared_versions_from_pyproject_and_requirements(tmp_path):
    (tmp_path / "requirements.txt").write_text("torch==1.13.1\npeft>=0.7\n")
    (tmp_path / "requirements-dev.txt").write_text("accelerate~=0.25\n# transformers==9\n")
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "requirements.txt").write_text("transformers==3.0\n")  # further down: after the extras
    pyproject = {
        "project": {
            "dependencies": ["torch>=2.1,<3", "numpy"],
            "optional-dependencies": {"hf": ["transformers>=4.40"], "cpu": ["torch==9.9"]},
        }
    }
    declared = declared_versions(tmp_path, pyproject)
    assert {name: t.describe() for name, t in declared.items()} == {
        # pyproject.toml first, then its extras, then requirements*.txt (sorted by name).
        "torch": "2.1 (declared dependency: pyproject.toml: torch>=2.1,<3)",
        "transformers": "4.40 (declared dependency: pyproject.toml [hf]: transformers>=4.40)",
        "accelerate": "0.25 (declared dependency: requirements-dev.txt: accelerate~=0.25)",
        "peft": "0.7 (declared dependency: requirements.txt: peft>=0.7)",
    }


def test_declared_versions_tolerate_odd_input(tmp_path):
    (tmp_path / "requirements.txt").write_bytes(b"torch==1.10.0\n\xff\xfe garbage \x00\n")
    pyproject = {"project": {"dependencies": "torch>=2.1", "optional-dependencies": ["x"]}}
    assert declared_versions(tmp_path, {"project": {"dependencies": 5, "optional-dependencies": {"x": 7, 3: [1]}}})
    assert {n: str(t.version) for n, t in declared_versions(tmp_path, pyproject).items()} == {"torch": "1.10"}
    assert declared_versions(tmp_path, {"project": "nonsense"})["torch"].origin == "requirements.txt: torch==1.10.0"
    assert declared_versions(tmp_path, None)["torch"].source is VersionSource.DECLARED


# --- resolution order, end to end ------------------------------------------------------

CONFIGURED = "[tool.ckptlint]\ntarget-versions = {torch = '2.3'}\n"
DECLARED = "[project]\nname = 'demo'\ndependencies = ['torch>=2.1,<3']\n"


def test_resolution_order_as_shown_by_show_settings(cli, make_project, installed):
    root = make_project({"model.py": MODEL})
    assert shown_versions(cli, root) == {
        "torch": "unknown",
        "transformers": "unknown",
        "peft": "unknown",
        "accelerate": "unknown",
        "trl": "unknown",
        "open-clip-torch": "unknown",
    }
    installed.update({"torch": "2.5.1", "transformers": "4.46.3"})
    shown = shown_versions(cli, root)
    assert shown["torch"] == "2.5.1 (installed distribution: torch 2.5.1)"
    assert shown["transformers"] == "4.46.3 (installed distribution: transformers 4.46.3)"
    (root / "requirements.txt").write_text("torch==1.10.0\n")
    assert shown_versions(cli, root)["torch"] == "1.10 (declared dependency: requirements.txt: torch==1.10.0)"
    (root / "pyproject.toml").write_text(DECLARED)
    assert shown_versions(cli, root)["torch"] == "2.1 (declared dependency: pyproject.toml: torch>=2.1,<3)"
    (root / "pyproject.toml").write_text(DECLARED + CONFIGURED)
    config = (root / "pyproject.toml").resolve()
    assert shown_versions(cli, root)["torch"] == f"2.3 (configuration: {config})"
    shown = shown_versions(cli, root, "--target-version", "torch=2.4", "--target-version", "peft=0.13")
    assert shown["torch"] == "2.4 (command line: --target-version torch=2.4)"
    assert shown["peft"] == "0.13 (command line: --target-version peft=0.13)"
    assert shown["transformers"] == "4.46.3 (installed distribution: transformers 4.46.3)"
    assert shown["accelerate"] == "unknown"
    # open_clip's distribution name, as requirement files write it (`open_clip_torch` too).
    (root / "requirements.txt").write_text("torch==1.10.0\nopen_clip_torch>=2.20.0\n")
    shown = shown_versions(cli, root)
    assert shown["open-clip-torch"] == "2.20 (declared dependency: requirements.txt: open_clip_torch>=2.20.0)"


def test_last_target_version_option_wins(cli, make_project, installed):
    root = make_project({})
    shown = shown_versions(cli, root, "--target-version", "torch=1.10", "--target-version", "Torch=2.2")
    assert shown["torch"] == "2.2 (command line: --target-version Torch=2.2)"


@pytest.mark.parametrize(
    "setup, args",
    [
        ({}, ["--target-version", "torch=1.10"]),
        ({}, ["--target-version", "torch=1.10.2"]),
        ({"requirements.txt": "torch==1.10.0\n"}, []),
        ({"requirements-train.txt": "numpy\ntorch>=1.9,<1.11\n"}, []),
        ({"pyproject.toml": "[project]\nname = 'demo'\ndependencies = ['torch==1.10.2']\n"}, []),
        ({"pyproject.toml": "[project]\nname = 'demo'\ndependencies = ['torch~=1.10.0']\n"}, []),
        ({"ckptlint.toml": "target-versions = {torch = '1.10'}\n"}, []),
        ({".ckptlint.yaml": "target-versions: {torch: '1.10'}\n"}, []),
        # The command line beats a declared dependency and the config.
        (
            {"requirements.txt": "torch==2.4\n", "ckptlint.toml": "target-versions = {torch = '2.4'}\n"},
            ["--target-version", "torch=1.10"],
        ),
    ],
)
def test_torch_before_1_11_silences_ckpt001_and_ckpt032_loses_its_fix(cli, make_project, installed, setup, args):
    installed["torch"] = "2.13.0"
    root = make_project({"model.py": MODEL})
    for name, text in setup.items():
        (root / name).write_text(text)
    result = lint(cli, root, *args, ".")
    assert findings(result, root) == BEFORE_THE_FLAG
    (finding,) = json.loads(result.stdout)
    assert "the targeted torch (< 1.11) has no `use_reentrant`" in finding["message"] and finding["fix"] is None


@pytest.mark.parametrize(
    "setup, args",
    [
        ({}, ["--target-version", "torch=1.11"]),
        ({"requirements.txt": "torch==1.10.0\n"}, ["--target-version", "torch=2.4"]),
        ({"ckptlint.toml": "target-versions = {torch = '1.10'}\n"}, ["--target-version", "torch=2.0"]),
        ({"requirements.txt": "torch==1.10.0\n", "ckptlint.toml": "target-versions = {torch = '2.1'}\n"}, []),
        (
            {
                "pyproject.toml": "[project]\nname = 'demo'\ndependencies = ['torch>=2.0']\n",
                "requirements.txt": "torch==1.10.0\n",
            },
            [],
        ),
    ],
)
def test_torch_1_11_and_later_reports(cli, make_project, installed, setup, args):
    installed["torch"] = "1.9.0"  # lower priority than all of the above
    root = make_project({"model.py": MODEL})
    for name, text in setup.items():
        (root / name).write_text(text)
    result = lint(cli, root, *args, ".")
    assert findings(result, root) == BOTH
    assert all(not d["message"].endswith(UNKNOWN_NOTE) for d in json.loads(result.stdout))


def test_installed_version_is_used_when_nothing_is_declared(cli, make_project, installed):
    root = make_project({"model.py": MODEL})
    installed["torch"] = "1.10.1"
    assert findings(lint(cli, root, "."), root) == BEFORE_THE_FLAG
    installed["torch"] = "2.13.0"
    assert findings(lint(cli, root, "."), root) == BOTH


def test_unknown_version_reports_and_names_the_affected_versions(cli, make_project, installed):
    root = make_project({"model.py": MODEL})
    result = lint(cli, root, ".")
    assert findings(result, root) == BOTH
    # CKPT001 needs the flag (torch >= 1.11); CKPT032 holds for every torch.
    assert [d["message"].endswith(UNKNOWN_NOTE) for d in json.loads(result.stdout)] == [True, False]


def test_declared_versions_come_from_the_project_root(cli, make_project, installed):
    root = make_project(
        {"model.py": MODEL, "sub/requirements.txt": "torch==1.10\n"},
        pyproject="[project]\nname = 'demo'\ndependencies = ['torch>=2.2']\n",
    )
    settings = resolve_settings(root / "sub")
    assert settings.target_versions.get("torch").describe() == "2.2 (declared dependency: pyproject.toml: torch>=2.2)"
    assert shown_versions(cli, root / "sub")["torch"] == "2.2 (declared dependency: pyproject.toml: torch>=2.2)"


def test_a_broken_pyproject_does_not_stop_requirements(cli, make_project, installed):
    root = make_project({"model.py": MODEL, "requirements.txt": "torch==1.10.0\n"}, pyproject="[project\n")
    assert shown_versions(cli, root)["torch"] == "1.10 (declared dependency: requirements.txt: torch==1.10.0)"
    assert findings(lint(cli, root, "."), root) == BEFORE_THE_FLAG


def test_a_range_reaching_below_the_flag_reports_without_the_fix(cli, make_project, installed):
    """`torch>=1.8` runs torch 1.8 (no `use_reentrant`) and every newer torch (the implicit
    reentrant default): CKPT001 is reported, with no fix the oldest torch would reject; an
    exact 1.10 pin runs nothing newer and is not."""
    root = make_project({"model.py": MODEL, "requirements.txt": "torch>=1.8\n"})
    items = json.loads(lint(cli, root).stdout)
    first = next(item for item in items if item["code"] == "CKPT001")
    assert (first["location"]["row"], first["fix"]) == (3, None)
    assert first["message"].endswith("pass it only when `torch.__version__` is 1.11 or later)")
    (root / "requirements.txt").write_text("torch==1.10.0\n")
    assert [item["code"] for item in json.loads(lint(cli, root).stdout)] == ["CKPT032"]


def test_the_summary_says_how_many_findings_the_declared_versions_hide(cli, make_project, installed):
    root = make_project({"model.py": MODEL, "requirements.txt": "torch==1.10.0\n"})
    note = (
        "(1 finding not shown: CKPT001 applies to torch>=1.11, the target is torch 1.10 (declared dependency: "
        "requirements.txt: torch==1.10.0); `--target-version` to see them.)\n"
    )
    for _ in range(2):  # cold, then from the cache
        result = cli(["."], cwd=root)
        assert result.output.endswith("Found 1 error.\n" + note)
    assert "not shown" not in cli(["--target-version", "torch=2.4", "."], cwd=root).output
    assert [item["code"] for item in json.loads(lint(cli, root).stdout)] == ["CKPT032"]


def test_machine_formats_say_what_the_declared_versions_hide(cli, make_project, installed):
    """JSON (a list with no place for it) and JUnit say it on stderr; SARIF as a note among the
    run's notifications, GitHub as a notice of the run; `-q` keeps stderr quiet."""
    root = make_project({"model.py": MODEL, "requirements.txt": "torch==1.10.0\n"})
    sentence = (
        "1 finding not shown: CKPT001 applies to torch>=1.11, the target is torch 1.10 (declared dependency: "
        "requirements.txt: torch==1.10.0); `--target-version` to see them."
    )
    for output_format in ("json", "junit", "sarif", "github"):
        result = cli(["--output-format", output_format, "--no-cache", "."], cwd=root)
        assert result.stderr == f"note: {sentence}\n", output_format
    run = json.loads(cli(["--output-format", "sarif", "--no-cache", "."], cwd=root).stdout)["runs"][0]
    assert run["invocations"] == [
        {
            "executionSuccessful": True,
            "toolExecutionNotifications": [{"level": "note", "descriptor": {"id": "not-shown"}, "message": {"text": sentence}}],
        }
    ]
    annotations = cli(["--output-format", "github", "--no-cache", "."], cwd=root).stdout.splitlines()
    assert annotations[-1] == f"::notice title=ckptlint::{sentence}"
    assert cli(["--output-format", "json", "--no-cache", "-q", "."], cwd=root).stderr == ""
    shown = cli(["--output-format", "sarif", "--no-cache", "--target-version", "torch=2.4", "."], cwd=root)
    assert (shown.stderr, "invocations" in json.loads(shown.stdout)["runs"][0]) == ("", False)


def test_hidden_findings_cite_the_versions_of_their_own_project(cli, make_project, installed):
    """A nested project pinned to torch 1.10 under a root on torch 2.4: the summary gives the
    nested project's declaration (its own pyproject.toml), not the root's versions."""
    root = make_project(
        {"model.py": MODEL, "old/pyproject.toml": "[project]\nname = 'old'\ndependencies = ['torch==1.10.0']\n",
         "old/model.py": MODEL},
        pyproject="[project]\nname = 'demo'\ndependencies = ['torch>=2.4']\n",
    )
    assert cli(["."], cwd=root).output.endswith(
        "(1 finding not shown: CKPT001 applies to torch>=1.11, the target is torch 1.10 (declared dependency: "
        "pyproject.toml: torch==1.10.0); `--target-version` to see them.)\n"
    )


def test_a_declared_upper_bound_rules_out_an_installed_version_outside_it(monkeypatch):
    """`transformers<4.46.0` declares no version to target, but the project does not run the
    installed 5.17: a rule for < 5.0 applies, one for >= 5.0 does not; an installed version
    inside the range is used as before."""
    import ckptlint.versions as versions_module

    installed = {"transformers": "5.17.0"}
    monkeypatch.setattr(
        versions_module, "installed_version",
        lambda package: TargetVersion(Version.parse(installed[package]), VersionSource.INSTALLED, package)
        if package in installed else None,
    )
    declared = {"transformers": DeclaredRange(VersionRange.of("transformers", max="4.46.0"), "requirements.txt: transformers<4.46.0")}
    versions = TargetVersions({}, ranges=declared)
    assert versions.get("transformers") is None
    assert versions.declared_range("transformers") == declared["transformers"]
    assert versions.applies([VersionRange.of("transformers", max="5.0")]) is Applies.YES
    assert versions.applies([VersionRange.of("transformers", min="5.0")]) is Applies.NO
    assert versions.applies([VersionRange.of("transformers", min="4.40", max="5.0")]) is Applies.UNKNOWN
    assert not versions.could_be(VersionRange.of("transformers", min="5.0"))
    assert versions.fingerprint() != TargetVersions({}).fingerprint()
    installed["transformers"] = "4.45.2"
    inside = TargetVersions({}, ranges=declared)
    assert str(inside.get("transformers").version) == "4.45.2"
    assert inside.declared_range("transformers") is None
