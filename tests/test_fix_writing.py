"""Writing fixes (DESIGN.md, "Quality bars"): the bytes outside the edits, the encoding, the
BOM, the line endings and the file mode survive; files are replaced atomically (a temporary
file and os.replace, none left behind); a file changed on disk since it was read is not
overwritten; a second --fix changes nothing."""

from __future__ import annotations

import codecs
import os
import stat
from pathlib import Path

import pytest

import ckptlint.runner
import ckptlint.writer
from ckptlint.writer import ChangedOnDisk, replace_atomically

PYPROJECT = "[project]\nname = 'demo'\ndependencies = ['torch>=2.1']\n"

# Comments, odd spacing, a tab, trailing whitespace and a non-ASCII comment: all of it must
# come back byte for byte, only the two insertions added.
MODEL = (
    "# -*- coding: {coding} -*-\n"
    "# caf\u00e9 \u00bb model\n"
    "from torch.utils.checkpoint import checkpoint   \n"
    "\n"
    "def forward(self, h, mask):\t# keep me\n"
    "    h = checkpoint(self.layer,  h)  # one\n"
    "    return checkpoint(\n"
    "        self.layer, h,\n"
    "        attention_mask=mask)  # two\n"
)
FIXED = (
    "# -*- coding: {coding} -*-\n"
    "# caf\u00e9 \u00bb model\n"
    "from torch.utils.checkpoint import checkpoint   \n"
    "\n"
    "def forward(self, h, mask):\t# keep me\n"
    "    h = checkpoint(self.layer,  h, use_reentrant=False)  # one\n"
    "    return checkpoint(\n"
    "        self.layer, h,\n"
    "        attention_mask=mask, use_reentrant=False)  # two\n"
)
SIMPLE = """\
from torch.utils.checkpoint import checkpoint
def forward(self, h, mask):
    h = checkpoint(self.layer, h)
    return checkpoint(self.layer, h, attention_mask=mask)
"""
SIMPLE_FIXED = """\
from torch.utils.checkpoint import checkpoint
def forward(self, h, mask):
    h = checkpoint(self.layer, h, use_reentrant=False)
    return checkpoint(self.layer, h, attention_mask=mask, use_reentrant=False)
"""


def source(coding: str, newline: str = "\n", *, fixed: bool = False) -> str:
    return (FIXED if fixed else MODEL).format(coding=coding).replace("\n", newline)


def fix(cli, root: Path, *paths: str, unsafe: bool = True):
    args = ["--fix", *(["--unsafe-fixes"] if unsafe else []), "--no-cache", *paths]
    result = cli(args, cwd=root)
    assert "Traceback" not in result.stderr, result.stderr
    return result


def tree(root: Path) -> list[str]:
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*"))


# --- bytes, encodings, endings ---------------------------------------------------------


@pytest.mark.parametrize(
    "name, before, after",
    [
        ("lf.py", source("utf-8").encode(), source("utf-8", fixed=True).encode()),
        ("crlf.py", source("utf-8", "\r\n").encode(), source("utf-8", "\r\n", fixed=True).encode()),
        (
            "bom.py",
            codecs.BOM_UTF8 + source("utf-8").encode(),
            codecs.BOM_UTF8 + source("utf-8", fixed=True).encode(),
        ),
        (
            "bom_crlf.py",
            codecs.BOM_UTF8 + source("utf-8", "\r\n").encode(),
            codecs.BOM_UTF8 + source("utf-8", "\r\n", fixed=True).encode(),
        ),
        ("latin1.py", source("latin-1").encode("latin-1"), source("latin-1", fixed=True).encode("latin-1")),
        (
            "latin1_crlf.py",
            source("latin-1", "\r\n").encode("latin-1"),
            source("latin-1", "\r\n", fixed=True).encode("latin-1"),
        ),
        ("cp1252.py", source("cp1252").encode("cp1252"), source("cp1252", fixed=True).encode("cp1252")),
        # Mixed endings: each line keeps its own.
        (
            "mixed.py",
            source("utf-8").encode().replace(b"# one\n", b"# one\r\n", 1),
            source("utf-8", fixed=True).encode().replace(b"# one\n", b"# one\r\n", 1),
        ),
        ("no_final_newline.py", source("utf-8").encode().rstrip(b"\n"), source("utf-8", fixed=True).encode().rstrip(b"\n")),
    ],
)
def test_fix_keeps_every_byte_outside_the_edits(cli, make_project, name, before, after):
    root = make_project({name: before}, pyproject=PYPROJECT)
    result = fix(cli, root, name)
    assert (result.exit_code, result.stdout) == (0, "Found 2 errors (2 fixed, 0 remaining).\n")
    assert (root / name).read_bytes() == after
    # The interpreter reads the result as the same text it read before, plus the edits.
    assert "\u00e9" in (root / name).read_bytes().decode(
        "latin-1" if "latin1" in name else "cp1252" if "cp1252" in name else "utf-8-sig"
    )


