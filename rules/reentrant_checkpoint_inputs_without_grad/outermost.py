"""Whether a module class is the outermost model: what its `forward` is given is the raw
input a training step feeds it (a batch of images or token ids, which never require grad),
not the activations of a parent module.

Asked of the project's call graph (`ProjectIndex.call_sites`), conservatively: the class is
built somewhere, every call that may build it (any call by its name, in any file that can
name it) sits outside classes (a script, a `main()`, a builder function called outside
classes in turn), it is never held as a value (a registry table, a class handed to a
builder: who builds it then is not known), and no project class derives from it (a
subclass may be a block of a parent), and where the project calls the instance it passes
data (a batch from a loader), not another model's output. A class built by a parent module's `__init__`
(`self.backbone = Backbone()`) is a block, whatever its `forward` is called with.
"""

from __future__ import annotations

from ckptlint.model.form.summary import ASSIGN, ELEMENTS, MODULE_LEVEL, dotted_absolute
from ckptlint.model.library.combined import SAME_MODEL_FUNCTIONS, SAME_MODEL_METHODS
from ckptlint.model.library.torch import GRAD_PRESERVING_METHODS
from ckptlint.model.syntax.names import is_test_path

_MAX_BUILDER_DEPTH = 3


def outermost_model(project, class_name: str) -> str | None:
    """Where the project builds `class_name` as its outermost model (`train.py:12`, the
    first place outside tests), or None when it is, or may be, a block of another module."""
    facts = project.class_named(class_name)
    if facts is None:
        return None
    if project.subclasses_of(facts.name):
        return None
    places = _built_outside_classes(project, f"{facts.name}.__init__", 0)
    if not places:
        return None
    places.sort(key=lambda place: (is_test_path(place[0]), place))
    return f"{places[0][0]}:{places[0][1]}"


def _built_outside_classes(project, function: str, depth: int) -> list[tuple[str, int]] | None:
    """(path, line) of the calls of `function` (a constructor, or a builder returning what it
    builds), all of them outside classes and each bound to a name or returned as it is
    (`model = Net()`, `model = FSDP(Net().cuda())`, `return Net()`); None when any is inside
    a class or inside another expression (`nn.Sequential(Stem(), Net())`, `(Net(), Lm())`),
    or none is found."""
    module = function.rsplit(".", 2)[0] if function.endswith(".__init__") else function.rsplit(".", 1)[0]
    call_sites = project.call_sites
    if call_sites.named_as_value(function, module):
        return None
    calls = list(call_sites.calls_of(function, module))
    if not calls:
        return None
    short = function.rsplit(".", 2)[-2] if function.endswith(".__init__") else function.rsplit(".", 1)[-1]
    places: list[tuple[str, int]] = []
    for path, caller, _, line in calls:
        if _in_class(project, caller.name):
            return None
        facts = project.files.get(path)
        names = dict(facts.names) if facts is not None else {}
        bound = [b for b in caller.bindings if b.line == line and b.how == ASSIGN and _direct(b.value, short, names)]
        returned = any(_direct(value, short, names) for value, _ in caller.returns)
        if not (bound or returned):
            return None
        if any(b.pattern[0] == "name" and not _fed_data(project, caller, names, b.pattern[1], 0) for b in bound):
            return None  # `denoiser(context)`, `context` a text encoder's output
        if caller.name.endswith(f".{MODULE_LEVEL}") or not (returned or _returns_a_name(caller)):
            places.append((path, line))
            continue
        if depth >= _MAX_BUILDER_DEPTH:
            return None
        further = _built_outside_classes(project, caller.name, depth + 1)  # `def build_model(): return Net()`
        if further is None:
            return None
        places.extend(further)
    return places


