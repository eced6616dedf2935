"""Runs the engine over files: reading, decoding, caching, parallelism, fixing and
writing. The CLI is a shell over `check_paths` and `check_stdin`."""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ckptlint.cache import ResultCache, settings_fingerprint, trusted_stat
from ckptlint.config import Settings
from ckptlint.discovery import INDEXED_SUFFIXES, RACY_WINDOW_NS, display_path, relative_to_root
from ckptlint.engine import (
    add_noqa_text,
    analysis_stopped,
    decode_for_lint,
    fix_text,
    import_rules,
    lint_text,
    reports_unused_noqa,
    unknown_noqa_codes,
    unreadable,
)
from ckptlint.indexing import Projects
from ckptlint.limits import AnalysisLimits
from ckptlint.model.index import ProjectIndex
from ckptlint.model.project.reads import ALL_FACTS, ALL_PATHS
from ckptlint.notebooks import Notebook, NotebookError, places_in_cells, read_notebook
from ckptlint.rule_codes import project_rule_codes
from ckptlint.rule_manifest import RULE_TRIGGERS
from ckptlint.model.syntax.file_kinds import SHELL_SUFFIXES
from ckptlint.recipes import MAX_RECIPE_BYTES, is_recipe_path, may_hold_findings
from ckptlint.source import DecodedSource, SourceTooLarge, content_digest, mentions_any, read_source_bytes
from ckptlint.types import Diagnostic, FileResult, RunResult, fixable
from ckptlint.walk_cache import discover_remembered
from ckptlint.worker_pool import TaskFailure, WorkerPool, workers_for
from ckptlint.writer import ChangedOnDisk, replace_atomically

# Below this many files, or bytes of them, a second worker process costs more than it saves.
PARALLEL_THRESHOLD = 64
PARALLEL_BYTES = 256 << 10


@dataclass(frozen=True)
class RunOptions:
    fix: bool = False  # compute fixes (and write them unless `diff`)
    unsafe_fixes: bool = False
    diff: bool = False  # compute fixes, write nothing
    jobs: int | None = None  # None: the number of cores
    use_cache: bool = True
    limits: AnalysisLimits = AnalysisLimits()

    add_noqa: bool = False  # add `# noqa: CODE` for each finding (and write it)

    @property
    def computes_fixes(self) -> bool:
        return self.fix or self.diff


@dataclass(frozen=True)
class FixedFile:
    """Fixes a worker computed, for the parent to write: a worker can be killed at any
    moment, so it never writes a user's file itself."""

    original: bytes  # what the fixes were computed from: written only over these bytes
    fixed: bytes
    unfixed: FileResult  # the file's result when the fixed bytes cannot be written


def check_decoded(
    decoded: DecodedSource,
    path: Path,
    display: str,
    settings: Settings,
    options: RunOptions,
    project: ProjectIndex | None = None,
) -> tuple[FileResult, FileResult | None]:
    """Lint (and with fixes on, fix in memory) one decoded file. With fixes, also the result
    before any fix (what stands when the fixed text cannot be written)."""
    # A mistyped code in a `# noqa` is a warning, never a failed run (Ruff is silent); where
    # CKPT100 is selected it reports the line directives' instead.
    notices = unknown_noqa_codes(decoded.text, display, in_lines=not reports_unused_noqa(path, settings, decoded.text))
    if options.add_noqa:
        return _with_noqa_added(decoded, path, display, settings, options, project, notices)
    if not options.computes_fixes:
        outcome = lint_text(decoded.text, path, settings, display_path=display, project=project, limits=options.limits)
        result = FileResult(
            display, outcome.diagnostics, internal_errors=outcome.internal_errors, notices=notices, inputs=outcome.inputs,
            hidden=outcome.hidden,
        )
        return result, None
    fixed = fix_text(
        decoded.text,
        path,
        settings,
        unsafe=options.unsafe_fixes,
        display_path=display,
        project=project,
        limits=options.limits,
    )
    changed = fixed.text != decoded.text
    initial = fixed.initial or fixed.remaining
    return (
        FileResult(
            display,
            fixed.remaining.diagnostics,
            fixed.applied,
            source=decoded.text,
            fixed_source=fixed.text if changed else None,
            internal_errors=fixed.remaining.internal_errors + ((fixed.error,) if fixed.error else ()),
            notices=notices,
            inputs=fixed.remaining.inputs,
            hidden=fixed.remaining.hidden,
        ),
        FileResult(
            display, initial.diagnostics, internal_errors=initial.internal_errors, notices=notices, inputs=initial.inputs,
            hidden=initial.hidden,
        ),
    )


