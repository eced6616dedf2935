"""The command line, as DESIGN.md ("Command line") describes it, through click's runner and
through a real `python -m ckptlint` process."""

from __future__ import annotations

import json
import re
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ckptlint import __version__
from ckptlint.registry import rule_by_code
from ckptlint.rule_codes import all_codes
from conftest import run_subprocess

# The projects below declare torch>=2.1, so the result does not depend on the torch (if any)
# installed next to the tests.
PYPROJECT = "[project]\nname = 'demo'\ndependencies = ['torch>=2.1']\n"

MODEL = """\
from torch.utils.checkpoint import checkpoint
def forward(self, h, mask):
    h = checkpoint(self.layer, h)
    return checkpoint(self.layer, h, attention_mask=mask)
"""
MODEL_SAFE_FIXED = """\
from torch.utils.checkpoint import checkpoint
def forward(self, h, mask):
    h = checkpoint(self.layer, h)
    return checkpoint(self.layer, h, attention_mask=mask, use_reentrant=False)
"""
MODEL_ALL_FIXED = """\
from torch.utils.checkpoint import checkpoint
def forward(self, h, mask):
    h = checkpoint(self.layer, h, use_reentrant=False)
    return checkpoint(self.layer, h, attention_mask=mask, use_reentrant=False)
"""
CLEAN = """\
from torch.utils.checkpoint import checkpoint
y = checkpoint(block, x, use_reentrant=False)
"""

MSG001 = (
    "`checkpoint` without `use_reentrant`: torch falls back to the reentrant implementation "
    "and its warning cannot point at this line; pass `use_reentrant=False`"
)
MSG032 = (
    "keyword argument `attention_mask` passed to a reentrant `checkpoint` (`use_reentrant` "
    "omitted, so torch defaults to reentrant): torch raises `ValueError: Unexpected keyword "
    "arguments: attention_mask` at runtime; pass `use_reentrant=False`"
)
LINE3 = f"src/model.py:3:9: CKPT001 warning: {MSG001}"
LINE4 = f"src/model.py:4:12: CKPT032 [*] error: {MSG032}"
SUMMARY = [
    "Found 2 findings (1 error, 1 warning).",
    "[*] 1 fixable with the `--fix` option.",
    "(1 hidden fix can be enabled with the `--unsafe-fixes` option.)",
]
DIFF_SAFE = """\
--- a/src/model.py
+++ b/src/model.py
@@ -1,4 +1,4 @@
 from torch.utils.checkpoint import checkpoint
 def forward(self, h, mask):
     h = checkpoint(self.layer, h)
-    return checkpoint(self.layer, h, attention_mask=mask)
+    return checkpoint(self.layer, h, attention_mask=mask, use_reentrant=False)
"""
ANSI = "\x1b["


@pytest.fixture
def project(make_project) -> Path:
    return make_project({"src/model.py": MODEL}, pyproject=PYPROJECT)


def found(stdout: str) -> list[tuple[str, int, int, str]]:
    """(path, row, column, code) of each diagnostic line in text output."""
    rows = []
    for line in stdout.splitlines():
        parts = line.split(":", 3)
        if len(parts) == 4 and parts[1].isdigit() and parts[2].isdigit():
            rows.append((parts[0], int(parts[1]), int(parts[2]), parts[3].split()[0]))
    return rows


# --- invocation -------------------------------------------------------------------------


def test_bare_paths_mean_check(cli, project):
    bare = cli(["src/"], cwd=project)
    explicit = cli(["check", "src/"], cwd=project)
    assert bare.exit_code == explicit.exit_code == 1
    assert bare.stdout == explicit.stdout
    assert bare.stdout.splitlines() == [LINE3, LINE4, *SUMMARY]
    assert bare.stderr == explicit.stderr == ""


def test_default_path_is_the_current_directory(cli, project):
    result = cli([], cwd=project)
    assert result.exit_code == 1
    assert result.stdout.splitlines() == [LINE3, LINE4, *SUMMARY]
    # From a subdirectory, paths are shown relative to it and the project is still found.
    inner = cli(["check"], cwd=project / "src")
    assert found(inner.stdout) == [("model.py", 3, 9, "CKPT001"), ("model.py", 4, 12, "CKPT032")]


def test_python_dash_m_as_a_real_process(project):
    proc = run_subprocess(["src"], cwd=project)
    assert proc.returncode == 1
    assert proc.stdout.decode().splitlines() == [LINE3, LINE4, *SUMMARY]
    assert proc.stderr == b""
    # Not a terminal: no colour anywhere.
    assert ANSI.encode() not in proc.stdout + proc.stderr


def test_version(cli, tmp_path):
    result = cli(["--version"], cwd=tmp_path)
    assert result.exit_code == 0
    assert result.stdout == f"ckptlint {__version__}\n"


def test_version_imports_neither_libcst_nor_torch(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "CLICOLOR_FORCE")}
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "ckptlint", "--version"],
        cwd=tmp_path, capture_output=True, env=env, timeout=60,
    )
    assert proc.returncode == 0
    assert proc.stdout == f"ckptlint {__version__}\n".encode()
    imported = {
        line.rsplit("|", 1)[1].strip()
        for line in proc.stderr.decode().splitlines()
        if line.startswith("import time:") and "|" in line
    }
    assert "ckptlint.cli" in imported  # the -X importtime listing works at all
    heavy = {name for name in imported if name.split(".")[0] in ("libcst", "torch", "yaml", "pathspec")}
    assert heavy == set()
    assert {name for name in imported if name.startswith(("ckptlint.engine", "ckptlint.rules"))} == set()


def test_a_lint_run_does_not_import_torch(project):
    env = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "CLICOLOR_FORCE")}
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "ckptlint", "-q", "src"],
        cwd=project, capture_output=True, env=env, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 1
    # Every module imported, by the run and by its worker processes (which inherit -X importtime).
    imported = {
        line.rsplit("|", 1)[1].strip().split(".")[0]
        for line in proc.stderr.decode().splitlines()
        if line.startswith("import time:") and "|" in line
    }
    assert "libcst" in imported and "torch" not in imported


