"""One file's analysis with libcst: the shared traversal that finds checkpoint sites and
runs every selected rule (the context rules see is `ckptlint.rule.FileContext`). Imported by the engine only for a
file that a selected rule may apply to (libcst and the rules take 0.2 s to import)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ckptlint.lazy_libcst import cst
from libcst.metadata import MetadataWrapper

from ckptlint.analysis.checkpoint_sites import CallableResolver, CheckpointSite
from ckptlint.analysis.cst_walk import walk_batched
from ckptlint import cancellation
from ckptlint.config import Settings
from ckptlint.model.index import ProjectIndex
from ckptlint.model.syntax.names import absolute_import, module_name
from ckptlint.registry import rule_by_code
from ckptlint.rule import FileContext, Rule
from ckptlint.suppression import NOQA, noqa_codes
from ckptlint.types import Diagnostic

if TYPE_CHECKING:
    from ckptlint.parsing import ParsedModule


class FileAnalyzer(cst.BatchableCSTVisitor):
    """Collects, in the shared traversal, what the engine derives facts from: calls with
    the class their `self` refers to, plain assignments, `self.<attr>` assignments, and
    `# noqa` comments. Names are the file's (`FileContext.names`), asked for the few
    expressions that need them."""

    def __init__(self, context: FileContext) -> None:
        super().__init__()
        self._context = context
        self.calls: list[tuple[cst.Call, cst.ClassDef | None]] = []
        self.self_attribute_values: dict[tuple[cst.ClassDef, str], list[cst.BaseExpression]] = {}
        self.noqa_comments: set[str] = set()
        self._assigned_value: dict[cst.Name, cst.BaseExpression] = {}
        self._containers: list[cst.ClassDef | cst.FunctionDef] = []
        self._self_class: list[cst.ClassDef | None] = [None]  # the class `self` refers to
        # The innermost statement (an `elif` is one) holding each call, block and assignment:
        # where a position is asked for most, found here without another walk (`Positions`).
        self.statement_of: dict[cst.CSTNode, cst.CSTNode] = {}
        self._statements: list[cst.CSTNode] = []

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        self._statements.append(node)
        self._containers.append(node)
        self._self_class.append(None)

    def leave_ClassDef(self, original_node: cst.ClassDef) -> None:
        self._statements.pop()
        self._containers.pop()
        self._self_class.pop()

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._statements.append(node)
        # A method's `self` is its class; a function nested in a method shares it.
        owner = self._containers[-1] if self._containers else None
        self._self_class.append(owner if isinstance(owner, cst.ClassDef) else self._self_class[-1])
        self._containers.append(node)

    def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
        self._statements.pop()
        self._containers.pop()
        self._self_class.pop()

    def visit_SimpleStatementLine(self, node: cst.SimpleStatementLine) -> None:
        self._statements.append(node)

    def leave_SimpleStatementLine(self, original_node: cst.SimpleStatementLine) -> None:
        self._statements.pop()

    def visit_If(self, node: cst.If) -> None:
        self._statements.append(node)

    def leave_If(self, original_node: cst.If) -> None:
        self._statements.pop()

    def visit_For(self, node: cst.For) -> None:
        self._statements.append(node)

    def leave_For(self, original_node: cst.For) -> None:
        self._statements.pop()

    def visit_While(self, node: cst.While) -> None:
        self._statements.append(node)

    def leave_While(self, original_node: cst.While) -> None:
        self._statements.pop()

    def visit_Try(self, node: cst.Try) -> None:
        self._statements.append(node)

    def leave_Try(self, original_node: cst.Try) -> None:
        self._statements.pop()

    def visit_TryStar(self, node: cst.TryStar) -> None:
        self._statements.append(node)

    def leave_TryStar(self, original_node: cst.TryStar) -> None:
        self._statements.pop()

    def visit_With(self, node: cst.With) -> None:
        self._statements.append(node)

    def leave_With(self, original_node: cst.With) -> None:
        self._statements.pop()

    def visit_Match(self, node: cst.Match) -> None:
        self._statements.append(node)

    def leave_Match(self, original_node: cst.Match) -> None:
        self._statements.pop()


    def visit_IndentedBlock(self, node: cst.IndentedBlock) -> None:
        if self._statements:
            self.statement_of[node] = self._statements[-1]

    def visit_Call(self, node: cst.Call) -> None:
        self.calls.append((node, self._self_class[-1]))
        if self._statements:
            self.statement_of[node] = self._statements[-1]

    def visit_Assign(self, node: cst.Assign) -> None:
        self.statement_of[node] = self._statements[-1]
        for target in node.targets:
            self._record(target.target, node.value)

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        self.statement_of[node] = self._statements[-1]

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        self.statement_of[node] = self._statements[-1]
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

    def assigned_values(self, name: cst.Name, imports: bool = True) -> list[cst.BaseExpression]:
        """Values of the assignments that may bind `name` where it is read; empty when any
        binding is not a plain assignment (import, def, loop target, parameter...).
        `imports=False`: the imports binding it are passed over (only its assignments)."""
        bindings = self._context.names.bindings(name)
        if bindings is None:
            return []
        values = []
        for binding in bindings:
            value = self._assigned_value.get(binding.target) if binding.target is not None else None
            if value is None:
                if not imports and binding.kind == "import":
                    continue
                return []
            values.append(value)
        return values

    def checkpoint_sites(
        self, project_alias=lambda name: None, alias_keywords=lambda name: None, returned_alias=lambda name: None
    ) -> tuple[list[CheckpointSite], list[CheckpointSite]]:
        """The file's checkpoint sites, and its possible ones: calls of a name bound to
        torch's checkpoint by one import and to something else by another
        (`CallableResolver.possible_site_for_call`). `project_alias`: the torch function a
        qualified name of another project module stands for; `alias_keywords`: its
        absolute name and the flags it binds, when it is a partial; `returned_alias`: the
        torch function (and other libraries' functions) a project getter's call returns."""
        resolver = CallableResolver(
            self._context.qualified_names, self.assigned_values, self.self_attribute_values, project_alias, alias_keywords,
            returned_alias,
        )
        sites, possible = [], []
        for call, self_class in self.calls:
            site = resolver.site_for_call(call, self_class)
            if site is not None:
                sites.append(site)
                continue
            site = resolver.possible_site_for_call(call, self_class)
            if site is not None:
                possible.append(site)
        return sites, possible

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
    parsed: ParsedModule,
    text: str,
    path: Path,
    display: str,
    settings: Settings,
    rule_classes: Sequence[type[Rule]],
    errors: list[str],
    project: ProjectIndex,
    relative_path: str,
    suppressed: list[tuple[int, str]] | None = None,
) -> list[Diagnostic]:
    """The rules' findings on one parsed file, without those a `# noqa` suppresses; each
    suppression's (row, code) goes to `suppressed` (the unused-suppression report's input;
    code `*` for a bare `# noqa`)."""
    module = parsed.module
    wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
    context = FileContext(
        path, display, text, module, settings.target_versions, settings, wrapper, project, relative_path,
        statement_lines=parsed.statement_lines, parsed_ast=parsed.tree, analyses=parsed.analyses,
    )
    analyzer = FileAnalyzer(context)
    context.known_holders = analyzer.statement_of
    rules = [rule_class(context) for rule_class in rule_classes]
    walk_batched(wrapper, [analyzer, *rules])
    cancellation.check()

    sites, context.possible_sites = analyzer.checkpoint_sites(*_project_aliases(project, relative_path))
    context.sites = sites
    for rule in rules:
        cancellation.check()
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
    for diagnostic in drop_superseded(reported):
        row = diagnostic.noqa_row or diagnostic.location.row
        codes = analyzer.suppressed_codes(context.line_index.line(row))
        if codes is None or diagnostic.code in codes:
            if suppressed is not None:
                suppressed.append((row, "*" if codes is None else diagnostic.code))
            continue
        diagnostics.append(diagnostic)
    return diagnostics


def drop_superseded(diagnostics: list[Diagnostic]) -> list[Diagnostic]:
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


def _project_aliases(project: ProjectIndex, relative_path: str):
    """Qualified name -> the torch checkpoint function it is under another module's name
    (`ProjectIndex.checkpoint_aliases`), and -> its absolute name and the flags it binds
    when it is a partial (`checkpoint_alias_keywords`); relative imports resolved against
    this file."""
    aliases = project.checkpoint_aliases
    if not aliases:
        return (lambda name: None), (lambda name: None), (lambda name: None)
    keywords = project.checkpoint_alias_keywords
    alternatives = project.checkpoint_alias_alternatives
    module = module_name(relative_path)
    is_package = relative_path.endswith("__init__.py")

    def absolute(qualified) -> str:
        name = qualified.name
        return absolute_import(module, is_package, name) if name.startswith(".") else name

    def bound(qualified) -> tuple[str, tuple] | None:
        name = absolute(qualified)
        return (name, keywords[name]) if name in keywords else None

    def returned(qualified) -> tuple[str, tuple[str, ...]] | None:
        """A getter's call: what it returns (`get_checkpoint_fn()`, also one of this file)."""
        for name in (f"{absolute(qualified)}()", f"{module}.{qualified.name}()"):
            if name in aliases:
                return aliases[name], alternatives.get(name, ())
        return None

    return (lambda qualified: aliases.get(absolute(qualified))), bound, returned