def test_fix_keeps_cr_only_line_endings(cli, make_project):
    before = SIMPLE.replace("\n", "\r").encode()
    root = make_project({"cr.py": before}, pyproject=PYPROJECT)
    fix(cli, root, "cr.py")
    assert (root / "cr.py").read_bytes() == SIMPLE_FIXED.replace("\n", "\r").encode()


def test_safe_fix_only_touches_its_own_line(cli, make_project):
    before = source("utf-8", "\r\n").encode()
    root = make_project({"m.py": before}, pyproject=PYPROJECT)
    result = fix(cli, root, "m.py", unsafe=False)
    assert result.exit_code == 1
    assert result.stdout.splitlines()[-2:] == [
        "Found 2 findings (1 fixed, 1 remaining: 1 warning).",
        "(1 hidden fix can be enabled with the `--unsafe-fixes` option.)",
    ]
    assert (root / "m.py").read_bytes() == before.replace(
        b"attention_mask=mask)", b"attention_mask=mask, use_reentrant=False)"
    )


# --- mode, atomicity, links ------------------------------------------------------------


@pytest.mark.parametrize("mode", [0o755, 0o640, 0o600, 0o444])
def test_fix_keeps_the_file_mode(cli, make_project, mode):
    root = make_project({"m.py": SIMPLE}, pyproject=PYPROJECT)
    (root / "m.py").chmod(mode)
    try:
        fix(cli, root, "m.py")
        assert stat.S_IMODE((root / "m.py").stat().st_mode) == mode
        assert (root / "m.py").read_text() == SIMPLE_FIXED
    finally:
        (root / "m.py").chmod(0o644)


def test_fix_replaces_the_file_and_leaves_no_temporary_files(cli, make_project):
    root = make_project({"pkg/a.py": SIMPLE, "pkg/b.py": SIMPLE, "c.py": SIMPLE}, pyproject=PYPROJECT)
    before = tree(root)
    inode = (root / "pkg" / "a.py").stat().st_ino
    assert fix(cli, root, ".").exit_code == 0
    assert tree(root) == before
    # A new file took the old one's name (os.replace), rather than the old one being rewritten.
    assert (root / "pkg" / "a.py").stat().st_ino != inode
    assert (root / "pkg" / "a.py").read_text() == SIMPLE_FIXED


def test_fix_goes_through_a_temporary_file_and_os_replace(cli, make_project, monkeypatch):
    root = make_project({"m.py": SIMPLE}, pyproject=PYPROJECT)
    replaced: list[tuple[str, str]] = []
    real_replace = os.replace

    def spy(source, destination):
        replaced.append((str(source), str(destination)))
        # At the moment of the rename the target still holds the old text, and the new one is
        # complete in the temporary file.
        assert Path(destination).read_text() == SIMPLE
        assert Path(source).read_text() == SIMPLE_FIXED
        return real_replace(source, destination)

    monkeypatch.setattr(ckptlint.writer.os, "replace", spy)
    fix(cli, root, "m.py")
    [(temporary, target)] = replaced
    assert Path(target) == (root / "m.py").resolve()
    assert Path(temporary).parent == (root / "m.py").resolve().parent
    assert Path(temporary).name.startswith(".m.py.") and temporary.endswith(".ckptlint-tmp")
    assert not Path(temporary).exists()