def test_help_lists_the_commands_and_options(cli, tmp_path):
    top = cli(["--help"], cwd=tmp_path)
    assert top.exit_code == 0
    assert {"check", "rule", "clean"} <= {line.split()[0] for line in top.stdout.splitlines() if line.startswith("  ")}
    check = cli(["check", "--help"], cwd=tmp_path)
    assert check.exit_code == 0
    for option in ("--select", "--ignore", "--extend-select", "--fix", "--unsafe-fixes", "--diff",
                   "--output-format", "--statistics", "--show-fixes", "--exit-zero", "--config",
                   "--target-version", "--stdin-filename", "--show-settings", "--no-cache"):
        assert option in check.stdout


# --- exit codes -------------------------------------------------------------------------


def test_exit_0_when_clean(cli, make_project):
    root = make_project({"src/model.py": CLEAN}, pyproject=PYPROJECT)
    result = cli(["src"], cwd=root)
    assert (result.exit_code, result.stdout, result.stderr) == (0, "All checks passed!\n", "")


def test_exit_0_for_a_directory_without_python(cli, make_project):
    root = make_project({"README.md": "# demo\n"}, pyproject=PYPROJECT)
    result = cli([], cwd=root)
    assert (result.exit_code, result.stdout) == (0, "All checks passed!\n")


def test_exit_1_with_findings_and_0_with_exit_zero(cli, project):
    assert cli(["src"], cwd=project).exit_code == 1
    result = cli(["--exit-zero", "src"], cwd=project)
    assert result.exit_code == 0
    assert result.stdout.splitlines() == [LINE3, LINE4, *SUMMARY]


def test_unknown_option_exits_2(cli, project):
    result = cli(["--bogus", "src"], cwd=project)
    assert result.exit_code == 2
    assert "Error: No such option '--bogus'" in result.stderr
    assert result.stdout == ""


def test_bad_output_format_exits_2(cli, project):
    result = cli(["--output-format", "xml", "src"], cwd=project)
    assert result.exit_code == 2
    assert "'xml' is not one of" in result.stderr


@pytest.mark.parametrize("option", ["--select", "--ignore", "--extend-select"])
@pytest.mark.parametrize("value", ["CKPT999", "CKPT001,XYZ", "CKPT7"])
def test_unknown_rule_code_exits_2_naming_it(cli, project, option, value):
    bad = value.split(",")[-1]
    result = cli([option, value, "src"], cwd=project)
    assert result.exit_code == 2
    assert result.stdout == ""
    first = result.stderr.splitlines()[0]
    assert first.startswith(f"error: {option}: unknown rule code or prefix '{bad}'; known codes: CKPT001, CKPT002, ")


def test_missing_path_is_a_finding_not_a_crash(cli, project):
    result = cli(["src", "nowhere.py"], cwd=project)
    assert result.exit_code == 1
    assert found(result.stdout) == [
        ("nowhere.py", 1, 1, "CKPT901"),
        ("src/model.py", 3, 9, "CKPT001"),
        ("src/model.py", 4, 12, "CKPT032"),
    ]


def test_a_missing_path_named_like_a_command_gets_a_hint(cli, project):
    result = cli(["rules"], cwd=project)
    assert result.exit_code == 1  # still a path, reported as unreadable
    assert found(result.stdout) == [("rules", 1, 1, "CKPT901")]
    assert result.stderr == "hint: `rules` is no file or directory; did you mean `ckptlint rule`?\n"
    assert "hint" not in cli(["nowhere"], cwd=project).stderr  # not close to any command


def test_stdin_cannot_be_mixed_with_paths(cli, project):
    result = cli(["-", "src"], cwd=project, input=MODEL)
    assert result.exit_code == 2
    assert result.stderr == "error: `-` (standard input) cannot be combined with other paths\n"


def test_missing_config_file_exits_2(cli, project):
    result = cli(["--config", "missing.toml", "src"], cwd=project)
    assert result.exit_code == 2
    assert result.stderr == "error: --config: missing.toml: no such file\n"


def test_bad_config_key_exits_2_naming_file_and_key(cli, make_project):
    root = make_project({"src/model.py": MODEL}, pyproject=PYPROJECT + "[tool.ckptlint]\nselct = ['CKPT001']\n")
    result = cli(["src"], cwd=root)
    assert result.exit_code == 2
    assert result.stderr.startswith(f"error: {root / 'pyproject.toml'}: unknown key `selct`; allowed keys: select, ")


def test_config_option_reads_that_file(cli, project):
    (project / "other.toml").write_text('ignore = ["CKPT001"]\n')
    result = cli(["--config", "other.toml", "-q", "src"], cwd=project)
    assert (result.exit_code, result.stdout.splitlines()) == (1, [LINE4])


def test_internal_error_in_a_rule_exits_2_and_other_files_are_linted(cli, make_project, monkeypatch):
    from ckptlint.rules.checkpoint_implicit_reentrant.rule import CheckpointImplicitReentrant

    def broken(self, site):
        raise RuntimeError("boom")

    monkeypatch.setattr(CheckpointImplicitReentrant, "visit_checkpoint_site", broken)
    root = make_project(
        {
            "a.py": "from torch.utils.checkpoint import checkpoint\ny = checkpoint(f, x)\n",
            "b.py": "from torch.utils.checkpoint import checkpoint\ny = checkpoint(f, x, mask=m)\n",
        },
        pyproject=PYPROJECT,
    )
    result = cli(["--no-cache", "-q", "."], cwd=root)
    assert result.exit_code == 2
    assert found(result.stdout) == [("b.py", 2, 5, "CKPT032")]
    assert result.stderr.count("internal error in rule CKPT001 (checkpoint-implicit-reentrant)") == 2
    assert "error: a.py: internal error in rule CKPT001" in result.stderr
    assert "RuntimeError: boom" in result.stderr


# --- rule selection ---------------------------------------------------------------------

