"""The flags users reach for, with Ruff's names and meanings: -o/--output-file, -q/-s,
--color, --exit-non-zero-on-fix, inline --config, --exclude / --extend-exclude /
--per-file-ignores on the command line, --watch."""

from __future__ import annotations

import os
import queue
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from ckptlint.config import Settings
from ckptlint.watch import watch, watched_paths
from test_cli import LINE3, LINE4, MODEL, MODEL_SAFE_FIXED, PYPROJECT, SUMMARY

ANSI = "\x1b["


@pytest.fixture
def project(make_project) -> Path:
    return make_project({"src/model.py": MODEL}, pyproject=PYPROJECT)


# --- -o / --output-file -------------------------------------------------------------------


def test_output_file_gets_the_report_and_stdout_stays_empty(cli, project):
    result = cli(["src", "-o", "reports/lint.txt", "--color", "always"], cwd=project)
    assert (result.exit_code, result.stdout) == (1, "")
    # Its directory is created, and no colour goes into a file (as Ruff).
    assert (project / "reports" / "lint.txt").read_text().splitlines() == [LINE3, LINE4, *SUMMARY]
    machine = cli(["src", "--output-file", "lint.json", "--output-format", "json"], cwd=project)
    assert machine.stdout == ""
    assert cli(["src", "--output-format", "json"], cwd=project).stdout == (project / "lint.json").read_text()


def test_output_file_that_cannot_be_written_exits_2(cli, project):
    (project / "taken").write_text("")
    result = cli(["src", "-o", "taken/lint.txt"], cwd=project)
    assert result.exit_code == 2
    assert result.stderr.startswith("error: --output-file: cannot write taken/lint.txt: ")


# --- -q / -s ------------------------------------------------------------------------------


def test_quiet_prints_findings_only_and_silent_nothing(cli, project):
    (project / "empty").mkdir()
    quiet = cli(["src", "empty", "-q"], cwd=project)
    # Ruff's -q: diagnostics and nothing else (no summary, no warnings).
    assert quiet.stdout.splitlines() == [LINE3, LINE4]
    assert quiet.stderr == ""
    assert cli(["empty"], cwd=project).stderr.startswith("warning: no files to lint under empty")
    silent = cli(["src", "-s"], cwd=project)
    assert (silent.exit_code, silent.stdout, silent.stderr) == (1, "", "")
    assert cli(["src", "--silent", "-o", "out.txt"], cwd=project).exit_code == 1
    assert (project / "out.txt").read_text() == ""  # Ruff's --silent writes no report, the file is made empty
    clean = cli(["--silent", "--select", "CKPT9"], cwd=project)
    assert (clean.exit_code, clean.stdout) == (0, "")


def test_silent_still_writes_the_fixed_code_of_standard_input(cli, project):
    result = cli(["-", "--stdin-filename", "m.py", "--fix", "--silent"], cwd=project, input=MODEL)
    assert (result.exit_code, result.stdout, result.stderr) == (1, MODEL_SAFE_FIXED, "")


def test_silent_still_says_why_it_exits_2(cli, project):
    result = cli(["src", "--silent", "--select", "CKPT999"], cwd=project)
    assert result.exit_code == 2
    assert result.stderr.startswith("error: --select: unknown rule code or prefix 'CKPT999'")


# --- --color ------------------------------------------------------------------------------


def test_color_always_never_and_the_environment(cli, project, monkeypatch):
    assert ANSI in cli(["src", "--color", "always"], cwd=project).stdout
    assert ANSI not in cli(["src", "--color", "never"], cwd=project).stdout
    assert ANSI not in cli(["src"], cwd=project).stdout  # auto: not a terminal
    monkeypatch.setenv("FORCE_COLOR", "1")
    assert ANSI in cli(["src"], cwd=project).stdout
    assert ANSI not in cli(["src", "--color", "never"], cwd=project).stdout  # the flag wins
    monkeypatch.delenv("FORCE_COLOR")
    monkeypatch.setenv("NO_COLOR", "1")
    assert ANSI not in cli(["src"], cwd=project).stdout
    assert ANSI in cli(["src", "--color", "always"], cwd=project).stdout
    bad = cli(["src", "--color", "sometimes"], cwd=project)
    assert bad.exit_code == 2 and "'sometimes' is not one of 'auto', 'always', 'never'" in bad.stderr


# --- --exit-non-zero-on-fix ---------------------------------------------------------------


