"""A remembered walk is used only while nothing it depended on changed: a file added or
removed in any directory walked, a .gitignore added, edited or removed."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

import ckptlint.walk_cache
from ckptlint.config import DEFAULT_EXCLUDE
from ckptlint.walk_cache import discover_remembered

OLD = time.time_ns() - 60 * 10**9  # outside the window in which a stat is not trusted


def age(root: Path) -> None:
    """Put every modification time in the past, as for a tree not touched in a while."""
    for directory, names, files in os.walk(root):
        for name in files:
            os.utime(os.path.join(directory, name), ns=(OLD, OLD))
        os.utime(directory, ns=(OLD, OLD))


@pytest.fixture
def tree(tmp_path):
    root = tmp_path / "project"
    for relative in ("a.py", "pkg/b.py", "pkg/deep/c.py", "build/gen.py"):
        (root / relative).parent.mkdir(parents=True, exist_ok=True)
        (root / relative).write_text("x = 1\n")
    age(root)
    return root


@pytest.fixture
def walks(monkeypatch):
    """Counts the real walks."""
    calls = []
    original = ckptlint.walk_cache.discover

    def counting(paths, **options):
        calls.append(paths)
        return original(paths, **options)

    monkeypatch.setattr(ckptlint.walk_cache, "discover", counting)
    return calls


def found(root: Path, cache: Path) -> list[str]:
    result = discover_remembered(
        [root], cache_directory=cache, purpose="test", project_root=root, exclude=DEFAULT_EXCLUDE, extend_exclude=()
    )
    return [os.path.relpath(p, root) for p in result.absolute]


def test_an_unchanged_tree_is_not_walked_again(tree, tmp_path, walks):
    assert found(tree, tmp_path / "cache") == ["a.py", "pkg/b.py", "pkg/deep/c.py"]
    assert found(tree, tmp_path / "cache") == ["a.py", "pkg/b.py", "pkg/deep/c.py"]
    assert len(walks) == 1


@pytest.mark.parametrize(
    "change, expected",
    [
        (lambda root: (root / "pkg/deep/new.py").write_text(""), ["a.py", "pkg/b.py", "pkg/deep/c.py", "pkg/deep/new.py"]),
        (lambda root: (root / "pkg/b.py").unlink(), ["a.py", "pkg/deep/c.py"]),
        (lambda root: (root / "pkg/.gitignore").write_text("deep/\n"), ["a.py", "pkg/b.py"]),
        (lambda root: (root / "pkg/deep").rename(root / "pkg/moved"), ["a.py", "pkg/b.py", "pkg/moved/c.py"]),
    ],
    ids=["file added deep down", "file removed", "gitignore added", "directory renamed"],
)
def test_a_change_anywhere_in_the_tree_is_seen(tree, tmp_path, walks, change, expected):
    found(tree, tmp_path / "cache")
    change(tree)
    assert found(tree, tmp_path / "cache") == expected
    assert len(walks) == 2


def test_an_edited_gitignore_is_seen_even_with_its_old_size_and_mtime(tree, tmp_path, walks):
    (tree / ".gitignore").write_text("a.py\n")
    age(tree)
    assert found(tree, tmp_path / "cache") == ["pkg/b.py", "pkg/deep/c.py"]
    (tree / ".gitignore").write_text("b.py\n")
    os.utime(tree / ".gitignore", ns=(OLD, OLD))  # the ctime still moves
    assert found(tree, tmp_path / "cache") == ["a.py", "pkg/deep/c.py"]


def test_other_arguments_walk_again(tree, tmp_path, walks):
    found(tree, tmp_path / "cache")
    result = discover_remembered(
        [tree / "pkg"], cache_directory=tmp_path / "cache", purpose="test", project_root=tree, exclude=(), extend_exclude=()
    )
    assert len(result.paths) == 2
    assert len(walks) == 2


def test_a_walk_of_a_tree_modified_just_now_is_not_remembered(tmp_path, walks):
    root = tmp_path / "fresh"
    root.mkdir()
    (root / "a.py").write_text("")
    found(root, tmp_path / "cache")
    found(root, tmp_path / "cache")
    assert len(walks) == 2


@pytest.mark.parametrize("garbage", [b"", b"{", b'{"arguments": 1}', b"[]"])
def test_a_corrupt_remembered_walk_is_walked_again(tree, tmp_path, walks, garbage):
    found(tree, tmp_path / "cache")
    [remembered] = (tmp_path / "cache").glob("*/walk-*.json")
    remembered.write_bytes(garbage)
    assert found(tree, tmp_path / "cache") == ["a.py", "pkg/b.py", "pkg/deep/c.py"]
    assert len(walks) == 2
