"""Which files are linted (DESIGN.md, "Engine pipeline" and "Command line"): .gitignore,
`exclude` / `extend-exclude`, default excludes, explicitly named paths and
`--force-exclude`, links, unreadable things and odd names; and a parallel run over many
files giving what a serial one gives."""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

import pytest

from ckptlint.config import DEFAULT_EXCLUDE
from ckptlint.discovery import discover, matches_any

PYPROJECT = "[project]\nname = 'demo'\ndependencies = ['torch>=2.1']\n"
MODEL = """\
from torch.utils.checkpoint import checkpoint
def forward(self, h, mask):
    h = checkpoint(self.layer, h)
    return checkpoint(self.layer, h, attention_mask=mask)
"""
ONE = "from torch.utils.checkpoint import checkpoint\ny = checkpoint(block, x)\n"  # CKPT001 at 2:5


def lint(cli, root: Path, *args: str):
    return cli(["--output-format", "json", "--no-cache", *args], cwd=root)


def findings(result, root: Path) -> list[tuple[str, int, int, str]]:
    assert "Traceback" not in result.stderr, result.stderr
    return [
        (Path(os.path.relpath(d["filename"], root)).as_posix(), d["location"]["row"], d["location"]["column"], d["code"])
        for d in json.loads(result.stdout)
    ]


def linted(cli, root: Path, *args: str) -> list[str]:
    """The files that produced a finding (every file below holds one)."""
    return sorted({path for path, *_ in findings(lint(cli, root, *args), root)})


def messages(cli, root: Path, *args: str) -> dict[str, str]:
    result = lint(cli, root, *args)
    assert "Traceback" not in result.stderr
    return {Path(os.path.relpath(d["filename"], root)).as_posix(): d["message"] for d in json.loads(result.stdout)}


# --- .gitignore ------------------------------------------------------------------------


def test_root_gitignore(cli, make_project):
    root = make_project(
        {
            ".gitignore": "ignored.py\nout/\n*.gen.py\n# a comment\n\n/anchored.py\n",
            "kept.py": ONE,
            "ignored.py": ONE,
            "out/a.py": ONE,
            "src/out/b.py": ONE,  # `out/` matches at any depth
            "src/model.gen.py": ONE,
            "anchored.py": ONE,
            "src/anchored.py": ONE,  # `/anchored.py` only at the root
        },
        pyproject=PYPROJECT,
    )
    assert linted(cli, root, ".") == ["kept.py", "src/anchored.py"]


def test_nested_gitignore_applies_below_its_directory(cli, make_project):
    root = make_project(
        {
            "pkg/.gitignore": "local.py\n/only_here.py\n",
            "pkg/local.py": ONE,
            "pkg/only_here.py": ONE,
            "pkg/sub/only_here.py": ONE,
            "pkg/sub/local.py": ONE,
            "local.py": ONE,  # above the .gitignore: not affected
        },
        pyproject=PYPROJECT,
    )
    assert linted(cli, root, ".") == ["local.py", "pkg/sub/only_here.py"]


def test_negation_patterns(cli, make_project):
    root = make_project(
        {
            ".gitignore": "*.py\n!keep.py\n!/pkg/\n",
            "drop.py": ONE,
            "keep.py": ONE,
            "pkg/keep.py": ONE,
            "pkg/drop.py": ONE,
        },
        pyproject=PYPROJECT,
    )
    assert linted(cli, root, ".") == ["keep.py", "pkg/keep.py"]


def test_deeper_gitignore_overrides_a_higher_one(cli, make_project):
    # As in git: sub/.gitignore's `!keep.py` re-includes what the root's `*.py` ignored.
    root = make_project(
        {
            ".gitignore": "*.py\n",
            "sub/.gitignore": "!keep.py\n",
            "top.py": ONE,
            "sub/keep.py": ONE,
            "sub/other.py": ONE,
            "sub/deeper/keep.py": ONE,
        },
        pyproject=PYPROJECT,
    )
    assert linted(cli, root, ".") == ["sub/deeper/keep.py", "sub/keep.py"]


