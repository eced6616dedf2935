"""Suppressions never break a run: unknown codes in `# noqa` are warnings, unused ones are
CKPT100 (opt-in, Ruff's RUF100) with a safe fix, `--add-noqa` writes the directives, and
`# ckptlint: noqa: CODE` suppresses codes file-wide."""

from __future__ import annotations

import json

from ckptlint.noqa_fixes import unused_noqa, with_noqa_added
from ckptlint.rule_codes import all_codes
from ckptlint.types import Diagnostic, Edit, Location
from test_notebooks import notebook

PYPROJECT = "[project]\nname = 'demo'\ndependencies = ['torch>=2.1', 'transformers>=5.0']\n"
IMPORT = "from torch.utils.checkpoint import checkpoint\n"
MSG001 = (
    "`checkpoint` without `use_reentrant`: torch falls back to the reentrant implementation "
    "and its warning cannot point at this line; pass `use_reentrant=False`"
)

SUPPRESSIONS = IMPORT + (
    "a = checkpoint(f, x)  # noqa: CKPT001\n"  # used
    "b = checkpoint(f, x, use_reentrant=False)  # noqa: CKPT001\n"  # unused
    "c = checkpoint(f, x, use_reentrant=False)  # noqa: E501, CKPT001\n"  # unused, E501 stays
    "d = checkpoint(f, x)  # noqa: CKPT0011\n"  # unknown (and CKPT001 still reported)
    "e = checkpoint(f, x, use_reentrant=False)  # noqa: CKPT001  # why\n"
    "g = checkpoint(f, x, use_reentrant=False)  # noqa: CKPT001 (kept for torch 1.x)\n"
    "h = checkpoint(f, x, use_reentrant=False)  # noqa\n"  # bare: other tools' to judge
    "i = checkpoint(f, x, use_reentrant=False)  # noqa: CKPT001, CKPT100\n"  # quiet on purpose
    "j = checkpoint(f, x)  # noqa: CKPT001, CKPT001\n"  # duplicated
)
SUPPRESSIONS_FIXED = IMPORT + (
    "a = checkpoint(f, x)  # noqa: CKPT001\n"
    "b = checkpoint(f, x, use_reentrant=False)\n"
    "c = checkpoint(f, x, use_reentrant=False)  # noqa: E501\n"
    "d = checkpoint(f, x)\n"
    "e = checkpoint(f, x, use_reentrant=False)  # why\n"
    "g = checkpoint(f, x, use_reentrant=False)  # (kept for torch 1.x)\n"
    "h = checkpoint(f, x, use_reentrant=False)  # noqa\n"
    "i = checkpoint(f, x, use_reentrant=False)  # noqa: CKPT001, CKPT100\n"
    "j = checkpoint(f, x)  # noqa: CKPT001\n"
)


def test_unused_noqa_is_off_by_default_and_all_does_not_select_it(cli, make_project):
    root = make_project({"m.py": SUPPRESSIONS}, pyproject=PYPROJECT)
    for args in ([], ["--select", "ALL"], ["--select", "CKPT"], ["--config", "extend-select = ['ALL']"]):
        result = cli(["m.py", "--no-cache", "-q", *args], cwd=root)
        assert result.stdout == f"m.py:5:5: CKPT001 warning: {MSG001}\n", args
        assert result.exit_code == 1


