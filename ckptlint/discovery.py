"""Which files to lint: walk the given paths, honour .gitignore files, `exclude` and
`extend-exclude`, never follow a directory link twice (symlink loops), and return a sorted,
de-duplicated list.

Paths named explicitly are linted even when excluded, unless `--force-exclude` is given
(pre-commit passes staged files by name, so its hook uses it). A directory named explicitly
is walked even when excluded; inside it, only the patterns that do not exclude the directory
itself apply (as in Ruff and ripgrep).
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from ckptlint.model.syntax.file_kinds import CONFIGURATION_SUFFIXES

PYTHON_SUFFIXES = (".py", ".pyi")
PYTHON_INCLUDE = ("*.py", "*.pyi")
# Files whose code the project index reads: Python sources and Jupyter notebooks.
INDEXED_SUFFIXES = (*PYTHON_SUFFIXES, ".ipynb")
INDEXED_INCLUDE = (*PYTHON_INCLUDE, "*.ipynb")
# Configuration files the index also reads (`ckptlint.model.syntax.file_kinds`).
CONFIGURATION_INCLUDE = tuple(f"*{suffix}" for suffix in CONFIGURATION_SUFFIXES)

# A path relative to the project root as its parts; None for a path outside the root.
Parts = tuple[str, ...]
# A pattern of one .gitignore: (depth of the directory holding the file, pattern index).
PatternKey = tuple[int, int]


@dataclass(frozen=True)
class Discovered:
    # The files found, as found (under a relative path given, relative), sorted like paths.
    paths: tuple[str, ...]
    # Paths that could not be read as directories or files: (path, reason).
    problems: tuple[tuple[Path, str], ...]
    # The absolute path of each of `paths`, in the same order.
    absolute: tuple[str, ...]
    # The names in each directory walked (by absolute path): project markers are looked
    # up there instead of asking the file system again.
    listings: dict[str, frozenset[str]] = field(default_factory=dict)
    # What the result depends on: the stat of every directory listed and every path named,
    # and of every .gitignore looked for (None: there was none). Unchanged, the walk would
    # find the same files (`ckptlint.walk_cache`).
    depends_on: dict[str, list[int] | None] = field(default_factory=dict)

    @property
    def files(self) -> tuple[Path, ...]:
        return tuple(map(Path, self.paths))


# A file or directory modified this close to a run's start may change again within the same
# timestamp tick after it was read: its stat is not trusted to tell it unchanged later (git's
# "racily clean" rule).
RACY_WINDOW_NS = 2_000_000_000


def stat_key(status: os.stat_result) -> list[int]:
    """What tells a file or directory changed: an edit changes mtime and ctime (ctime even
    when the mtime is put back), an added or removed entry a directory's."""
    return [status.st_mtime_ns, status.st_size, status.st_ino, status.st_ctime_ns]


@lru_cache(maxsize=512)
def _spec(patterns: tuple[str, ...]) -> _Matcher:
    return _Matcher(patterns)


class _Matcher:
    """gitignore-style patterns (pathspec). Without a negated pattern (the usual case),
    the patterns are tested as one regular expression: pathspec tries each in turn, and
    the walk tests every entry of the tree."""

    def __init__(self, patterns: tuple[str, ...]) -> None:
        if patterns and all(_PLAIN_NAME.fullmatch(p) and p.strip(".") for p in patterns):
            # Plain names (the default excludes): each matches that name at any depth, as a
            # file or a directory, exactly as pathspec's own regex for it; pathspec itself
            # (10 ms to import) is not needed.
            self.spec = None
            self._any = re.compile(f"^(?:.+/)?(?:{'|'.join(map(re.escape, patterns))})(?:/|$)")
            return
        import pathspec

        self.spec = pathspec.GitIgnoreSpec.from_lines(patterns)
        active = [p for p in self.spec.patterns if p.include is not None]
        self._any = None
        if all(p.include and isinstance(getattr(p, "regex", None), re.Pattern) for p in active):
            # pathspec's own group names would repeat in the alternation: made anonymous.
            alternatives = [_NAMED_GROUP.sub("(?:", p.regex.pattern) for p in active]
            self._any = re.compile("|".join(f"(?:{a})" for a in alternatives)) if alternatives else _NOTHING

    def match_file(self, path: str) -> bool:
        if self._any is not None:
            return self._any.match(path) is not None
        return self.spec.match_file(path)