def _with_noqa_added(
    decoded: DecodedSource,
    path: Path,
    display: str,
    settings: Settings,
    options: RunOptions,
    project: ProjectIndex | None,
    notices: tuple[str, ...],
) -> tuple[FileResult, FileResult | None]:
    """`--add-noqa` on one file: the result names the findings left without a directive;
    the second one stands when the new text cannot be written."""
    outcome = add_noqa_text(decoded.text, path, settings, display_path=display, project=project, limits=options.limits)
    result = FileResult(
        display, outcome.left, source=decoded.text, fixed_source=outcome.text, internal_errors=outcome.internal_errors,
        notices=notices, added_noqa=outcome.added,
    )
    return result, dataclasses.replace(result, fixed_source=None, added_noqa=0)


def _unreadable_result(path: Path, display: str, problem: Diagnostic, settings: Settings) -> FileResult:
    """A file ckptlint could not read or decode: CKPT901 unless deselected or ignored for it."""
    ignored = settings.ignored_codes_for_path(path)
    if problem.code not in settings.enabled_codes or any(problem.code.startswith(p) for p in ignored):
        return FileResult(display)
    return FileResult(display, (problem,))


# Every finding is reported at a call that turns checkpointing on, and that call (or the
# import it goes through) names one of these.
CHECKPOINTING_WORDS = (b"checkpoint", b"prepare_model_for_kbit_training")


def _too_large(path: Path, display: str, settings: Settings, limits: AnalysisLimits, size: int) -> FileResult:
    """A file over the size limit is never parsed. One that mentions checkpointing is a
    file ckptlint could not check (CKPT900); others could hold no finding anyway."""
    if is_recipe_path(path) or not mentions_any(path, CHECKPOINTING_WORDS):
        return FileResult(display)
    return FileResult(display, analysis_stopped(path, display, settings, limits.describe_size(size, limits.bytes_for(path))))


def check_file(
    path: Path, settings: Settings, options: RunOptions, project: ProjectIndex | None = None
) -> tuple[FileResult, FixedFile | None]:
    """One file's result, and the fixes to write (never written here: `write_fixes`)."""
    display = display_path(path)
    try:
        data = read_source_bytes(path, limit=options.limits.bytes_for(path))
    except SourceTooLarge as error:
        return _too_large(path, display, settings, options.limits, error.size), None
    except OSError as error:
        return _unreadable_result(path, display, unreadable(display, error.strerror or str(error)), settings), None
    shell = path.name.lower().endswith(SHELL_SUFFIXES)
    if is_recipe_path(path) and (len(data) > MAX_RECIPE_BYTES or not may_hold_findings(data, shell=shell)):
        return FileResult(display), None  # data, not a training recipe: nothing to say about it
    decoded, problem = decode_for_lint(data, display)
    if problem is not None:
        return _unreadable_result(path, display, problem, settings), None
    result, unfixed = check_decoded(decoded, path, display, settings, options, project)
    if result.fixed_source is None or options.diff or unfixed is None:
        return result, None
    try:
        fixed = decoded.encode(result.fixed_source)
    except UnicodeEncodeError as error:
        message = f"{display}: fixes not written: the fixed code cannot be encoded as {decoded.encoding} ({error.reason})"
        return dataclasses.replace(unfixed, internal_errors=unfixed.internal_errors + (message,)), None
    return result, FixedFile(data, fixed, unfixed)


