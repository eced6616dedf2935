"""The engine: source text in, diagnostics (and fixed text) out. No terminal, no files.

    lint_text(text, path, settings)   -> diagnostics for one file's text (Python, or a
                                         training recipe / launch script: `ckptlint.recipes`)
    fix_text(text, path, settings)    -> fixed text + applied fixes, to a fixed point

Reading, decoding, caching and writing files is `ckptlint.runner`'s.
"""

from __future__ import annotations

import ast
import dataclasses
import re
import sys
import threading
import traceback
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ckptlint import cancellation
from ckptlint.config import Settings
from ckptlint.limits import AnalysisLimits
from ckptlint.model.file_facts.facts import FileFacts, text_digest
from ckptlint.model.index import ProjectIndex
from ckptlint.model.syntax.parsed_text import ParsedText
from ckptlint.notebooks import Notebook, NotebookError, is_notebook_path, read_notebook, top_level_await_only
from ckptlint.parsing import parse_error, parse_module
from ckptlint.recipes import recipe_kind
from ckptlint.noqa_fixes import AddedNoqa, unused_noqa, with_noqa_added
from ckptlint.registry import all_rules
from ckptlint.rule_codes import ENGINE_CODES, UNREADABLE_FILE, UNUSED_NOQA, all_codes
from ckptlint.rule_manifest import RULE_TRIGGERS
from ckptlint.source import DecodedSource, LineIndex, UndecodableSource, code_only, decode_source
from ckptlint.suppression import NOQA, file_level_noqa, file_level_noqa_rows, written_codes
from ckptlint.types import AppliedFix, Diagnostic, Location, fixable
from ckptlint.versions import VersionSource

if TYPE_CHECKING:
    from ckptlint.rule import Rule

SKIP_FILE = re.compile(r"^[ \t]*#[ \t]*ckptlint:[ \t]*skip-file\b", re.MULTILINE)
MAX_FIX_ITERATIONS = 10
_NOQA_WITH_OUR_CODE = re.compile(r"#\s*noqa:[^\n]*?CKPT", re.IGNORECASE)


def unknown_noqa_codes(text: str, display: str, *, in_lines: bool = True) -> tuple[str, ...]:
    """`# noqa: CKPT999` (or `# ckptlint: noqa: CKPT999`): a ckptlint code that names no rule
    (a typo suppresses nothing), for a warning; with `in_lines` false only the file-level
    directives (CKPT100 reports the others). Other tools' codes (`E501`) are not ckptlint's
    to judge."""
    if "noqa" not in text and "NOQA" not in text:
        return ()
    if is_notebook_path(display):  # a notebook's comments are in its cells: `nb.ipynb:cell 3:2`
        try:
            cells = [(f"{display}:cell {cell.number}", cell.source) for cell in read_notebook(text).cells]
        except NotebookError:
            cells = []  # reported as CKPT900
    else:
        cells = [(display, text)]
    known = set(all_codes())

    def unknown(code: str) -> bool:
        return code.upper().startswith("CKPT") and code.upper() not in known

    problems = []
    for where, code_text in cells:
        found = [(row, f"# ckptlint: noqa: {code}") for row, codes in file_level_noqa_rows(code_text) for code in codes if unknown(code)]
        if in_lines:
            for row, line in enumerate(LineIndex(code_text).lines(), start=1):
                if _NOQA_WITH_OUR_CODE.search(line):
                    found.extend((row, f"# noqa: {code}") for match in NOQA.finditer(line) for code in written_codes(match) if unknown(code))
        problems.extend(
            f"{where}:{row}: `{directive}` names no ckptlint rule; known codes: {', '.join(sorted(known))}"
            for row, directive in sorted(found)
        )
    return tuple(problems)