_NAMED_GROUP = re.compile(r"\(\?P<\w+>")
_PLAIN_NAME = re.compile(r"[A-Za-z0-9_.-]+")
_NOTHING = re.compile(r"(?!)")


def matches_any(relative_path: str, patterns: Sequence[str]) -> bool:
    """gitignore-style matching of a '/'-separated path relative to the project root; a
    pattern also matches any path below a matching directory."""
    if not patterns:
        return False
    spec = _spec(tuple(patterns))
    if spec.match_file(relative_path):
        return True
    parts = relative_path.rstrip("/").split("/")
    return any(spec.match_file("/".join(parts[:i]) + "/") for i in range(1, len(parts)))


def absolute_text(path: Path | str) -> str:
    """The absolute path as text; a string that already is absolute is taken as it is (the
    walk's paths are absolute and normalised, and this runs for every file)."""
    return path if isinstance(path, str) and os.path.isabs(path) else os.path.abspath(path)


def display_path(path: Path | str) -> str:
    """How a path is shown: relative to the working directory."""
    text = absolute_text(path)
    directory, _, name = text.rpartition(os.sep)
    try:
        return _display_prefix(directory or os.sep, os.getcwd()) + name
    except ValueError:  # another drive on Windows
        return text


@lru_cache(maxsize=4096)
def _display_prefix(directory: str, cwd: str) -> str:
    relative = os.path.relpath(directory, cwd)
    return "" if relative == os.curdir else relative + os.sep


def relative_to_root(path: Path | str, root: Path) -> str:
    """The '/'-separated path relative to `root`; a path outside the root as it is."""
    text = absolute_text(path)
    prefix = _root_prefix(root)
    if text.startswith(prefix):
        text = text[len(prefix):]
    return text.replace(os.sep, "/") if os.sep != "/" else text


@lru_cache(maxsize=64)
def _root_prefix(root: Path) -> str:
    return os.path.join(os.path.abspath(root), "")


class _GitIgnores:
    """The .gitignore files of the project, each applying below its own directory; a deeper
    file overrides a higher one (so `!keep.py` in `sub/.gitignore` re-includes `sub/keep.py`
    that the root's `*.py` ignored), as in git."""

    def __init__(self, root: Path, enabled: bool) -> None:
        self.root = root
        self.enabled = enabled
        # directory parts -> the .gitignore files that apply inside it, outermost first:
        # (depth of the file's directory, its spec)
        self._chains: dict[Parts, tuple[tuple[int, object], ...]] = {}
        self._filtered: dict[tuple[int, frozenset[PatternKey]], object] = {}  # (id(spec), overridden)
        # Directories the walk listed without a .gitignore in them: not looked up again.
        self.without_ignore_file: set[Parts] = set()
        self.looked_up: dict[str, list[int] | None] = {}  # .gitignore path -> its stat, or None

    def _own(self, directory: Parts):
        ignore_file = os.path.join(self.root, *directory, ".gitignore")
        if directory in self.without_ignore_file:
            self.looked_up[ignore_file] = None
            return None
        try:
            status = os.stat(ignore_file)
            self.looked_up[ignore_file] = stat_key(status)
            if not stat.S_ISREG(status.st_mode):
                return None
            with open(ignore_file, encoding="utf-8", errors="replace") as handle:
                lines = handle.read().splitlines()
        except OSError:
            self.looked_up.setdefault(ignore_file, None)
            return None
        import pathspec

        return pathspec.GitIgnoreSpec.from_lines(lines) if lines else None

    def chain(self, directory: Parts) -> tuple[tuple[int, object], ...]:
        # Built from the longest known parent down (the walk has always seen the parent).
        start = len(directory)
        while start > 0 and directory[:start] not in self._chains:
            start -= 1
        for depth in range(start, len(directory) + 1):
            key = directory[:depth]
            if key not in self._chains:
                inherited = self._chains[key[:-1]] if key else ()
                own = self._own(key)
                self._chains[key] = inherited + ((depth, own),) if own is not None else inherited
        return self._chains[directory]

    def ignores(self, parts: Parts | None, is_dir: bool, overridden: frozenset[PatternKey] = frozenset()) -> bool:
        """Whether git ignores the path itself (its parents are not checked). Patterns in
        `overridden` are skipped."""
        if not self.enabled or not parts:
            return False
        # From the deepest .gitignore up: the first one with a matching pattern decides.
        for depth, spec in reversed(self.chain(parts[:-1])):
            below = "/".join(parts[depth:]) + ("/" if is_dir else "")
            if any(key[0] == depth for key in overridden):
                spec = self._without(spec, depth, overridden)
            include = spec.check_file(below).include
            if include is not None:
                return include
        return False

    def _without(self, spec, depth: int, overridden: frozenset[PatternKey]):
        import pathspec

        key = (id(spec), overridden)  # specs live as long as self._chains: ids are stable
        if key not in self._filtered:
            kept = [p for index, p in enumerate(spec.patterns) if (depth, index) not in overridden]
            self._filtered[key] = pathspec.GitIgnoreSpec(kept)
        return self._filtered[key]

    def ignored_with_parents(self, parts: Parts | None, is_dir: bool) -> bool:
        return parts is not None and any(
            self.ignores(parts[:depth], is_dir or depth < len(parts)) for depth in range(1, len(parts) + 1)
        )

    def patterns_ignoring(self, directory: Parts | None) -> frozenset[PatternKey]:
        """The patterns that ignore `directory` itself, or a directory above it."""
        if not self.enabled or not directory:
            return frozenset()
        found = set()
        for end in range(1, len(directory) + 1):
            for depth, spec in self.chain(directory[: end - 1]):
                below = "/".join(directory[depth:end]) + "/"
                for index, pattern in enumerate(spec.patterns):
                    if pattern.include and pattern.match_file(below) is not None:
                        found.add((depth, index))
        return frozenset(found)