def test_a_file_below_an_ignored_directory_cannot_be_re_included(cli, make_project):
    # git does not look inside an excluded directory, so `!build/keep.py` has no effect.
    root = make_project(
        {".gitignore": "generated/\n!generated/keep.py\n", "generated/keep.py": ONE, "main.py": ONE},
        pyproject=PYPROJECT,
    )
    assert linted(cli, root, ".") == ["main.py"]


def test_respect_gitignore_false(cli, make_project):
    root = make_project(
        {".gitignore": "ignored.py\n", "ignored.py": ONE, "kept.py": ONE},
        pyproject=PYPROJECT + "[tool.ckptlint]\nrespect-gitignore = false\n",
    )
    assert linted(cli, root, ".") == ["ignored.py", "kept.py"]


def test_gitignore_is_read_from_the_project_root_when_linting_a_subdirectory(cli, make_project):
    root = make_project(
        {".gitignore": "src/skip.py\n", "src/skip.py": ONE, "src/lint.py": ONE}, pyproject=PYPROJECT
    )
    assert linted(cli, root / "src", ".") == ["lint.py"]
    assert linted(cli, root, "src") == ["src/lint.py"]


# --- exclude / extend-exclude / defaults -----------------------------------------------


@pytest.mark.parametrize("directory", [".venv", "venv", "build", "dist", "node_modules", ".tox", ".git", "site-packages", "__pypackages__"])
def test_default_excludes(cli, make_project, directory):
    root = make_project({f"{directory}/lib.py": ONE, f"src/{directory}/lib.py": ONE, "main.py": ONE}, pyproject=PYPROJECT)
    assert directory in DEFAULT_EXCLUDE
    assert linted(cli, root, ".") == ["main.py"]


def test_exclude_and_extend_exclude_patterns(cli, make_project):
    files = {
        "main.py": ONE,
        "migrations/0001.py": ONE,
        "src/migrations/0002.py": ONE,
        "models/a.py": ONE,
        "src/models/b.py": ONE,
        "scripts/gen_x.py": ONE,
        "scripts/run.py": ONE,
        "venv/lib.py": ONE,
    }
    root = make_project(files, pyproject=PYPROJECT + "[tool.ckptlint]\nextend-exclude = ['migrations', '/models', 'scripts/gen_*.py']\n")
    assert linted(cli, root, ".") == ["main.py", "scripts/run.py", "src/models/b.py"]
    # `exclude` replaces the defaults: venv/ is linted now.
    root = make_project(files, pyproject=PYPROJECT + "[tool.ckptlint]\nexclude = ['migrations/']\n")
    assert linted(cli, root, ".") == [
        "main.py",
        "models/a.py",
        "scripts/gen_x.py",
        "scripts/run.py",
        "src/models/b.py",
        "venv/lib.py",
    ]


def test_exclude_with_negation(cli, make_project):
    root = make_project(
        {"tests/a.py": ONE, "tests/keep.py": ONE, "main.py": ONE},
        pyproject=PYPROJECT + "[tool.ckptlint]\nextend-exclude = ['tests/*', '!tests/keep.py']\n",
    )
    assert linted(cli, root, ".") == ["main.py", "tests/keep.py"]


def test_explicit_file_in_an_excluded_directory(cli, make_project):
    root = make_project(
        {
            ".gitignore": "ignored/\n",
            "build/b.py": ONE,
            "generated/g.py": ONE,
            "ignored/i.py": ONE,
            "main.py": ONE,
        },
        pyproject=PYPROJECT + "[tool.ckptlint]\nextend-exclude = ['generated']\n",
    )
    explicit = ["build/b.py", "generated/g.py", "ignored/i.py", "main.py"]
    assert linted(cli, root, ".") == ["main.py"]
    # Named on the command line (as pre-commit does): linted...
    assert linted(cli, root, *explicit) == explicit
    # ...unless --force-exclude.
    assert linted(cli, root, "--force-exclude", *explicit) == ["main.py"]
    result = lint(cli, root, "--force-exclude", "build/b.py")
    assert (result.exit_code, json.loads(result.stdout)) == (0, [])


