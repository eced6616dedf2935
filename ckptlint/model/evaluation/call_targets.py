"""Which project functions a call runs: a function itself; a class its constructor, own or
inherited through its bases; `super().<method>(...)` the next base's method; a variable the
classes or functions it may hold (`trainer_class = trainers.DPOTrainer`,
`getattr(trainers, config.trainer)`). Asked by `ckptlint.model.evaluation.fates` where it follows a
model into a call, and by the rules through it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ckptlint.model.file_facts.hf_events import SUPER_CALL
from ckptlint.model.form.values import ClassRef, FunctionRef

if TYPE_CHECKING:
    from ckptlint.model.file_facts.facts import FunctionFacts
    from ckptlint.model.evaluation.denotation import Denotation
    from ckptlint.model.project.project_facts import ProjectFacts


@dataclass(frozen=True)
class Callee:
    """A project function a call runs; for a constructor, the class of the object it builds."""

    function: str
    instance: str | None = None


def called_functions(denotation: Denotation, callee: str) -> tuple[Callee, ...] | None:
    """The project functions a call of project name `callee` may run (None: not known):
    - a function runs itself;
    - a class (`Trainer(accelerator, model)`) runs its constructor, its own or the one it
      inherits (`class DPOTrainer(BasicTrainer)` with no `__init__`), which gets the
      arguments (not its class body, which a class holding a model class as an attribute,
      `policy_hf_model_class = AutoModelForCausalLM`, has facts for too);
    - a variable holding a class or function (`TrainerClass = trainers.DPOTrainer`, or
      `getattr(trainers, config.trainer)`: any public class or function of that module)
      runs what each of them runs; one holding something not known (a library class, a
      value computed at run time) is not known."""
    index = denotation.index
    if index.class_named(callee) is not None:
        return _constructor(index, callee)
    if index.function_summary(callee) is not None:
        return (Callee(callee),)
    values = denotation.named(callee)
    names = sorted(
        value.name for value in values
        if isinstance(value, (ClassRef, FunctionRef)) and not value.bound and (
            index.class_named(value.name) is not None or index.function_summary(value.name) is not None)
    )
    if not names or len(names) != len(values):
        return (Callee(callee),) if not values else None
    found: list[Callee] = []
    for name in names:
        candidates = called_functions(denotation, name) if name != callee else None
        if candidates is None:
            return None
        found.extend(c for c in candidates if c not in found)
    return tuple(found)


def _constructor(index: ProjectFacts, class_name: str) -> tuple[Callee, ...] | None:
    """The `__init__` a project class's instances are built by: its own, or the first one
    its bases define in method order; the class itself where none does (`object`'s, which
    takes nothing); None where a library base's runs."""
    facts = index.class_named(class_name)
    if facts is None:
        return None
    for owner in method_order(index, facts.name):
        if index.class_named(owner) is None:
            return None  # a library base's constructor: not visible
        if index.function_summary(f"{owner}.__init__") is not None:
            return (Callee(f"{owner}.__init__", facts.name),)
    return (Callee(facts.name, facts.name),)


def super_method(index: ProjectFacts, callee: str, instance: str | None) -> tuple[Callee, ...] | None:
    """What `super().<method>(...)` in a method of class `cls` runs (`callee` is
    `cls.<super>.<method>`): the method of the next class after `cls` in the method order
    of the object's class (`instance`, else `cls`); () where no class defines it (`object`'s
    constructor), None where a library class comes first."""
    cls, _, method = callee.partition(f".{SUPER_CALL}.")
    order = method_order(index, instance if instance is not None else cls)
    if cls not in order:
        order = method_order(index, cls)
    for owner in order[order.index(cls) + 1:]:
        if index.class_named(owner) is None:
            return None
        if index.function_summary(f"{owner}.{method}") is not None:
            return (Callee(f"{owner}.{method}", instance if instance is not None else cls),)
    return ()


def method_order(index: ProjectFacts, class_name: str) -> list[str]:
    """The class and its bases, depth first and left to right: Python's method resolution
    order for the single-inheritance chains and leading mixins of training code. Bases the
    project does not define are named as written and not gone into."""
    found: list[str] = []

    def visit(name: str) -> None:
        facts = index.class_named(name)
        resolved = facts.name if facts is not None else name
        if resolved in found or len(found) >= 64 or resolved in ("object", "builtins.object"):
            return
        found.append(resolved)
        for base in facts.bases if facts is not None else ():
            visit(base)

    visit(class_name)
    return found


def class_methods(index: ProjectFacts, order: list[str]) -> list[FunctionFacts]:
    """The methods with facts an object of the class whose method order is `order` has:
    for each name, the first class's that defines one."""
    methods: dict[str, FunctionFacts] = {}
    for owner in order:
        facts = index.facts_of(owner) if index.class_named(owner) is not None else None
        for method in facts.functions if facts is not None else ():
            cls, _, short = method.name.rpartition(".")
            if cls == owner and short not in methods:
                methods[short] = method
    return list(methods.values())