@dataclass(frozen=True)
class LintOutcome:
    diagnostics: tuple[Diagnostic, ...]
    internal_errors: tuple[str, ...] = ()
    parsed: bool = True
    # Other files the diagnostics rest on (a launch script's recipes): see `FileResult.inputs`.
    inputs: tuple[tuple[str, str | None], ...] = ()
    hidden: tuple[str, ...] = ()  # see `FileResult.hidden`
    # With `lint_text(keep_facts=True)`: the facts the project index would hold for this text,
    # when the lint extracted them (for its project rules); the editor server lays them over
    # its index instead of extracting them again.
    facts: FileFacts | None = None


def import_rules(*, with_libcst: bool = True) -> None:
    """Import the rules ahead of the lint, and with `with_libcst` libcst and the traversal
    too: in the parent of a run while the index workers extract (`WorkerPool.while_busy`),
    so that the lint workers forked next inherit them instead of importing them each
    (libcst: 0.15-0.2 s apiece). The rules alone (their gates) need no libcst
    (`ckptlint.lazy_libcst`)."""
    if with_libcst:
        from ckptlint.traversal import run_rules  # noqa: F401  (and libcst with it)
    all_rules()


def selected_rules(settings: Settings) -> list[type[Rule]]:
    return [rule for rule in all_rules() if rule.code in settings.enabled_codes]


def lint_text(
    text: str,
    path: Path,
    settings: Settings,
    *,
    display_path: str | None = None,
    rules: Sequence[type[Rule]] | None = None,
    project: ProjectIndex | None = None,
    limits: AnalysisLimits = AnalysisLimits(),
    keep_facts: bool = False,
) -> LintOutcome:
    """Lint one file's text. Every file is syntax-checked with CPython's own parser (fast);
    only files that contain a selected rule's trigger words are parsed with libcst and
    analysed. Cross-file rules see `project` (by default a project of this file alone).

    A file whose shape libcst cannot parse within `limits` is reported as CKPT900 before
    libcst sees it; the time and memory limits themselves are the runner's to enforce
    (`ckptlint.worker_pool`). `keep_facts`: see `LintOutcome.facts` (Python files only).
    """
    display = display_path or str(path)
    if is_notebook_path(path):
        notebook = _read_notebook(text, path, settings, display)
        if isinstance(notebook, LintOutcome):
            return notebook
        notebook, broken = notebook
        outcome = on_deep_stack(_lint_text, notebook.python_text, path, settings, display, rules, project, limits)
        return _in_cells(notebook, outcome, broken)
    kind = recipe_kind(path, text)
    if kind is not None:
        return _lint_recipe(text, path, settings, display, kind, project)
    kept: list[FileFacts] | None = [] if keep_facts else None
    outcome = on_deep_stack(_lint_text, text, path, settings, display, rules, project, limits, kept)
    return dataclasses.replace(outcome, facts=kept[0]) if kept else outcome


def _read_notebook(
    text: str, path: Path, settings: Settings, display: str
) -> tuple[Notebook, tuple[Diagnostic, ...]] | LintOutcome:
    """The notebook without the cells that are not Python on their own, and CKPT900 for
    each of those in its cell; or CKPT900 at the place in the file where it cannot be read
    as a notebook (invalid JSON, not nbformat 4, a cell without `source`)."""
    try:
        notebook = read_notebook(text)
    except NotebookError as error:
        problem = parse_error(display, error.row, error.column, str(error), kind="")
        return LintOutcome(_reportable([problem], path, settings), parsed=False)
    broken = notebook.cells_that_do_not_parse()
    if not broken:
        return notebook, ()
    code = {cell.number: cell.code for cell in notebook.cells}
    problems = [
        dataclasses.replace(parse_error(display, error.lineno or 1, error.offset or 1, error.msg), cell=number)
        for number, error in broken.items()
        if not top_level_await_only(error, code[number])
    ]
    return read_notebook(text, leave_out=frozenset(broken)), _reportable(problems, path, settings)


def _in_cells(notebook: Notebook, outcome: LintOutcome, broken: tuple[Diagnostic, ...] = ()) -> LintOutcome:
    located = (*(notebook.in_cells(d) for d in outcome.diagnostics), *broken)
    return dataclasses.replace(outcome, diagnostics=tuple(sorted(located, key=lambda d: d.sort_key)))


