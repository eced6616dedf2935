"""Configuration (DESIGN.md, "Configuration"): where it is found, what each key does, and
that every bad file or value exits 2 with the file, the key and what is allowed. Also the
result cache, whose key is the resolved configuration."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

import ckptlint.runner
from conftest import json_findings
from ckptlint.config import (
    DEFAULT_EXCLUDE,
    ConfigError,
    Overrides,
    resolve_settings,
)
from ckptlint.project_root import find_project_root

# torch>=2.1 is declared so results do not depend on the torch installed next to the tests.
PYPROJECT = "[project]\nname = 'demo'\ndependencies = ['torch>=2.1']\n"
MODEL = """\
from torch.utils.checkpoint import checkpoint
def forward(self, h, mask):
    h = checkpoint(self.layer, h)
    return checkpoint(self.layer, h, attention_mask=mask)
"""
BOTH = [("model.py", 3, 9, "CKPT001"), ("model.py", 4, 12, "CKPT032")]
# Without CKPT032 (which supersedes it), line 4 is an implicit reentrant checkpoint too.
ONLY_001 = [("model.py", 3, 9, "CKPT001"), ("model.py", 4, 12, "CKPT001")]
ONLY_032 = [("model.py", 4, 12, "CKPT032")]
ALLOWED_KEYS = (
    "allowed keys: select, ignore, extend-select, exclude, extend-exclude, per-file-ignores, "
    "target-versions, stateful-modules, checkpoint-functions, fsdp, cache-dir, respect-gitignore"
)


def findings(result, root: Path) -> list[tuple]:
    return json_findings(result, root)


def lint(cli, root: Path, *args: str):
    return cli(["--output-format", "json", "--no-cache", *args], cwd=root)


def settings_lines(stdout: str) -> dict[str, str]:
    """`--show-settings` as {label: value}; each target version under its package name."""
    shown: dict[str, str] = {}
    in_versions = False
    for line in stdout.splitlines():
        if line == "target versions:":
            in_versions = True
        elif in_versions and line.startswith("  "):
            package, value = line.split(None, 1)
            shown[package] = value
        elif ":" in line:
            label, value = line.split(":", 1)
            shown[label.strip()] = value.strip()
    return shown


def config_error(result) -> str:
    """The one error line of a run that must stop at the configuration."""
    assert result.exit_code == 2, (result.stdout, result.stderr)
    assert result.stdout == ""
    assert "Traceback" not in result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    return lines[0][len("error: ") :]


# --- where the configuration comes from ------------------------------------------------

CONFIG_SOURCES = {
    "pyproject.toml": PYPROJECT + "[tool.ckptlint]\nselect = ['CKPT032']\n",
    "ckptlint.toml": "select = ['CKPT032']\n",
    ".ckptlint.toml": "select = ['CKPT032']\n",
    ".ckptlint.yaml": "select: [CKPT032]\n",
}


@pytest.mark.parametrize("name", list(CONFIG_SOURCES))
def test_each_config_file_is_read(cli, make_project, name):
    root = make_project({"model.py": MODEL}, pyproject=PYPROJECT)
    assert findings(lint(cli, root, "."), root) == BOTH
    (root / name).write_text(CONFIG_SOURCES[name])
    assert findings(lint(cli, root, "."), root) == ONLY_032
    shown = settings_lines(cli(["--show-settings", "."], cwd=root).stdout)
    assert shown["config file"] == str(root.resolve() / name)
    assert shown["selected rules"] == "CKPT032, CKPT900, CKPT901"


# Within one directory: .ckptlint.toml, then ckptlint.toml, then .ckptlint.yaml, then
# pyproject.toml (only with a [tool.ckptlint] table).
@pytest.mark.parametrize(
    "present, chosen",
    [
        ([".ckptlint.toml", "ckptlint.toml", ".ckptlint.yaml", "pyproject.toml"], ".ckptlint.toml"),
        (["ckptlint.toml", ".ckptlint.yaml", "pyproject.toml"], "ckptlint.toml"),
        ([".ckptlint.yaml", "pyproject.toml"], ".ckptlint.yaml"),
        (["pyproject.toml"], "pyproject.toml"),
    ],
)
def test_precedence_within_one_directory(cli, make_project, present, chosen):
    root = make_project({"model.py": MODEL}, pyproject=PYPROJECT)
    for name in present:
        # Each file selects a different code so the one in force is visible in the results.
        select = "CKPT032" if name == chosen else "CKPT001"
        text = CONFIG_SOURCES[name].replace("CKPT032", select)
        (root / name).write_text(text)
    assert settings_lines(cli(["--show-settings", "."], cwd=root).stdout)["config file"] == str(root.resolve() / chosen)
    assert findings(lint(cli, root, "."), root) == ONLY_032


def test_pyproject_without_a_tool_table_is_not_a_config(cli, make_project):
    root = make_project({"pkg/model.py": MODEL}, pyproject=PYPROJECT)
    (root / "pkg" / "ckptlint.toml").write_text("select = ['CKPT032']\n")
    # The nearest config file from the linted path up to the project root: pkg/ckptlint.toml.
    shown = settings_lines(cli(["--show-settings", "pkg"], cwd=root).stdout)
    assert shown["config file"] == str(root.resolve() / "pkg" / "ckptlint.toml")
    assert shown["project root"] == f"{root.resolve()} (holds pyproject.toml)"
    assert findings(lint(cli, root, "pkg"), root) == [("pkg/model.py", 4, 12, "CKPT032")]
    # Without a config anywhere: defaults.
    (root / "pkg" / "ckptlint.toml").unlink()
    assert settings_lines(cli(["--show-settings", "pkg"], cwd=root).stdout)["config file"] == "none found (defaults)"


def test_config_search_stops_at_the_project_root(cli, tmp_path):
    (tmp_path / "ckptlint.toml").write_text("select = ['CKPT032']\n")  # above the project
    project = tmp_path / "project"
    project.mkdir()
    (project / "pyproject.toml").write_text(PYPROJECT)
    (project / "model.py").write_text(MODEL)
    shown = settings_lines(cli(["--show-settings", "."], cwd=project).stdout)
    assert shown["config file"] == "none found (defaults)"
    assert findings(lint(cli, project, "."), project) == BOTH


def test_config_option_overrides_discovery(cli, make_project):
    root = make_project({"model.py": MODEL}, pyproject=PYPROJECT + "[tool.ckptlint]\nselect = ['CKPT032']\n")
    (root / "configs").mkdir()
    (root / "configs" / "strict.yaml").write_text("select: [CKPT001]\n")
    result = lint(cli, root, "--config", "configs/strict.yaml", ".")
    assert findings(result, root) == ONLY_001
    shown = settings_lines(cli(["--show-settings", "--config", "configs/strict.yaml", "."], cwd=root).stdout)
    assert shown["config file"] == str(root.resolve() / "configs" / "strict.yaml")
    # A pyproject.toml named with --config is read for its [tool.ckptlint] table.
    (root / "configs" / "pyproject.toml").write_text("[tool.ckptlint]\nignore = ['CKPT032']\n")
    assert findings(lint(cli, root, "--config", "configs/pyproject.toml", "."), root) == ONLY_001


def test_config_option_naming_a_missing_file(cli, make_project):
    root = make_project({"model.py": MODEL}, pyproject=PYPROJECT)
    assert config_error(cli(["--config", "nope.toml", "."], cwd=root)) == "--config: nope.toml: no such file"


def test_empty_yaml_and_empty_toml_mean_defaults(cli, make_project):
    root = make_project({"model.py": MODEL}, pyproject=PYPROJECT)
    (root / ".ckptlint.yaml").write_text("# nothing yet\n")
    assert findings(lint(cli, root, "."), root) == BOTH
    (root / ".ckptlint.toml").write_text("")
    assert findings(lint(cli, root, "."), root) == BOTH


# --- project root ----------------------------------------------------------------------


@pytest.mark.parametrize("marker", ["pyproject.toml", "setup.cfg", "setup.py", ".git"])
def test_project_root_is_the_nearest_ancestor_with_a_marker(tmp_path, marker):
    outer = tmp_path / "outer"
    inner = outer / "inner"
    (inner / "src" / "pkg").mkdir(parents=True)
    (outer / "pyproject.toml").write_text("[project]\nname = 'outer'\n")
    if marker == ".git":
        (inner / ".git").mkdir()
    else:
        (inner / marker).write_text("")
    assert find_project_root(inner / "src" / "pkg") == inner.resolve()
    assert find_project_root(inner / "src" / "pkg" / "mod.py") == inner.resolve()
    assert find_project_root(outer) == outer.resolve()
    settings = resolve_settings(inner / "src")
    assert settings.project_root == inner.resolve()
    assert settings.origins["project root"] == f"{inner.resolve()} (holds {marker})"


def test_git_file_of_a_worktree_marks_the_root(tmp_path):
    (tmp_path / "wt" / "src").mkdir(parents=True)
    (tmp_path / "wt" / ".git").write_text("gitdir: /elsewhere\n")
    assert find_project_root(tmp_path / "wt" / "src") == (tmp_path / "wt").resolve()


def test_without_any_marker_the_start_directory_is_the_root(tmp_path):
    (tmp_path / "a" / "b").mkdir(parents=True)
    root = find_project_root(tmp_path / "a" / "b")
    # Nothing above tmp_path is expected to hold a marker either; if it does, the nearest wins.
    assert root == (tmp_path / "a" / "b").resolve() or any(
        (root / m).exists() for m in ("pyproject.toml", "setup.cfg", "setup.py", ".git")
    )


def test_show_settings_names_the_root_and_its_marker(cli, tmp_path):
    (tmp_path / "setup.py").write_text("")
    (tmp_path / "pkg").mkdir()
    shown = settings_lines(cli(["--show-settings", "pkg"], cwd=tmp_path).stdout)
    assert shown["project root"] == f"{tmp_path.resolve()} (holds setup.py)"


# --- each key --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "table, expected",
    [
        ("select = ['CKPT001']", ONLY_001),
        ("select = ['CKPT0']", BOTH),  # prefixes
        ("select = ['ckpt001']", ONLY_001),  # case does not matter
        ("ignore = ['CKPT001']", ONLY_032),
        ("ignore = ['CKPT03']", ONLY_001),
        ("select = ['CKPT001']\nextend-select = ['CKPT032']", BOTH),
        ("select = []\nextend-select = ['CKPT032']", ONLY_032),
        ("select = ['CKPT0']\nignore = ['CKPT001']", ONLY_032),
        # The more specific prefix decides: CKPT001 beats the ignored CKPT0.
        ("select = ['CKPT001']\nignore = ['CKPT0']", ONLY_001),
        ("ignore = ['ALL']", []),
        ("select = []", []),
    ],
)
def test_selection_keys(cli, make_project, table, expected):
    root = make_project({"model.py": MODEL}, pyproject=PYPROJECT + "[tool.ckptlint]\n" + table + "\n")
    assert findings(lint(cli, root, "."), root) == expected


def test_command_line_selection_layers_over_the_config(cli, make_project):
    root = make_project({"model.py": MODEL}, pyproject=PYPROJECT + "[tool.ckptlint]\nselect = ['CKPT032']\n")
    assert findings(lint(cli, root, "--extend-select", "CKPT001", "."), root) == BOTH
    assert findings(lint(cli, root, "--select", "CKPT001", "."), root) == ONLY_001
    assert findings(lint(cli, root, "--ignore", "CKPT032", "."), root) == []


def test_per_file_ignores(cli, make_project):
    root = make_project(
        {"model.py": MODEL, "tests/test_model.py": MODEL, "legacy/old.py": MODEL},
        pyproject=PYPROJECT
        + "[tool.ckptlint.per-file-ignores]\n"
        + "'tests/*' = ['CKPT001']\n"
        + "'legacy/' = ['CKPT0']\n"
        + "'model.py' = ['CKPT032']\n",
    )
    assert findings(lint(cli, root, "."), root) == [
        ("model.py", 3, 9, "CKPT001"),
        ("tests/test_model.py", 4, 12, "CKPT032"),
    ]


def test_exclude_replaces_the_defaults_and_extend_exclude_adds(cli, make_project):
    files = {"model.py": MODEL, "generated/gen.py": MODEL, "build/b.py": MODEL}
    root = make_project(files, pyproject=PYPROJECT + "[tool.ckptlint]\nextend-exclude = ['generated']\n")
    assert {f[0] for f in findings(lint(cli, root, "."), root)} == {"model.py"}
    root = make_project(files, pyproject=PYPROJECT + "[tool.ckptlint]\nexclude = ['generated']\n")
    # `build` was excluded only by the defaults, which `exclude` replaces.
    assert {f[0] for f in findings(lint(cli, root, "."), root)} == {"model.py", "build/b.py"}


def test_other_keys_reach_the_settings(make_project):
    root = make_project(
        {},
        pyproject=PYPROJECT
        + "[tool.ckptlint]\n"
        + "stateful-modules = ['my.layers.RunningNorm']\n"
        + "checkpoint-functions = ['my.utils.ckpt', 'my.utils.ckpt_seq']\n"
        + "fsdp = 'yes'\n"
        + "cache-dir = '.cache/ckpt'\n"
        + "target-versions = {torch = '2.4', transformers = '4.46.1'}\n"
        + "respect-gitignore = false\n",
    )
    settings = resolve_settings(root)
    assert settings.stateful_modules == ("my.layers.RunningNorm",)
    assert settings.checkpoint_functions == ("my.utils.ckpt", "my.utils.ckpt_seq")
    assert settings.fsdp == "yes"
    assert settings.cache_dir == root.resolve() / ".cache" / "ckpt"
    assert settings.respect_gitignore is False
    assert str(settings.target_versions.get("torch").version) == "2.4"
    assert str(settings.target_versions.get("transformers").version) == "4.46.1"
    assert settings.exclude == DEFAULT_EXCLUDE


@pytest.mark.parametrize("value, mode", [("'auto'", "auto"), ("'no'", "no"), ("true", "yes"), ("false", "no")])
def test_fsdp_values(cli, make_project, value, mode):
    root = make_project({}, pyproject=PYPROJECT + f"[tool.ckptlint]\nfsdp = {value}\n")
    assert settings_lines(cli(["--show-settings", "."], cwd=root).stdout)["fsdp"] == mode


def test_yaml_keys(cli, make_project):
    root = make_project({"model.py": MODEL, "vendor/v.py": MODEL}, pyproject=PYPROJECT)
    (root / ".ckptlint.yaml").write_text(
        "select: [CKPT0]\n"
        "ignore: [CKPT032]\n"
        "extend-exclude: [vendor]\n"
        "fsdp: yes\n"  # YAML 1.1 reads this as true
        "target-versions:\n  torch: '2.4'\n"
    )
    # `fsdp: yes` makes the implicit reentrant call CKPT002 (reported instead of CKPT001).
    assert findings(lint(cli, root, "."), root) == [(*finding[:3], "CKPT002") for finding in ONLY_001]
    shown = settings_lines(cli(["--show-settings", "."], cwd=root).stdout)
    assert shown["fsdp"] == "yes"
    assert shown["torch"] == f"2.4 (configuration: {root.resolve() / '.ckptlint.yaml'})"


def test_cache_dir_key_is_relative_to_the_config_file(cli, make_project):
    root = make_project({"pkg/model.py": MODEL}, pyproject=PYPROJECT)
    (root / "pkg" / ".ckptlint.toml").write_text("cache-dir = 'my-cache'\n")
    assert cli(["pkg"], cwd=root).exit_code == 1
    assert (root / "pkg" / "my-cache").is_dir()
    assert not (root / ".ckptlint_cache").exists()


# --- bad configuration: exit 2, the file, the key, what is allowed --------------------

BAD_TABLES = [
    ("foo = 1", "unknown key `foo`; " + ALLOWED_KEYS),
    ("[lint]\nselect = ['CKPT001']", "unknown key `lint`; " + ALLOWED_KEYS),
    (
        "select = ['CKPT999']",
        "`select`: unknown rule code or prefix 'CKPT999'; known codes: ",
    ),
    ("ignore = ['FOO']", "`ignore`: unknown rule code or prefix 'FOO'; known codes: "),
    ("extend-select = ['CKPT001', 'E501']", "`extend-select`: unknown rule code or prefix 'E501'; known codes: "),
    ("select = 3", "`select` must be a list of strings, got 3"),
    # A bare string is refused for every list, as Ruff does.
    ("select = 'CKPT032'", "`select` must be a list of strings, got the string 'CKPT032' (write ['CKPT032'])"),
    ("exclude = 'm.py'", "`exclude` must be a list of strings, got the string 'm.py' (write ['m.py'])"),
    ("extend-include = '*.pyw'", "`extend-include` must be a list of strings, got the string '*.pyw' (write ['*.pyw'])"),
    ("include = []", "`include` is empty: no file would be linted; remove it for the default (*.py, *.pyi,"),
    ("select = ['CKPT001', 1]", "`select` must be a list of strings, got ['CKPT001', 1]"),
    ("exclude = [true]", "`exclude` must be a list of strings, got [True]"),
    ("extend-exclude = {a = 1}", "`extend-exclude` must be a list of strings, got {'a': 1}"),
    ("stateful-modules = 5", "`stateful-modules` must be a list of strings, got 5"),
    ("checkpoint-functions = [[]]", "`checkpoint-functions` must be a list of strings, got [[]]"),
    ("fsdp = 'maybe'", "`fsdp` must be one of auto, yes, no, got 'maybe'"),
    ("fsdp = 1", "`fsdp` must be one of auto, yes, no, got 1"),
    ("cache-dir = 3", "`cache-dir` must be a path string, got 3"),
    ("cache-dir = ''", "`cache-dir` must be a path string, got ''"),
    ("respect-gitignore = 'no'", "`respect-gitignore` must be true or false, got 'no'"),
    ("per-file-ignores = ['tests/*']", "`per-file-ignores` must be a table of glob pattern -> list of codes"),
    (
        "per-file-ignores = {'tests/*' = ['CKPT0X']}",
        "`per-file-ignores` [tests/*]: unknown rule code or prefix 'CKPT0X'; known codes: ",
    ),
    (
        "per-file-ignores = {'tests/*' = 7}",
        "`per-file-ignores.tests/*` must be a list of strings, got 7",
    ),
    (
        "per-file-ignores = {'tests/*' = 'CKPT001'}",
        "`per-file-ignores.tests/*` must be a list of strings, got the string 'CKPT001' (write ['CKPT001'])",
    ),
    (
        "target-versions = '2.4'",
        '`target-versions` must be a table such as {torch = "2.4", transformers = "4.46"}',
    ),
    ("target-versions = {torch = 'abc'}", "`target-versions.torch` must be a version such as \"2.4\", got 'abc'"),
    ("target-versions = {torch = true}", "`target-versions.torch` must be a version such as \"2.4\", got True"),
    (
        "target-versions = {troch = '2.4'}",
        "`target-versions.troch`: unknown package; allowed: torch, transformers, peft, accelerate, trl, open-clip-torch",
    ),
    (
        # TOML reads 2.10 as the float 2.1: refused, not silently taken as torch 2.1.
        "target-versions = {torch = 2.10}",
        "`target-versions.torch` must be a quoted version such as \"2.4\"; a bare number loses trailing "
        "zeros (2.10 reads as 2.1), got 2.1",
    ),
]


@pytest.mark.parametrize("table, message", BAD_TABLES, ids=[t for t, _ in BAD_TABLES])
@pytest.mark.parametrize("name", ["ckptlint.toml", "pyproject.toml"])
def test_bad_toml_values_exit_2(cli, make_project, name, table, message):
    root = make_project({"model.py": MODEL}, pyproject=PYPROJECT)
    config = root / name
    if name == "pyproject.toml":
        config.write_text(PYPROJECT + "[tool.ckptlint]\n" + table + "\n")
        if table.startswith("[lint]"):
            config.write_text(PYPROJECT + "[tool.ckptlint.lint]\nselect = ['CKPT001']\n")
    else:
        config.write_text(table + "\n")
    error = config_error(cli(["."], cwd=root))
    assert error.startswith(f"{config.resolve()}: {message}")
    if "known codes: " in message:
        assert error.endswith("(prefixes such as CKPT0 and ALL also work)")
        assert "CKPT001, CKPT002" in error


@pytest.mark.parametrize(
    "text, message",
    [
        ("foo: 1\n", "unknown key `foo`; " + ALLOWED_KEYS),
        ("select: [CKPT999]\n", "`select`: unknown rule code or prefix 'CKPT999'"),
        ("select: [FOO]\n", "`select`: unknown rule code or prefix 'FOO'"),
        ("select: {a: 1}\n", "`select` must be a list of strings, got {'a': 1}"),
        ("select:\n", "`select` must be a list of strings, got None"),
        ("fsdp: sometimes\n", "`fsdp` must be one of auto, yes, no, got 'sometimes'"),
        ("target-versions: {torch: 2.10}\n", "`target-versions.torch` must be a quoted version such as \"2.4\""),
        ("- select\n- CKPT001\n", "expected a mapping of settings at the top level (keys: select, ignore,"),
        ("just a string\n", "expected a mapping of settings at the top level (keys: select, ignore,"),
        ("42\n", "expected a mapping of settings at the top level"),
        ("select: [CKPT001\n", "invalid YAML: "),
        ("select: 'CKPT001\n", "invalid YAML: "),
        ("a: b: c\n", "invalid YAML: mapping values are not allowed here (line 1, column 5)"),
        ("\tselect: x\n", "invalid YAML: "),
    ],
)
def test_bad_yaml_exits_2(cli, make_project, text, message):
    root = make_project({"model.py": MODEL}, pyproject=PYPROJECT)
    (root / ".ckptlint.yaml").write_text(text)
    error = config_error(cli(["."], cwd=root))
    assert error.startswith(f"{(root / '.ckptlint.yaml').resolve()}: {message}"), error


@pytest.mark.parametrize(
    "name, text",
    [
        ("ckptlint.toml", "select = [\n"),
        ("ckptlint.toml", "select = 'CKPT001\n"),
        ("ckptlint.toml", "[tool\n"),
        ("ckptlint.toml", "select = ['CKPT001']\nselect = ['CKPT032']\n"),
        ("pyproject.toml", PYPROJECT + "[tool.ckptlint]\nselect = [\n"),
    ],
)
def test_invalid_toml_exits_2(cli, make_project, name, text):
    root = make_project({"model.py": MODEL}, pyproject=PYPROJECT)
    (root / name).write_text(text)
    error = config_error(cli(["."], cwd=root))
    assert error.startswith(f"{(root / name).resolve()}: invalid TOML: "), error
    assert "(at " in error  # where in the file


def test_config_that_is_not_utf8_exits_2(cli, make_project):
    root = make_project({"model.py": MODEL}, pyproject=PYPROJECT)
    (root / "ckptlint.toml").write_bytes(b"# caf\xe9\nselect = ['CKPT001']\n")
    assert config_error(cli(["."], cwd=root)).startswith(f"{(root / 'ckptlint.toml').resolve()}: invalid TOML: ")
    (root / "ckptlint.toml").unlink()
    (root / ".ckptlint.yaml").write_bytes(b"# caf\xe9\nselect: [CKPT001]\n")
    assert config_error(cli(["."], cwd=root)).startswith(
        f"{(root / '.ckptlint.yaml').resolve()}: invalid YAML: not UTF-8"
    )


def test_tool_ckptlint_that_is_not_a_table(cli, make_project):
    root = make_project({"model.py": MODEL}, pyproject=PYPROJECT + "[tool]\nckptlint = 3\n")
    assert config_error(cli(["."], cwd=root)) == (
        f"{(root / 'pyproject.toml').resolve()}: [tool.ckptlint] must be a table of settings "
        "(keys: select, ignore, extend-select, exclude, extend-exclude, per-file-ignores, target-versions, "
        "stateful-modules, checkpoint-functions, fsdp, cache-dir, respect-gitignore, include, extend-include, severity, fail-on)"
    )


def test_broken_pyproject_without_a_ckptlint_table_is_not_an_error(cli, make_project):
    # Not ckptlint's file to judge: no [tool.ckptlint] in it, so it is not our configuration.
    root = make_project({"model.py": MODEL}, pyproject="[project\nname = 'demo'\n")
    result = lint(cli, root, "--target-version", "torch=2.4", ".")
    assert result.exit_code == 1
    assert findings(result, root) == BOTH


def test_bad_config_is_reported_by_every_command(cli, make_project):
    root = make_project({"model.py": MODEL}, pyproject=PYPROJECT + "[tool.ckptlint]\nfoo = 1\n")
    for args in (["."], ["check", "."], ["--show-settings", "."], ["--fix", "."], ["clean", "."]):
        assert "unknown key `foo`" in config_error(cli(args, cwd=root)), args
    assert (root / "model.py").read_text() == MODEL


def test_bad_config_in_a_real_process_prints_one_line(make_project):
    from conftest import run_subprocess

    root = make_project({"model.py": MODEL}, pyproject=PYPROJECT + "[tool.ckptlint]\nselect = ['CKPT999']\n")
    completed = run_subprocess(["."], cwd=root)
    assert completed.returncode == 2
    assert completed.stdout == b""
    assert completed.stderr.decode().startswith(f"error: {(root / 'pyproject.toml').resolve()}: `select`: ")
    assert b"Traceback" not in completed.stderr
    assert len(completed.stderr.splitlines()) == 1


@pytest.mark.parametrize(
    "args, message",
    [
        (["--select", "FOO"], "--select: unknown rule code or prefix 'FOO'"),
        (["--ignore", "CKPT999"], "--ignore: unknown rule code or prefix 'CKPT999'"),
        (["--target-version", "torch"], "--target-version: expected PACKAGE=VERSION (e.g. torch=2.4), got 'torch'"),
        (["--target-version", "=2.4"], "--target-version: expected PACKAGE=VERSION (e.g. torch=2.4), got '=2.4'"),
        (["--target-version", "torch=abc"], "--target-version: 'abc' is not a version (e.g. torch=2.4)"),
        (["--target-version", "torch="], "--target-version: '' is not a version (e.g. torch=2.4)"),
        (
            ["--target-version", "troch=1.10"],
            "--target-version: unknown package 'troch'; allowed: torch, transformers, peft, accelerate, trl, open-clip-torch",
        ),
    ],
)
def test_bad_command_line_values_exit_2(cli, make_project, args, message):
    root = make_project({"model.py": MODEL}, pyproject=PYPROJECT)
    assert config_error(cli([*args, "."], cwd=root)).startswith(message)


@pytest.mark.parametrize("value", [".", "..", "/"])
def test_cache_dir_holding_the_project_is_refused(cli, make_project, value):
    # `ckptlint clean` deletes the cache directory: it must never be the project itself.
    root = make_project({"model.py": MODEL}, pyproject=PYPROJECT + f"[tool.ckptlint]\ncache-dir = '{value}'\n")
    error = config_error(cli(["."], cwd=root))
    assert error.startswith(f"{(root / 'pyproject.toml').resolve()}: `cache-dir`: ")
    assert error.endswith("is the project root or a directory above it; use a directory of its own, such as .ckptlint_cache")
    assert config_error(cli(["clean", "."], cwd=root)).startswith(f"{(root / 'pyproject.toml').resolve()}: `cache-dir`: ")
    assert (root / "model.py").read_text() == MODEL
    root2 = make_project({"model.py": MODEL}, pyproject=PYPROJECT)
    assert config_error(cli(["--cache-dir", value, "."], cwd=root2)).startswith("--cache-dir: ")


def test_resolve_settings_raises_config_error_for_the_api(make_project):
    root = make_project({}, pyproject=PYPROJECT + "[tool.ckptlint]\nselect = ['NOPE']\n")
    with pytest.raises(ConfigError, match="unknown rule code or prefix 'NOPE'"):
        resolve_settings(root)
    with pytest.raises(ConfigError, match="no such file"):
        resolve_settings(root, Overrides(config_file=root / "missing.toml"))


# --- the cache: keyed on content and configuration -------------------------------------


@pytest.fixture
def lint_calls(record_calls):
    """Counts the files the engine actually lints (cache misses)."""
    return record_calls(ckptlint.runner, "lint_text", lambda text, path, *args, **kwargs: Path(path).name)


def json_run(cli, root: Path, *args: str):
    return cli(["--output-format", "json", *args], cwd=root)


def test_second_run_uses_the_cache(cli, make_project, lint_calls):
    root = make_project({"a.py": MODEL, "b.py": MODEL}, pyproject=PYPROJECT)
    cold = json_run(cli, root, ".")
    assert sorted(lint_calls) == ["a.py", "b.py"]
    warm = json_run(cli, root, ".")
    assert sorted(lint_calls) == ["a.py", "b.py"]  # nothing linted again
    assert warm.stdout == cold.stdout
    assert warm.exit_code == cold.exit_code == 1
    # The fixes come back from the cache too.
    assert [d["fix"]["applicability"] for d in json.loads(warm.stdout)] == ["unsafe", "safe", "unsafe", "safe"]
    cache = root / ".ckptlint_cache"
    assert (cache / "README").read_text().startswith("This directory is ckptlint's cache")
    assert (cache / ".gitignore").read_text() == "*\n"


def test_changed_file_is_linted_again(cli, make_project, lint_calls):
    root = make_project({"a.py": MODEL, "b.py": MODEL}, pyproject=PYPROJECT)
    json_run(cli, root, ".")
    lint_calls.clear()
    (root / "a.py").write_text(MODEL.replace("attention_mask=mask", "attention_mask=mask, use_reentrant=False"))
    result = json_run(cli, root, ".")
    assert lint_calls == ["a.py"]
    assert findings(result, root) == [("a.py", 3, 9, "CKPT001"), ("b.py", 3, 9, "CKPT001"), ("b.py", 4, 12, "CKPT032")]


@pytest.mark.parametrize(
    "second, expected",
    [
        (["--select", "CKPT001"], [("a.py", 3, 9, "CKPT001"), ("a.py", 4, 12, "CKPT001")]),
        (["--ignore", "CKPT001"], [("a.py", 4, 12, "CKPT032")]),
        # torch 1.10 has no flag: CKPT001 is silent, the keyword still crashes (CKPT032).
        (["--target-version", "torch=1.10"], [("a.py", 4, 12, "CKPT032")]),
    ],
)
def test_other_settings_never_reuse_stale_results(cli, make_project, lint_calls, second, expected):
    root = make_project({"a.py": MODEL}, pyproject=PYPROJECT)
    json_run(cli, root, ".")
    lint_calls.clear()
    assert findings(json_run(cli, root, *second, "."), root) == expected
    assert lint_calls == ["a.py"]
    # Each configuration has its own entries: both are warm now.
    assert len(findings(json_run(cli, root, "."), root)) == 2
    assert findings(json_run(cli, root, *second, "."), root) == expected
    assert lint_calls == ["a.py"]


def test_target_version_change_gives_fresh_results(cli, make_project):
    root = make_project({"a.py": MODEL}, pyproject=PYPROJECT)
    assert findings(json_run(cli, root, "."), root) == [("a.py", 3, 9, "CKPT001"), ("a.py", 4, 12, "CKPT032")]
    old = json_run(cli, root, "--target-version", "torch=1.10", ".")
    assert findings(old, root) == [("a.py", 4, 12, "CKPT032")]
    assert "the targeted torch (< 1.11)" in json.loads(old.stdout)[0]["message"]
    assert len(findings(json_run(cli, root, "."), root)) == 2
    (root / "ckptlint.toml").write_text("ignore = ['CKPT032']\n")
    assert findings(json_run(cli, root, "."), root) == [("a.py", 3, 9, "CKPT001"), ("a.py", 4, 12, "CKPT001")]
    (root / "ckptlint.toml").write_text("[per-file-ignores]\n'a.py' = ['CKPT001']\n")
    assert findings(json_run(cli, root, "."), root) == [("a.py", 4, 12, "CKPT032")]


@pytest.mark.parametrize(
    "garbage",
    [
        b"",
        b"not json at all",
        b"\xff\xfe\x00garbage",
        b"[]",
        b'{"files": []}',
        b'{"files": {"x": 1}}',
        b"[" * 100_000,
    ],
)
def test_corrupt_cache_file_is_ignored(cli, make_project, lint_calls, garbage):
    root = make_project({"a.py": MODEL}, pyproject=PYPROJECT)
    expected = json_run(cli, root, "--no-cache", ".").stdout
    json_run(cli, root, ".")
    [cache_file] = [
        p for p in (root / ".ckptlint_cache").glob("*/*.json") if not p.name.startswith(("index-", "facts-", "walk-"))
    ]
    cache_file.write_bytes(garbage)
    lint_calls.clear()
    result = json_run(cli, root, ".")
    assert result.stdout == expected
    assert lint_calls == ["a.py"]
    # And it is rewritten whole.
    assert json.loads(cache_file.read_text())["files"]


@pytest.mark.parametrize("which", ["*/index-*.json", "*/facts-*/*.json"])
@pytest.mark.parametrize(
    "garbage",
    [
        b"",
        b"not json",
        b'{"files": {"a.py": {"digest": 1, "facts": []}}}',
        b'{"digest": "0", "facts": {}}',
        b'{"files": {"model.py": {"digest": "0", "exported": "0", "stat": [1, 2, 3, 4]}}}',
    ],
)
def test_corrupt_project_index_cache_is_rebuilt(cli, make_project, which, garbage):
    """The index cache (digests and stats in `index-*.json`, each file's facts in
    `facts-*/`) broken in any way: the next run, with a changed file that needs the facts,
    gives what a run without cache gives."""
    files = {
        "model.py": MODEL,
        "train.py": "from torch.distributed.fsdp import FullyShardedDataParallel as FSDP\nmodel = FSDP(model)\n",
    }
    root = make_project(files, pyproject=PYPROJECT)
    json_run(cli, root, ".")
    cached = list((root / ".ckptlint_cache").glob(which))
    assert cached
    for path in cached:
        path.write_bytes(garbage)
    (root / "model.py").write_text((root / "model.py").read_text() + "\n# edited\n")
    expected = json_run(cli, root, "--no-cache", ".").stdout
    assert json_run(cli, root, ".").stdout == expected
    assert json_run(cli, root, ".").stdout == expected  # and from the cache rebuilt


def test_an_edit_that_keeps_size_and_mtime_is_seen(cli, make_project):
    """Unchanged files are recognised by their stat, without reading them; an edit that keeps
    the size and puts the modification time back still changes the inode's ctime."""
    root = make_project({"model.py": MODEL}, pyproject=PYPROJECT)
    old = time.time_ns() - 10 * 10**9  # outside the window in which a stat is not trusted
    os.utime(root / "model.py", ns=(old, old))
    assert findings(json_run(cli, root, "."), root) == BOTH
    call = "h = checkpoint(self.layer, h)"
    edited = MODEL.replace(call, "h = self.layer(h)".ljust(len(call)))
    assert len(edited) == len(MODEL)
    (root / "model.py").write_text(edited)
    os.utime(root / "model.py", ns=(old, old))
    assert findings(json_run(cli, root, "."), root) == [("model.py", 4, 12, "CKPT032")]


