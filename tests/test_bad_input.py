"""Input that is not clean Python (DESIGN.md, "Quality bars": never crash on input). Each
case goes through the command line; none may print a traceback, and the run always goes on
over the other files: a syntax error is CKPT900 at the parser's line, an unreadable or
undecodable file is CKPT901, and everything Python itself accepts is linted normally."""

from __future__ import annotations

import codecs
import json
import os
from pathlib import Path

import pytest

from conftest import json_findings, run_subprocess

PYPROJECT = "[project]\nname = 'demo'\ndependencies = ['torch>=2.1']\n"
IMPORT = b"from torch.utils.checkpoint import checkpoint\n"
CALL = b"y = checkpoint(block, x)\n"  # CKPT001 at column 5
GOOD = IMPORT + CALL  # the file that must still be linted next to every bad one

# name -> (bytes, [(row, column or None when Pythons disagree, code)], message start or None)
CASES: dict[str, tuple[bytes, list[tuple[int, int | None, str]], str | None]] = {
    # Syntax errors: CKPT900 at the line CPython names.
    "unclosed_bracket.py": (IMPORT + b"x = checkpoint(f, (1,\n", [(2, None, "CKPT900")], "SyntaxError: "),
    "unexpected_indent.py": (
        IMPORT + b"def f():\n    x = 1\n        y = checkpoint(g, x)\n",
        [(4, None, "CKPT900")],
        "SyntaxError: unexpected indent",
    ),
    "bad_dedent.py": (
        IMPORT + b"def f():\n    x = 1\n  y = checkpoint(g, x)\n",
        [(4, None, "CKPT900")],
        "SyntaxError: unindent does not match any outer indentation level",
    ),
    "python2_print.py": (IMPORT + b"print 'hello'\n", [(2, 1, "CKPT900")], "SyntaxError: Missing parentheses"),
    "fstring_error.py": (IMPORT + b"x = f'{checkpoint(a, b}'\n", [(2, None, "CKPT900")], "SyntaxError: "),
    "ends_in_a_string.py": (IMPORT + b"x = '''abc", [(2, None, "CKPT900")], "SyntaxError: unterminated"),
    "ends_in_a_call.py": (IMPORT + b"y = checkpoint(block, ", [(2, None, "CKPT900")], "SyntaxError: "),
    "ends_in_a_backslash.py": (IMPORT + b"y = 1 + \\", [(2, None, "CKPT900")], "SyntaxError: "),
    "tabs_and_spaces.py": (
        IMPORT + b"if x:\n        a = 1\n\tb = checkpoint(m, x)\n",
        [(4, None, "CKPT900")],
        "SyntaxError: inconsistent use of tabs and spaces in indentation",
    ),
    "nul_byte.py": (IMPORT + b"y = checkpoint(m, x)\x00\n", [(None, None, "CKPT900")], "SyntaxError: "),
    "binary.py": (bytes(range(256)) * 4, [(1, 1, "CKPT901")], "cannot read file: not valid utf-8: byte 0x80 on line 3"),  # after \n and \r
    "deep_nesting.py": (
        IMPORT + b"x = " + b"(" * 5000 + b"1" + b")" * 5000 + b"\n",
        [(2, None, "CKPT900")],
        "SyntaxError: too many nested parentheses",
    ),
    "deep_indentation.py": (
        IMPORT + b"".join(b"    " * i + b"if a:\n" for i in range(120)) + b"    " * 120 + b"pass\n",
        [(None, None, "CKPT900")],
        "SyntaxError: too many levels of indentation",
    ),
    # Undecodable: CKPT901, saying which byte on which line.
    "latin1_without_coding.py": (
        b"# -*- a comment -*-\nname = 'caf\xe9'\n" + CALL,
        [(1, 1, "CKPT901")],
        "cannot read file: not valid utf-8: byte 0xe9 on line 2; declare the file's encoding with a PEP 263 "
        "coding line or re-save it as UTF-8",
    ),
    "latin1_further_down.py": (
        IMPORT + b"a = 1\r\nb = 2\rname = 'caf\xe9'\n",
        [(1, 1, "CKPT901")],
        "cannot read file: not valid utf-8: byte 0xe9 on line 4;",
    ),
    "truncated_utf8.py": (IMPORT + "x = 'é'".encode()[:-2], [(1, 1, "CKPT901")], "cannot read file: not valid utf-8"),
    "cp1252_quotes.py": (IMPORT + b"# \x93smart\x94 quotes\n" + CALL, [(1, 1, "CKPT901")], "cannot read file: not valid utf-8: byte 0x93 on line 2"),
    "utf16.py": (codecs.BOM_UTF16_LE + GOOD.decode().encode("utf-16-le"), [(1, 1, "CKPT901")], "cannot read file: "),
    "unknown_coding.py": (b"# coding: klingon\n" + GOOD, [(1, 1, "CKPT901")], "cannot read file: unknown encoding: klingon"),
    "bom_and_latin1_coding.py": (
        codecs.BOM_UTF8 + b"# coding: latin-1\n" + GOOD,
        [(1, 1, "CKPT901")],
        "cannot read file: the file starts with a UTF-8 byte-order mark but its coding line declares another encoding",
    ),
    # Valid Python in unusual clothes: linted normally, locations in characters.
    "latin1_with_coding.py": (
        b"# -*- coding: latin-1 -*-\n" + IMPORT + b"name = 'caf\xe9'; y = checkpoint(block, name)\n",
        [(3, 20, "CKPT001")],
        None,
    ),
    "cp1252_with_coding.py": (
        b"# vim: set fileencoding=cp1252 :\n" + IMPORT + b"# \x93quoted\x94\n" + CALL,
        [(4, 5, "CKPT001")],
        None,
    ),
    "utf8_bom.py": (codecs.BOM_UTF8 + GOOD, [(2, 5, "CKPT001")], None),
    "utf8_bom_with_coding.py": (codecs.BOM_UTF8 + b"# coding: utf-8\n" + GOOD, [(3, 5, "CKPT001")], None),
    "crlf.py": (GOOD.replace(b"\n", b"\r\n"), [(2, 5, "CKPT001")], None),
    "cr_only.py": (IMPORT.replace(b"\n", b"\r") + b"\r" + CALL.replace(b"\n", b"\r"), [(3, 5, "CKPT001")], None),
    "mixed_endings.py": (IMPORT.replace(b"\n", b"\r\n") + b"a = 1\rb = 2\n" + CALL, [(4, 5, "CKPT001")], None),
    "no_final_newline.py": (GOOD.rstrip(b"\n"), [(2, 5, "CKPT001")], None),
    "tabs.py": (IMPORT + b"def f():\n\tif x:\n\t\treturn checkpoint(m, x)\n", [(4, 10, "CKPT001")], None),
    "form_feed.py": (IMPORT + b"\x0c\ndef f():\n\x0c    return checkpoint(m, x)\n", [(4, 13, "CKPT001")], None),
    "non_ascii_identifiers.py": (IMPORT + "schön = checkpoint(block, x)\n".encode(), [(2, 9, "CKPT001")], None),
    "wide_chars.py": (IMPORT + "s = '日本語'; y = checkpoint(block, x)\n".encode(), [(2, 16, "CKPT001")], None),
    "long_line.py": (IMPORT + b"x = [" + b"1, " * 3000 + b"]; y = checkpoint(block, x)\n", [(2, 9013, "CKPT001")], None),
    # Nothing to report.
    "empty.py": (b"", [], None),
    "only_a_bom.py": (codecs.BOM_UTF8, [], None),
    "only_newlines.py": (b"\n\r\n\r", [], None),
    "comments_only.py": (b"# checkpoint(block, x) would be reported, were it code\n# more\n", [], None),
    "docstring_only.py": (b'"""checkpoint(block, x) in a docstring."""\n', [], None),
}