def test_explicit_excluded_directory(cli, make_project):
    root = make_project(
        {
            ".gitignore": "ignored/\n*.tmp.py\n",
            "build/b.py": ONE,
            "build/.venv/v.py": ONE,  # excluded by its own pattern, not by the named directory's
            "ignored/i.py": ONE,
            "ignored/x.tmp.py": ONE,
        },
        pyproject=PYPROJECT,
    )
    assert linted(cli, root, "build") == ["build/b.py"]
    assert linted(cli, root, "ignored") == ["ignored/i.py"]
    assert linted(cli, root, "--force-exclude", "build", "ignored") == []


def test_explicit_directories_below_ignored_ones(cli, make_project):
    root = make_project(
        {
            "a/.gitignore": "build/\n*.tmp.py\n",
            "b/.gitignore": "build/\n",
            "a/build/x.py": ONE,
            "a/build/x.tmp.py": ONE,
            "b/build/y.tmp.py": ONE,  # a/.gitignore's *.tmp.py does not reach b/
            ".gitignore": "vendor/\n",
            "vendor/pkg/mod.py": ONE,
        },
        pyproject=PYPROJECT + "[tool.ckptlint]\nexclude = []\n",
    )
    assert linted(cli, root, ".") == []
    assert linted(cli, root, "a/build", "b/build", "vendor/pkg") == ["a/build/x.py", "b/build/y.tmp.py", "vendor/pkg/mod.py"]


def test_force_exclude_with_gitignored_parent(cli, make_project):
    root = make_project({".gitignore": "vendor/\n", "vendor/pkg/mod.py": ONE}, pyproject=PYPROJECT)
    assert linted(cli, root, "vendor/pkg/mod.py") == ["vendor/pkg/mod.py"]
    assert linted(cli, root, "--force-exclude", "vendor/pkg/mod.py") == []


def test_pyi_files_and_other_suffixes(cli, make_project):
    root = make_project(
        {
            "stub.pyi": ONE, "mod.py": ONE, "notes.txt": ONE, "script": ONE, "mod.pyc": ONE,
            "nb.ipynb": json.dumps({"cells": [{"cell_type": "code", "metadata": {}, "source": ONE}], "metadata": {}, "nbformat": 4}),
        },
        pyproject=PYPROJECT,
    )
    # Notebooks are linted too (their code cells: tests/test_notebooks.py).
    assert linted(cli, root, ".") == ["mod.py", "nb.ipynb", "stub.pyi"]
    # A file named explicitly is linted whatever its suffix.
    assert linted(cli, root, "script") == ["script"]


# --- links -----------------------------------------------------------------------------


def test_symlink_to_a_file(cli, make_project):
    root = make_project({"real.py": ONE, "outside/target.txt": ONE}, pyproject=PYPROJECT)
    (root / "link.py").symlink_to("real.py")
    (root / "alias.py").symlink_to(root / "outside" / "target.txt")
    assert linted(cli, root, ".") == ["alias.py", "link.py", "real.py"]


def test_symlink_to_a_directory_is_walked_once(cli, make_project):
    root = make_project({"pkg/mod.py": ONE}, pyproject=PYPROJECT)
    (root / "zlink").symlink_to("pkg", target_is_directory=True)
    assert linted(cli, root, ".") == ["pkg/mod.py"]
    # On its own, the link is walked.
    assert linted(cli, root, "zlink") == ["zlink/mod.py"]


