"""The rule API: `Rule`, the `FileContext` a rule sees and `Replacement` fixes.

A rule is a folder under `rules/` (`rules/<slug>/rule.py`) holding one `Rule` subclass, and
its cases as files (`rules/<slug>/cases/`, read by `ckptlint/rule_cases.py`). The class
declares its code, slug, message, fix applicability and the library versions where its hazard
exists; its docstring and its cases' titles are its documentation page. Rules are libcst
batchable visitors, so every selected rule runs in the same single traversal of a file, and
they also receive higher-level facts from the engine (`visit_checkpoint_site`).
"""

from __future__ import annotations

import ast
import inspect
import traceback
from pathlib import Path
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING, ClassVar, TypeVar

from ckptlint.lazy_libcst import cst

from ckptlint.analysis.checkpoint_sites import CheckpointSite
from ckptlint.rule_cases import cases_section
from ckptlint.source import LineIndex
from ckptlint.types import Applicability, Diagnostic, Edit, Fix, Location, Severity, rule_docs_url
from ckptlint.versions import Applies, TargetVersions, VersionRange

if TYPE_CHECKING:
    from libcst.metadata import CodeRange, MetadataWrapper

    from ckptlint.analysis.file_names import FileNames
    from ckptlint.model.script_models.names import QualifiedName

    from ckptlint.analysis.positions import StatementLines
    from ckptlint.config import Settings
    from ckptlint.model.index import ProjectIndex



@lru_cache(maxsize=None)
def _visitor_method_names(rule: type) -> tuple[str, ...]:
    """A rule class's `visit_*` / `leave_*` methods that do something (libcst's no-op stubs
    left out)."""
    return tuple(
        name for name in sorted(dir(rule))
        if name.startswith(("visit_", "leave_"))
        and callable(getattr(rule, name))
        and not getattr(getattr(rule, name), "_is_no_op", False)
    )


T = TypeVar("T")