def test_unused_noqa_reports_unused_unknown_and_duplicated_ckptlint_codes(cli, make_project):
    root = make_project({"m.py": SUPPRESSIONS}, pyproject=PYPROJECT)
    result = cli(["m.py", "--no-cache", "--extend-select", "CKPT100"], cwd=root)
    assert result.stdout.splitlines() == [
        "m.py:3:44: CKPT100 [*] info: unused `noqa` directive (unused: `CKPT001`): it suppresses no finding on this line; remove it",
        "m.py:4:44: CKPT100 [*] info: unused `noqa` directive (unused: `CKPT001`): it suppresses no finding on this line; remove it",
        f"m.py:5:5: CKPT001 warning: {MSG001}",
        "m.py:5:23: CKPT100 [*] info: unused `noqa` directive (unknown: `CKPT0011`): it suppresses no finding on this line; remove it",
        "m.py:6:44: CKPT100 [*] info: unused `noqa` directive (unused: `CKPT001`): it suppresses no finding on this line; remove it",
        "m.py:7:44: CKPT100 [*] info: unused `noqa` directive (unused: `CKPT001`): it suppresses no finding on this line; remove it",
        "m.py:10:23: CKPT100 [*] info: unused `noqa` directive (duplicated: `CKPT001`): it suppresses no finding on this line; remove it",
        "Found 7 findings (1 warning, 6 info).",
        "[*] 6 fixable with the `--fix` option.",
        "(1 hidden fix can be enabled with the `--unsafe-fixes` option.)",
    ]
    # CKPT100 reports the unknown code itself: no warning besides.
    assert result.stderr == ""
    in_config = make_project({"m.py": SUPPRESSIONS}, pyproject=PYPROJECT + "[tool.ckptlint]\nextend-select = ['CKPT100']\n")
    assert cli(["m.py", "--no-cache"], cwd=in_config).stdout == result.stdout


def test_the_fix_removes_the_unused_codes_and_keeps_everything_else(cli, make_project):
    root = make_project({"m.py": SUPPRESSIONS}, pyproject=PYPROJECT)
    fixed = cli(["m.py", "--no-cache", "--extend-select", "CKPT100", "--fix"], cwd=root)
    assert (root / "m.py").read_text() == SUPPRESSIONS_FIXED
    assert fixed.stdout.splitlines()[-2:] == [
        "Found 7 findings (6 fixed, 1 remaining: 1 warning).",
        "(1 hidden fix can be enabled with the `--unsafe-fixes` option.)",
    ]
    again = cli(["m.py", "--no-cache", "--extend-select", "CKPT100", "--fix"], cwd=root)
    assert (root / "m.py").read_text() == SUPPRESSIONS_FIXED
    assert again.stdout.splitlines()[-2:] == ["Found 1 warning.", "(1 hidden fix can be enabled with the `--unsafe-fixes` option.)"]


def test_codes_of_rules_that_did_not_run_are_not_judged(cli, make_project):
    """Not selected, or ruled out by the target versions: another run may need them."""
    text = IMPORT + "y = checkpoint(f, x, use_reentrant=False)  # noqa: CKPT032, CKPT001\n"
    text += "model.gradient_checkpointing_enable()  # noqa: CKPT020\n"  # transformers>=5: no CKPT020
    root = make_project({"m.py": text}, pyproject=PYPROJECT)
    result = cli(["m.py", "--no-cache", "-q", "--select", "CKPT001,CKPT100"], cwd=root)
    assert result.stdout == (
        "m.py:2:44: CKPT100 [*] info: unused `noqa` directive (unused: `CKPT001`): it suppresses no finding on this line; remove it\n"
    )


def test_per_file_ignores_and_a_file_level_noqa_turn_unused_noqa_off(cli, make_project):
    text = IMPORT + "y = checkpoint(f, x, use_reentrant=False)  # noqa: CKPT001\n"
    root = make_project({"m.py": text, "n.py": "# ckptlint: noqa: CKPT100\n" + text}, pyproject=PYPROJECT)
    result = cli([".", "--no-cache", "-q", "--extend-select", "CKPT100", "--per-file-ignores", "n.py:CKPT001"], cwd=root)
    assert [line.split(" [*]")[0] for line in result.stdout.splitlines()] == ["m.py:2:44: CKPT100"]
    ignored = cli([".", "--no-cache", "-q", "--extend-select", "CKPT100", "--per-file-ignores", "m.py:CKPT100"], cwd=root)
    assert (ignored.exit_code, ignored.stdout) == (0, "")