def test_files_modified_during_the_last_seconds_are_read_again(make_project):
    """git's racily-clean rule: a stat taken within two seconds of the file's modification is
    not remembered (another write in the same timestamp tick would look unchanged)."""
    from ckptlint.config import resolve_settings
    from ckptlint.indexing import build_index

    root = make_project({"fresh.py": "x = 1\n", "old.py": "y = 1\n"}, pyproject=PYPROJECT)
    old = time.time_ns() - 10 * 10**9
    os.utime(root / "old.py", ns=(old, old))
    build_index(root, resolve_settings(root))
    # (Beside it, `index-*.revisions.json`: when each fine-grained key last changed.)
    [index_file] = [p for p in (root / ".ckptlint_cache").glob("*/index-*.json") if not p.name.endswith(".revisions.json")]
    entries = json.loads(index_file.read_text())["files"]
    assert entries["fresh.py"]["stat"] is None
    assert entries["old.py"]["stat"][0] == old


def test_corrupt_cache_entries_are_linted_again(cli, make_project, lint_calls):
    root = make_project({"a.py": MODEL, "b.py": MODEL}, pyproject=PYPROJECT)
    expected = json_run(cli, root, "--no-cache", ".").stdout
    json_run(cli, root, ".")
    [cache_file] = [
        p for p in (root / ".ckptlint_cache").glob("*/*.json") if not p.name.startswith(("index-", "facts-", "walk-"))
    ]
    data = json.loads(cache_file.read_text())
    entries = data["files"]
    a_key = next(key for key in entries if key.endswith("a.py"))
    b_key = next(key for key in entries if key.endswith("b.py"))
    entries[a_key]["diagnostics"][0]["location"] = {"row": "3", "column": 9}
    entries[b_key]["diagnostics"] = [["not", "a", "diagnostic"]]
    cache_file.write_text(json.dumps(data))
    lint_calls.clear()
    assert json_run(cli, root, ".").stdout == expected
    assert sorted(lint_calls) == ["a.py", "b.py"]