def findings(result, root: Path) -> list[tuple]:
    return json_findings(result, root, with_message=True)


def assert_case(found, name: str) -> None:
    _, expected, message = CASES[name]
    mine = [f for f in found if f[0] == name]
    assert len(mine) == len(expected), mine
    for (_, row, column, code, text), (want_row, want_column, want_code) in zip(mine, expected):
        assert code == want_code, (name, mine)
        if want_row is not None:
            assert row == want_row, (name, mine)
        if want_column is not None:
            assert column == want_column, (name, mine)
        if message is not None:
            assert text.startswith(message), (name, text)


@pytest.fixture(scope="module")
def bad_project(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("bad_input")
    (root / "pyproject.toml").write_text(PYPROJECT)
    for name, (data, _, _) in CASES.items():
        (root / name).write_bytes(data)
    (root / "zz_good.py").write_bytes(GOOD)
    return root


@pytest.fixture(scope="module")
def all_at_once(bad_project):
    """One real process over every case: no crash, no traceback, every file reported."""
    return run_subprocess(["--output-format", "json", "--no-cache", "."], cwd=bad_project)


def test_one_run_over_every_case_goes_on_to_the_end(all_at_once, bad_project):
    assert all_at_once.returncode == 1
    assert b"Traceback" not in all_at_once.stderr
    assert all_at_once.stderr == b""
    found = [
        (Path(os.path.relpath(d["filename"], bad_project)).as_posix(), d["location"]["row"], d["code"])
        for d in json.loads(all_at_once.stdout)
    ]
    assert ("zz_good.py", 2, "CKPT001") in found
    assert {path for path, _, _ in found} == {name for name, (_, expected, _) in CASES.items() if expected} | {"zz_good.py"}


@pytest.mark.parametrize("name", list(CASES))
def test_case_in_the_full_run(all_at_once, bad_project, name):
    found = [
        (
            Path(os.path.relpath(d["filename"], bad_project)).as_posix(),
            d["location"]["row"],
            d["location"]["column"],
            d["code"],
            d["message"],
        )
        for d in json.loads(all_at_once.stdout)
    ]
    assert_case(found, name)


@pytest.mark.parametrize(
    "name",
    [
        "unclosed_bracket.py",
        "python2_print.py",
        "fstring_error.py",
        "ends_in_a_string.py",
        "latin1_without_coding.py",
        "latin1_with_coding.py",
        "utf8_bom.py",
        "cr_only.py",
        "binary.py",
        "empty.py",
        "deep_nesting.py",
    ],
)
def test_case_next_to_a_good_file_in_process(cli, make_project, name):
    root = make_project({name: CASES[name][0], "zz_good.py": GOOD}, pyproject=PYPROJECT)
    result = cli(["--output-format", "json", "--no-cache", "."], cwd=root)
    found = findings(result, root)
    assert_case(found, name)
    assert found[-1][:4] == ("zz_good.py", 2, 5, "CKPT001")
    assert result.exit_code == 1
    assert result.stderr == ""


def test_text_output_for_a_syntax_error(cli, make_project):
    root = make_project({"broken.py": IMPORT + b"print 'hello'\n"}, pyproject=PYPROJECT)
    result = cli(["--no-cache", "."], cwd=root)
    assert result.exit_code == 1
    assert result.stdout.splitlines() == [
        "broken.py:2:1: CKPT900 error: SyntaxError: Missing parentheses in call to 'print'. Did you mean print(...)?",
        "Found 1 error.",
    ]


def test_empty_and_comment_only_files_pass(cli, make_project):
    root = make_project(
        {"empty.py": b"", "comments.py": b"# nothing\n", "bom.py": codecs.BOM_UTF8, "blank.py": b"\n\n\n"},
        pyproject=PYPROJECT,
    )
    result = cli(["--no-cache", "."], cwd=root)
    assert (result.exit_code, result.stdout) == (0, "All checks passed!\n")


def test_syntax_error_in_a_file_that_never_mentions_checkpoint(cli, make_project):
    # No trigger word, but a broken file is still reported: Python would refuse it too.
    root = make_project({"util.py": b"def f(:\n    pass\n"}, pyproject=PYPROJECT)
    found = findings(cli(["--output-format", "json", "--no-cache", "."], cwd=root), root)
    assert [(path, row, code) for path, row, _, code, _ in found] == [("util.py", 1, "CKPT900")]


def test_bad_input_on_stdin(cli, make_project):
    root = make_project({}, pyproject=PYPROJECT)
    latin = cli(["--output-format", "json", "-", "--stdin-filename", "x.py"], cwd=root, input=b"s = 'caf\xe9'\n")
    assert [(d["code"], d["filename"], d["message"]) for d in json.loads(latin.stdout)] == [
        (
            "CKPT901",
            str(root / "x.py"),
            "cannot read file: not valid utf-8: byte 0xe9 on line 1; declare the file's encoding with a PEP 263 "
            "coding line or re-save it as UTF-8",
        )
    ]
    broken = cli(["--output-format", "json", "-"], cwd=root, input=IMPORT + b"def f(:\n")
    assert [(d["code"], d["location"]["row"]) for d in json.loads(broken.stdout)] == [("CKPT900", 2)]
    assert "Traceback" not in latin.stderr + broken.stderr


def test_deeply_nested_valid_code_in_a_real_process(make_project):
    """libcst's native parser recurses on the C stack: code like this used to kill the
    process (SIGSEGV) rather than raise."""
    root = make_project(
        {
            "chain.py": IMPORT + b"x = " + b" and ".join([b"a"] * 10000) + b"\n" + CALL,
            "unary.py": IMPORT + b"x = " + b"not " * 50000 + b"a\n" + CALL,
            "lambdas.py": IMPORT + b"x = " + b"lambda: " * 5000 + b"a\n" + CALL,
            "zz_good.py": GOOD,
        },
        pyproject=PYPROJECT,
    )
    completed = run_subprocess(["--output-format", "json", "--no-cache", "."], cwd=root)
    assert completed.returncode == 1, completed.stderr
    assert b"Traceback" not in completed.stderr
    found = [(Path(d["filename"]).name, d["location"]["row"], d["code"]) for d in json.loads(completed.stdout)]
    assert ("chain.py", 3, "CKPT001") in found
    assert ("zz_good.py", 2, "CKPT001") in found
    assert {code for name, _, code in found if name in ("unary.py", "lambdas.py")} == {"CKPT900"}


# The cases whose only problem is a parse error or an unreadable file, and those with a fix.
UNFIXABLE = {name for name, (_, expected, _) in CASES.items() if {c for *_, c in expected} & {"CKPT900", "CKPT901"}}
FIXED_CASES = {name for name, (_, expected, _) in CASES.items() if {c for *_, c in expected} == {"CKPT001"}}
FIXABLE = IMPORT + b"def f(block, x):\n    return checkpoint(block, x)\n"
RECIPE = b"gradient_checkpointing: true  # memory\ngradient_checkpointing_kwargs:\n  use_reentrant: true\nfsdp: shard_grad_op\n"


def test_hostile_directory_fixed_twice_and_concurrently(tmp_path):
    """Every hostile case, fixable files, a recipe, odd paths and links, fixed by two processes
    at once sharing one cache, then again: no traceback, every problem reported with its path,
    unfixable files byte-identical, fixed files valid and stable, and the cache still valid."""
    import ast
    import subprocess
    import sys

    import yaml

    root = tmp_path / "hostile project"
    root.mkdir()
    (root / "pyproject.toml").write_text(PYPROJECT)
    for name, (data, _, _) in CASES.items():
        (root / name).write_bytes(data)
    for index in range(6):
        (root / f"fixable_{index}.py").write_bytes(FIXABLE)
    (root / "sub dir ünïcode").mkdir()
    (root / "sub dir ünïcode" / "módulo con espacios.py").write_bytes(FIXABLE)
    (root / "recipe.yaml").write_bytes(RECIPE)
    (root / "package.py").mkdir()
    (root / "dangling.py").symlink_to(root / "missing.py")
    (root / "loop").symlink_to(root)
    originals = {p: p.read_bytes() for p in root.rglob("*") if p.is_file() and not p.is_symlink()}

    command = [sys.executable, "-m", "ckptlint", "check", ".", "--fix", "--unsafe-fixes", "--output-format", "json",
               "--target-version", "transformers=4.46"]  # fmt: skip
    processes = [
        subprocess.Popen(command, cwd=root, stdout=subprocess.PIPE, stderr=subprocess.PIPE) for _ in range(2)
    ]
    results = [(p.returncode, *p.communicate(timeout=300)) for p in processes]
    results = [(p.returncode, out, err) for p, (_, out, err) in zip(processes, results)]
    again = subprocess.run(command, cwd=root, capture_output=True, timeout=300)
    assert again.returncode == 1 and again.stderr == b"", again.stderr.decode()
    results.append((again.returncode, again.stdout, again.stderr))
    for code, out, err in results:
        assert b"Traceback" not in err and b"Traceback" not in out
        # Racing the other process, a run may find a file changed under it: it says so, writes
        # nothing to that file, and exits 2.
        errors = [line for line in err.decode().splitlines() if line.startswith("error:")]
        assert code == (2 if errors else 1), err.decode()
        assert all("changed on disk while ckptlint was running; not overwritten" in line for line in errors)
        reported = {Path(d["filename"]).name for d in json.loads(out)}
        assert UNFIXABLE <= reported
        assert "dangling.py" in reported  # (a directory named `package.py` is walked, not read)

    for path, before in originals.items():
        after = path.read_bytes()
        if path.name.startswith(("fixable_", "módulo")) or path.name in FIXED_CASES:
            assert b"use_reentrant=False" in after and ast.parse(after)
        elif path.name == "recipe.yaml":
            assert after == RECIPE.replace(b"use_reentrant: true", b"use_reentrant: false")
            assert yaml.safe_load(after)
        else:
            assert after == before, path.name  # nothing fixable: never rewritten
    assert not list(root.rglob("*ckptlint-tmp"))  # no temporary file left behind

    # The cache the concurrent runs wrote gives what a run without it gives.
    check = [sys.executable, "-m", "ckptlint", "check", ".", "--output-format", "json", "--target-version", "transformers=4.46"]
    cached = subprocess.run(check, cwd=root, capture_output=True, timeout=300)
    fresh = subprocess.run(check + ["--no-cache"], cwd=root, capture_output=True, timeout=300)
    assert cached.stdout == fresh.stdout and cached.returncode == fresh.returncode == 1


def test_unknown_ckptlint_code_in_noqa_is_a_warning_that_leaves_the_exit_status_alone(cli, make_project):
    root = make_project(
        {
            "model.py": "from torch.utils.checkpoint import checkpoint\n"
            "y = checkpoint(block, x)  # noqa: CKPT01\n"
            "z = checkpoint(block, x)  # noqa: E501, CKPT001\n",
            "launch.sh": "accelerate launch train.py --gradient_checkpointing  # noqa: CKPT999\n",
        }
    )
    result = cli([".", "--no-cache"], cwd=root)
    assert result.exit_code == 1  # the finding the typo did not suppress, not exit 2
    warnings = [line for line in result.stderr.splitlines() if line.startswith("warning:")]
    assert [w.split(" names")[0] for w in warnings] == [
        "warning: launch.sh:1: `# noqa: CKPT999`",
        "warning: model.py:2: `# noqa: CKPT01`",
    ]
    assert "known codes: CKPT001, CKPT002" in warnings[0]
    assert "error" not in result.stderr
    assert "model.py:2:5: CKPT001" in result.stdout  # the typo suppressed nothing
