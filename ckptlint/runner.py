"""Runs the engine over files: reading, decoding, caching, parallelism, fixing and
writing. The CLI is a shell over `check_paths` and `check_stdin`."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ckptlint.cache import ResultCache, content_digest, settings_fingerprint
from ckptlint.config import Settings
from ckptlint.discovery import PYTHON_SUFFIXES, display_path, relative_to_root
from ckptlint.engine import decode_for_lint, fix_text, lint_text, unknown_noqa_codes, unreadable
from ckptlint.indexing import Projects
from ckptlint.project import ProjectIndex
from ckptlint.registry import project_rule_codes
from ckptlint.recipes import MAX_RECIPE_BYTES, SHELL_SUFFIXES, is_recipe_path, may_hold_findings
from ckptlint.source import DecodedSource, read_source_bytes
from ckptlint.types import Diagnostic, FileResult, RunResult
from ckptlint.walk_cache import discover_remembered
from ckptlint.writer import ChangedOnDisk, replace_atomically

# Below this many files a process pool costs more than it saves.
PARALLEL_THRESHOLD = 64
# Larger files are skipped with a warning: they are generated (tables, protobufs), and
# CPython's parser alone needs about 120 bytes of memory per byte of source (a 63 MB file:
# 7.5 GB and 107 s).
MAX_FILE_BYTES = 16 << 20


def too_large(display: str, size: int) -> FileResult:
    return FileResult(
        display,
        skipped=True,
        notices=(
            f"{display}: skipped: {size / (1 << 20):.1f} MiB is larger than the {MAX_FILE_BYTES >> 20} MiB "
            "ckptlint analyses (generated code?); exclude it to silence this warning",
        ),
    )


@dataclass(frozen=True)
class RunOptions:
    fix: bool = False  # compute fixes (and write them unless `diff`)
    unsafe_fixes: bool = False
    diff: bool = False  # compute fixes, write nothing
    jobs: int | None = None  # None: the number of cores
    use_cache: bool = True

    @property
    def computes_fixes(self) -> bool:
        return self.fix or self.diff


def check_decoded(
    decoded: DecodedSource,
    path: Path,
    display: str,
    settings: Settings,
    options: RunOptions,
    project: ProjectIndex | None = None,
) -> FileResult:
    """Lint (and with fixes on, fix in memory) one decoded file."""
    errors = unknown_noqa_codes(decoded.text, display)
    if not options.computes_fixes:
        outcome = lint_text(decoded.text, path, settings, display_path=display, project=project)
        return FileResult(display, outcome.diagnostics, internal_errors=outcome.internal_errors, errors=errors)
    fixed = fix_text(decoded.text, path, settings, unsafe=options.unsafe_fixes, display_path=display, project=project)
    changed = fixed.text != decoded.text
    return FileResult(
        display,
        fixed.remaining.diagnostics,
        fixed.applied,
        source=decoded.text,
        fixed_source=fixed.text if changed else None,
        internal_errors=fixed.remaining.internal_errors + ((fixed.error,) if fixed.error else ()),
        errors=errors,
    )


def _unreadable_result(path: Path, display: str, problem: Diagnostic, settings: Settings) -> FileResult:
    """A file ckptlint could not read or decode: CKPT901 unless deselected or ignored for it."""
    ignored = settings.ignored_codes_for_path(path)
    if problem.code not in settings.enabled_codes or any(problem.code.startswith(p) for p in ignored):
        return FileResult(display)
    return FileResult(display, (problem,))


def check_file(path: Path, settings: Settings, options: RunOptions, project: ProjectIndex | None = None) -> FileResult:
    display = display_path(path)
    try:
        data = read_source_bytes(path)
    except OSError as error:
        return _unreadable_result(path, display, unreadable(display, error.strerror or str(error)), settings)
    shell = path.name.lower().endswith(SHELL_SUFFIXES)
    if is_recipe_path(path) and (len(data) > MAX_RECIPE_BYTES or not may_hold_findings(data, shell=shell)):
        return FileResult(display)  # data, not a training recipe: nothing to say about it
    if len(data) > MAX_FILE_BYTES:
        return too_large(display, len(data))
    decoded, problem = decode_for_lint(data, display)
    if problem is not None:
        return _unreadable_result(path, display, problem, settings)
    result = check_decoded(decoded, path, display, settings, options, project)
    if result.fixed_source is None or options.diff:
        return result
    try:
        replace_atomically(path, decoded.encode(result.fixed_source), expected=data)
    except (ChangedOnDisk, OSError, UnicodeEncodeError) as error:
        if isinstance(error, ChangedOnDisk):
            message = str(error)
        elif isinstance(error, UnicodeEncodeError):
            message = f"{display}: fixes not written: the fixed code cannot be encoded as {decoded.encoding} ({error.reason})"
        else:
            message = f"{display}: could not write fixes: {error.strerror or error}"
        # Nothing was written: the file still has every finding it had before the fixes.
        unfixed = check_decoded(
            decoded, path, display, settings, dataclasses.replace(options, fix=False, diff=False), project
        )
        return dataclasses.replace(unfixed, internal_errors=unfixed.internal_errors + (message,))
    return result


# The indexes of the run's projects, installed once per worker process (an index can be
# large; sending it with every file would cost more than linting).
_WORKER_INDEXES: dict[Path, ProjectIndex] = {}


def _install_indexes(indexes: dict[Path, ProjectIndex]) -> None:
    _WORKER_INDEXES.update(indexes)


def _check_one(args: tuple[Path, Settings, RunOptions, Path]) -> FileResult:
    path, settings, options, root = args
    return check_file(path, settings, options, _WORKER_INDEXES.get(root))


def projects_for_run(settings: Settings, options: RunOptions) -> Projects:
    return Projects(
        settings,
        use_cache=options.use_cache and not options.computes_fixes,
        jobs=options.jobs,
        build=bool(project_rule_codes() & settings.enabled_codes),
    )


def check_paths(
    paths: Sequence[Path], settings: Settings, options: RunOptions, *, force_exclude: bool = False
) -> RunResult:
    found = discover_remembered(
        paths,
        cache_directory=settings.cache_directory if options.use_cache else None,
        purpose="run",
        project_root=settings.project_root,
        exclude=settings.exclude,
        extend_exclude=settings.extend_exclude,
        respect_gitignore=settings.respect_gitignore,
        force_exclude=force_exclude,
        include=settings.include,
    )
    results: list[FileResult] = [
        _unreadable_result(p, display_path(p), unreadable(display_path(p), reason), settings)
        for p, reason in found.problems
    ]
    projects = projects_for_run(settings, options)
    projects.run_files = tuple(zip(found.paths, found.absolute))
    projects.listings = found.listings
    cache = ResultCache(settings) if options.use_cache and not options.computes_fixes else None
    pending: list[tuple[Path, Settings, Path, str | None]] = []
    keys: dict[Path, str] = {}  # project root -> the part of a cache key shared by its files
    for text_path, absolute in zip(found.paths, found.absolute):
        root = projects.root_of(absolute)
        file_settings = projects.settings_for(root)
        index = projects.index_for(root)
        if cache is None or not absolute.endswith(PYTHON_SUFFIXES):
            # Recipes are cheap to read, and a launch script's findings depend on the files
            # it names: only Python results are cached.
            pending.append((Path(text_path), file_settings, root, None))
            continue
        # The index has just checked the file (by stat, or by reading it): its digest is current.
        digest = index.digests.get(relative_to_root(absolute, root)) if index.digests else None
        if digest is None:
            try:
                digest = content_digest(read_source_bytes(absolute))
            except OSError:
                pending.append((Path(text_path), file_settings, root, None))  # check_file reports it
                continue
        if root not in keys:
            keys[root] = f"{settings_fingerprint(file_settings)}:{index.fingerprint}"
        # A result depends on the file, its project's settings, and what the index knows.
        key = f"{digest}:{keys[root]}"
        cached = cache.get(absolute, key)
        if cached is None:
            pending.append((Path(text_path), file_settings, root, key))
        else:
            display = display_path(absolute)
            results.append(FileResult(display, tuple(dataclasses.replace(d, path=display) for d in cached)))

    jobs = options.jobs or os.cpu_count() or 1
    indexes = projects.indexes()
    work = [(path, file_settings, options, root) for path, file_settings, root, _ in pending]
    if jobs > 1 and len(work) >= PARALLEL_THRESHOLD:
        from concurrent.futures import ProcessPoolExecutor  # only for large runs (10 ms to import)

        pool = ProcessPoolExecutor(max_workers=jobs, initializer=_install_indexes, initargs=(indexes,))
        try:
            fresh = list(pool.map(_check_one, work, chunksize=max(1, len(work) // (jobs * 8))))
        finally:
            # On an interrupt, drop the queued work: the workers finish what they hold (each
            # write is atomic) and exit, rather than run on as orphans writing files.
            pool.shutdown(wait=True, cancel_futures=True)
    else:
        fresh = [check_file(path, file_settings, options, indexes.get(root)) for path, file_settings, _, root in work]

    for (path, _, _, digest), result in zip(pending, fresh):
        results.append(result)
        if cache is not None and digest is not None and not result.internal_errors and not result.notices and not result.errors:
            cache.put(os.path.abspath(path), digest, result.diagnostics)
    warning = cache.save() if cache is not None else None
    return RunResult(tuple(sorted(results, key=lambda r: r.path)), warnings=(warning,) if warning else ())


def check_stdin(data: bytes, filename: str | None, settings: Settings, options: RunOptions) -> RunResult:
    display = filename or "-"
    path = Path(filename).absolute() if filename else settings.project_root / "-"
    if len(data) > MAX_FILE_BYTES:
        return RunResult((too_large(display, len(data)),))
    decoded, problem = decode_for_lint(data, display)
    if problem is not None:
        return RunResult((_unreadable_result(path, display, problem, settings),))
    projects = projects_for_run(settings, options)
    root = projects.root_of(path)
    return RunResult(
        (check_decoded(decoded, path, display, projects.settings_for(root), options, projects.index_for(root)),)
    )
