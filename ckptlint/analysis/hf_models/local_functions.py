"""The file's definitions as the interpreter needs them (`FileDefinitions`, collected in the
shared traversal), and which functions are worth interpreting: the names each reads and
whether it mentions anything the interpreter follows, through the functions of the file it
calls too."""

from __future__ import annotations

import re
from collections.abc import Sequence

from ckptlint.lazy_libcst import cst

from ckptlint.analysis.hf_models.syntax import body_of
from ckptlint.analysis.huggingface import GC_ENABLE


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
        self.callees: set[cst.FunctionDef] = set()


def close_over_callees(facts: dict[cst.FunctionDef, LocalFunctionFacts]) -> None:
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


class FileDefinitions(cst.BatchableCSTVisitor):
    """The file's classes and functions (by dotted name, nested ones under `<locals>`), the
    class each method's `self` is, what each function reads, the statements a fix may insert
    after, and the calls that may run a function of the file (resolved once names are). A
    visitor of the shared traversal (`Rule.uses_script_models`), or walked on its own."""

    def __init__(self, module_name: str) -> None:
        super().__init__()
        self.module_name = module_name
        self.functions: dict[str, cst.FunctionDef] = {}
        self.classes: dict[str, cst.ClassDef] = {}
        self.class_of_function: dict[cst.FunctionDef, str] = {}
        self.main_input_names: dict[str, str] = {}  # same-file model classes that declare it
        self.function_facts: dict[cst.FunctionDef, LocalFunctionFacts] = {}
        self.project_names: dict[cst.FunctionDef, str] = {}  # as the project model names functions
        self.imported_names: set[str] = set()  # bound by `from module import name`
        self.insertable: set[cst.SimpleStatementLine] = set()
        self.calls: list[tuple[cst.Call, str | None, tuple[cst.FunctionDef, ...]]] = []
        self._scope: list[str] = []
        self._classes: list[str | None] = [None]  # the class whose body is being visited
        self._self_classes: list[str | None] = [None]  # the class `self` refers to
        self._functions: list[cst.FunctionDef] = []  # enclosing functions, innermost last

    def _note_insertable(self, body: Sequence[cst.BaseStatement]) -> None:
        for statement in body:
            if isinstance(statement, cst.SimpleStatementLine):
                self.insertable.add(statement)

    def visit_Module(self, node: cst.Module) -> None:
        self._note_insertable(node.body)

    def visit_IndentedBlock(self, node: cst.IndentedBlock) -> None:
        self._note_insertable(node.body)

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        if not isinstance(node.names, cst.ImportStar):
            for alias in node.names:
                bound = alias.asname.name if alias.asname is not None else alias.name
                if isinstance(bound, cst.Name):
                    self.imported_names.add(bound.value)

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        name = ".".join([*self._scope, node.name.value])
        self.classes[name] = node
        for statement in body_of(node):
            if isinstance(statement, cst.SimpleStatementLine):
                for small in statement.body:
                    if (
                        isinstance(small, cst.Assign)
                        and any(isinstance(t.target, cst.Name) and t.target.value == "main_input_name" for t in small.targets)
                        and isinstance(small.value, cst.SimpleString)
                    ):
                        self.main_input_names[name] = str(small.value.evaluated_value)
        self._scope.append(node.name.value)
        self._classes.append(name)

    def leave_ClassDef(self, original_node: cst.ClassDef) -> None:
        self._scope.pop()
        self._classes.pop()

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        name = ".".join([*self._scope, node.name.value])
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
        self._scope.extend([node.name.value, "<locals>"])
        self._classes.append(None)

    def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
        del self._scope[-2:]
        self._classes.pop()
        self._functions.pop()
        self._self_classes.pop()

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if isinstance(func, cst.Name) or (isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name)):
            self.calls.append((node, self._self_classes[-1], tuple(self._functions)))

    def visit_Name(self, node: cst.Name) -> None:
        if self._functions:
            relevant = bool(RELEVANT_IDENTIFIER.search(node.value))
            for function in self._functions:
                facts = self.function_facts[function]
                facts.reads.add(node.value)
                facts.relevant = facts.relevant or relevant

    def visit_Attribute(self, node: cst.Attribute) -> None:
        if node.attr.value == GC_ENABLE:
            for function in self._functions:
                self.function_facts[function].enables = True
        if isinstance(node.value, cst.Name) and node.value.value == "self":
            for function in self._functions:
                self.function_facts[function].reads.add(f"self.{node.attr.value}")