BOTH = [(3, "CKPT001"), (4, "CKPT032")]
# With CKPT032 off, the call it would have reported still lacks `use_reentrant`: CKPT001.
ONLY_001 = [(3, "CKPT001"), (4, "CKPT001")]
ONLY_032 = [(4, "CKPT032")]


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ([], BOTH),
        (["--select", "ALL"], BOTH),
        (["--select", "CKPT0"], BOTH),
        (["--select", "CKPT00"], ONLY_001),
        (["--select", "CKPT03"], ONLY_032),
        (["--select", "CKPT001"], ONLY_001),
        (["--select", "CKPT032"], ONLY_032),
        (["--select", "CKPT001,CKPT032"], BOTH),
        (["--select", " CKPT001 , CKPT032 "], BOTH),
        (["--select", "CKPT001", "--select", "CKPT032"], BOTH),
        (["--select", "ckpt032"], ONLY_032),
        (["--ignore", "CKPT001"], ONLY_032),
        (["--ignore", "CKPT03"], ONLY_001),
        (["--ignore", "CKPT0"], []),
        (["--ignore", "ALL"], []),
        (["--ignore", "CKPT001,CKPT032"], []),
        # The most specific prefix wins, whichever option it is in; on a tie, ignore wins.
        (["--select", "CKPT0", "--ignore", "CKPT032"], ONLY_001),
        (["--select", "CKPT032", "--ignore", "CKPT0"], ONLY_032),
        (["--select", "CKPT03", "--ignore", "CKPT0"], ONLY_032),
        (["--select", "ALL", "--ignore", "CKPT0"], []),
        (["--select", "CKPT001", "--ignore", "CKPT001"], []),
        (["--ignore", "CKPT0", "--extend-select", "CKPT032"], ONLY_032),
        (["--select", "CKPT001", "--extend-select", "CKPT03"], BOTH),
        (["--extend-select", "CKPT001"], BOTH),
    ],
)
def test_selection(cli, project, args, expected):
    result = cli(["-q", *args, "src"], cwd=project)
    assert [(row, code) for _, row, _, code in found(result.stdout)] == expected
    assert result.exit_code == (1 if expected else 0)


@pytest.mark.parametrize("prefix", ["C", "CK"])
def test_short_ignore_prefix_beats_default_all(cli, project, prefix):
    result = cli(["-q", "--ignore", prefix, "src"], cwd=project)
    assert (result.exit_code, result.stdout) == (0, "")


def test_command_line_select_overrides_configured_ignore(cli, make_project):
    root = make_project({"src/model.py": MODEL}, pyproject=PYPROJECT + "[tool.ckptlint]\nignore = ['CKPT001']\n")
    assert cli(["-q", "src"], cwd=root).stdout.splitlines() == [LINE4]
    result = cli(["-q", "--select", "CKPT001", "src"], cwd=root)
    assert [(row, code) for _, row, _, code in found(result.stdout)] == ONLY_001


def test_engine_codes_stay_on_under_a_narrow_select(cli, make_project):
    root = make_project({"src/model.py": MODEL, "src/broken.py": "def f(:\n"}, pyproject=PYPROJECT)
    result = cli(["-q", "--select", "CKPT032", "src"], cwd=root)
    assert found(result.stdout) == [("src/broken.py", 1, 7, "CKPT900"), ("src/model.py", 4, 12, "CKPT032")]


@pytest.mark.parametrize("ignore", ["CKPT900,CKPT901", "CKPT9"])
def test_engine_codes_can_be_ignored(cli, make_project, ignore):
    root = make_project({"src/model.py": MODEL, "src/broken.py": "def f(:\n"}, pyproject=PYPROJECT)
    result = cli(["-q", "--select", "CKPT032", "--ignore", ignore, "src", "missing.py"], cwd=root)
    assert found(result.stdout) == [("src/model.py", 4, 12, "CKPT032")]


# --- fixes ------------------------------------------------------------------------------


def test_fix_applies_only_safe_fixes(cli, project):
    result = cli(["--fix", "src"], cwd=project)
    assert result.exit_code == 1
    assert result.stdout.splitlines() == [
        LINE3,
        "Found 2 findings (1 fixed, 1 remaining: 1 warning).",
        "(1 hidden fix can be enabled with the `--unsafe-fixes` option.)",
    ]
    assert (project / "src/model.py").read_text() == MODEL_SAFE_FIXED


def test_second_fix_run_is_a_no_op(cli, project):
    cli(["--fix", "src"], cwd=project)
    before = (project / "src/model.py").read_bytes()
    mtime = (project / "src/model.py").stat().st_mtime_ns
    again = cli(["--fix", "src"], cwd=project)
    assert again.exit_code == 1
    assert again.stdout.splitlines() == [
        LINE3,
        "Found 1 warning.",
        "(1 hidden fix can be enabled with the `--unsafe-fixes` option.)",
    ]
    assert (project / "src/model.py").read_bytes() == before
    assert (project / "src/model.py").stat().st_mtime_ns == mtime


def test_fix_with_unsafe_fixes_fixes_everything(cli, project):
    result = cli(["--fix", "--unsafe-fixes", "src"], cwd=project)
    assert (result.exit_code, result.stdout) == (0, "Found 2 errors (2 fixed, 0 remaining).\n")
    assert (project / "src/model.py").read_text() == MODEL_ALL_FIXED
    again = cli(["--fix", "--unsafe-fixes", "src"], cwd=project)
    assert (again.exit_code, again.stdout) == (0, "All checks passed!\n")
    assert (project / "src/model.py").read_text() == MODEL_ALL_FIXED
    assert cli(["src"], cwd=project).exit_code == 0


def test_unsafe_fixes_without_fix_marks_them_fixable(cli, project):
    result = cli(["--unsafe-fixes", "src"], cwd=project)
    assert result.exit_code == 1
    assert result.stdout.splitlines() == [
        f"src/model.py:3:9: CKPT001 [*] warning: {MSG001}",
        LINE4,
        "Found 2 findings (1 error, 1 warning).",
        "[*] 2 fixable with the `--fix` option.",
    ]
    assert (project / "src/model.py").read_text() == MODEL