def test_unused_noqa_in_a_notebook_cell_is_fixed_in_the_cell(cli, make_project):
    root = make_project(
        {"nb.ipynb": notebook("import torch.utils.checkpoint as cp", "y = cp.checkpoint(f, x, use_reentrant=False)  # noqa: CKPT001")},
        pyproject=PYPROJECT,
    )
    result = cli(["nb.ipynb", "--no-cache", "-q", "--extend-select", "CKPT100"], cwd=root)
    assert result.stdout.split(" [*]")[0] == "nb.ipynb:cell 2:1:47: CKPT100"
    cli(["nb.ipynb", "--no-cache", "--extend-select", "CKPT100", "--fix"], cwd=root)
    cells = json.loads((root / "nb.ipynb").read_text())["cells"]
    assert cells[1]["source"] == ["y = cp.checkpoint(f, x, use_reentrant=False)"]


def test_unused_noqa_edits_in_isolation():
    known = set(all_codes())
    text = "x = 1  # type: ignore  # noqa: CKPT001\n\ty = 2  #noqa:CKPT001,CKPT033\n"
    found = unused_noqa(text, "m.py", {(2, "CKPT033")}, {"CKPT001", "CKPT033"}, known, None)
    # Reported at the directive; the edit takes the blanks before it (the comment before stays)
    # or only the codes (one is left).
    assert [(d.location, d.end_location, d.fix.edits) for d in found] == [
        (Location(1, 24), Location(1, 39), (Edit(Location(1, 22), Location(1, 39), ""),)),
        (Location(2, 9), Location(2, 30), (Edit(Location(2, 15), Location(2, 30), "CKPT033"),)),
    ]
    assert unused_noqa('s = "# noqa: CKPT001"\n', "m.py", set(), {"CKPT001"}, known, None) == []  # a string


# --- --add-noqa ---------------------------------------------------------------------------

TO_SUPPRESS = IMPORT + (
    "a = checkpoint(f, x)\n"
    "b = checkpoint(f, x)   # reason\n"
    "c = checkpoint(f, x)  # noqa: E501\n"
    "d = checkpoint(f, x, mask=m)\n"
    "e = checkpoint(\n"
    "    f, x)\n"
    'g = checkpoint(f, """\n'
    '""")\n'
)
SUPPRESSED = IMPORT + (
    "a = checkpoint(f, x)  # noqa: CKPT001\n"
    "b = checkpoint(f, x)   # reason  # noqa: CKPT001\n"
    "c = checkpoint(f, x)  # noqa: E501, CKPT001\n"
    "d = checkpoint(f, x, mask=m)  # noqa: CKPT032\n"
    "e = checkpoint(  # noqa: CKPT001\n"
    "    f, x)\n"
    'g = checkpoint(f, """\n'
    '""")\n'
)


def test_add_noqa_writes_a_directive_for_each_finding_and_merges_existing_ones(cli, make_project):
    root = make_project({"m.py": TO_SUPPRESS}, pyproject=PYPROJECT)
    result = cli(["m.py", "--no-cache", "--add-noqa"], cwd=root)
    assert (root / "m.py").read_text() == SUPPRESSED
    assert result.exit_code == 0
    assert result.stdout == ""
    assert result.stderr.splitlines() == [
        "Added 5 noqa directives.",
        "warning: m.py:8:5: CKPT001 left without a `# noqa` (no comment can end that line, or the file is not Python)",
    ]
    after = cli(["m.py", "--no-cache", "-q"], cwd=root)
    assert [line.split(" ")[0] for line in after.stdout.splitlines()] == ["m.py:8:5:"]
    again = cli(["m.py", "--no-cache", "--add-noqa"], cwd=root)
    assert (root / "m.py").read_text() == SUPPRESSED
    assert again.stderr.splitlines()[0].startswith("warning: m.py:8:5: CKPT001")  # nothing added: no count (Ruff)


def test_add_noqa_through_the_cache_and_in_a_notebook(cli, make_project):
    root = make_project(
        {"m.py": IMPORT + "a = checkpoint(f, x)\n", "nb.ipynb": notebook("import torch.utils.checkpoint as cp", "y = cp.checkpoint(f, x)")},
        pyproject=PYPROJECT,
    )
    assert cli(["."], cwd=root).exit_code == 1  # the results are cached
    result = cli([".", "--add-noqa"], cwd=root)
    assert result.stderr == "Added 2 noqa directives.\n"
    assert (root / "m.py").read_text() == IMPORT + "a = checkpoint(f, x)  # noqa: CKPT001\n"
    assert json.loads((root / "nb.ipynb").read_text())["cells"][1]["source"] == ["y = cp.checkpoint(f, x)  # noqa: CKPT001"]
    assert cli(["."], cwd=root).exit_code == 0