def test_exit_non_zero_on_fix(cli, make_project):
    root = make_project({"src/model.py": MODEL}, pyproject=PYPROJECT)
    # Everything fixable fixed: 0 without the flag, 1 with it (Ruff's meaning).
    assert cli(["src", "--fix", "--unsafe-fixes"], cwd=root).exit_code == 0
    (root / "src/model.py").write_text(MODEL)
    fixed = cli(["src", "--fix", "--unsafe-fixes", "--exit-non-zero-on-fix"], cwd=root)
    assert fixed.exit_code == 1
    assert fixed.stdout == "Found 2 errors (2 fixed, 0 remaining).\n"
    # Nothing left to fix: 0 again.
    assert cli(["src", "--fix", "--unsafe-fixes", "--exit-non-zero-on-fix"], cwd=root).exit_code == 0
    both = cli(["src", "--exit-zero", "--exit-non-zero-on-fix"], cwd=root)
    assert (both.exit_code, both.stderr) == (
        2, "error: --exit-zero and --exit-non-zero-on-fix contradict each other: give one of them\n"
    )


def test_exit_non_zero_on_fix_with_findings_left_and_without_fix(cli, make_project):
    root = make_project({"src/model.py": MODEL}, pyproject=PYPROJECT)
    assert cli(["src", "--exit-non-zero-on-fix"], cwd=root).exit_code == 1  # findings: 1 anyway
    result = cli(["src", "--fix", "--exit-non-zero-on-fix"], cwd=root)
    assert result.exit_code == 1
    assert (root / "src/model.py").read_text() == MODEL_SAFE_FIXED


# --- --config KEY=VALUE -------------------------------------------------------------------


def test_inline_config_overrides_the_config_file(cli, make_project):
    root = make_project({"src/model.py": MODEL}, pyproject=PYPROJECT + "[tool.ckptlint]\nignore = ['CKPT032']\n")
    assert [line.split()[1] for line in cli(["src", "-q"], cwd=root).stdout.splitlines()] == ["CKPT001", "CKPT001"]
    result = cli(["src", "-q", "--config", "select = ['CKPT03']"], cwd=root)
    assert result.stdout.splitlines() == [LINE4]  # a `select` layer after the file's, as in Ruff
    # Dedicated flags come after it; several pairs, one file.
    (root / "other.toml").write_text("select = ['CKPT001']\n")
    flags = cli(["src", "-q", "--config", "other.toml", "--config", "extend-select = ['CKPT032']", "--ignore", "CKPT001"], cwd=root)
    assert flags.stdout.splitlines() == [LINE4]
    shown = cli(["src", "--config", "other.toml", "--config", "extend-select = ['CKPT032']", "--ignore", "CKPT001", "--show-settings"], cwd=root)
    assert shown.stdout.splitlines()[2:4] == [
        "selected rules:    CKPT032, CKPT900, CKPT901",
        f"  from:            {root / 'other.toml'}, then command line (--config), then command line",
    ]
    settings = cli(["src", "--config", "exclude = ['gen']", "--config", "fsdp='no'", "--show-settings"], cwd=root)
    assert "exclude:           gen\n  from:            command line (--config)\n" in settings.stdout
    assert "fsdp:              no\n  from:            command line (--config)\n" in settings.stdout


def test_inline_config_is_validated_as_a_config_file_is(cli, project):
    unknown = cli(["src", "--config", "selct = ['CKPT0']"], cwd=project)
    assert unknown.exit_code == 2
    assert unknown.stderr.startswith('error: --config "selct = [\'CKPT0\']": unknown key `selct`; allowed keys: select, ')
    bad = cli(["src", "--config", "select = CKPT0"], cwd=project)
    assert bad.exit_code == 2
    assert bad.stderr.startswith("error: --config 'select = CKPT0': neither a file nor a TOML `KEY = VALUE` pair (")
    missing = cli(["src", "--config", "missing.toml"], cwd=project)
    assert missing.stderr == "error: --config: missing.toml: no such file\n"
    (project / "a.toml").write_text("")
    (project / "b.toml").write_text("")
    two = cli(["src", "--config", "a.toml", "--config", "b.toml"], cwd=project)
    assert two.stderr == "error: --config: give one configuration file at most, got a.toml, b.toml\n"


# --- --exclude / --extend-exclude / --per-file-ignores ------------------------------------


def test_exclude_and_extend_exclude_on_the_command_line(cli, make_project):
    root = make_project({"src/model.py": MODEL, "gen/model.py": MODEL, "venv/model.py": MODEL}, pyproject=PYPROJECT)
    files = lambda result: sorted({line.split(":")[0] for line in result.stdout.splitlines() if ".py:" in line})
    assert files(cli([".", "-q", "--extend-exclude", "gen"], cwd=root)) == ["src/model.py"]
    # --exclude replaces the default list (which holds venv), as Ruff's does.
    assert files(cli([".", "-q", "--exclude", "gen,src"], cwd=root)) == ["venv/model.py"]


