"""Random numbers torch's checkpoint does not replay, drawn where training runs: Python's
`random`, NumPy's global generator and generators of one's own, torch sampling with an
explicit `generator=` (torch saves and restores only the default CPU and device generators).
They are described in `MethodFacts.random` and the `DRAWS_RANDOM` events beside torch's own
draws, marked with `UNRESTORED`, which only CKPT036's region paths take."""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterator, Sequence

from ckptlint.model.file_facts.training_guards import rules_out_training
from ckptlint.model.library.numpy import GENERATOR_METHODS_NOT_DRAWING, NUMPY_GENERATORS, NUMPY_RANDOM_NOT_DRAWING
from ckptlint.model.library.python import PYTHON_RANDOM_DRAWS, PYTHON_RANDOM_GENERATORS
from ckptlint.model.library.torch import RANDOM_SAMPLING_FUNCTIONS, RANDOM_TENSOR_METHODS
from ckptlint.model.syntax.ast_walk import walk
from ckptlint.model.syntax.call_syntax import is_none, keyword_argument

UNRESTORED = "not replayed: "  # the mark of such a draw's description
# The mark of a global generator seeded there (`np.random.seed(seed)`, a seed not None): the
# draws of a region that seeds it are the same again (transformers' BigBird seeds NumPy with
# its layer's index before drawing its random attention blocks).
SEEDS = f"{UNRESTORED}seeds "
PYTHON_RNG = "Python's RNG"
NUMPY_RNG = "NumPy's global RNG"
_SEEDING = {"random.seed": PYTHON_RNG, "numpy.random.seed": NUMPY_RNG}
_GENERATORS = NUMPY_GENERATORS | PYTHON_RANDOM_GENERATORS
_TORCH_GENERATOR = "torch.Generator"
# torch's samplers taking `generator=` (torch 2.13 reference, "Random sampling"), and the
# tensor methods that sample (`x.uniform_(generator=g)`, `probs.multinomial(1, generator=g)`).
_TORCH_SAMPLERS = RANDOM_SAMPLING_FUNCTIONS | {"torch.bernoulli"}
_TENSOR_SAMPLERS = RANDOM_TENSOR_METHODS | {"bernoulli", "multinomial"}


def generator_attributes(node: ast.ClassDef, resolve: Callable[[ast.AST], str | None]) -> frozenset[str]:
    """The `self` attributes a class binds to a NumPy or Python generator of its own
    (`self.rng = np.random.default_rng(seed)`): their state lives across calls, so the
    recomputation draws the next numbers, seeded or not."""
    found = set()
    for inner in walk(node):
        if isinstance(inner, ast.Assign) and isinstance(inner.value, ast.Call) and _makes_generator(inner.value, resolve):
            for target in inner.targets:
                if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and target.value.id == "self":
                    found.add(target.attr)
    return frozenset(found)


def unrestored_draws(
    function: ast.FunctionDef | ast.AsyncFunctionDef,
    resolve: Callable[[ast.AST], str | None],
    attributes: frozenset[str] = frozenset(),
    never_true: frozenset[str] = frozenset(),
) -> Iterator[tuple[str, str | None]]:
    """The draws of a function body that can run in training, each described with its line
    (`not replayed: `random.random`, Python's RNG (line 12)`), with the `self` attribute of a
    probability that makes it drawn or matter (`self.drop_path > 0 and random.random() <
    self.drop_path`: none drawn, or none deciding anything, where the instance holds only
    zero; as `MethodFacts.random_attributes`; `generator=self.gen`: `gen`, None where the
    instance holds only None), else None. A generator the body makes
    with a seed (`default_rng(0)`, `torch.Generator().manual_seed(0)`) draws the same
    numbers again: not one; made without a seed it draws from the OS's entropy: one."""
    unseeded: set[str] = set()
    seeded: set[str] = set()
    probabilities: dict[int, str] = {}  # id of a draw -> the `self` attribute deciding whether it matters
    # `generator=generator` with the parameter defaulting to None (diffusers' `randn_tensor`
    # style): torch's default generator unless a caller passes one, which is not known here.
    arguments = function.args
    positional = [*arguments.posonlyargs, *arguments.args]
    defaults = [*zip(positional[len(positional) - len(arguments.defaults):], arguments.defaults),
                *((a, d) for a, d in zip(arguments.kwonlyargs, arguments.kw_defaults) if d is not None)]
    seeded |= {argument.arg for argument, default in defaults if is_none(default)}
    for node in _in_training(function.body, never_true):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) and len(node.targets) == 1:
            target = node.targets[0]
            if isinstance(target, ast.Name):
                if _makes_generator(node.value, resolve):
                    (seeded if _seeded(node.value) else unseeded).add(target.id)
                elif (made := _torch_generator(node.value, resolve)) is not None:
                    (seeded if made else unseeded).add(target.id)
        if isinstance(node, ast.Call) and (resolve(node.func) or "") in _SEEDING:
            seed = node.args[0] if node.args else keyword_argument(node, "a") or keyword_argument(node, "seed")
            if seed is not None and not is_none(seed):
                yield f"{SEEDS}{_SEEDING[resolve(node.func)]} (line {node.lineno})", None
        elif isinstance(node, ast.Call):
            description = _draw(node, resolve, attributes, unseeded, seeded)
            if description:
                generator = _self_attribute(keyword_argument(node, "generator"))
                yield f"{UNRESTORED}{description} (line {node.lineno})", probabilities.get(id(node)) or generator
        elif isinstance(node, ast.BoolOp) and isinstance(node.op, ast.And):
            probabilities.update(_guarded_by_probability(node))