def _lint_text(
    text: str,
    path: Path,
    settings: Settings,
    display: str,
    rules: Sequence[type[Rule]] | None,
    project: ProjectIndex | None,
    limits: AnalysisLimits,
    kept_facts: list[FileFacts] | None = None,
) -> LintOutcome:
    """Python text: the rules' findings less those `# noqa` and `# ckptlint: noqa: CODE`
    suppress, with the unused suppressions (CKPT100) when selected."""
    if SKIP_FILE.search(text):
        return LintOutcome(())
    in_file = file_level_noqa(text)
    if in_file is None:
        return LintOutcome(())
    report_unused = UNUSED_NOQA.code in settings.enabled_codes and "noqa" in text.lower()
    used: list[tuple[int, str]] | None = [] if report_unused else None
    outcome = _lint_python(text, path, settings, display, rules, project, limits, used, kept_facts)
    diagnostics = outcome.diagnostics
    if used is not None and outcome.parsed:
        candidates = selected_rules(settings) if rules is None else rules
        judged = {rule.code for rule in candidates if rule.applies_to_versions(settings.target_versions)}
        unused = unused_noqa(text, display, set(used), judged, set(all_codes()), UNUSED_NOQA.url())
        if unused:
            diagnostics = tuple(sorted((*diagnostics, *_reportable(unused, path, settings)), key=lambda d: d.sort_key))
    if in_file:
        diagnostics = tuple(d for d in diagnostics if d.code not in in_file)
    if diagnostics is outcome.diagnostics:
        return outcome
    return dataclasses.replace(outcome, diagnostics=diagnostics)


def reports_unused_noqa(path: Path, settings: Settings, text: str) -> bool:
    """Whether CKPT100 reports the unknown codes of this file's `# noqa` comments (Python
    files and notebooks, where it is selected and not ignored); elsewhere a warning does."""
    if UNUSED_NOQA.code not in settings.enabled_codes or recipe_kind(path, text) is not None:
        return False
    return not any(UNUSED_NOQA.code.startswith(p) for p in settings.ignored_codes_for_path(path))