def _fed_data(project, summary, names: dict[str, str], instance: str, depth: int) -> bool:
    """Whether every call of `instance` the summary shows (in what it binds, returns or hands
    to a project function) passes data: a loop's element (`for images, labels in loader`),
    an item of one (`batch["latents"]`), a parameter, converted by `.to()`, `.cuda()`...; not
    another model's output (`context = text_encoder(ids)[0]`; `denoiser(context)`). A
    project function the instance is handed to is read the same way, its parameter for the
    instance (calls written as bare statements are not in the summaries)."""
    expressions = [*(b.value for b in summary.bindings), *(value for value, _ in summary.returns), *(c for c, _ in summary.passes)]
    bindings: dict[str, list] = {}
    for binding in summary.bindings:
        if binding.pattern[0] == "name":
            bindings.setdefault(binding.pattern[1], []).append(binding)
    parameters = {p.name for p in summary.parameters}
    for expr in expressions:
        for call in _calls_in(expr):
            arguments = [*call[2], *(value for _, value in call[3])]
            if call[1] == ("name", instance):
                if not all(_is_data(a, bindings, parameters, 0) for a in arguments):
                    return False
            elif ("name", instance) in call[2] and depth < 2:
                handed = _handed_to(project, call[1], names, summary)
                if handed is None:
                    continue  # a library's (an optimizer's, a wrapper's): it does not feed the model
                function, position = handed, call[2].index(("name", instance))
                if position < len(function.parameters) and not _fed_data(
                    project, function, names, function.parameters[position].name, depth + 1
                ):
                    return False
    return True


def _calls_in(expr):
    if not isinstance(expr, tuple) or not expr:
        return
    if expr[0] == "call":
        yield expr
    for part in expr[1:]:
        if isinstance(part, tuple):
            yield from _calls_in(part)


def _is_data(expr, bindings, parameters, depth: int) -> bool:
    kind = expr[0] if isinstance(expr, tuple) and expr else None
    if depth > 6 or kind is None:
        return False
    if kind == "const":
        return True
    if kind == "index":
        return _is_data(expr[1], bindings, parameters, depth + 1)
    if kind == "call" and expr[1][0] == "attr" and expr[1][2] in GRAD_PRESERVING_METHODS:
        return _is_data(expr[1][1], bindings, parameters, depth + 1)
    if kind == "name":
        found = bindings.get(expr[1], [])
        if not found:
            return expr[1] in parameters
        return all(
            b.how == ELEMENTS or (b.how == ASSIGN and _is_data(b.value, bindings, parameters, depth + 1)) for b in found
        )
    return False


def _handed_to(project, callee, names: dict[str, str], summary):
    """The summary of the project function a call runs (`train(model, loader)`), if known."""
    if callee[0] != "name":
        return None
    module = summary.name.rsplit(".", 2)[0] if summary.name.endswith(f".{MODULE_LEVEL}") else summary.name.rsplit(".", 1)[0]
    absolute = names.get(callee[1], f"{module}.{callee[1]}")
    return project.function_summary(absolute)


def _direct(expr, short: str, names: dict[str, str]) -> bool:
    """Whether `expr` is the construction itself, through what hands the same model back
    (`.cuda()`, `.to(device)`, `torch.compile(...)`, `DDP(...)`, `FSDP(...)`)."""
    if expr[0] != "call":
        return False
    func, arguments = expr[1], expr[2]
    if _last_name(func) == short:
        return True
    if func[0] == "attr" and func[2] in SAME_MODEL_METHODS:
        return _direct(func[1], short, names)
    if arguments and dotted_absolute(func, names) in SAME_MODEL_FUNCTIONS:
        return _direct(arguments[0], short, names)
    return False


def _in_class(project, name: str) -> bool:
    """Whether a function (`pkg.mod.Parent.__init__`, `pkg.mod.Parent.forward.inner`) is a
    method of a class, or nested in one."""
    parts = name.split(".")
    return any(project.is_class(".".join(parts[:end])) for end in range(1, len(parts)))


def _returns_a_name(caller) -> bool:
    """Whether the caller returns anything but constants and calls (a name bound to what it
    built, a container of it, or what is not known here)."""
    return any(value[0] not in ("const", "call") for value, _ in caller.returns)


def _last_name(expr) -> str | None:
    if expr[0] == "name":
        return expr[1]
    if expr[0] == "attr":
        return expr[2]
    return None