def write_fixes(path: Path, result: FileResult, fixed: FixedFile) -> FileResult:
    """Write a file's fixes atomically; when that cannot be done, the file keeps every
    finding it had before the fixes, and the reason is an error of the run."""
    try:
        replace_atomically(path, fixed.fixed, expected=fixed.original)
    except (ChangedOnDisk, OSError) as error:
        message = str(error) if isinstance(error, ChangedOnDisk) else f"{result.path}: could not write fixes: {error.strerror or error}"
        unfixed = fixed.unfixed
        return dataclasses.replace(unfixed, internal_errors=unfixed.internal_errors + (message,))
    return result


def stopped_result(
    path: Path, display: str, settings: Settings, limits: AnalysisLimits, failure: TaskFailure
) -> FileResult:
    """The result of a file whose worker did not return: CKPT900 with the limit it hit,
    or (a bug of ours) an internal error with the traceback."""
    if failure.kind == "error":
        return FileResult(display, internal_errors=(f"{display}: internal error:\n{failure.detail}",))
    reason = {"time": limits.describe_time(), "memory": limits.describe_memory()}.get(
        failure.kind, f"the analysis crashed: {failure.detail}"
    )
    return FileResult(display, analysis_stopped(path, display, settings, reason))


# The indexes of the run's projects, installed once per worker process (an index can be
# large; sending it with every file would cost more than linting).
_WORKER_INDEXES: dict[Path, ProjectIndex] = {}


def _install_indexes(indexes: dict[Path, ProjectIndex]) -> None:
    _WORKER_INDEXES.update(indexes)


def _check_one(args: tuple[Path, Settings, RunOptions, Path]) -> tuple[FileResult, FixedFile | None]:
    path, settings, options, root = args
    index = _WORKER_INDEXES.get(root)
    if index is None or index.read_log is None:
        return check_file(path, settings, options, index)
    index.begin_reads()
    result, fixed = check_file(path, settings, options, index)
    return dataclasses.replace(result, reads=index.end_reads()), fixed


def analyse_in_workers(
    work: Sequence[tuple[Path, Settings, RunOptions, Path]],
    indexes: dict[Path, ProjectIndex],
    options: RunOptions,
) -> list[FileResult]:
    """Each file's analysis in a worker process, under the per-file limits; the parent
    writes the fixes, in order."""
    if not work:
        return []
    sizes = [_size(path) for path, _, _, _ in work]
    with WorkerPool(
        _check_one,
        workers=workers_for(sizes, options.jobs, min_files=PARALLEL_THRESHOLD, min_bytes=PARALLEL_BYTES),
        limits=options.limits.for_workers,
        initializer=_install_indexes,
        initargs=(indexes,),
    ) as pool:
        outcomes = pool.map(work, weights=sizes)  # the largest files first: none left for last
    results = []
    for (path, file_settings, _, _), outcome in zip(work, outcomes):
        if isinstance(outcome, TaskFailure):
            results.append(stopped_result(path, display_path(path), file_settings, options.limits, outcome))
            continue
        result, fixed = outcome
        results.append(write_fixes(path, result, fixed) if fixed is not None else result)
    return results


def _size(path: Path) -> int:
    try:
        return os.stat(path).st_size
    except OSError:
        return 0  # `check_file` reports it


# From this many changed files on, some will need the rules: not worth reading them first.
_CHANGED_FILES_SURELY_LINTED = 16


def import_rules_for(changed: Sequence[str]) -> None:
    """`import_rules`, where linting the files the index is extracting again (those that
    changed: they are the ones linted next) will need them. With many files, libcst too:
    some will surely be analysed, by several workers. With a few of which one names a
    rule's trigger word, the rules only: whether the rules' gates let the file through to
    libcst is known once its facts are (a model file that only names
    `gradient_checkpointing` is never parsed with libcst), and the extraction takes less
    time than importing libcst, so the one worker that may need it loses little importing
    it itself. Where only files without a trigger word changed (a warm run after an edit
    elsewhere), neither is imported."""
    if len(changed) >= _CHANGED_FILES_SURELY_LINTED:
        import_rules()
    elif any(_names_a_trigger(path) for path in changed):
        import_rules(with_libcst=False)