def _lint_python(
    text: str,
    path: Path,
    settings: Settings,
    display: str,
    rules: Sequence[type[Rule]] | None,
    project: ProjectIndex | None,
    limits: AnalysisLimits,
    suppressed: list[tuple[int, str]] | None = None,
    kept_facts: list[FileFacts] | None = None,
) -> LintOutcome:
    # A file calling a helper of another module that hands keywords to checkpoint need not
    # name checkpoint: the index says which names to look for.
    forwarding = project is not None and project.mentions_forwarding(text)
    # Likewise torch's checkpoint under another module's name (`from .utils import checkpoint`).
    aliased = project is not None and project.imports_checkpoint_alias(_relative(path, project.root))
    # And a project function that wraps a model in FSDP1 (`model = shard(model)`).
    sharding = project is not None and project.mentions_fsdp_wrapper(text)
    if rules is None and not (forwarding or aliased or sharding) and not any(word in text for word in RULE_TRIGGERS):
        rules = []  # no rule can apply: the rules (and libcst) are not even imported
    versions = settings.target_versions

    def reached(rule: type[Rule], words: str) -> bool:
        return (
            rule.may_apply_to(words) or (forwarding and rule.reached_through_forwarding)
            or (aliased and rule.reached_through_aliases) or (sharding and rule.reached_through_fsdp_wrappers)
        )

    candidates = [rule for rule in (selected_rules(settings) if rules is None else rules) if reached(rule, text)]
    rules = [rule for rule in candidates if rule.applies_to_versions(versions)]
    # Rules a declared or chosen version rules out still run, to say how many findings the
    # versions hide (not for an installed version: that is no choice of the project's).
    gated = [rule for rule in candidates if rule not in rules and _ruled_out_by_choice(rule, versions)]
    root = project.root if project is not None else settings.project_root
    relative_path = _relative(path, root)
    project = project or ProjectIndex(root)
    parsed_text = ParsedText(text)  # one CPython parse for the file's facts and the rules' model
    if any(rule.uses_project for rule in (*rules, *gated)):
        # The file's own facts, from the text being linted; with them, the project rules
        # that can find nothing here are dropped before the (expensive) libcst parse.
        project = project.with_file(relative_path, text, parsed_text)
        if kept_facts is not None:
            kept_facts.append(project.indexed_facts(relative_path, text))
        cancellation.check()
        rules, gated = (
            [rule for rule in group if not rule.uses_project or rule.may_apply_to_project(project, relative_path, settings, text)]
            for group in (rules, gated)
        )
    if not (rules or gated) and _parsed_by_index(project, relative_path, text):
        return LintOutcome(())  # valid Python (the index parsed this very text), and no rule to run

    def any_rule_left(tree: ast.Module) -> bool:
        """Drops the rules to which CPython's tree, or the words of the code itself (without
        comments and strings, for `words_in_code_only` rules), leave nothing to find; whether
        any rule is left, for which libcst parses the file."""
        nonlocal rules, gated
        code: str | None = None

        def in_code(rule: type[Rule]) -> bool:
            nonlocal code
            if not rule.words_in_code_only:
                return True
            if code is None:
                code = code_only(text)
            return reached(rule, code) and (
                not rule.uses_project or rule.may_apply_to_project(project, relative_path, settings, code)
            )

        rules, gated = ([r for r in group if in_code(r) and r.may_apply_to_syntax(tree, text, project)] for group in (rules, gated))
        return bool(rules or gated)

    parsed = parse_module(text, display, with_libcst=bool(rules or gated), limits=limits, needed=any_rule_left, parsed=parsed_text)
    cancellation.check()  # (the safe points of a lint the editor server supersedes)
    if isinstance(parsed, Diagnostic):
        return LintOutcome(_reportable([parsed], path, settings), parsed=False)
    if parsed is None:
        return LintOutcome(())

    from ckptlint.traversal import run_rules

    errors: list[str] = []
    try:
        diagnostics = run_rules(parsed, text, path, display, settings, rules, errors, project, relative_path, suppressed)
        hidden = run_rules(parsed, text, path, display, settings, gated, [], project, relative_path) if gated else []
        if hidden:  # as if they had run with the others: a finding another one implies is not counted
            from ckptlint.traversal import drop_superseded

            kept = {id(d) for d in drop_superseded([*diagnostics, *hidden])}
            hidden = [d for d in hidden if id(d) in kept]
    except RecursionError:
        return LintOutcome(
            (parse_error(display, 1, 1, "the file is nested too deeply to analyse (recursion limit reached)"),),
            parsed=False,
        )
    return LintOutcome(
        _reportable(diagnostics, path, settings), tuple(errors),
        hidden=tuple(_why_hidden(d.code, gated, settings) for d in _reportable(hidden, path, settings)),
    )


def _parsed_by_index(project: ProjectIndex, relative_path: str, text: str) -> bool:
    """Whether the index extracted facts from this very text: facts come only from a tree
    CPython parsed, so checking its syntax again would find nothing."""
    if project.digests.get(relative_path) != text_digest(text):
        return False
    facts = project.files.get(relative_path)
    return facts is not None and facts != FileFacts(facts.module)


def _why_hidden(code: str, gated: Sequence[type[Rule]], settings: Settings) -> str:
    """Why the file's project's target versions hide a finding: `CKPT001 applies to
    torch>=1.11, the target is torch 1.10 (declared dependency: requirements.txt: ...)`."""
    rule = next(rule for rule in gated if rule.code == code)
    return "; ".join(
        f"{code} applies to {version_range}, the target is {version_range.package} "
        f"{settings.target_versions.get(version_range.package).describe()}"
        for version_range in rule.targets
    )


def _ruled_out_by_choice(rule: type[Rule], versions) -> bool:
    """Whether versions the project declares or the user chose (not merely installed) are
    what keeps the rule from running."""
    return bool(rule.targets) and all(
        (target := versions.get(version_range.package)) is not None and target.source is not VersionSource.INSTALLED
        for version_range in rule.targets
    )