def test_fix_counts_are_true_across_files(cli, make_project):
    three_kwargs = (
        "import torch.utils.checkpoint as cp\n"
        "a = cp.checkpoint(f, x, mask=m)\n"
        "b = cp.checkpoint(f, x, scale=2)\n"
        "c = cp.checkpoint(f, x)\n"
    )
    root = make_project({"src/model.py": MODEL, "src/other.py": three_kwargs}, pyproject=PYPROJECT)
    result = cli(["--fix", "--show-fixes", "src"], cwd=root)
    assert result.exit_code == 1
    assert result.stdout.splitlines() == [
        LINE3,
        f"src/other.py:4:5: CKPT001 warning: {MSG001}",
        "Fixed 3 errors:",
        "- src/model.py:",
        "    1 × CKPT032 (kwargs-to-reentrant-checkpoint)",
        "- src/other.py:",
        "    2 × CKPT032 (kwargs-to-reentrant-checkpoint)",
        "Found 5 findings (3 fixed, 2 remaining: 2 warnings).",
        "(2 hidden fixes can be enabled with the `--unsafe-fixes` option.)",
    ]
    assert (root / "src/other.py").read_text() == (
        "import torch.utils.checkpoint as cp\n"
        "a = cp.checkpoint(f, x, mask=m, use_reentrant=False)\n"
        "b = cp.checkpoint(f, x, scale=2, use_reentrant=False)\n"
        "c = cp.checkpoint(f, x)\n"
    )


def test_show_fixes_with_unsafe_fixes(cli, project):
    result = cli(["--fix", "--unsafe-fixes", "--show-fixes", "src"], cwd=project)
    assert result.exit_code == 0
    assert result.stdout.splitlines() == [
        "Fixed 2 errors:",
        "- src/model.py:",
        "    1 × CKPT001 (checkpoint-implicit-reentrant)",
        "    1 × CKPT032 (kwargs-to-reentrant-checkpoint)",
        "Found 2 errors (2 fixed, 0 remaining).",
    ]


def test_fix_keeps_crlf_line_endings(cli, make_project):
    root = make_project({"src/model.py": MODEL.replace("\n", "\r\n").encode()}, pyproject=PYPROJECT)
    result = cli(["--fix", "--unsafe-fixes", "src"], cwd=root)
    assert result.exit_code == 0
    assert (root / "src/model.py").read_bytes() == MODEL_ALL_FIXED.replace("\n", "\r\n").encode()


# --- --diff -----------------------------------------------------------------------------


def test_diff_prints_pending_fixes_writes_nothing_exits_1(cli, project):
    result = cli(["--diff", "src"], cwd=project)
    assert result.exit_code == 1
    assert result.stdout == DIFF_SAFE
    assert result.stderr == (
        "Would fix 1 error.\n(1 hidden fix can be enabled with the `--unsafe-fixes` option.)\n"
    )
    assert (project / "src/model.py").read_text() == MODEL


def test_diff_with_unsafe_fixes(cli, project):
    result = cli(["--diff", "--unsafe-fixes", "src"], cwd=project)
    assert result.exit_code == 1
    assert result.stdout.splitlines()[3:] == [
        " from torch.utils.checkpoint import checkpoint",
        " def forward(self, h, mask):",
        "-    h = checkpoint(self.layer, h)",
        "-    return checkpoint(self.layer, h, attention_mask=mask)",
        "+    h = checkpoint(self.layer, h, use_reentrant=False)",
        "+    return checkpoint(self.layer, h, attention_mask=mask, use_reentrant=False)",
    ]
    assert result.stderr == "Would fix 2 errors.\n"
    assert (project / "src/model.py").read_text() == MODEL


def test_diff_exits_0_when_nothing_to_fix(cli, make_project):
    root = make_project({"src/model.py": MODEL_SAFE_FIXED}, pyproject=PYPROJECT)
    result = cli(["--diff", "src"], cwd=root)
    assert (result.exit_code, result.stdout) == (0, "")
    assert result.stderr == (
        "No errors would be fixed.\n(1 hidden fix can be enabled with the `--unsafe-fixes` option.)\n"
    )
    clean = make_project({"src/model.py": CLEAN}, pyproject=PYPROJECT)
    result = cli(["--diff", "src"], cwd=clean)
    assert (result.exit_code, result.stdout, result.stderr) == (0, "", "No errors would be fixed.\n")


def test_diff_counts_unfixable_findings(cli, make_project):
    root = make_project({"src/broken.py": "def f(:\n"}, pyproject=PYPROJECT)
    result = cli(["--diff", "src"], cwd=root)
    assert (result.exit_code, result.stdout) == (0, "")
    assert result.stderr == "No errors would be fixed (1 not fixable).\n"


def test_diff_with_fix_still_writes_nothing(cli, project):
    result = cli(["--diff", "--fix", "--unsafe-fixes", "src"], cwd=project)
    assert result.exit_code == 1
    assert (project / "src/model.py").read_text() == MODEL


def test_diff_prints_only_the_diff_whatever_the_format(cli, project):
    for extra in (["--output-format", "json"], ["--output-format", "github"], ["--statistics"]):
        result = cli(["--diff", *extra, "src"], cwd=project)
        assert (result.exit_code, result.stdout) == (1, DIFF_SAFE), extra


def test_diff_exit_zero(cli, project):
    result = cli(["--diff", "--exit-zero", "src"], cwd=project)
    assert (result.exit_code, result.stdout) == (0, DIFF_SAFE)


def test_diff_of_a_file_without_final_newline(cli, make_project):
    root = make_project({"m.py": b"import torch\ny = torch.utils.checkpoint.checkpoint(f, x, k=v)"}, pyproject=PYPROJECT)
    result = cli(["--diff", "m.py"], cwd=root)
    assert result.exit_code == 1
    assert result.stdout == (
        "--- a/m.py\n"
        "+++ b/m.py\n"
        "@@ -1,2 +1,2 @@\n"
        " import torch\n"
        "-y = torch.utils.checkpoint.checkpoint(f, x, k=v)\n"
        "\\ No newline at end of file\n"
        "+y = torch.utils.checkpoint.checkpoint(f, x, k=v, use_reentrant=False)\n"
        "\\ No newline at end of file\n"
    )