def test_add_noqa_refuses_what_it_cannot_combine_with(cli, make_project):
    root = make_project({"m.py": IMPORT}, pyproject=PYPROJECT)
    for flag in ("--fix", "--diff", "--watch", "--statistics"):
        result = cli(["m.py", "--add-noqa", flag], cwd=root)
        assert (result.exit_code, result.stderr) == (2, f"error: --add-noqa cannot be combined with {flag}\n")
    stdin = cli(["-", "--add-noqa"], cwd=root, input=IMPORT)
    assert (stdin.exit_code, stdin.stderr) == (2, "error: --add-noqa edits files: it cannot be used with standard input\n")


def test_with_noqa_added_in_isolation():
    def at(row: int, code: str = "CKPT001") -> Diagnostic:
        return Diagnostic(code, "m", "m.py", Location(row, 1), Location(row, 2), noqa_row=row)

    text = "a = 1\r\nb = 2 \\\n  + 3\r\n"
    added = with_noqa_added(text, [at(1), at(1, "CKPT030"), at(2), at(1, "CKPT900")], {"CKPT900"})
    assert (added.text, added.added, added.left) == ("a = 1  # noqa: CKPT001, CKPT030\r\nb = 2 \\\n  + 3\r\n", 1, (2,))


# --- # ckptlint: noqa: CODE ---------------------------------------------------------------


def test_file_level_noqa_suppresses_the_codes_it_names_in_the_whole_file(cli, make_project):
    body = "a = checkpoint(f, x)\nb = checkpoint(f, x, mask=m)\n"
    root = make_project(
        {
            "one.py": "# ckptlint: noqa: CKPT001\n" + IMPORT + body,
            "both.py": "#!/usr/bin/env python\n# ckptlint: noqa: CKPT001, ckpt032\n" + IMPORT + body,
            "all.py": "# ckptlint: noqa\n" + IMPORT + body,
            "typo.py": "# ckptlint: noqa: CKPT01\n" + IMPORT + body,
        },
        pyproject=PYPROJECT,
    )
    result = cli([".", "--no-cache", "-q"], cwd=root)
    assert [line.split(" ")[:2] for line in result.stdout.splitlines()] == [
        ["one.py:4:5:", "CKPT032"],
        ["typo.py:3:5:", "CKPT001"],
        ["typo.py:4:5:", "CKPT032"],
    ]
    loud = cli([".", "--no-cache"], cwd=root)
    assert loud.stderr.startswith("warning: typo.py:1: `# ckptlint: noqa: CKPT01` names no ckptlint rule; known codes: CKPT001,")
    assert loud.exit_code == 1


def test_unknown_codes_where_unused_noqa_does_not_look_are_still_warnings(cli, make_project):
    """CKPT100 reads Python files and notebooks: a recipe's or launch script's mistyped code
    (an extension-less script with a shell shebang included) stays a warning."""
    line = "accelerate launch train.py --gradient_checkpointing  # noqa: CKPT999\n"
    root = make_project({"launch.sh": line, "run": "#!/bin/bash\n" + line, "m.py": "x = 1  # noqa: CKPT999\n"}, pyproject=PYPROJECT)
    result = cli(["launch.sh", "run", "m.py", "--no-cache", "--extend-select", "CKPT100"], cwd=root)
    assert [w.split(" names")[0] for w in result.stderr.splitlines()] == [
        "warning: launch.sh:1: `# noqa: CKPT999`", "warning: run:2: `# noqa: CKPT999`"
    ]
    assert [line.split(" [*]")[0] for line in result.stdout.splitlines()[:1]] == ["m.py:1:8: CKPT100"]
