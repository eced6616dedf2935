"""One file's analysis with libcst: the shared traversal that finds checkpoint sites and
runs every selected rule, and the context rules see. Imported by the engine only for a
file that a selected rule may apply to (libcst and the rules take 0.2 s to import)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import libcst as cst
from libcst._nodes.internal import CodegenState
from libcst.metadata import CodeRange, MetadataWrapper, PositionProvider, QualifiedName, ScopeProvider

from ckptlint.analysis.checkpoint_sites import CallableResolver, CheckpointSite
from ckptlint.config import Settings
from ckptlint.model.index import ProjectIndex
from ckptlint.registry import rule_by_code
from ckptlint.rule import Rule
from ckptlint.source import LineIndex
from ckptlint.suppression import NOQA, noqa_codes
from ckptlint.types import Diagnostic, Edit, Location
from ckptlint.versions import TargetVersions


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
    # Qualified names of a name, attribute or call (through imports, scopes); available from
    # the hooks that run after the traversal.
    qualified_names: Callable[[cst.BaseExpression], set[QualifiedName]] = lambda expr: set()

    def __post_init__(self) -> None:
        self.line_index = LineIndex(self.text)
        self._positions = None

    def position(self, node: cst.CSTNode) -> CodeRange:
        # Positions need a code-generation pass over the whole module: computed only once
        # something is reported.
        if self._positions is None:
            self._positions = self.wrapper.resolve(PositionProvider)
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


class FileAnalyzer(cst.BatchableCSTVisitor):
    """Collects, in the shared traversal, what the engine derives facts from: calls with
    the class their `self` refers to, plain assignments, `self.<attr>` assignments, and
    `# noqa` comments. Only scopes are computed for the whole file; qualified names are
    computed on demand for the few expressions that need them."""

    METADATA_DEPENDENCIES = (ScopeProvider,)

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple[cst.Call, cst.ClassDef | None]] = []
        self.self_attribute_values: dict[tuple[cst.ClassDef, str], list[cst.BaseExpression]] = {}
        self.noqa_comments: set[str] = set()
        self._assigned_value: dict[cst.Name, cst.BaseExpression] = {}
        self._containers: list[cst.ClassDef | cst.FunctionDef] = []
        self._self_class: list[cst.ClassDef | None] = [None]  # the class `self` refers to

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        self._containers.append(node)
        self._self_class.append(None)

    def leave_ClassDef(self, original_node: cst.ClassDef) -> None:
        self._containers.pop()
        self._self_class.pop()

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        # A method's `self` is its class; a function nested in a method shares it.
        owner = self._containers[-1] if self._containers else None
        self._self_class.append(owner if isinstance(owner, cst.ClassDef) else self._self_class[-1])
        self._containers.append(node)

    def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
        self._containers.pop()
        self._self_class.pop()

    def visit_Call(self, node: cst.Call) -> None:
        self.calls.append((node, self._self_class[-1]))

    def visit_Assign(self, node: cst.Assign) -> None:
        for target in node.targets:
            self._record(target.target, node.value)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        if node.value is not None:
            self._record(node.target, node.value)

    def _record(self, target: cst.BaseExpression, value: cst.BaseExpression) -> None:
        if isinstance(target, cst.Name):
            self._assigned_value[target] = value
        elif (
            isinstance(target, cst.Attribute)
            and isinstance(target.value, cst.Name)
            and target.value.value == "self"
            and self._self_class[-1] is not None
        ):
            self.self_attribute_values.setdefault((self._self_class[-1], target.attr.value), []).append(value)

    def visit_Comment(self, node: cst.Comment) -> None:
        if NOQA.search(node.value):
            self.noqa_comments.add(node.value)

    # --- derived facts ---------------------------------------------------------------

    def qualified_names(self, expr: cst.BaseExpression) -> set[QualifiedName]:
        scope = self.get_metadata(ScopeProvider, expr, None)
        if scope is None or not isinstance(expr, (cst.Name, cst.Attribute, cst.Call)):
            return set()
        return scope.get_qualified_names_for(expr)

    def assigned_values(self, name: cst.Name) -> list[cst.BaseExpression]:
        """Values of the assignments that may bind `name` where it is read; empty when any
        binding is not a plain assignment (import, def, loop target, parameter...)."""
        scope = self.get_metadata(ScopeProvider, name, None)
        if scope is None:
            return []
        values = []
        for assignment in scope[name.value]:
            value = self._assigned_value.get(getattr(assignment, "node", None))
            if value is None:
                return []
            values.append(value)
        return values

    def checkpoint_sites(self) -> list[CheckpointSite]:
        resolver = CallableResolver(self.qualified_names, self.assigned_values, self.self_attribute_values)
        sites = []
        for call, self_class in self.calls:
            site = resolver.site_for_call(call, self_class)
            if site is not None:
                sites.append(site)
        return sites

    def suppressed_codes(self, line: str) -> frozenset[str] | None:
        """Codes a `# noqa` comment ending `line` suppresses; None means all of them."""
        codes: set[str] = set()
        stripped = line.rstrip("\r\n")
        for comment in self.noqa_comments:
            if stripped.endswith(comment):
                named = noqa_codes(comment)
                if named is None:
                    return None
                codes |= named
        return frozenset(codes)


def run_rules(
    module: cst.Module,
    text: str,
    path: Path,
    display: str,
    settings: Settings,
    rule_classes: Sequence[type[Rule]],
    errors: list[str],
    project: ProjectIndex,
    relative_path: str,
) -> list[Diagnostic]:
    wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
    context = FileContext(
        path, display, text, module, settings.target_versions, settings, wrapper, project, relative_path
    )
    analyzer = FileAnalyzer()
    rules = [rule_class(context) for rule_class in rule_classes]
    wrapper.visit_batched([analyzer, *rules])
    # libcst hands metadata to visitors only during the traversal; the hooks that follow it
    # need it too (already computed and cached on the wrapper, so this costs nothing).
    for visitor in (analyzer, *rules):
        visitor.metadata = wrapper.resolve_many(visitor.get_inherited_dependencies())

    context.sites = sites = analyzer.checkpoint_sites()
    context.qualified_names = analyzer.qualified_names
    for rule in rules:
        for site in sites:
            rule.run_guarded(rule.visit_checkpoint_site, site)
        rule.run_guarded(rule.finish)

    reported: list[Diagnostic] = []
    for rule in rules:
        if rule.internal_error is not None:
            errors.append(f"{display}: internal error in rule {rule.code} ({rule.name}):\n{rule.internal_error}")
            continue
        reported.extend(rule.diagnostics)
    # Precedence first: `# noqa: CKPT032` must not bring back the CKPT001 it superseded.
    diagnostics: list[Diagnostic] = []
    for diagnostic in _drop_superseded(reported):
        suppressed = analyzer.suppressed_codes(context.line_index.line(diagnostic.noqa_row or diagnostic.location.row))
        if suppressed is None or diagnostic.code in suppressed:
            continue
        diagnostics.append(diagnostic)
    return diagnostics


def _drop_superseded(diagnostics: list[Diagnostic]) -> list[Diagnostic]:
    """At one node, the most specific code is reported and the ones it implies are not."""
    by_span: dict[tuple, set[str]] = {}
    for d in diagnostics:
        by_span.setdefault((d.location, d.end_location), set()).add(d.code)
    kept = []
    for d in diagnostics:
        others = by_span[(d.location, d.end_location)] - {d.code}
        if any(d.code in getattr(rule_by_code(code), "supersedes", ()) for code in others):
            continue
        kept.append(d)
    return kept