# --- reporting options ------------------------------------------------------------------


def test_quiet_prints_findings_only(cli, project):
    result = cli(["-q", "src"], cwd=project)
    assert (result.exit_code, result.stdout, result.stderr) == (1, f"{LINE3}\n{LINE4}\n", "")
    clean = cli(["-q", "--select", "CKPT9", "src"], cwd=project)
    assert (clean.exit_code, clean.stdout) == (0, "")
    fixed = cli(["-q", "--fix", "src"], cwd=project)
    assert (fixed.exit_code, fixed.stdout) == (1, f"{LINE3}\n")


def test_statistics_text(cli, make_project):
    many = "import torch.utils.checkpoint as cp\n" + "".join(f"y{i} = cp.checkpoint(f, x)\n" for i in range(10))
    root = make_project({"src/model.py": MODEL, "src/many.py": many}, pyproject=PYPROJECT)
    result = cli(["--statistics", "src"], cwd=root)
    assert result.exit_code == 1
    assert result.stdout.splitlines() == [
        "11\tCKPT001\t[-] checkpoint-implicit-reentrant",
        " 1\tCKPT032\t[*] kwargs-to-reentrant-checkpoint",
        "Found 12 findings (1 error, 11 warnings).",
        "[*] 1 fixable with the `--fix` option.",
        "(11 hidden fixes can be enabled with the `--unsafe-fixes` option.)",
    ]
    unsafe = cli(["--statistics", "--unsafe-fixes", "-q", "src"], cwd=root)
    assert unsafe.stdout.splitlines() == [
        "11\tCKPT001\t[*] checkpoint-implicit-reentrant",
        " 1\tCKPT032\t[*] kwargs-to-reentrant-checkpoint",
    ]


def test_statistics_json(cli, project):
    result = cli(["--statistics", "--output-format", "json", "src"], cwd=project)
    assert result.exit_code == 1
    assert json.loads(result.stdout) == [
        {"code": "CKPT001", "name": "checkpoint-implicit-reentrant", "count": 1, "fixable": False},
        {"code": "CKPT032", "name": "kwargs-to-reentrant-checkpoint", "count": 1, "fixable": True},
    ]
    empty = cli(["--statistics", "--output-format", "json", "--select", "CKPT9", "src"], cwd=project)
    assert (empty.exit_code, json.loads(empty.stdout)) == (0, [])


# --- suppression ------------------------------------------------------------------------

NOQA = """\
from torch.utils.checkpoint import checkpoint
def forward(self, h, mask):
    a = checkpoint(self.layer, h)  # noqa
    b = checkpoint(self.layer, h)  # noqa: CKPT001
    c = checkpoint(self.layer, h)  # noqa: CKPT032
    d = checkpoint(self.layer, h, attention_mask=mask)  # noqa: CKPT001
    e = checkpoint(self.layer, h, attention_mask=mask)  # noqa
    f = checkpoint(self.layer, h)  # NOQA:CKPT032,CKPT001
    g = checkpoint(self.layer, h)  # some words # noqa: CKPT001 because reasons
    i = checkpoint(
        self.layer, h)  # noqa: CKPT001
    return a
"""


def test_noqa(cli, make_project):
    root = make_project({"m.py": NOQA}, pyproject=PYPROJECT)
    result = cli(["-q", "m.py"], cwd=root)
    # Bare noqa suppresses everything on its line; `noqa: CODE` only that code; the
    # comment belongs on the line where the reported call starts.
    assert found(result.stdout) == [("m.py", 5, 9, "CKPT001"), ("m.py", 6, 9, "CKPT032"), ("m.py", 10, 9, "CKPT001")]


def test_noqa_for_the_superseding_code_does_not_resurrect_the_superseded_one(cli, make_project):
    root = make_project(
        {"m.py": "from torch.utils.checkpoint import checkpoint\ny = checkpoint(f, x, mask=m)  # noqa: CKPT032\n"},
        pyproject=PYPROJECT,
    )
    result = cli(["-q", "m.py"], cwd=root)
    assert (result.exit_code, result.stdout) == (0, "")


def test_skip_file(cli, make_project):
    root = make_project(
        {"src/model.py": MODEL, "src/skipped.py": "# ckptlint: skip-file\n" + MODEL}, pyproject=PYPROJECT
    )
    result = cli(["-q", "src"], cwd=root)
    assert [path for path, *_ in found(result.stdout)] == ["src/model.py", "src/model.py"]
    skipped = cli(["src/skipped.py"], cwd=root)
    assert (skipped.exit_code, skipped.stdout) == (0, "All checks passed!\n")


# --- standard input ---------------------------------------------------------------------


def test_stdin_with_stdin_filename(cli, project):
    result = cli(["-", "--stdin-filename", "foo.py"], cwd=project, input=MODEL)
    assert result.exit_code == 1
    assert result.stdout.splitlines() == [
        f"foo.py:3:9: CKPT001 warning: {MSG001}",
        f"foo.py:4:12: CKPT032 [*] error: {MSG032}",
        *SUMMARY,
    ]
    assert not (project / "foo.py").exists()


def test_stdin_filename_alone_reads_stdin(cli, project):
    # As in Ruff: --stdin-filename with no paths reads standard input, not the directory.
    result = cli(["--stdin-filename", "foo.py", "-q"], cwd=project, input=MODEL)
    assert [path for path, *_ in found(result.stdout)] == ["foo.py", "foo.py"]


def test_stdin_without_filename_is_reported_as_dash(cli, project):
    result = cli(["-", "-q"], cwd=project, input=MODEL)
    assert found(result.stdout) == [("-", 3, 9, "CKPT001"), ("-", 4, 12, "CKPT032")]