def unrestored_call(
    call: ast.Call, resolve: Callable[[ast.AST], str | None], parameters: frozenset[str] = frozenset()
) -> str | None:
    """One call's draw, seen alone (a function outside classes), described without its line;
    `generator=` one of the function's `parameters` is not one (what callers pass, None in
    diffusers' `randn_tensor(shape, generator=None)` style, is not known here)."""
    description = _draw(call, resolve, frozenset(), set(), set(parameters))
    return f"{UNRESTORED}{description}" if description else None


def _draw(call: ast.Call, resolve, attributes: frozenset[str], unseeded: set[str], seeded: set[str]) -> str | None:
    name = resolve(call.func) or ""
    if name in PYTHON_RANDOM_DRAWS:
        return f"`{name}`, {PYTHON_RNG}"
    if name.startswith("numpy.random.") and name.count(".") == 2 and name.rsplit(".", 1)[-1] not in NUMPY_RANDOM_NOT_DRAWING:
        return f"`{name}`, {NUMPY_RNG}"
    func = call.func
    if isinstance(func, ast.Attribute) and func.attr not in GENERATOR_METHODS_NOT_DRAWING and not func.attr.startswith("_"):
        receiver = func.value
        if isinstance(receiver, ast.Name) and receiver.id in unseeded:
            return f"`{receiver.id}.{func.attr}`, a generator made without a seed"
        if (
            isinstance(receiver, ast.Attribute) and isinstance(receiver.value, ast.Name) and receiver.value.id == "self"
            and receiver.attr in attributes
        ):
            return f"`self.{receiver.attr}.{func.attr}`, a generator the module keeps"
        if isinstance(receiver, ast.Call) and _makes_generator(receiver, resolve) and not _seeded(receiver):
            return f"`{func.attr}` of a generator made without a seed"
    generator = keyword_argument(call, "generator")
    if generator is not None and not is_none(generator):
        if isinstance(generator, ast.Name) and generator.id in seeded:
            return None  # seeded where it is made, or a parameter defaulting to None
        if name in _TORCH_SAMPLERS or (not name and isinstance(func, ast.Attribute) and func.attr in _TENSOR_SAMPLERS):
            shown = name.rsplit(".", 1)[-1] if name else func.attr
            return f"`{shown}(generator=...)`, an explicit torch.Generator"
    return None


def _guarded_by_probability(test: ast.BoolOp) -> Iterator[tuple[int, str]]:
    """The draws of an `and` chain that a `self.<p>` written before them, or compared with
    them, decides (`self.p > 0 and random.random() < self.p`)."""
    guard = None
    for value in test.values:
        compared = value.comparators[0] if isinstance(value, ast.Compare) and len(value.comparators) == 1 else None
        sides = (value.left, compared) if compared is not None else (value,)
        attribute = next((_self_attribute(side) for side in sides if _self_attribute(side)), None)
        if attribute == "training":
            continue
        if guard is None and attribute is not None and not any(isinstance(n, ast.Call) for n in walk(value)):
            guard = attribute  # `self.drop_path > 0`, `self.drop_path`
            continue
        for inner in walk(value):
            if isinstance(inner, ast.Call):
                decided = guard or attribute
                if decided is not None:
                    yield id(inner), decided


def _self_attribute(expr: ast.AST | None) -> str | None:
    if isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.Name) and expr.value.id == "self":
        return expr.attr
    return None


def _makes_generator(call: ast.Call, resolve) -> bool:
    return (resolve(call.func) or "") in _GENERATORS


def _torch_generator(call: ast.Call, resolve) -> bool | None:
    """For `torch.Generator(...)`, whether it is seeded there (`.manual_seed(s)` called on
    it); None for any other call."""
    seeded = False
    while isinstance(call.func, ast.Attribute) and isinstance(call.func.value, ast.Call) and call.func.attr == "manual_seed":
        call, seeded = call.func.value, True
    return seeded if (resolve(call.func) or "") == _TORCH_GENERATOR else None


def _seeded(call: ast.Call) -> bool:
    """`default_rng(0)`, `random.Random(seed)`: a seed other than None is given."""
    seed = call.args[0] if call.args else keyword_argument(call, "seed")
    return seed is not None and not is_none(seed)


def _in_training(body: Sequence[ast.stmt], never_true: frozenset[str]) -> Iterator[ast.AST]:
    """The nodes of a body that can run in training, in source order of statements: the
    branches a test rules out (`if not self.training:`) left out, the tests themselves in
    (`if random.random() < self.p:`), nested functions and classes left out."""
    for statement in body:
        if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        if isinstance(statement, ast.If):
            yield from walk(statement.test)
            outside_training = rules_out_training(statement.test, never_true)
            if outside_training is not True:
                yield from _in_training(statement.body, never_true)
            if outside_training is not False:
                yield from _in_training(statement.orelse, never_true)
            if outside_training is False and statement.body and isinstance(statement.body[-1], (ast.Return, ast.Raise)):
                return
        elif isinstance(statement, (ast.For, ast.AsyncFor, ast.While)):
            yield from walk(statement.iter if isinstance(statement, (ast.For, ast.AsyncFor)) else statement.test)
            yield from _in_training(statement.body, never_true)
            yield from _in_training(statement.orelse, never_true)
        elif isinstance(statement, (ast.With, ast.AsyncWith)):
            for item in statement.items:
                yield from walk(item.context_expr)
            yield from _in_training(statement.body, never_true)
        elif isinstance(statement, ast.Try):
            for block in (statement.body, *(h.body for h in statement.handlers), statement.orelse, statement.finalbody):
                yield from _in_training(block, never_true)
        else:
            yield from walk(statement)