def test_no_cache_writes_nothing_and_reads_nothing(cli, make_project, lint_calls):
    root = make_project({"a.py": MODEL}, pyproject=PYPROJECT)
    json_run(cli, root, "--no-cache", ".")
    assert not (root / ".ckptlint_cache").exists()
    json_run(cli, root, ".")
    lint_calls.clear()
    json_run(cli, root, "--no-cache", ".")
    assert lint_calls == ["a.py"]


def test_fix_runs_do_not_use_the_cache(cli, make_project, lint_calls):
    root = make_project({"a.py": MODEL}, pyproject=PYPROJECT)
    json_run(cli, root, ".")
    lint_calls.clear()
    result = cli(["--fix", "."], cwd=root)
    assert result.exit_code == 1  # the unsafe CKPT001 fix was not applied
    assert "use_reentrant=False" in (root / "a.py").read_text()
    # The fixed file is a different content: linted afresh, and the stale entry is not used.
    assert findings(json_run(cli, root, "."), root) == [("a.py", 3, 9, "CKPT001")]


def test_cache_dir_option_and_clean(cli, make_project):
    root = make_project({"a.py": MODEL}, pyproject=PYPROJECT)
    assert cli(["--cache-dir", "elsewhere/cache", "."], cwd=root).exit_code == 1
    assert (root / "elsewhere" / "cache" / "README").is_file()
    assert list((root / "elsewhere" / "cache").glob("*/*.json"))
    assert not (root / ".ckptlint_cache").exists()
    assert cli(["."], cwd=root).exit_code == 1
    assert (root / ".ckptlint_cache").is_dir()
    result = cli(["clean", "."], cwd=root)
    assert result.exit_code == 0
    assert result.stdout == f"Removed {(root / '.ckptlint_cache').resolve()}\n"
    assert not (root / ".ckptlint_cache").exists()
    assert (root / "a.py").read_text() == MODEL
    # Nothing to remove: still fine, and silent.
    assert cli(["clean", "."], cwd=root).stdout == ""