def test_stdin_as_a_real_process(project):
    proc = run_subprocess(["-", "--stdin-filename", "pkg/foo.py"], cwd=project, input=MODEL.encode())
    assert proc.returncode == 1
    assert proc.stdout.decode().splitlines()[:2] == [
        f"pkg/foo.py:3:9: CKPT001 warning: {MSG001}",
        f"pkg/foo.py:4:12: CKPT032 [*] error: {MSG032}",
    ]


def test_stdin_fix_prints_the_fixed_code(cli, project):
    result = cli(["-", "--stdin-filename", "foo.py", "--fix"], cwd=project, input=MODEL)
    assert result.exit_code == 1
    assert result.stdout == MODEL_SAFE_FIXED
    assert result.stderr.splitlines() == [
        f"foo.py:3:9: CKPT001 warning: {MSG001}",
        "Found 2 findings (1 fixed, 1 remaining: 1 warning).",
        "(1 hidden fix can be enabled with the `--unsafe-fixes` option.)",
    ]
    unsafe = cli(["-", "--stdin-filename", "foo.py", "--fix", "--unsafe-fixes"], cwd=project, input=MODEL)
    assert (unsafe.exit_code, unsafe.stdout) == (0, MODEL_ALL_FIXED)
    assert not (project / "foo.py").exists()


def test_stdin_fix_echoes_code_that_needs_nothing(cli, project):
    result = cli(["-", "--stdin-filename", "foo.py", "--fix"], cwd=project, input=CLEAN)
    assert (result.exit_code, result.stdout, result.stderr) == (0, CLEAN, "All checks passed!\n")


def test_stdin_fix_keeps_encoding_bom_and_line_endings(cli, project):
    latin1 = (
        b"# -*- coding: latin-1 -*-\r\n"
        b"from torch.utils.checkpoint import checkpoint\r\n"
        b"# caf\xe9\r\n"
        b"y = checkpoint(f, x, mask=m)\r\n"
    )
    result = cli(["-", "--stdin-filename", "foo.py", "--fix"], cwd=project, input=latin1)
    assert result.exit_code == 0
    assert result.stdout_bytes == latin1.replace(b"mask=m)", b"mask=m, use_reentrant=False)")

    bom = b"\xef\xbb\xbfimport torch\ny = torch.utils.checkpoint.checkpoint(f, x, mask=m)\n"
    result = cli(["-", "--stdin-filename", "foo.py", "--fix"], cwd=project, input=bom)
    assert result.stdout_bytes == bom.replace(b"mask=m)", b"mask=m, use_reentrant=False)")


@pytest.mark.parametrize(
    "data",
    [b'x = "\xff\xfe"\n', b"from torch.utils.checkpoint import checkpoint\ndef f(:\n    checkpoint(g, x)\n"],
    ids=["undecodable", "syntax-error"],
)
def test_stdin_fix_echoes_input_it_cannot_fix(cli, project, data):
    # An editor replaces its buffer with what is printed: it must get its text back.
    result = cli(["-", "--stdin-filename", "foo.py", "--fix"], cwd=project, input=data)
    assert result.exit_code == 1
    assert result.stdout_bytes == data
    assert [code for *_, code in found(result.stderr)] == (["CKPT901"] if b"\xff" in data else ["CKPT900"])


def test_stdin_diff(cli, project):
    result = cli(["-", "--stdin-filename", "foo.py", "--diff"], cwd=project, input=MODEL)
    assert result.exit_code == 1
    assert result.stdout == DIFF_SAFE.replace("src/model.py", "foo.py")
    assert result.stderr == "Would fix 1 error.\n(1 hidden fix can be enabled with the `--unsafe-fixes` option.)\n"
    assert not (project / "foo.py").exists()


def test_stdin_json_reports_the_stdin_filename(cli, project):
    result = cli(["-", "--stdin-filename", "foo.py", "--output-format", "json"], cwd=project, input=MODEL)
    assert [(d["filename"], d["code"]) for d in json.loads(result.stdout)] == [
        (str(project / "foo.py"), "CKPT001"),
        (str(project / "foo.py"), "CKPT032"),
    ]


def test_stdin_filename_selects_per_file_ignores(cli, make_project):
    root = make_project(
        {"src/model.py": MODEL},
        pyproject=PYPROJECT + "[tool.ckptlint.per-file-ignores]\n'tests/*' = ['CKPT001']\n",
    )
    tests = cli(["-", "--stdin-filename", "tests/test_x.py", "-q"], cwd=root, input=MODEL)
    assert [code for *_, code in found(tests.stdout)] == ["CKPT032"]
    other = cli(["-", "--stdin-filename", "src/x.py", "-q"], cwd=root, input=MODEL)
    assert [code for *_, code in found(other.stdout)] == ["CKPT001", "CKPT032"]


# --- ckptlint rule ----------------------------------------------------------------------


@pytest.mark.parametrize("key", ["CKPT001", "ckpt001", "checkpoint-implicit-reentrant"])
def test_rule_page(cli, tmp_path, key):
    result = cli(["rule", key], cwd=tmp_path)
    assert result.exit_code == 0
    assert result.stdout == rule_by_code("CKPT001").documentation()
    assert result.stdout.splitlines()[:7] == [
        "# checkpoint-implicit-reentrant (CKPT001)",
        "",
        "`checkpoint` or `checkpoint_sequential` called without `use_reentrant`.",
        "",
        "Fix: available (unsafe).",
        "Severity: warning.",
        "Applies to: torch>=1.11.",
    ]
    for section in ("## What it does", "## Why is this bad?", "## Example", "## Use instead", "## Fix safety"):
        assert section in result.stdout.splitlines()


def test_rule_page_of_an_engine_code(cli, tmp_path):
    result = cli(["rule", "CKPT900"], cwd=tmp_path)
    assert result.exit_code == 0
    assert result.stdout.splitlines()[:3] == ["# parse-error (CKPT900)", "", "The file could not be parsed, or not analysed within the per-file limits."]