def test_per_file_ignores_on_the_command_line(cli, make_project):
    root = make_project(
        {"src/model.py": MODEL, "tests/test_model.py": MODEL},
        pyproject=PYPROJECT + "[tool.ckptlint.per-file-ignores]\n'src/*' = ['CKPT032']\n",
    )
    codes = lambda result: [(line.split(":")[0], line.split()[1]) for line in result.stdout.splitlines()]
    assert codes(cli([".", "-q"], cwd=root)) == [
        ("src/model.py", "CKPT001"), ("tests/test_model.py", "CKPT001"), ("tests/test_model.py", "CKPT032")
    ]
    # Replaces the table (src/ reports CKPT032 again); PATTERN:CODE pairs, comma-separated.
    replaced = cli([".", "-q", "--per-file-ignores", "tests/*:CKPT001,tests/*:CKPT032"], cwd=root)
    assert codes(replaced) == [("src/model.py", "CKPT001"), ("src/model.py", "CKPT032")]
    extended = cli([".", "-q", "--extend-per-file-ignores", "tests/*:CKPT0"], cwd=root)
    assert codes(extended) == [("src/model.py", "CKPT001")]
    bad = cli([".", "--per-file-ignores", "CKPT001"], cwd=root)
    assert (bad.exit_code, bad.stderr) == (2, "error: --per-file-ignores: expected PATTERN:CODES (e.g. 'tests/*:CKPT001'), got 'CKPT001'\n")
    unknown = cli([".", "--per-file-ignores", "tests/*:CKPT0011"], cwd=root)
    assert unknown.stderr.startswith("error: --per-file-ignores [tests/*]: unknown rule code or prefix 'CKPT0011'")


# --- --watch ------------------------------------------------------------------------------


def test_watch_runs_again_when_a_watched_file_changes(tmp_path):
    model = tmp_path / "m.py"
    model.write_text("x = 1\n")
    runs: queue.Queue[str] = queue.Queue()
    changes: list = []
    stop = threading.Event()

    def run() -> None:
        runs.put(model.read_text())

    thread = threading.Thread(
        target=watch, args=(run, lambda: [str(model)]), kwargs={"interval": 0.01, "stop": stop, "on_change": changes.append}
    )
    thread.start()
    try:
        assert runs.get(timeout=60) == "x = 1\n"
        model.write_text("x = 22\n")
        assert runs.get(timeout=60) == "x = 22\n"
    finally:
        stop.set()
        thread.join(timeout=60)
    assert not thread.is_alive()
    assert list(changes[0]) == [str(model)]


def test_watched_paths_are_the_files_directories_and_configuration(make_project):
    root = make_project({"src/model.py": MODEL, "src/pkg/util.py": "", "docs/x.md": ""}, pyproject=PYPROJECT)
    watched = watched_paths([root / "src"], Settings.default(root))
    assert str(root / "src/model.py") in watched and str(root / "src/pkg/util.py") in watched
    assert str(root / "src") in watched and str(root / "src/pkg") in watched  # a new file changes these
    assert str(root / "pyproject.toml") in watched and str(root / ".ckptlint.toml") in watched
    assert not any("docs" in path for path in watched)


def test_watch_from_the_command_line(make_project):
    """A real `ckptlint --watch`: each run's summary is waited for on its output, the edit
    made in between; the process is stopped like Ctrl-C."""
    root = make_project({"m.py": MODEL}, pyproject=PYPROJECT)
    env = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "CLICOLOR_FORCE")}
    process = subprocess.Popen(
        [sys.executable, "-m", "ckptlint", "--watch", "--no-cache", "m.py"],
        cwd=root, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in process.stdout], daemon=True).start()

    def until(text: str) -> list[str]:
        seen = []
        while not seen or seen[-1] != text:
            seen.append(lines.get(timeout=120).rstrip("\n"))
        return seen

    try:
        assert [line.split(" ")[1] for line in until("Found 2 findings (1 error, 1 warning).") if ".py:" in line] == ["CKPT001", "CKPT032"]
        (root / "m.py").write_text(MODEL.replace("checkpoint(self.layer, h)", "checkpoint(self.layer, h, use_reentrant=False)"))
        assert [line.split(" ")[1] for line in until("Found 1 error.") if ".py:" in line] == ["CKPT032"]
        (root / "m.py").write_text("")
        assert [line for line in until("All checks passed!") if ".py:" in line] == []
    finally:
        process.send_signal(subprocess.signal.SIGINT)
        _, stderr = process.communicate(timeout=60)
    assert stderr.count("Starting linter in watch mode...") == 1
    assert stderr.count("File change detected...") >= 2


def test_watch_refuses_what_it_cannot_combine_with(cli, project):
    for flag, message in (
        (["--diff"], "--watch cannot be combined with --diff"),
        (["--statistics"], "--watch cannot be combined with --statistics"),
        (["-o", "x.txt"], "--watch cannot be combined with --output-file"),
    ):
        result = cli(["src", "--watch", *flag], cwd=project)
        assert (result.exit_code, result.stderr) == (2, f"error: {message}\n")