def _lint_recipe(
    text: str, path: Path, settings: Settings, display: str, kind: str, project: ProjectIndex | None = None
) -> LintOutcome:
    """A training recipe (YAML / JSON) or launch script: see `ckptlint.recipes`."""
    from ckptlint.model.syntax.recipe_documents import RecipeSyntaxError
    from ckptlint.recipes.lint import lint_recipe

    if SKIP_FILE.search(text):
        return LintOutcome(())
    in_file = file_level_noqa(text)
    if in_file is None:
        return LintOutcome(())

    def run():
        return lint_recipe(
            text,
            path,
            display,
            kind,
            settings.target_versions,
            settings.enabled_codes,
            project_root=settings.project_root,
            project=project,
        )

    try:
        linted = on_deep_stack(run)
    except RecipeSyntaxError as error:
        problem = parse_error(display, error.row, error.column, str(error), kind="")
        return LintOutcome(_reportable([problem], path, settings), parsed=False)
    except Exception:  # a bug of ours: reported with the file, the run goes on
        return LintOutcome((), (f"{display}: internal error reading the recipe:\n{traceback.format_exc(limit=-4)}",))
    diagnostics = (d for d in linted.diagnostics if d.code not in in_file)
    return LintOutcome(_reportable(diagnostics, path, settings), inputs=linted.inputs)


def analysis_stopped(path: Path, display: str, settings: Settings, reason: str) -> tuple[Diagnostic, ...]:
    """CKPT900 for a file whose analysis stopped at a limit (`reason` says which), unless
    the selection or per-file-ignores drop it."""
    return _reportable([parse_error(display, 1, 1, reason, kind="")], path, settings)


def _relative(path: Path, root: Path) -> str:
    try:
        return path.absolute().relative_to(root.absolute()).as_posix()
    except ValueError:
        return path.name


def _reportable(diagnostics: Iterable[Diagnostic], path: Path, settings: Settings) -> tuple[Diagnostic, ...]:
    """Drop what per-file-ignores or the selection (for the engine's own codes) exclude."""
    ignored = settings.ignored_codes_for_path(path)
    return tuple(
        sorted(
            (
                d
                for d in diagnostics
                if d.code in settings.enabled_codes or d.code not in ENGINE_CODES
                if not any(d.code.startswith(p) for p in ignored)
            ),
            key=lambda d: d.sort_key,
        )
    )


_DEEP_STACK_BYTES = 512 << 20
_DEEP_RECURSION_LIMIT = 60_000


def on_deep_stack(function, *args):
    """Run `function` in a thread with a large stack and a raised recursion limit.

    libcst's parser and visitors recurse once per nesting level; on the default stack a
    valid but deeply nested expression crashes the interpreter instead of raising. Python's
    own limits and `MAX_SYNTAX_DEPTH` (checked first in `parse_module`) bound the depth that
    reaches libcst."""
    result: list = []

    def run() -> None:
        previous = sys.getrecursionlimit()
        sys.setrecursionlimit(max(previous, _DEEP_RECURSION_LIMIT))
        try:
            result.append((True, function(*args)))
        except BaseException as error:  # re-raised in the caller's thread
            result.append((False, error))
        finally:
            sys.setrecursionlimit(previous)

    with _STACK_SIZE_LOCK:
        previous_size = threading.stack_size(_DEEP_STACK_BYTES)
        try:
            thread = threading.Thread(target=run, name="ckptlint-lint")
            thread.start()
        finally:
            threading.stack_size(previous_size)
    thread.join()
    ok, value = result[0]
    if not ok:
        raise value
    return value


_STACK_SIZE_LOCK = threading.Lock()


def unreadable(display: str, reason: str) -> Diagnostic:
    return Diagnostic(
        code=UNREADABLE_FILE.code,
        message=f"cannot read file: {reason}",
        path=display,
        location=Location(1, 1),
        end_location=Location(1, 1),
        url=UNREADABLE_FILE.url(),
        severity=UNREADABLE_FILE.severity,
    )