def test_rule_all(cli, tmp_path):
    result = cli(["rule", "--all"], cwd=tmp_path)
    assert result.exit_code == 0
    titles = [line for line in result.stdout.splitlines() if re.fullmatch(r"# [a-z0-9-]+ \(CKPT\d+\)", line)]
    assert titles[0] == "# checkpoint-implicit-reentrant (CKPT001)"
    assert titles[-2:] == ["# parse-error (CKPT900)", "# unreadable-file (CKPT901)"]
    assert [title.rsplit("(", 1)[1].rstrip(")") for title in titles] == sorted(all_codes())


def test_rule_unknown_exits_2(cli, tmp_path):
    result = cli(["rule", "CKPT999"], cwd=tmp_path)
    assert (result.exit_code, result.stdout) == (2, "")
    assert result.stderr == "error: unknown rule 'CKPT999'; `ckptlint rule --all` lists them\n"
    bare = cli(["rule"], cwd=tmp_path)
    assert bare.exit_code == 2
    assert bare.stderr == "error: give a rule code (e.g. `ckptlint rule CKPT001`) or --all\n"


def test_rule_json(cli, tmp_path):
    result = cli(["rule", "CKPT032", "--output-format", "json"], cwd=tmp_path)
    assert result.exit_code == 0
    page = json.loads(result.stdout)
    assert list(page) == ["code", "name", "summary", "fix", "targets", "url", "explanation"]
    assert page["code"] == "CKPT032"
    assert page["name"] == "kwargs-to-reentrant-checkpoint"
    assert page["summary"] == "Keyword arguments passed to a reentrant `checkpoint`: a `ValueError` at runtime."
    assert page["fix"] == "safe"
    assert page["targets"] == []  # every torch: before the flag, any keyword raised
    assert page["url"] == "https://github.com/ckptlint/ckptlint/blob/main/docs/rules/CKPT032.md"
    assert page["explanation"] == rule_by_code("CKPT032").documentation()
    every = json.loads(cli(["rule", "--all", "--output-format", "json"], cwd=tmp_path).stdout)
    fixes = {code: getattr(getattr(rule_by_code(code), "fix", None), "value", None) for code in all_codes()}
    assert [(r["code"], r["fix"]) for r in every] == sorted(fixes.items())
    assert fixes["CKPT001"] == "unsafe" and fixes["CKPT032"] == "safe" and fixes["CKPT900"] is None


# --- --show-settings and --target-version -----------------------------------------------


def settings_lines(stdout: str) -> dict[str, str]:
    return {line.split(":", 1)[0].strip(): line.split(":", 1)[1].strip() for line in stdout.splitlines() if ":" in line}


def test_show_settings(cli, project):
    result = cli(["--show-settings", "src"], cwd=project)
    assert result.exit_code == 0
    lines = result.stdout.splitlines()
    root = project.resolve()
    assert lines[0] == f"project root:      {root} (holds pyproject.toml)"
    assert lines[1] == "config file:       none found (defaults)"
    # CKPT100 (unused `# noqa`) is opt-in: `ALL`, the default, leaves it out.
    assert lines[2] == "selected rules:    " + ", ".join(c for c in all_codes() if c != "CKPT100")
    assert lines[3] == "  from:            default (ALL)"
    assert "target versions:" in lines
    assert "  torch          2.1 (declared dependency: pyproject.toml: torch>=2.1)" in lines
    assert any(line.startswith("  transformers   ") for line in lines)
    assert f"cache dir:         {root / '.ckptlint_cache'}" in lines
    assert not (root / ".ckptlint_cache").exists()  # nothing was linted


def test_show_settings_with_command_line_overrides(cli, make_project):
    root = make_project(
        {"src/model.py": MODEL},
        pyproject=PYPROJECT + "[tool.ckptlint]\nignore = ['CKPT001']\ntarget-versions = {transformers = '4.46'}\n",
    )
    result = cli(["--show-settings", "--select", "CKPT0", "--target-version", "torch=2.4", "src"], cwd=root)
    assert result.exit_code == 0
    lines = result.stdout.splitlines()
    config = root.resolve() / "pyproject.toml"
    assert lines[1] == f"config file:       {config}"
    # --select starts afresh, as in Ruff
    assert lines[2] == "selected rules:    " + ", ".join(c for c in all_codes() if c != "CKPT100")
    assert lines[3] == "  from:            command line"
    assert "  torch          2.4 (command line: --target-version torch=2.4)" in lines
    assert f"  transformers   4.46 (configuration: {config})" in lines


def test_show_settings_for_a_file_path(cli, project):
    result = cli(["check", "--show-settings", str(project / "src" / "model.py")], cwd=project.parent)
    assert result.exit_code == 0
    assert result.stdout.splitlines()[0] == f"project root:      {project.resolve()} (holds pyproject.toml)"


def test_target_version_before_the_flag_existed_silences_ckpt001_and_drops_the_fix(cli, project):
    old = cli(["--target-version", "torch=1.10", "-q", "src"], cwd=project)
    assert old.exit_code == 1
    assert old.stdout.startswith("src/model.py:4:12: CKPT032 error: keyword argument `attention_mask` passed to `checkpoint`: the targeted torch (< 1.11)")
    assert "[*]" not in old.stdout and "CKPT001" not in old.stdout
    new = cli(["--target-version", "torch=1.11", "-q", "src"], cwd=project)
    assert (new.exit_code, new.stdout) == (1, f"{LINE3}\n{LINE4}\n")


def test_declared_dependency_sets_the_target_version(cli, make_project):
    root = make_project({"src/model.py": MODEL}, pyproject="[project]\nname = 'demo'\ndependencies = ['torch==1.10.2']\n")
    old = cli(["--output-format", "json", "src"], cwd=root)
    assert [d["code"] for d in json.loads(old.stdout)] == ["CKPT032"]  # no CKPT001 before the flag
    # The command line wins over the declaration.
    new = cli(["--output-format", "json", "--target-version", "torch=2.4", "src"], cwd=root)
    assert [d["code"] for d in json.loads(new.stdout)] == ["CKPT001", "CKPT032"]


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("torch", "error: --target-version: expected PACKAGE=VERSION (e.g. torch=2.4), got 'torch'\n"),
        ("torch=abc", "error: --target-version: 'abc' is not a version (e.g. torch=2.4)\n"),
        ("=2.4", "error: --target-version: expected PACKAGE=VERSION (e.g. torch=2.4), got '=2.4'\n"),
    ],
)
def test_bad_target_version_exits_2(cli, project, value, message):
    result = cli(["--target-version", value, "src"], cwd=project)
    assert (result.exit_code, result.stdout, result.stderr) == (2, "", message)