def test_cache_never_writes_into_an_existing_directory_it_does_not_own(cli, make_project):
    # A configured cache-dir that already exists keeps its own README and .gitignore.
    root = make_project({"a.py": MODEL, "shared/.gitignore": "keep-me\n", "shared/README": "mine\n"}, pyproject=PYPROJECT)
    assert cli(["--cache-dir", "shared", "."], cwd=root).exit_code == 1
    assert (root / "shared" / ".gitignore").read_text() == "keep-me\n"
    assert (root / "shared" / "README").read_text() == "mine\n"
    assert list((root / "shared").glob("*/*.json"))


def test_clean_removes_only_what_ckptlint_wrote(cli, make_project):
    root = make_project({"a.py": MODEL, "shared/notes.txt": "mine\n"}, pyproject=PYPROJECT + "[tool.ckptlint]\ncache-dir = 'shared'\n")
    assert cli(["."], cwd=root).exit_code == 1
    assert list((root / "shared").glob("*/*.json"))
    assert cli(["clean", "."], cwd=root).exit_code == 0
    assert (root / "shared" / "notes.txt").read_text() == "mine\n"


def test_cache_leaves_no_temporary_files(cli, make_project):
    root = make_project({"a.py": MODEL, "b.py": MODEL}, pyproject=PYPROJECT)
    cli(["."], cwd=root)
    (root / "b.py").write_text("x = 1\n")
    cli(["."], cwd=root)
    names = sorted(p.name for p in (root / ".ckptlint_cache").rglob("*"))
    assert not [n for n in names if n.endswith(".tmp")], names