def test_fix_through_a_symlink_updates_the_target_and_keeps_the_link(cli, make_project):
    root = make_project({"real/model.py": SIMPLE}, pyproject=PYPROJECT)
    (root / "link.py").symlink_to("real/model.py")
    fix(cli, root, "link.py")
    assert (root / "link.py").is_symlink()
    assert os.readlink(root / "link.py") == "real/model.py"
    assert (root / "real" / "model.py").read_text() == SIMPLE_FIXED


def test_unwritable_directory_is_reported_and_the_file_kept(cli, make_project, monkeypatch):
    root = make_project({"m.py": SIMPLE, "other.py": SIMPLE}, pyproject=PYPROJECT)

    def refuse(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(ckptlint.writer.tempfile, "mkstemp", refuse)
    result = fix(cli, root, "m.py", "other.py")
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [
        "error: m.py: could not write fixes: Permission denied",
        "error: other.py: could not write fixes: Permission denied",
    ]
    assert (root / "m.py").read_text() == SIMPLE
    # Nothing claimed as fixed: all four findings remain.
    assert result.stdout.splitlines()[-1] == "Found 4 findings (2 errors, 2 warnings)."


# --- never over someone else's change --------------------------------------------------


def test_replace_atomically_refuses_a_file_that_changed(tmp_path):
    path = tmp_path / "m.py"
    path.write_bytes(b"theirs\n")
    with pytest.raises(ChangedOnDisk, match="changed on disk while ckptlint was running; not overwritten"):
        replace_atomically(path, b"fixed\n", expected=b"ours\n")
    assert path.read_bytes() == b"theirs\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.py"]


def test_replace_atomically_writes_and_keeps_mode(tmp_path):
    path = tmp_path / "m.py"
    path.write_bytes(b"old\r\n")
    path.chmod(0o750)
    replace_atomically(path, b"new\r\n", expected=b"old\r\n")
    assert path.read_bytes() == b"new\r\n"
    assert stat.S_IMODE(path.stat().st_mode) == 0o750
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.py"]


def test_replace_atomically_cleans_up_when_writing_fails(tmp_path, monkeypatch):
    path = tmp_path / "m.py"
    path.write_bytes(b"old\n")

    def full_disk(descriptor):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(ckptlint.writer.os, "fsync", full_disk)
    with pytest.raises(OSError, match="No space left on device"):
        replace_atomically(path, b"new\n", expected=b"old\n")
    assert path.read_bytes() == b"old\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.py"]


def test_replace_atomically_through_a_symlink(tmp_path):
    (tmp_path / "real.py").write_bytes(b"old\n")
    (tmp_path / "link.py").symlink_to("real.py")
    replace_atomically(tmp_path / "link.py", b"new\n", expected=b"old\n")
    assert (tmp_path / "link.py").is_symlink()
    assert (tmp_path / "real.py").read_bytes() == b"new\n"


def test_a_file_changed_during_the_run_is_not_overwritten(cli, make_project, monkeypatch):
    root = make_project({"a.py": SIMPLE, "b.py": SIMPLE}, pyproject=PYPROJECT)
    concurrent = SIMPLE + "# edited in the editor meanwhile\n"
    original = ckptlint.runner.check_decoded

    def edit_meanwhile(decoded, path, display, settings, options, project=None):
        result = original(decoded, path, display, settings, options, project)
        if Path(path).name == "a.py":
            Path(path).write_text(concurrent)  # after ckptlint read it, before it writes
        return result

    monkeypatch.setattr(ckptlint.runner, "check_decoded", edit_meanwhile)
    result = fix(cli, root, ".")
    assert result.exit_code == 2
    assert result.stderr.splitlines() == ["error: a.py: changed on disk while ckptlint was running; not overwritten"]
    assert (root / "a.py").read_text() == concurrent
    assert (root / "b.py").read_text() == SIMPLE_FIXED
    # Only b.py's two fixes are counted; a.py's findings are still there.
    assert result.stdout.splitlines()[-1] == "Found 4 findings (2 fixed, 2 remaining: 1 error, 1 warning)."
    assert sorted(p.name for p in root.iterdir()) == ["a.py", "b.py", "pyproject.toml"]