# --- colour -----------------------------------------------------------------------------


def _run_on_a_terminal(args: list[str], cwd: Path, env: dict[str, str]) -> bytes:
    pty = pytest.importorskip("pty")
    master, slave = pty.openpty()
    try:
        subprocess.run([sys.executable, "-m", "ckptlint", *args], cwd=cwd, stdout=slave, stderr=slave, env=env, timeout=120)
    finally:
        os.close(slave)
    output = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # Linux: EIO once the other side is closed and drained
            break
        if not chunk:
            break
        output += chunk
    os.close(master)
    return output


def _plain_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "CLICOLOR_FORCE", "NO_COLOR")}


def test_colour_only_on_a_terminal(project):
    piped = subprocess.run(
        [sys.executable, "-m", "ckptlint", "src"], cwd=project, capture_output=True, env=_plain_env(), timeout=120
    )
    assert piped.returncode == 1
    assert ANSI.encode() not in piped.stdout + piped.stderr
    terminal = _run_on_a_terminal(["src"], project, _plain_env())
    assert b"\x1b[33m\x1b[1mCKPT001\x1b[0m" in terminal
    assert b"[*] " in terminal


def test_no_color_and_force_color(project):
    no_color = _run_on_a_terminal(["src"], project, {**_plain_env(), "NO_COLOR": "1"})
    assert b"CKPT001" in no_color and ANSI.encode() not in no_color
    forced = subprocess.run(
        [sys.executable, "-m", "ckptlint", "src"], cwd=project, capture_output=True,
        env={**_plain_env(), "FORCE_COLOR": "1"}, timeout=120,
    )
    assert b"\x1b[33m\x1b[1mCKPT001\x1b[0m" in forced.stdout


def test_errors_are_not_coloured_when_piped(project):
    proc = run_subprocess(["--select", "CKPT999", "src"], cwd=project)
    assert proc.returncode == 2
    assert proc.stdout == b""
    assert proc.stderr.decode().startswith("error: --select: unknown rule code or prefix 'CKPT999'")


def test_unknown_target_version_package_exits_2(cli, project):
    result = cli(["--target-version", "troch=1.10", "src"], cwd=project)
    assert result.exit_code == 2
    assert "troch" in result.stderr


# --- cache and parallelism --------------------------------------------------------------


def test_warm_cache_gives_the_same_output(cli, project):
    cold = cli(["--output-format", "json", "src"], cwd=project)
    assert (project / ".ckptlint_cache").is_dir()
    warm = cli(["--output-format", "json", "src"], cwd=project)
    assert warm.stdout == cold.stdout
    assert [d["fix"] is not None for d in json.loads(warm.stdout)] == [True, True]
    # Other settings, other results: the cache is keyed on them.
    narrow = cli(["-q", "--select", "CKPT00", "src"], cwd=project)
    assert narrow.stdout.splitlines() == [LINE3, f"src/model.py:4:12: CKPT001 warning: {MSG001}"]


def test_no_cache_and_cache_dir(cli, project):
    assert cli(["--no-cache", "src"], cwd=project).exit_code == 1
    assert not (project / ".ckptlint_cache").exists()
    assert cli(["--cache-dir", "elsewhere", "src"], cwd=project).exit_code == 1
    assert (project / "elsewhere").is_dir()
    assert not (project / ".ckptlint_cache").exists()


def test_clean_removes_the_cache(cli, project):
    cli(["src"], cwd=project)
    cache = project.resolve() / ".ckptlint_cache"
    assert cache.is_dir()
    result = cli(["clean"], cwd=project)
    assert (result.exit_code, result.stdout) == (0, f"Removed {cache}\n")
    assert not cache.exists()


def test_parallel_run_matches_serial(cli, make_project):
    root = make_project({f"src/m{i:02}.py": MODEL for i in range(70)}, pyproject=PYPROJECT)
    serial = cli(["--no-cache", "--jobs", "1", "src"], cwd=root)
    parallel = cli(["--no-cache", "--jobs", "2", "src"], cwd=root)
    assert parallel.exit_code == serial.exit_code == 1
    assert parallel.stdout == serial.stdout
    assert serial.stdout.splitlines()[-3] == "Found 140 findings (70 errors, 70 warnings)."
    assert cli(["--jobs", "0", "src"], cwd=root).exit_code == 2


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--stdin-filename", "a.py", "a.py"], "--stdin-filename names standard input"),
        (["--no-cache", "--cache-dir", "c", "."], "--no-cache and --cache-dir contradict each other"),
        (["-", "a.py"], "`-` (standard input) cannot be combined with other paths"),
    ],
)
def test_conflicting_options_exit_2_before_linting(cli, make_project, args, message):
    root = make_project({"a.py": "from torch.utils.checkpoint import checkpoint\ny = checkpoint(f, x)\n"})
    result = cli(args, root, input="")
    assert result.exit_code == 2
    assert result.stdout == ""
    assert message in result.stderr
    assert not (root / ".ckptlint_cache").exists() and not (root / "c").exists()


def test_check_collects_garbage_less_often(tmp_path):
    """`ckptlint.collector`: set by `check` (a process of its own here: the setting stays)."""
    from ckptlint import collector

    code = (
        "import gc; from click.testing import CliRunner; from ckptlint.cli import main; "
        f"CliRunner().invoke(main, ['check', {str(tmp_path)!r}]); print(*gc.get_threshold())"
    )
    shown = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    young, older = collector.YOUNG_COLLECTION_ALLOCATIONS, collector.OLDER_COLLECTION_EVERY
    assert shown == [str(young), str(older), str(older)]