def test_dangling_symlink_is_ckpt901(cli, make_project):
    root = make_project({"main.py": ONE}, pyproject=PYPROJECT)
    (root / "dangling.py").symlink_to("does-not-exist.py")
    result = lint(cli, root, ".")
    assert findings(result, root) == [("dangling.py", 1, 1, "CKPT901"), ("main.py", 2, 5, "CKPT001")]
    assert messages(cli, root, ".")["dangling.py"] == "cannot read file: No such file or directory"
    assert result.exit_code == 1


def test_symlink_loops_end(cli, make_project):
    root = make_project({"a/mod.py": ONE, "b/other.py": ONE}, pyproject=PYPROJECT)
    (root / "a" / "up").symlink_to("..", target_is_directory=True)
    (root / "a" / "to_b").symlink_to("../b", target_is_directory=True)
    (root / "b" / "to_a").symlink_to("../a", target_is_directory=True)
    (root / "self.py").symlink_to("self.py")  # a link to itself
    (root / "ping.py").symlink_to("pong.py")
    (root / "pong.py").symlink_to("ping.py")
    result = lint(cli, root, ".")
    assert result.exit_code == 1
    found = findings(result, root)
    assert [f for f in found if f[3] == "CKPT001"] == [("a/mod.py", 2, 5, "CKPT001"), ("b/other.py", 2, 5, "CKPT001")]
    assert [f[0] for f in found if f[3] == "CKPT901"] == ["ping.py", "pong.py", "self.py"]
    reasons = messages(cli, root, ".")
    assert reasons["self.py"] == "cannot read file: Too many levels of symbolic links"


def test_symlink_loop_named_explicitly(cli, make_project):
    root = make_project({"a/mod.py": ONE}, pyproject=PYPROJECT)
    (root / "a" / "loop").symlink_to(".", target_is_directory=True)
    assert linted(cli, root, "a/loop/loop/loop") == ["a/loop/loop/loop/mod.py"]


# --- unreadable things and odd names ---------------------------------------------------


def _readable_despite_chmod(path: Path) -> bool:
    try:
        path.read_bytes() if path.is_file() else list(path.iterdir())
        return True
    except PermissionError:
        return False


def test_unreadable_file_is_ckpt901(cli, make_project):
    root = make_project({"secret.py": ONE, "main.py": ONE}, pyproject=PYPROJECT)
    (root / "secret.py").chmod(0)
    try:
        if _readable_despite_chmod(root / "secret.py"):
            pytest.skip("running with privileges that ignore file permissions")
        assert findings(lint(cli, root, "."), root) == [("main.py", 2, 5, "CKPT001"), ("secret.py", 1, 1, "CKPT901")]
        assert messages(cli, root, ".")["secret.py"] == "cannot read file: Permission denied"
    finally:
        (root / "secret.py").chmod(0o644)


def test_unreadable_directory_is_ckpt901(cli, make_project):
    root = make_project({"locked/mod.py": ONE, "main.py": ONE}, pyproject=PYPROJECT)
    (root / "locked").chmod(0)
    try:
        if _readable_despite_chmod(root / "locked"):
            pytest.skip("running with privileges that ignore file permissions")
        assert findings(lint(cli, root, "."), root) == [("locked", 1, 1, "CKPT901"), ("main.py", 2, 5, "CKPT001")]
    finally:
        (root / "locked").chmod(0o755)