def test_fix_that_the_encoding_cannot_hold_is_not_written(cli, make_project, monkeypatch):
    before = source("latin-1").encode("latin-1")
    root = make_project({"m.py": before}, pyproject=PYPROJECT)
    original = ckptlint.runner.fix_text

    def fix_with_a_euro(text, *args, **kwargs):
        outcome = original(text, *args, **kwargs)
        return outcome.__class__(outcome.text.replace("# two", "# two \u20ac"), outcome.applied, outcome.remaining, outcome.error)

    monkeypatch.setattr(ckptlint.runner, "fix_text", fix_with_a_euro)
    result = fix(cli, root, "m.py")
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [
        "error: m.py: fixes not written: the fixed code cannot be encoded as iso-8859-1 (ordinal not in range(256))"
    ]
    assert (root / "m.py").read_bytes() == before


# --- idempotence and --diff ------------------------------------------------------------


@pytest.mark.parametrize("newline", ["\n", "\r\n"])
def test_second_fix_is_a_no_op(cli, make_project, newline):
    root = make_project({"m.py": source("latin-1", newline).encode("latin-1")}, pyproject=PYPROJECT)
    fix(cli, root, "m.py")
    after_first = (root / "m.py").read_bytes()
    stamp = (root / "m.py").stat()
    second = fix(cli, root, "m.py")
    assert (second.exit_code, second.stdout) == (0, "All checks passed!\n")
    assert (root / "m.py").read_bytes() == after_first
    assert (root / "m.py").stat().st_mtime_ns == stamp.st_mtime_ns
    assert (root / "m.py").stat().st_ino == stamp.st_ino  # not even rewritten


def test_diff_writes_nothing(cli, make_project):
    before = codecs.BOM_UTF8 + source("utf-8", "\r\n").encode()
    root = make_project({"m.py": before}, pyproject=PYPROJECT)
    stamp = (root / "m.py").stat()
    files = tree(root)
    result = cli(["--diff", "--unsafe-fixes", "--no-cache", "m.py"], cwd=root)
    assert result.exit_code == 1
    # (click's result.stdout turns \r\n into \n; the bytes are what a terminal gets.)
    assert b"+    h = checkpoint(self.layer,  h, use_reentrant=False)  # one\r\n" in result.stdout_bytes
    assert b"+        attention_mask=mask, use_reentrant=False)  # two\r\n" in result.stdout_bytes
    assert (root / "m.py").read_bytes() == before
    assert (root / "m.py").stat().st_mtime_ns == stamp.st_mtime_ns
    assert tree(root) == files


def test_files_that_cannot_be_read_are_not_written(cli, make_project):
    files = {
        "broken.py": b"from torch.utils.checkpoint import checkpoint\ncheckpoint(f, x\n",
        "latin.py": b"from torch.utils.checkpoint import checkpoint\ns = 'caf\xe9'\ncheckpoint(f, x)\n",
        "ok.py": SIMPLE.encode(),
    }
    root = make_project(files, pyproject=PYPROJECT)
    result = fix(cli, root, ".")
    assert result.exit_code == 1
    assert [line.split(":", 3)[:3] + [line.split()[1]] for line in result.stdout.splitlines()[:2]] == [
        ["broken.py", "2", "11", "CKPT900"],
        ["latin.py", "1", "1", "CKPT901"],
    ]
    assert result.stdout.splitlines()[-1] == "Found 4 errors (2 fixed, 2 remaining)."
    for name in ("broken.py", "latin.py"):
        assert (root / name).read_bytes() == files[name]
    assert (root / "ok.py").read_text() == SIMPLE_FIXED