# --- fixes -----------------------------------------------------------------------------


def apply_fixes(text: str, diagnostics: Iterable[Diagnostic], unsafe: bool) -> tuple[str, list[Diagnostic]]:
    """Apply every fix whose edits overlap no earlier fix's; identical edits count once.
    Returns the new text and the diagnostics whose fixes were applied."""
    index = LineIndex(text)
    taken: list[tuple[int, int, str]] = []
    applied: list[Diagnostic] = []
    candidates = sorted((d for d in diagnostics if fixable(d, unsafe)), key=lambda d: d.fix.edits[0])
    for diagnostic in candidates:
        spans = [(index.offset(e.location), index.offset(e.end_location), e.content) for e in diagnostic.fix.edits]
        new = [s for s in spans if s not in taken]
        if any(_overlaps(s, t) for s in new for t in taken):
            continue
        taken.extend(new)
        applied.append(diagnostic)
    for start, end, content in sorted(taken, reverse=True):
        text = text[:start] + content + text[end:]
    return text, applied


def _overlaps(a: tuple[int, int, str], b: tuple[int, int, str]) -> bool:
    # Two insertions at the same point conflict (their order would be arbitrary).
    if a[0] == a[1] == b[0] == b[1]:
        return True
    return a[0] < b[1] and b[0] < a[1]


@dataclass(frozen=True)
class FixOutcome:
    text: str
    applied: tuple[AppliedFix, ...]
    remaining: LintOutcome
    error: str | None = None
    # The findings before any fix: what stands when the fixed text cannot be written.
    initial: LintOutcome | None = None


def fix_text(
    text: str,
    path: Path,
    settings: Settings,
    *,
    unsafe: bool,
    display_path: str | None = None,
    project: ProjectIndex | None = None,
    limits: AnalysisLimits = AnalysisLimits(),
) -> FixOutcome:
    """Fix until nothing changes (bounded). If a round produces code that does not parse,
    that round is discarded and the error reported; the text stays at the last good state."""
    display = display_path or str(path)
    if is_notebook_path(path):
        return _fix_notebook(text, path, settings, unsafe, display, project, limits)

    def lint(code: str) -> LintOutcome:
        return lint_text(code, path, settings, display_path=display, project=project, limits=limits)

    return _fix_to_fixed_point(text, lint, unsafe, display)


def _fix_to_fixed_point(text: str, lint, unsafe: bool, display: str) -> FixOutcome:
    applied: list[AppliedFix] = []
    outcome = initial = lint(text)
    error = None
    for _ in range(MAX_FIX_ITERATIONS):
        new_text, fixed = apply_fixes(text, outcome.diagnostics, unsafe)
        if not fixed or new_text == text:
            break
        new_outcome = lint(new_text)
        if not new_outcome.parsed:
            error = f"{display}: fixes for {', '.join(sorted({d.code for d in fixed}))} produced invalid code; file left unchanged by them"
            break
        applied.extend(AppliedFix(d.code, d.fix.message, d.location.row) for d in fixed)
        text, outcome = new_text, new_outcome
    return FixOutcome(text, tuple(applied), outcome, error, initial)


def _fix_notebook(
    text: str, path: Path, settings: Settings, unsafe: bool, display: str, project: ProjectIndex | None, limits: AnalysisLimits
) -> FixOutcome:
    """Fixes computed on the code cells joined, written back into each changed cell's
    `source`; the rest of the file keeps its bytes."""
    notebook = _read_notebook(text, path, settings, display)
    if isinstance(notebook, LintOutcome):
        return FixOutcome(text, (), notebook, None, notebook)
    notebook, broken = notebook

    def lint(code: str) -> LintOutcome:
        return on_deep_stack(_lint_text, code, path, settings, display, None, project, limits)

    fixed = _fix_to_fixed_point(notebook.python_text, lint, unsafe, display)
    initial = _in_cells(notebook, fixed.initial or fixed.remaining, broken)
    if not fixed.applied:
        return FixOutcome(text, (), _in_cells(notebook, fixed.remaining, broken), fixed.error, initial)
    try:
        new_text = notebook.with_python_text(fixed.text)
    except NotebookError as error:
        return FixOutcome(text, (), initial, f"{display}: fixes not written: {error}", initial)
    # The remaining findings located in the new cells (rows move when a fix adds a line).
    remaining = _in_cells(read_notebook(new_text, leave_out=notebook.left_out), fixed.remaining, broken)
    applied = tuple(
        dataclasses.replace(a, row=notebook.locate(Location(a.row, 1))[1].row) for a in fixed.applied
    )
    return FixOutcome(new_text, applied, remaining, fixed.error, initial)