@dataclass
class FileContext:
    """What a rule sees of the file it is checking and of the run."""

    path: Path
    display_path: str
    text: str
    module: cst.Module
    versions: TargetVersions
    settings: Settings
    wrapper: MetadataWrapper
    # The project the file belongs to, with this file's facts taken from `text`.
    project: ProjectIndex
    relative_path: str  # to the project root
    line_index: LineIndex = field(init=False)
    # Every checkpoint site of the file, known before the first `visit_checkpoint_site`.
    sites: list[CheckpointSite] = field(default_factory=list)
    # Calls that are torch's checkpoint on some of their name's bindings only (DeepSpeed's
    # on another): for the rules that compare a checkpointed branch with the plain one, and
    # CKPT001, which reports them without a fix.
    possible_sites: list[CheckpointSite] = field(default_factory=list)
    # CPython's lines of the statements, for positions without generating the whole module,
    # and the innermost statement of the calls and blocks, as the traversal saw them.
    statement_lines: StatementLines | None = None
    known_holders: dict[cst.CSTNode, cst.CSTNode] = field(default_factory=dict)
    # CPython's tree of `text`, when the engine parsed it to check the syntax.
    parsed_ast: ast.Module | None = None
    # What per-file analyses computed from this parse (`once`), shared with the other rule
    # run over it: the parse's own (`ParsedModule.analyses`).
    analyses: dict = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        self.line_index = LineIndex(self.text)
        self._positions = None
        self._ast_module: ast.Module | None | bool = False if self.parsed_ast is None else self.parsed_ast
        self._ast_bridge = None

    @property
    def ast_module(self) -> ast.Module | None:
        """The file's text parsed by CPython's parser (the engine's tree, else once on first
        use), which the project model's per-file analyses read; None when only libcst parses
        it (newer syntax)."""
        if self._ast_module is False:
            try:
                self._ast_module = ast.parse(self.text)
            except (SyntaxError, ValueError, RecursionError, MemoryError):
                self._ast_module = None
        return self._ast_module

    @property
    def names(self) -> FileNames:
        """The file's names: what a libcst name, attribute or call may denote, and a
        name's bindings (`analysis/file_names.py`), the project model's answers."""
        from ckptlint.analysis.file_names import FileNames

        return self.once(FileNames)

    def qualified_names(self, expr: cst.BaseExpression) -> frozenset[QualifiedName]:
        """What a name, attribute or call may denote, through imports and scopes (empty:
        not known); asked in any hook, `visit_*` included."""
        return self.names.qualified(expr)

    def once(self, compute: Callable[[FileContext], T]) -> T:
        """`compute(self)`, computed once for the parse of this file and shared by every rule
        and by both rule runs over it (the gated rules' run after the others'): a per-file
        analysis several rules ask for (`script_models`, the branches only old torch runs)."""
        try:
            return self.analyses[compute]
        except KeyError:
            found = self.analyses[compute] = compute(self)
            return found

    def cst_node_at(self, node: ast.AST | None, cst_type: type | tuple[type, ...]) -> cst.CSTNode | None:
        """The libcst node of type `cst_type` that an `ast` node of `ast_module` is, for a
        report's location or a fix (`analysis/ast_bridge.py`): a statement's own, the
        `cst.SimpleStatementLine` holding a small statement (None on a header's line,
        `if x: y()`), or the innermost node of that type spanning an expression. None for
        a node of no tree of this file."""
        bridge = self._bridge()
        return bridge.cst_node_at(node, cst_type) if bridge is not None else None

    def _bridge(self):
        if self._ast_bridge is None and self.ast_module is not None:
            from ckptlint.analysis.ast_bridge import AstBridge

            self._ast_bridge = AstBridge(self, self.ast_module)
        return self._ast_bridge

    def position(self, node: cst.CSTNode) -> CodeRange:
        # Positions need code generation (of the statements asked about, with the lines):
        # done only once something asks.
        if self._positions is None:
            from ckptlint.analysis.positions import Positions

            self._positions = Positions(self.module, self.statement_lines, self.known_holders)
        return self._positions[node]

    def edit_for(self, original: cst.CSTNode, replacement: cst.CSTNode) -> Edit | None:
        """The smallest text edit that turns `original` into `replacement`.

        An expression is rendered on its own, in the indentation of its line; when that
        rendering is the file's text at the node's position, the replacement rendered the
        same way is exact (a file with many fixes costs one small rendering per fix).
        Otherwise (statements, blocks, an expression starting on a continuation line) the
        whole module is regenerated, as a node's own code lacks the indentation of the
        block around it. Either way only the differing span is kept, so fixes of nested
        nodes never overlap and the bytes outside the edit stay identical."""
        if isinstance(original, cst.BaseExpression) and isinstance(replacement, cst.BaseExpression):
            local = self._local_texts(original, replacement)
            if local is not None:
                start, old_text, new_text = local
                return self._difference(old_text, new_text, start)
        new_text = self.module.deep_replace(original, replacement).code
        # Diff against libcst's own rendering (equal to the text, except that libcst drops a
        # final lone "\r"), so the edit never reaches past what the rules saw.
        return self._difference(self.module.code, new_text, 0)

    def _local_texts(self, original: cst.BaseExpression, replacement: cst.BaseExpression) -> tuple[int, str, str] | None:
        position = self.position(original)
        start = self.line_index.offset(Location(position.start.line, position.start.column + 1))
        end = self.line_index.offset(Location(position.end.line, position.end.column + 1))
        line = self.line_index.line(position.start.line)
        indent = line[: len(line) - len(line.lstrip(" \t"))]
        old_text = self._render(original, indent)
        if old_text != self.text[start:end]:
            return None
        return start, old_text, self._render(replacement, indent)

    def _render(self, node: cst.CSTNode, indent: str) -> str:
        from libcst._nodes.internal import CodegenState

        state = CodegenState(self.module.default_indent, self.module.default_newline, indent_tokens=[indent] if indent else [])
        node._codegen(state)
        return "".join(state.tokens)

    def _difference(self, old_text: str, new_text: str, offset: int) -> Edit | None:
        """The edit that turns `old_text` (found at `offset` of the file) into `new_text`."""
        if new_text == old_text:
            return None
        limit = min(len(old_text), len(new_text))
        prefix = 0
        while prefix < limit and old_text[prefix] == new_text[prefix]:
            prefix += 1
        suffix = 0
        while suffix < limit - prefix and old_text[-1 - suffix] == new_text[-1 - suffix]:
            suffix += 1
        return Edit(
            location=self.line_index.location(offset + prefix),
            end_location=self.line_index.location(offset + len(old_text) - suffix),
            content=new_text[prefix : len(new_text) - suffix],
        )