def discover(
    paths: Iterable[Path],
    *,
    project_root: Path,
    exclude: Sequence[str],
    extend_exclude: Sequence[str],
    respect_gitignore: bool = True,
    force_exclude: bool = False,
    include: Sequence[str] = PYTHON_INCLUDE,
) -> Discovered:
    patterns = tuple(exclude) + tuple(extend_exclude)
    included = _inclusion(tuple(include))
    gitignores = _GitIgnores(project_root, respect_gitignore)
    root_text = str(project_root)
    # Keyed by absolute path, so `a.py` and `/project/a.py` are linted once.
    files: dict[str, str] = {}
    problems: dict[str, tuple[Path, str]] = {}
    listings: dict[str, frozenset[str]] = {}
    depends_on: dict[str, list[int] | None] = {}
    visited_directories: set[tuple[int, int]] = set()
    deferred_links: list[tuple[Path, Parts | None, tuple[str, ...], frozenset[PatternKey]]] = []

    def parts_of(path: Path) -> Parts | None:
        """A path named on the command line, relative to the project root (whose path is
        resolved: a link on the way there is resolved too)."""
        plain = path.absolute()
        for candidate in (plain, Path(os.path.realpath(plain.parent)) / plain.name):
            text = str(candidate)
            if text == root_text:
                return ()
            if text.startswith(root_text.rstrip(os.sep) + os.sep):
                return candidate.relative_to(project_root).parts
        return None

    def pattern_path(path: Path, parts: Parts | None, is_dir: bool) -> str:
        text = "/".join(parts) if parts is not None else path.absolute().as_posix()
        return text + "/" if is_dir else text

    def excluded_with_parents(path: Path, parts: Parts | None, is_dir: bool) -> bool:
        if parts == ():
            return False  # the project root itself
        return matches_any(pattern_path(path, parts, is_dir), patterns) or gitignores.ignored_with_parents(
            parts, is_dir
        )

    def walk(root: Path, root_parts: Parts | None, active: tuple[str, ...], overridden: frozenset[PatternKey]) -> None:
        # Depth first in name order, with a stack rather than recursion: no tree is too deep.
        # Only the entries are matched: the walk never enters an excluded directory.
        spec = _spec(active) if active else None
        stack = [(root, root_parts)]
        while stack:
            directory, parts = stack.pop()
            try:
                info = directory.stat()
            except OSError as error:
                problems.setdefault(str(directory.absolute()), (directory, _reason(error)))
                continue
            absolute_directory = os.path.abspath(directory)
            depends_on[absolute_directory] = stat_key(info)
            key = (info.st_dev, info.st_ino)
            if key in visited_directories:
                continue  # a symlink loop, or a second link to a directory already walked
            visited_directories.add(key)
            try:
                entries = list(os.scandir(directory))
            except OSError as error:
                problems.setdefault(str(directory.absolute()), (directory, _reason(error)))
                continue
            names = frozenset(entry.name for entry in entries)
            listings[absolute_directory] = names
            if parts is not None and ".gitignore" not in names:
                gitignores.without_ignore_file.add(parts)
            # What patterns see of the entries: their path relative to the project root, or,
            # outside the project, their absolute path.
            if parts is None:
                prefix = Path(absolute_directory).as_posix() + "/"
            else:
                prefix = "".join(part + "/" for part in parts)
            subdirectories = []
            for entry in entries:
                name = entry.name
                try:
                    is_dir = entry.is_dir()  # follows links; a dangling link is neither
                except OSError:
                    is_dir = False
                relative = prefix + name
                if not is_dir and not included(name, relative):
                    continue
                entry_parts = parts + (name,) if parts is not None else None
                if (spec is not None and spec.match_file(relative + "/" if is_dir else relative)) or (
                    gitignores.enabled and gitignores.ignores(entry_parts, is_dir, overridden)
                ):
                    continue
                if is_dir and _is_link(entry):
                    # Walked after the real directories, so a file reached both ways is linted
                    # under its real path, whatever the order of names.
                    deferred_links.append((Path(entry.path), entry_parts, active, overridden))
                elif is_dir:
                    subdirectories.append((Path(entry.path), entry_parts))
                else:
                    files.setdefault(os.path.join(absolute_directory, name), entry.path)
            # Depth first in name order (files are sorted at the end).
            stack.extend(sorted(subdirectories, key=lambda item: item[0].name, reverse=True))

    for raw in paths:
        path = Path(raw)
        try:
            depends_on[os.path.abspath(path)] = stat_key(path.stat())
        except OSError:
            depends_on[os.path.abspath(path)] = None
        parts = parts_of(path)
        is_dir = path.is_dir()
        excluded = excluded_with_parents(path, parts, is_dir)
        if force_exclude and excluded:
            continue
        if is_dir and excluded:
            # Named on purpose: what excludes the directory itself does not apply inside it.
            where = pattern_path(path, parts, True)
            active = tuple(p for p in patterns if not matches_any(where, (p,)))
            walk(path, parts, active, gitignores.patterns_ignoring(parts))
        elif is_dir:
            walk(path, parts, patterns, frozenset())
        elif path.exists() or path.is_symlink():
            files.setdefault(os.path.abspath(path), os.fspath(path))  # named explicitly: linted whatever its suffix
        else:
            problems.setdefault(str(path.absolute()), (path, "No such file or directory"))
    while deferred_links:
        batch = sorted(deferred_links, key=lambda item: item[0].parts)
        deferred_links.clear()
        for item in batch:
            walk(*item)
    # In the order of the paths' parts, as `Path` sorts.
    ordered = sorted(files.items(), key=lambda item: item[1].split(os.sep))
    return Discovered(
        tuple(path for _, path in ordered),
        tuple(sorted(problems.values())),
        tuple(absolute for absolute, _ in ordered),
        listings,
        {**gitignores.looked_up, **depends_on},
    )


def _inclusion(include: tuple[str, ...]):
    """A test of a file's name and project-relative path against the `include` patterns:
    plain `*.suffix` patterns (the usual case) are a suffix test, anything else is matched
    gitignore-style against the path."""
    suffixes = tuple(p[1:] for p in include if p.startswith("*.") and not any(c in p[1:] for c in "*?[/"))
    others = tuple(p for p in include if p[1:] not in suffixes or not p.startswith("*."))
    spec = _spec(others) if others else None

    def included(name: str, relative_path: str) -> bool:
        return name.endswith(suffixes) or (spec is not None and spec.match_file(relative_path))

    return included


def _is_link(entry: os.DirEntry) -> bool:
    try:
        return entry.is_symlink()
    except OSError:
        return False


def _reason(error: OSError) -> str:
    return error.strerror or str(error)


def repository_root(start: Path, project_root: Path) -> Path:
    """The root of the git repository holding `start` (the nearest directory with a `.git`
    entry: a worktree's or submodule's `.git` file counts), else `project_root`: what
    GitHub annotations and GitLab reports take paths relative to."""
    start = start.resolve()
    for directory in (start, *start.parents):
        if os.path.lexists(os.path.join(directory, ".git")):
            return directory
    return project_root