def test_read_errors_are_ckpt901_whoever_runs_the_tests(cli, make_project, monkeypatch):
    """The same as the two tests above, by making the reads fail: they run as root too."""
    import ckptlint.runner

    root = make_project({"secret.py": ONE, "locked/mod.py": ONE, "main.py": ONE}, pyproject=PYPROJECT)
    real_read, real_scandir = ckptlint.runner.read_source_bytes, os.scandir

    def read(path, **kwargs):
        if Path(path).name == "secret.py":
            raise PermissionError(13, "Permission denied", str(path))
        return real_read(path, **kwargs)

    def scandir(path):
        if Path(path).name == "locked":
            raise PermissionError(13, "Permission denied", str(path))
        return real_scandir(path)

    monkeypatch.setattr(ckptlint.runner, "read_source_bytes", read)
    monkeypatch.setattr("ckptlint.discovery.os.scandir", scandir)
    for cache in ("--no-cache", "--cache-dir=.cache"):
        result = cli(["--output-format", "json", cache, "."], cwd=root)
        assert findings(result, root) == [
            ("locked", 1, 1, "CKPT901"),
            ("main.py", 2, 5, "CKPT001"),
            ("secret.py", 1, 1, "CKPT901"),
        ]
        assert {d["message"] for d in json.loads(result.stdout) if d["code"] == "CKPT901"} == {
            "cannot read file: Permission denied"
        }
        assert result.exit_code == 1


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_fifo_named_like_python_is_ckpt901_not_a_hang(cli, make_project):
    root = make_project({"main.py": ONE}, pyproject=PYPROJECT)
    os.mkfifo(root / "pipe.py")
    result = lint(cli, root, ".", "pipe.py")
    assert findings(result, root) == [("main.py", 2, 5, "CKPT001"), ("pipe.py", 1, 1, "CKPT901")]
    assert messages(cli, root, ".")["pipe.py"] == "cannot read file: not a regular file (a FIFO, socket or device)"


def test_socket_named_like_python_is_ckpt901(cli, tmp_path, make_project):
    root = make_project({"main.py": ONE}, pyproject=PYPROJECT)
    server = socket.socket(socket.AF_UNIX)
    try:
        server.bind(str(root / "s.py"))
    except OSError:
        pytest.skip("cannot bind a unix socket here")
    try:
        assert findings(lint(cli, root, "."), root) == [("main.py", 2, 5, "CKPT001"), ("s.py", 1, 1, "CKPT901")]
    finally:
        server.close()


def test_device_named_explicitly_is_not_read_forever(cli, make_project):
    if not Path("/dev/zero").exists():
        pytest.skip("no /dev/zero")
    root = make_project({}, pyproject=PYPROJECT)
    result = lint(cli, root, "/dev/zero")
    assert [(d["code"], d["message"]) for d in json.loads(result.stdout)] == [
        ("CKPT901", "cannot read file: not a regular file (a FIFO, socket or device)")
    ]


def test_directory_named_like_a_python_file(cli, make_project):
    root = make_project({"weird.py/inner.py": ONE, "main.py": ONE}, pyproject=PYPROJECT)
    assert linted(cli, root, ".") == ["main.py", "weird.py/inner.py"]
    assert linted(cli, root, "weird.py") == ["weird.py/inner.py"]
    (root / "empty.py").mkdir()
    result = lint(cli, root, "empty.py")
    assert (result.exit_code, json.loads(result.stdout)) == (0, [])


def test_paths_with_spaces_and_non_ascii_names(cli, make_project):
    names = ["my models/rés net.py", "日本語/モデル.py", "emoji 🚀.py", "tab\tname.py"]
    root = make_project({name: ONE for name in names}, pyproject=PYPROJECT)
    assert linted(cli, root, ".") == sorted(names)
    assert linted(cli, root, "my models/rés net.py", "日本語") == ["my models/rés net.py", "日本語/モデル.py"]
    text = cli(["--no-cache", "my models"], cwd=root)
    assert text.stdout.startswith("my models/rés net.py:2:5: CKPT001 warning: ")