@dataclass(frozen=True)
class Replacement:
    """A node to replace and what replaces it; the engine turns it into minimal text edits."""

    original: cst.CSTNode
    replacement: cst.CSTNode


@lru_cache(maxsize=None)
def _decoded(words: tuple[bytes, ...]) -> tuple[str, ...]:
    return tuple(word.decode() for word in words)


class Rule:
    """A lint rule: its gates (classmethods, asked before any libcst parse) and its
    `visit_*` / `leave_*` methods, which the traversal batches with the other rules'
    (`get_visitors`). Not a libcst class, so that importing a rule to ask its gate does not
    import libcst (`ckptlint.lazy_libcst`); rules read no libcst metadata."""

    code: ClassVar[str]
    name: ClassVar[str]
    message: ClassVar[str]
    fix: ClassVar[Applicability | None] = None
    # What goes wrong when a finding is left alone (DESIGN.md, "Severity"); every rule
    # declares its own (the registry refuses a rule without one). `report(severity=...)`
    # chooses another for one finding.
    severity: ClassVar[Severity]
    # The hazard exists only where the targeted versions fall in every range.
    targets: ClassVar[tuple[VersionRange, ...]] = ()
    # Byte strings one of which a file must contain for the rule to find anything in it,
    # and ones it must contain all of: the cheap test that keeps most files from libcst.
    triggers: ClassVar[tuple[bytes, ...]] = (b"checkpoint",)
    requires: ClassVar[tuple[bytes, ...]] = ()
    # Whether the rule reads the project index (`self.context.project`): a run builds the
    # index only when a selected rule does.
    uses_project: ClassVar[bool] = False
    # Whether the project index brings to the rule a file without its trigger words: one
    # that calls a project function whose keywords reach torch's checkpoint, defined in
    # another module (`ProjectIndex.mentions_forwarding`); `may_apply_to_project` decides.
    reached_through_forwarding: ClassVar[bool] = False
    # Likewise a file calling torch's checkpoint under a name another module of the project
    # gives it (`from .utils import checkpoint`; `ProjectIndex.mentions_checkpoint_alias`):
    # the rules about checkpoint sites.
    reached_through_aliases: ClassVar[bool] = False
    # Likewise a file calling a project function that wraps a model in FSDP1 with an
    # auto-wrap policy (`model = shard(model)`; `ProjectIndex.mentions_fsdp_wrapper`): the
    # rules about what happens to a model before its wrap.
    reached_through_fsdp_wrappers: ClassVar[bool] = False
    # Whether the words the gates look for count only where they are code: once CPython
    # has parsed the file, the gates are asked again of its text without comments and
    # string literals (`source.code_only`). For the rules whose findings all stand on what
    # the code calls or imports: an FSDP module whose docstrings explain
    # `torch.utils.checkpoint`, or a trainer whose comment names it, holds no checkpoint
    # site. Not for rules that read keys of configuration dicts (`{"use_reentrant": False}`).
    words_in_code_only: ClassVar[bool] = False

    @classmethod
    def applies_to_versions(cls, versions: TargetVersions) -> bool:
        """Whether the rule runs for the targeted versions: not when they fall outside
        `targets` (the lower bound of a declared range is what the project still runs on)."""
        return versions.applies(cls.targets) is not Applies.NO

    @classmethod
    def may_apply_to_project(cls, project: ProjectIndex, relative_path: str, settings: Settings, text: str) -> bool:
        """For rules that use the project: whether the index (with this file's facts) and
        the text leave anything for the rule to find in the file. False skips the file's
        libcst parse."""
        return True

    @classmethod
    def may_apply_to_syntax(cls, tree: ast.Module, text: str, project: ProjectIndex) -> bool:
        """Whether CPython's syntax tree of the file (parsed anyway, to check the syntax)
        leaves the rule something to find. When no rule of the file's does, its libcst
        parse is skipped; so False must mean that the rule would report nothing."""
        return True

    @classmethod
    def may_apply_to(cls, text: str) -> bool:
        return all(word in text for word in _decoded(cls.requires)) and any(
            word in text for word in _decoded(cls.triggers)
        )
    # Codes this rule implies at the same node; those are dropped when this one fires.
    supersedes: ClassVar[tuple[str, ...]] = ()

    def __init__(self, context: FileContext) -> None:
        self.context = context
        self.diagnostics: list[Diagnostic] = []
        # A rule that raises is stopped for this file; the engine reports the error with the
        # file and the rule, and every other rule and file goes on.
        self.internal_error: str | None = None

    def get_visitors(self):
        # The visitor methods, from the class: libcst's `inspect.getmembers(self)` would read
        # every attribute of the instance, computing each `cached_property` of the rule
        # (a whole-module walk) for every file, used or not.
        return {
            name: self._guarded(getattr(self, name))
            for name in _visitor_method_names(type(self))
        }

    def _guarded(self, function):
        def call(node):
            self.run_guarded(function, node)

        return call

    def run_guarded(self, function, *args) -> None:
        if self.internal_error is not None:
            return
        try:
            function(*args)
        except RecursionError:
            raise  # the file is too deep for any rule; the engine reports it once
        except Exception:
            self.internal_error = traceback.format_exc(limit=-4).rstrip()

    # --- hooks -------------------------------------------------------------------------

    def visit_checkpoint_site(self, site: CheckpointSite) -> None:
        """Called once per resolved checkpoint site, after the traversal."""

    def finish(self) -> None:
        """Called once after the traversal and the checkpoint sites: for rules that collect
        candidates while visiting and decide once the whole file (and its metadata) is known."""

    # --- reporting ---------------------------------------------------------------------

    def report(
        self,
        node: cst.CSTNode,
        message: str | None = None,
        *,
        replacements: Sequence[Replacement] = (),
        fix_message: str | None = None,
        severity: Severity | None = None,
    ) -> None:
        position = self.context.position(node)
        start = Location(position.start.line, position.start.column + 1)
        end = Location(position.end.line, position.end.column + 1)
        fix = None
        if replacements and self.fix is not None:
            edits = []
            for item in replacements:
                edit = self.context.edit_for(item.original, item.replacement)
                if edit is None:
                    edits = []
                    break
                edits.append(edit)
            if edits:
                fix = Fix(self.fix, fix_message or self.name, tuple(sorted(edits)))
        self.diagnostics.append(
            Diagnostic(
                code=self.code,
                message=message or self.message,
                path=self.context.display_path,
                location=start,
                end_location=end,
                fix=fix,
                noqa_row=start.row,
                url=self.url(),
                severity=severity or self.severity,
            )
        )

    def version_note(self) -> str:
        """A suffix naming the affected versions when the targeted ones are unknown."""
        if self.context.versions.applies(self.targets) is Applies.UNKNOWN:
            return " (affects " + ", ".join(str(r) for r in self.targets) + "; target version unknown)"
        return ""

    # --- documentation -----------------------------------------------------------------

    @classmethod
    def url(cls) -> str:
        return rule_docs_url(cls.code)

    @classmethod
    def summary(cls) -> str:
        return inspect.cleandoc(cls.__doc__ or "").split("\n", 1)[0]

    @classmethod
    def documentation(cls) -> str:
        """The rule page: a title, fix availability, target versions, the docstring, then
        the titles of the rule's cases (`rule_cases.cases_section`)."""
        body = inspect.cleandoc(cls.__doc__ or "").split("\n", 1)
        lines = [f"# {cls.name} ({cls.code})", ""]
        lines.append(f"{body[0]}")
        lines.append("")
        if cls.fix is None:
            lines.append("Fix: none.")
        else:
            lines.append(f"Fix: available ({cls.fix.value}).")
        lines.append(f"Severity: {cls.severity.value}.")
        if cls.targets:
            lines.append("Applies to: " + ", ".join(str(r) for r in cls.targets) + ".")
        lines.append("")
        if len(body) > 1:
            lines.append(body[1].strip("\n"))
        cases = cases_section(cls)
        if cases:
            lines += ["", cases]
        return "\n".join(lines).rstrip() + "\n"
