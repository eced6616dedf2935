"""The file's definitions as the interpreter needs them (`FileDefinitions`, from the file's
`ast` tree), and which functions are worth interpreting: the names each reads and whether it
mentions anything the interpreter follows, through the functions of the file it calls too."""

from __future__ import annotations

import ast
import re

from ckptlint.model.library.transformers import GC_ENABLE
from ckptlint.model.syntax.ast_walk import child_nodes
from ckptlint.model.script_models.syntax import FUNCTION_DEFINITIONS, string_value

FunctionNode = ast.FunctionDef | ast.AsyncFunctionDef

# Identifiers that make a function worth interpreting even when it gets nothing followed.
RELEVANT_IDENTIFIER = re.compile(
    r"^(backward|training_step|from_pretrained|from_config|_from_config|gradient_checkpointing\w*|"
    r"enable_input_require_grads|add_adapter|load_adapter|get_peft_model|prepare_model_for_\w+|use_cache|"
    r"requires_grad_?|register_forward_hook|setattr|dict)$|Peft|Trainer|Arguments|Config$|Model|For[A-Z]|Backbone$"
)


class LocalFunctionFacts:
    """Names a function reads and whether it mentions anything the analysis follows,
    including through the functions of the file it calls."""

    def __init__(self) -> None:
        self.reads: set[str] = set()
        self.relevant = False
        self.enables = False  # names `gradient_checkpointing_enable` / `prepare_model_for_kbit_training`
        self.callees: set[FunctionNode] = set()


def close_over_callees(facts: dict[FunctionNode, LocalFunctionFacts]) -> None:
    changed = True
    while changed:
        changed = False
        for function_facts in facts.values():
            for callee in function_facts.callees:
                other = facts.get(callee)
                if other is None:
                    continue
                if other.relevant and not function_facts.relevant:
                    function_facts.relevant = changed = True
                if not other.reads <= function_facts.reads:
                    function_facts.reads |= other.reads
                    changed = True


def identifiers(node: ast.AST) -> list[str]:
    """The identifiers a node itself writes (a name, an attribute's, a keyword's, a
    parameter's, a definition's, an import's), as libcst has a `Name` for each."""
    if isinstance(node, ast.Name):
        return [node.id]
    if isinstance(node, ast.Attribute):
        return [node.attr]
    if isinstance(node, ast.keyword):
        return [node.arg] if node.arg else []
    if isinstance(node, ast.arg):
        return [node.arg]
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return [node.name]
    if isinstance(node, ast.alias):
        return [*node.name.split("."), *([node.asname] if node.asname else [])] if node.name != "*" else []
    if isinstance(node, ast.ImportFrom):
        return node.module.split(".") if node.module else []
    if isinstance(node, (ast.Global, ast.Nonlocal)):
        return list(node.names)
    if isinstance(node, ast.ExceptHandler):
        return [node.name] if node.name else []
    if isinstance(node, (ast.MatchAs, ast.MatchStar)):
        return [node.name] if node.name else []
    if isinstance(node, ast.MatchMapping):
        return [node.rest] if node.rest else []
    if isinstance(node, ast.MatchClass):
        return list(node.kwd_attrs)
    return []


class FileDefinitions:
    """The file's classes and functions (by dotted name, nested ones under `<locals>`), the
    class each method's `self` is, what each function reads, and the calls that may run a
    function of the file (resolved once names are)."""

    def __init__(self, module_name: str, tree: ast.Module) -> None:
        self.module_name = module_name
        self.functions: dict[str, FunctionNode] = {}
        self.classes: dict[str, ast.ClassDef] = {}
        self.class_of_function: dict[FunctionNode, str] = {}
        self.main_input_names: dict[str, str] = {}  # same-file model classes that declare it
        self.function_facts: dict[FunctionNode, LocalFunctionFacts] = {}
        self.project_names: dict[FunctionNode, str] = {}  # as the project model names functions
        self.imported_names: set[str] = set()  # bound by `from module import name`
        self.calls: list[tuple[ast.Call, str | None, tuple[FunctionNode, ...]]] = []
        self._scope: list[str] = []
        self._classes: list[str | None] = [None]  # the class whose body is being visited
        self._self_classes: list[str | None] = [None]  # the class `self` refers to
        self._functions: list[FunctionNode] = []  # enclosing functions, innermost last
        self._visit(tree)

    def _visit(self, node: ast.AST) -> None:
        entered = self._enter(node)
        if self._functions:
            names = identifiers(node)
            if names:
                relevant = any(RELEVANT_IDENTIFIER.search(name) for name in names)
                for function in self._functions:
                    facts = self.function_facts[function]
                    facts.reads.update(names)
                    facts.relevant = facts.relevant or relevant
            if isinstance(node, ast.Attribute):
                if node.attr == GC_ENABLE:
                    for function in self._functions:
                        self.function_facts[function].enables = True
                if isinstance(node.value, ast.Name) and node.value.id == "self":
                    for function in self._functions:
                        self.function_facts[function].reads.add(f"self.{node.attr}")
        if isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Name) or (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name)):
                self.calls.append((node, self._self_classes[-1], tuple(self._functions)))
        elif isinstance(node, ast.ImportFrom):
            self.imported_names.update(alias.asname or alias.name for alias in node.names if alias.name != "*")
        for child in child_nodes(node):
            self._visit(child)
        if entered == "class":
            self._scope.pop()
            self._classes.pop()
        elif entered == "function":
            del self._scope[-2:]
            self._classes.pop()
            self._functions.pop()
            self._self_classes.pop()

    def _enter(self, node: ast.AST) -> str | None:
        if isinstance(node, ast.ClassDef):
            name = ".".join([*self._scope, node.name])
            self.classes[name] = node
            for statement in node.body:
                if (
                    isinstance(statement, ast.Assign)
                    and any(isinstance(t, ast.Name) and t.id == "main_input_name" for t in statement.targets)
                    and string_value(statement.value) is not None
                ):
                    self.main_input_names[name] = string_value(statement.value)
            self._scope.append(node.name)
            self._classes.append(name)
            return "class"
        if isinstance(node, FUNCTION_DEFINITIONS):
            name = ".".join([*self._scope, node.name])
            self.functions[name] = node
            # A method's `self` is its class; a function nested in a method shares it.
            if self._classes[-1] is not None and self._scope and self._scope[-1] == self._classes[-1].rsplit(".", 1)[-1]:
                self.class_of_function[node] = self._classes[-1]
                self._self_classes.append(self._classes[-1])
            else:
                self._self_classes.append(self._self_classes[-1])
            self.function_facts[node] = LocalFunctionFacts()
            self.project_names[node] = f"{self.module_name}.{name}".replace(".<locals>", "")
            self._functions.append(node)
            self._scope.extend([node.name, "<locals>"])
            self._classes.append(None)
            return "function"
        return None