def test_nonexistent_path_is_ckpt901_and_the_run_goes_on(cli, make_project):
    root = make_project({"main.py": ONE}, pyproject=PYPROJECT)
    result = lint(cli, root, "nope.py", "main.py", "missing_dir/")
    assert findings(result, root) == [
        ("main.py", 2, 5, "CKPT001"),
        ("missing_dir", 1, 1, "CKPT901"),
        ("nope.py", 1, 1, "CKPT901"),
    ]
    assert result.exit_code == 1
    assert messages(cli, root, "nope.py")["nope.py"] == "cannot read file: No such file or directory"
    # Only a missing path: still a finding (exit 1), not a crash or a usage error.
    text = cli(["--no-cache", "nope.py"], cwd=root)
    assert (text.exit_code, text.stdout.splitlines()[0]) == (1, "nope.py:1:1: CKPT901 error: cannot read file: No such file or directory")


def test_a_very_deep_directory_tree(cli, make_project, monkeypatch):
    root = make_project({}, pyproject=PYPROJECT)
    deepest = root
    for _ in range(1200):  # deeper than Python's recursion limit
        deepest = deepest / "d"
        os.mkdir(deepest)
    (deepest / "m.py").write_text(ONE)
    try:
        assert linted(cli, root, ".") == ["d/" * 1200 + "m.py"]
    finally:
        # pytest's own cleanup (shutil.rmtree) recurses once per level and would fail on it.
        (deepest / "m.py").unlink()
        while deepest != root:
            for leftover in deepest.iterdir():
                leftover.unlink()
            deepest.rmdir()
            deepest = deepest.parent


def test_the_same_file_named_twice_is_linted_once(cli, make_project):
    root = make_project({"pkg/main.py": ONE}, pyproject=PYPROJECT)
    result = lint(cli, root, "pkg/main.py", "./pkg/main.py", str(root / "pkg" / "main.py"), "pkg", ".")
    assert findings(result, root) == [("pkg/main.py", 2, 5, "CKPT001")]


def test_results_are_sorted_by_path(cli, make_project):
    root = make_project({"b.py": MODEL, "a/z.py": ONE, "a.py": ONE, "B.py": ONE}, pyproject=PYPROJECT)
    found = findings(lint(cli, root, "b.py", "a", "."), root)
    assert found == sorted(found)
    assert [f[0] for f in found] == ["B.py", "a.py", "a/z.py", "b.py", "b.py"]


# --- discover() itself -----------------------------------------------------------------


def test_discover_returns_sorted_unique_paths_and_problems(tmp_path):
    for name in ["b.py", "a.py", "sub/c.py", "sub/d.txt", ".venv/e.py"]:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("x = 1\n")
    found = discover(
        [tmp_path, tmp_path / "a.py", tmp_path / "missing.py"],
        project_root=tmp_path,
        exclude=DEFAULT_EXCLUDE,
        extend_exclude=(),
    )
    assert found.files == (tmp_path / "a.py", tmp_path / "b.py", tmp_path / "sub" / "c.py")
    assert found.problems == ((tmp_path / "missing.py", "No such file or directory"),)


def test_discover_path_outside_the_project_root(tmp_path):
    (tmp_path / "project").mkdir()
    (tmp_path / "elsewhere" / "build").mkdir(parents=True)
    (tmp_path / "elsewhere" / "mod.py").write_text("x = 1\n")
    (tmp_path / "elsewhere" / "build" / "gen.py").write_text("x = 1\n")
    found = discover(
        [tmp_path / "elsewhere"], project_root=tmp_path / "project", exclude=DEFAULT_EXCLUDE, extend_exclude=()
    )
    assert found.files == (tmp_path / "elsewhere" / "mod.py",)


@pytest.mark.parametrize(
    "path, patterns, expected",
    [
        ("tests/test_a.py", ["tests/"], True),
        ("src/tests/test_a.py", ["tests/"], True),
        ("src/tests/test_a.py", ["/tests/"], False),
        ("a/b/c.py", ["a/b"], True),
        ("a/b/c.py", ["*.py"], True),
        ("a/b/c.py", ["b/c.py"], False),  # a pattern with a slash is anchored
        ("a/b/c.py", ["**/b/c.py"], True),
        ("legacy.py", ["legacy.py"], True),
        ("pkg/legacy.py", ["legacy.py"], True),
        ("tests/keep.py", ["tests/*", "!tests/keep.py"], False),
        ("x.py", [], False),
    ],
)
def test_matches_any(path, patterns, expected):
    assert matches_any(path, patterns) is expected