def test_unwritable_cache_directory_is_a_warning_not_a_failure(cli, make_project):
    """Results are still reported (and the exit code is the findings'), with one warning."""
    root = make_project({"a.py": MODEL}, pyproject=PYPROJECT)
    (root / "blocker").write_text("a file where the cache directory would go\n")
    expected = json_run(cli, root, "--no-cache", ".").stdout
    result = json_run(cli, root, "--cache-dir", "blocker/cache", ".")
    assert result.stdout == expected
    assert result.exit_code == 1
    [warning] = result.stderr.splitlines()
    assert warning.startswith(f"warning: cache not written ({root.resolve() / 'blocker' / 'cache'}): ")
    assert warning.endswith("; results are not cached")


# --- --show-settings: every setting and where it came from -------------------------------


def test_show_settings_shows_every_setting_with_its_origin(cli, make_project, monkeypatch):
    import importlib.metadata

    def version(name: str) -> str:
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "version", version)
    root = make_project(
        {
            "model.py": MODEL,
            "requirements/runtime.txt": "transformers~=4.53.0\n",
            "docker/requirements-gpu.txt": "transformers==4.53.2\n",
        },
        pyproject=PYPROJECT
        + "[tool.ckptlint]\n"
        "ignore = ['CKPT033']\n"
        "stateful-modules = ['my.layers.RunningNorm']\n"
        "checkpoint-functions = ['my.utils.ckpt']\n"
        "fsdp = 'yes'\n"
        "per-file-ignores = {'tests/*' = ['CKPT001']}\n"
        "extend-exclude = ['vendor']\n",
    )
    config = root.resolve() / "pyproject.toml"
    result = cli(["--show-settings", "--ignore", "CKPT032", "--target-version", "peft=0.13", "."], cwd=root)
    assert result.exit_code == 0 and result.stderr == ""
    codes = "CKPT001, CKPT002, CKPT003, CKPT004, CKPT005, CKPT006, CKPT007, CKPT008, CKPT010, CKPT011, CKPT020, CKPT021, CKPT030, CKPT031, CKPT034, CKPT035, CKPT036, CKPT900, CKPT901"
    assert result.stdout.splitlines() == [
        f"project root:      {root.resolve()} (holds pyproject.toml)",
        f"config file:       {config}",
        f"selected rules:    {codes}",
        f"  from:            default (ALL), then {config}, then command line",
        f"exclude:           {', '.join(DEFAULT_EXCLUDE)}",
        "  from:            default",
        "extend-exclude:    vendor",
        f"  from:            {config}",
        "include:           *.py, *.pyi, *.ipynb, *.yaml, *.yml, *.json, *.sh, *.bash, *.slurm, *.sbatch",
        "  from:            default",
        "per-file-ignores:  tests/*: CKPT001",
        f"  from:            {config}",
        "stateful-modules:  my.layers.RunningNorm",
        f"  from:            {config}",
        "checkpoint-functions: my.utils.ckpt",
        f"  from:            {config}",
        "fsdp:              yes",
        f"  from:            {config}",
        "respect-gitignore: true",
        "  from:            default",
        f"cache dir:         {root.resolve() / '.ckptlint_cache'}",
        "  from:            default",
        "severity:          (the rules' own)",
        "  from:            default",
        "fail-on:           info",
        "  from:            default",
        "target versions:",
        "  torch          2.1 (declared dependency: pyproject.toml: torch>=2.1)",
        "  transformers   4.53 (declared dependency: requirements/runtime.txt: transformers~=4.53.0)",
        "                   also declared: docker/requirements-gpu.txt: transformers==4.53.2",
        "  peft           0.13 (command line: --target-version peft=0.13)",
        "  accelerate     unknown",
        "  trl            unknown",
        "  open-clip-torch  unknown",
    ]