def decode_for_lint(data: bytes, display: str) -> tuple[DecodedSource | None, Diagnostic | None]:
    try:
        return decode_source(data), None
    except UndecodableSource as error:
        return None, unreadable(display, str(error))


# --- --add-noqa --------------------------------------------------------------------------


@dataclass(frozen=True)
class NoqaOutcome:
    """`--add-noqa` on one file: the new text (None when unchanged), how many lines got a
    directive, and the findings left without one (a training recipe, a line inside a
    multi-line string or ending in a continuation; CKPT9xx)."""

    text: str | None
    added: int
    left: tuple[Diagnostic, ...]
    internal_errors: tuple[str, ...] = ()


def add_noqa_text(
    text: str,
    path: Path,
    settings: Settings,
    *,
    display_path: str | None = None,
    project: ProjectIndex | None = None,
    limits: AnalysisLimits = AnalysisLimits(),
) -> NoqaOutcome:
    """Ruff's `--add-noqa`: `# noqa: CODE` on the line of each finding of a Python file or
    notebook (a notebook's cells edited in their `source`), merged into a directive the line
    has. Training recipes and launch scripts are left as they are."""
    display = display_path or str(path)
    not_suppressible = frozenset(ENGINE_CODES)
    if is_notebook_path(path):
        notebook = _read_notebook(text, path, settings, display)
        if isinstance(notebook, LintOutcome):
            return NoqaOutcome(None, 0, notebook.diagnostics, notebook.internal_errors)
        notebook, broken = notebook
        outcome = on_deep_stack(_lint_text, notebook.python_text, path, settings, display, None, project, limits)
        added = with_noqa_added(notebook.python_text, outcome.diagnostics, not_suppressible)
        left = _in_cells(notebook, dataclasses.replace(outcome, diagnostics=_left(outcome, added, not_suppressible)), broken)
        if not added.added:
            return NoqaOutcome(None, 0, left.diagnostics, outcome.internal_errors)
        try:
            new_text = notebook.with_python_text(added.text)
        except NotebookError as error:
            return NoqaOutcome(None, 0, _in_cells(notebook, outcome, broken).diagnostics, (f"{display}: `# noqa` not added: {error}",))
        return NoqaOutcome(new_text, added.added, left.diagnostics, outcome.internal_errors)
    outcome = lint_text(text, path, settings, display_path=display, project=project, limits=limits)
    if recipe_kind(path, text) is not None:
        return NoqaOutcome(None, 0, outcome.diagnostics, outcome.internal_errors)
    added = with_noqa_added(text, outcome.diagnostics, not_suppressible)
    if not added.added:
        return NoqaOutcome(None, 0, _left(outcome, added, not_suppressible), outcome.internal_errors)
    try:
        ast.parse(added.text)
    except (SyntaxError, ValueError, RecursionError, MemoryError) as error:  # a bug of ours: never written
        return NoqaOutcome(None, 0, outcome.diagnostics, (f"{display}: `# noqa` not added: the result would not parse ({error})",))
    return NoqaOutcome(added.text, added.added, _left(outcome, added, not_suppressible), outcome.internal_errors)


def _left(outcome: LintOutcome, added: AddedNoqa, not_suppressible: frozenset[str]) -> tuple[Diagnostic, ...]:
    rows = set(added.left)
    return tuple(
        d for d in outcome.diagnostics if d.code in not_suppressible or (d.noqa_row or d.location.row) in rows
    )