# --- many files: a process pool gives what one process gives ---------------------------


def test_jobs_2_over_many_files_matches_jobs_1(cli, make_project):
    files = {f"pkg{i % 7}/mod_{i:03}.py": (MODEL if i % 3 else ONE) for i in range(90)}
    files["pkg0/broken.py"] = "from torch.utils.checkpoint import checkpoint\ndef f(:\n"
    files["pkg1/latin.py"] = "x = 'caf\xe9'\n".encode("latin-1")
    root = make_project(files, pyproject=PYPROJECT)
    serial = lint(cli, root, "--jobs", "1", ".")
    parallel = lint(cli, root, "--jobs", "2", ".")
    assert parallel.stdout == serial.stdout
    assert parallel.exit_code == serial.exit_code == 1
    found = findings(parallel, root)
    assert len({f[0] for f in found}) == 92
    assert ("pkg0/broken.py", 2, 7, "CKPT900") in found
    assert ("pkg1/latin.py", 1, 1, "CKPT901") in found
    # The text report too, and with the cache warm.
    assert cli(["--jobs", "2", "."], cwd=root).stdout == cli(["--jobs", "1", "--no-cache", "."], cwd=root).stdout
    assert cli(["--jobs", "2", "."], cwd=root).stdout == cli(["--jobs", "1", "--no-cache", "."], cwd=root).stdout


def test_jobs_2_fix_over_many_files_matches_jobs_1(cli, make_project, tmp_path_factory):
    files = {f"m{i:03}.py": MODEL for i in range(70)}
    serial_root = make_project(files, pyproject=PYPROJECT)
    parallel_root = tmp_path_factory.mktemp("parallel")
    for name, text in {**files, "pyproject.toml": PYPROJECT}.items():
        (parallel_root / name).write_text(text)
    serial = cli(["--fix", "--unsafe-fixes", "--jobs", "1", "."], cwd=serial_root)
    parallel = cli(["--fix", "--unsafe-fixes", "--jobs", "2", "."], cwd=parallel_root)
    assert (serial.exit_code, serial.stdout) == (parallel.exit_code, parallel.stdout) == (
        0,
        "Found 140 errors (140 fixed, 0 remaining).\n",
    )
    for name in files:
        assert (parallel_root / name).read_bytes() == (serial_root / name).read_bytes()


@pytest.mark.parametrize(
    "patterns",
    [
        ("build", ".git", "site-packages", "foo.egg-info", "venv"),  # plain names: our own regex
        ("build", "*.egg-info", "foo/bar/", "/top.py", "docs/**/gen_*.py", "a?c", "[ab]x/", "**/tmp"),  # one regex
        ("build", "!build/keep.py", "*.py", "!top.py"),  # negations: pathspec itself
    ],
    ids=["plain names", "globs", "negations"],
)
def test_exclude_matching_agrees_with_pathspec(patterns):
    """The walk's matcher (one regular expression where it can) decides every path as
    pathspec's gitignore semantics do."""
    import itertools

    import pathspec

    from ckptlint.discovery import _Matcher

    ours, reference = _Matcher(patterns), pathspec.GitIgnoreSpec.from_lines(patterns)
    names = ["build", "keep.py", "foo", "bar", "top.py", "docs", "gen_1.py", "abc", "ax", "tmp", ".git", "venvx",
             "foo.egg-info", "site-packages", "x"]
    for depth in range(1, 4):
        for combo in itertools.product(names, repeat=depth):
            for suffix in ("", "/"):
                path = "/".join(combo) + suffix
                assert ours.match_file(path) == bool(reference.match_file(path)), path