def test_show_settings_origins_from_the_command_line(cli, make_project, tmp_path):
    root = make_project({"model.py": MODEL}, pyproject=PYPROJECT)
    (root / "ckptlint.toml").write_text("select = ['CKPT0']\ncache-dir = 'my-cache'\nextend-exclude = ['vendor']\n")
    result = cli(["--show-settings", "--ignore", "CKPT001", "--cache-dir", "elsewhere", "."], cwd=root)
    assert result.exit_code == 0
    shown = result.stdout.splitlines()
    config = root.resolve() / "ckptlint.toml"
    assert shown[3] == f"  from:            {config}, then command line"
    assert shown[shown.index("extend-exclude:    vendor") + 1] == f"  from:            {config}"
    assert shown[shown.index(f"cache dir:         {root.resolve() / 'elsewhere'}") + 1] == "  from:            command line"
    (root / "ckptlint.toml").write_text("respect-gitignore = false\ninclude = ['*.py']\n")
    shown = cli(["--show-settings", "--select", "CKPT001", "."], cwd=root).stdout.splitlines()
    assert shown[3] == "  from:            command line"
    assert shown[shown.index("include:           *.py") + 1] == f"  from:            {config}"
    assert shown[shown.index("respect-gitignore: false") + 1] == f"  from:            {config}"


def test_a_package_module_named_setup_is_no_project_root(tmp_path):
    """`trainer/setup.py` beside `trainer/__init__.py` builds the accelerator; it does not
    make `trainer/` a project of its own (its files keep the real root's versions and FSDP)."""
    from ckptlint.project_root import find_project_root, is_project_root

    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'trainer'\n")
    package = tmp_path / "trainer"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "setup.py").write_text("def make_accelerator():\n    pass\n")
    (package / "loop.py").write_text("")
    assert not is_project_root(package)
    assert find_project_root(package / "loop.py") == tmp_path.resolve()
    # A `setup.py` of a directory that is no package is a project (a monorepo's library).
    library = tmp_path / "libs" / "kernels"
    library.mkdir(parents=True)
    (library / "setup.py").write_text("from setuptools import setup\nsetup(name='kernels')\n")
    assert is_project_root(library)