def _names_a_trigger(path: str) -> bool:
    try:
        with open(path, "rb") as file:
            data = file.read()
    except OSError:
        return False
    return any(word.encode() in data for word in RULE_TRIGGERS)


def projects_for_run(settings: Settings, options: RunOptions) -> Projects:
    return Projects(
        settings,
        use_cache=options.use_cache,
        jobs=options.jobs,
        build=bool(project_rule_codes() & settings.enabled_codes),
        limits=options.limits,
        while_indexing=import_rules_for,
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
    cache = ResultCache(settings) if options.use_cache else None
    trusted_before = time.time_ns() - RACY_WINDOW_NS
    pending: list[_Pending] = []
    keys: dict[tuple[Path, bool], str] = {}  # (project root, Python?) -> what a key adds to a file's content
    for text_path, absolute in zip(found.paths, found.absolute):
        root = projects.root_of(absolute)
        file_settings = projects.settings_for(root)
        index = projects.index_for(root)
        if cache is None:
            pending.append(_Pending(Path(text_path), file_settings, root))
            continue
        is_python = absolute.endswith(INDEXED_SUFFIXES)
        # The index has just checked a Python file (by stat, or by reading it): its digest is current.
        content = index.digests.get(relative_to_root(absolute, root)) if is_python and index.digests else None
        stat: list[int] | None = None
        try:
            if content is None:
                stat = trusted_stat(os.stat(absolute), trusted_before)
                content = cache.recorded_content(absolute, stat) or content_digest(
                    read_source_bytes(absolute, limit=options.limits.bytes_for(absolute))
                )
        except SourceTooLarge as error:
            # Never parsed, never handed to a worker: silent unless it mentions checkpointing.
            results.append(_too_large(Path(text_path), display_path(absolute), file_settings, options.limits, error.size))
            continue
        except OSError:
            pending.append(_Pending(Path(text_path), file_settings, root))  # check_file reports it
            continue
        revision = index.revision if is_python else None
        if (root, is_python) not in keys:
            # A Python result depends on what its analysis read of the index (checked
            # against `revision`), or else on all the index knows; a launch script's on the
            # directory its relative paths are looked up from, a recipe's on the whole index
            # too (CKPT008: whether the project's code applies a DeepSpeed config's section).
            context = ("reads" if revision is not None else index.fingerprint) if is_python else f"{os.getcwd()}:{index.fingerprint}"
            keys[root, is_python] = f"{settings_fingerprint(file_settings)}:{options.limits.fingerprint()}:{context}"
        key = f"{content}:{keys[root, is_python]}"
        cached, cached_hidden = cache.get(
            absolute, key, trusted_before, None if revision is None else revision.unchanged_since
        ) or (None, ())
        if cached is None or (options.computes_fixes and any(fixable(d, options.unsafe_fixes) for d in cached)) or (
            options.add_noqa and cached
        ):
            if stat is None:
                try:
                    stat = trusted_stat(os.stat(absolute), trusted_before)
                except OSError:
                    pass
            pending.append(_Pending(Path(text_path), file_settings, root, key, content, stat))
        else:
            # Nothing to fix: a cached result is what linting the file again would give.
            display = display_path(absolute)
            results.append(FileResult(display, tuple(dataclasses.replace(d, path=display) for d in cached), hidden=cached_hidden))

    work = [(item.path, item.settings, options, item.root) for item in pending]
    analysed = analyse_in_workers(work, projects.indexes(), options)
    for item, result in zip(pending, analysed):
        results.append(result)
        # `--add-noqa` results hold the findings left without a directive, not the file's.
        if cache is not None and item.key is not None and result.fixed_source is None and _cacheable(result) and not options.add_noqa:
            cache.put(
                os.path.abspath(item.path),
                item.key,
                result.diagnostics,
                content=item.content,
                stat=item.stat,
                inputs=result.inputs,
                trusted_before=trusted_before,
                hidden=result.hidden,
                reads=_stamped_reads(result, item, projects),
            )
    warnings = [warning] if cache is not None and (warning := cache.save()) else []
    warnings.extend(error for index in projects.indexes().values() for error in index.extraction_errors)
    # Nested projects' declaration warnings (the run's own are the settings' notices).
    warnings.extend(n for nested in projects.nested_settings() for n in nested.notices)
    if not found.paths and not found.problems:
        # As Ruff's "No Python files found": a run that checked nothing must not read as clean.
        warnings.append(
            f"no files to lint under {', '.join(map(str, paths))} (`include`: {', '.join(settings.include)})"
        )
    results = [_places_in_cells(result, projects) for result in results]
    return RunResult(tuple(sorted(results, key=lambda r: r.path)), warnings=tuple(warnings))


def _places_in_cells(result: FileResult, projects: Projects) -> FileResult:
    """Places in notebooks that messages name from the project's facts (rows of the joined
    code) as cells and rows, read from the notebooks as they are now."""
    if not any(".ipynb:" in d.message for d in result.diagnostics):
        return result
    root = projects.root_of(os.path.abspath(result.path))
    notebooks: dict[str, Notebook | None] = {}

    def notebook_at(relative: str) -> Notebook | None:
        if relative not in notebooks:
            try:
                notebooks[relative] = read_notebook(read_source_bytes(root / relative).decode("utf-8"))
            except (OSError, UnicodeDecodeError, NotebookError):
                notebooks[relative] = None
        return notebooks[relative]

    diagnostics = tuple(dataclasses.replace(d, message=places_in_cells(d.message, notebook_at)) for d in result.diagnostics)
    return dataclasses.replace(result, diagnostics=diagnostics)


@dataclass(frozen=True)
class _Pending:
    """A file to analyse; with the cache, the key its result is stored under, its content
    digest and its (trusted) stat."""

    path: Path
    settings: Settings
    root: Path
    key: str | None = None
    content: str | None = None
    stat: list[int] | None = None


def _stamped_reads(result: FileResult, item: _Pending, projects: Projects) -> tuple[str, tuple[str, ...]] | None:
    """The revision of the index a Python result was computed at and the keys it read."""
    revision = projects.index_for(item.root).revision
    if revision is None:
        return None
    # A worker stopped at a limit recorded nothing: its result rests on every file's
    # exported facts, as every result did with the whole-project fingerprint.
    return revision.stamp, result.reads if result.reads is not None else (ALL_FACTS, ALL_PATHS)


def _cacheable(result: FileResult) -> bool:
    return not result.internal_errors and not result.notices


def check_stdin(data: bytes, filename: str | None, settings: Settings, options: RunOptions) -> RunResult:
    """Standard input, analysed in a worker process under the per-file limits like a file."""
    display = filename or "-"
    path = Path(filename).absolute() if filename else settings.project_root / "-"
    limit = options.limits.bytes_for(filename or "-")
    if len(data) > limit:
        if any(word in data for word in CHECKPOINTING_WORDS):
            reason = options.limits.describe_size(len(data), limit)
            return RunResult((FileResult(display, analysis_stopped(path, display, settings, reason)),))
        return RunResult((FileResult(display),))
    decoded, problem = decode_for_lint(data, display)
    if problem is not None:
        return RunResult((_unreadable_result(path, display, problem, settings),))
    projects = projects_for_run(settings, options)
    root = projects.root_of(path)
    file_settings = projects.settings_for(root)
    with WorkerPool(
        _check_decoded_here,
        workers=1,
        limits=options.limits.for_workers,
        initializer=_install_indexes,
        initargs=({root: projects.index_for(root)},),
    ) as pool:
        [outcome] = pool.map([(decoded, path, display, file_settings, options, root)])
    if isinstance(outcome, TaskFailure):
        return RunResult((stopped_result(path, display, file_settings, options.limits, outcome),))
    return RunResult((outcome,))


def _check_decoded_here(args: tuple[DecodedSource, Path, str, Settings, RunOptions, Path]) -> FileResult:
    decoded, path, display, settings, options, root = args
    return check_decoded(decoded, path, display, settings, options, _WORKER_INDEXES.get(root))[0]
