"""What a class's methods do when they run in training, for the region rules: the random
operations they run (dropout with a non-zero probability), the `self` attributes they use,
call and put in eval mode, and the state they write (assignments to `self`, in-place tensor
methods, container mutators, `global` / `nonlocal`), leaving out code that cannot run in
training (`if not self.training:`, a flag the class only ever sets to False, KV-cache
writes behind `use_cache`). Read with `ast` by `ckptlint.model.file_facts.extraction`.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterator, Mapping, Sequence

from ckptlint.model.syntax.ast_walk import statements, walk
from ckptlint.model.syntax.call_syntax import definitions, dotted, keyword_argument
from ckptlint.model.file_facts.facts import CheckpointCall, MethodFacts
from ckptlint.model.file_facts.unrestored_draws import UNRESTORED, generator_attributes, unrestored_draws
from ckptlint.model.file_facts.training_guards import (  # noqa: F401  (self_attribute: used by other modules)
    attached_from_outside, flags_never_set, in_training, self_attribute,
)
from ckptlint.model.library.combined import DROPOUT_FUNCTIONS, LIBRARY_PREFIXES
from ckptlint.model.library.python import CONTAINER_MUTATORS
from ckptlint.model.library.torch import (
    IDEMPOTENT_CONVERSIONS, IDEMPOTENT_IN_PLACE_METHODS, IN_PLACE_METHODS, RANDOM_SAMPLING_FUNCTIONS, RANDOM_TENSOR_METHODS, TORCH_CHECKPOINT_FUNCTIONS,
)


_REGION_WORDS = (
    "checkpoint", "dropout", "Dropout", "drop_path", "DropPath", "rand", "bernoulli", "dropout_p", ".eval(",
    "uniform_", "normal_", "self.", "global ", "nonlocal ",
)


def is_zero(expr: ast.AST | None) -> bool:
    return isinstance(expr, ast.Constant) and not isinstance(expr.value, bool) and expr.value == 0


def state_mutations(
    body: Sequence[ast.stmt],
    never_true: frozenset[str] = frozenset(),
    checked: frozenset[str] = frozenset(),
    module_level: Callable[[ast.AST], bool] | None = None,
) -> list[str]:
    """Writes to `self` state (assignments, in-place tensor methods, container mutators),
    `global` / `nonlocal` writes, and elements added to a list the module holds
    (`module_level`: `ACT.append(x)`, `stats.NORMS.append(x)`) that can run in training; a
    plain assignment to a `checked` attribute (set once its check passes) is not one."""
    found: list[tuple[int, str]] = []  # (id of the writing node, what it writes)
    declared: set[str] = set()
    read_from = _first_reads(body)
    for statement in in_training(body, never_true):
        if isinstance(statement, (ast.Global, ast.Nonlocal)):
            declared.update(statement.names)
            continue
        for inner in walk(statement):
            if isinstance(inner, (ast.Assign, ast.AnnAssign)) and is_literal(inner.value):
                continue  # `self._warned = True`: the recomputation writes the same value
            if isinstance(inner, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
                targets = inner.targets if isinstance(inner, ast.Assign) else [inner.target]
                for target in targets:
                    if _sets_checked(inner, target, checked):
                        continue  # `self.max_seq_len_cached = seq_len` once `seq_len > self.max_seq_len_cached`
                    if converts_itself(target, inner.value) or overwrites(inner, target, read_from):
                        continue  # the recomputation writes the value the forward wrote (`self.mask = self.mask.to(x.dtype)`)
                    if self_attribute(target) is not None:
                        found.append((id(inner), f"`{ast.unparse(target)}` assigned (line {inner.lineno})"))
                    elif isinstance(target, ast.Name) and target.id in declared:
                        found.append((id(inner), f"`{target.id}` (global or nonlocal) assigned (line {inner.lineno})"))
            elif isinstance(inner, ast.Call) and isinstance(inner.func, ast.Attribute):
                if self_attribute(inner.func.value) is not None and inner.func.attr in IN_PLACE_METHODS | CONTAINER_MUTATORS:
                    if inner.func.attr in IDEMPOTENT_IN_PLACE_METHODS and _fixed_arguments(inner):
                        continue  # `self.scale.clamp_(max=self.max_scale)`: the same value again
                    found.append((id(inner), f"`{ast.unparse(inner.func)}(...)` (line {inner.lineno})"))
                elif inner.func.attr in _GROWING and module_level is not None and module_level(inner.func.value):
                    # A list of the module's grows by one more element in the recomputation (a
                    # dict or set written again with the same key is not counted: a cache).
                    found.append((id(inner), f"`{ast.unparse(inner.func)}(...)` on a module-level list (line {inner.lineno})"))
    if not found:
        return []
    # A memo filled once per key: the recomputation finds the key and writes nothing.
    memoized = _filled_on_a_miss(body)
    return list(dict.fromkeys(text for node, text in found if node not in memoized))


_GROWING = frozenset({"append", "extend", "insert"})


def _filled_on_a_miss(body: Sequence[ast.stmt]) -> frozenset[int]:
    """The writes to `self.<cache>` under `if key not in self.<cache>:` (DiffSynth's rotary
    `register_grid_size`): a memo filled once per key, which the recomputation finds filled
    and does not write again. As ids of the writing nodes."""
    found: set[int] = set()
    for statement in body:
        for node in walk(statement):
            test = node.test if isinstance(node, ast.If) else None
            if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.NotIn)):
                continue
            cache = test.comparators[0]
            if not (isinstance(cache, ast.Attribute) and isinstance(cache.value, ast.Name) and cache.value.id == "self"):
                continue
            code = ast.unparse(cache)
            for inner in (n for s in node.body for n in walk(s)):
                if isinstance(inner, (ast.Assign, ast.AnnAssign)):
                    targets = inner.targets if isinstance(inner, ast.Assign) else [inner.target]
                    if all(isinstance(t, ast.Subscript) and ast.unparse(t.value) == code for t in targets):
                        found.add(id(inner))
                elif (
                    isinstance(inner, ast.Call) and isinstance(inner.func, ast.Attribute)
                    and inner.func.attr in ("update", "setdefault") and ast.unparse(inner.func.value) == code
                ):
                    found.add(id(inner))
    return frozenset(found)


def bound_names(function: ast.FunctionDef | ast.AsyncFunctionDef) -> frozenset[str]:
    """The names a function binds itself (parameters, assignments, loop and `with` targets,
    imports), less those it declares `global` / `nonlocal`."""
    arguments = function.args
    names = {a.arg for a in (*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs)}
    names |= {a.arg for a in (arguments.vararg, arguments.kwarg) if a is not None}
    declared: set[str] = set()
    for node in walk(function):
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            names.add(node.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            declared.update(node.names)
    return frozenset(names - declared)


def _sets_checked(assignment: ast.AST, target: ast.AST, checked: frozenset[str]) -> bool:
    """A plain assignment of a checked attribute from something else (`self.n = self.n + 1`
    under `if self.n < k:` still counts twice, and is a write)."""
    if not (isinstance(assignment, ast.Assign) and isinstance(target, ast.Attribute)):
        return False
    attribute = self_attribute(target)
    return attribute in checked and not any(
        isinstance(n, ast.Attribute) and self_attribute(n) == attribute for n in walk(assignment.value)
    )


def converts_itself(target: ast.AST, value: ast.AST | None) -> bool:
    """`self.a = self.a.to(x.dtype)`, also `... if self.a is not None else None` (CLIP's
    attention mask): a write the recomputation repeats with the same result."""
    if self_attribute(target) is None or value is None:
        return False
    if isinstance(value, ast.IfExp):
        return all(
            converts_itself(target, branch) or (isinstance(branch, ast.Constant) and branch.value is None)
            for branch in (value.body, value.orelse)
        )
    conversions = 0
    while isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and value.func.attr in IDEMPOTENT_CONVERSIONS:
        value, conversions = value.func.value, conversions + 1
    return conversions > 0 and ast.unparse(value) == ast.unparse(target)


def _first_reads(body: Sequence[ast.stmt]) -> dict[str, int]:
    """The first line each `self.<attr>` is read on in a method."""
    found: dict[str, int] = {}
    for statement in body:
        for node in walk(statement):
            if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load):
                if isinstance(node.value, ast.Name) and node.value.id == "self":
                    found[node.attr] = min(found.get(node.attr, node.lineno), node.lineno)
    return found


def overwrites(assignment: ast.AST, target: ast.AST, read_from: dict[str, int]) -> bool:
    """`self.modulator = self.h(ctx)`: a plain `self` attribute set to a value that does not
    read it, and not read earlier in the method. The recomputation computes the same value
    from the same inputs and sets it again, so nothing moves twice (a counter `self.n =
    self.n + 1`, or `n = self.n` then `self.n = n + 1`, reads itself first and does;
    `self.cache[k] = v` and `self.stats.n = ...` write into objects and are kept)."""
    if not (isinstance(assignment, (ast.Assign, ast.AnnAssign)) and isinstance(target, ast.Attribute)):
        return False
    if not (isinstance(target.value, ast.Name) and target.value.id == "self") or assignment.value is None:
        return False
    if read_from.get(target.attr, assignment.lineno) < assignment.lineno:
        return False
    return not any(
        isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == "self" and n.attr == target.attr
        for n in walk(assignment.value)
    )


def _fixed_arguments(call: ast.Call) -> bool:
    """Whether every argument of the call is a literal or a `self` attribute (a bound the
    module holds), the same when the recomputation calls it again."""
    values = [*call.args, *(keyword.value for keyword in call.keywords)]
    return all(is_literal(value) or self_attribute(value) is not None for value in values)


def is_literal(node: ast.AST | None) -> bool:
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.Not)):
        node = node.operand
    return isinstance(node, ast.Constant)


def first_argument(call: ast.Call) -> ast.AST | None:
    return call.args[0] if call.args else keyword_argument(call, "mode")


def is_false(expr: ast.AST | None) -> bool:
    return isinstance(expr, ast.Constant) and expr.value is False


def checked_attributes(tree: ast.AST) -> frozenset[str]:
    """The `self` attributes a file's classes set only after checking them: `if seq_len >
    self.max_seq_len_cached: self._set_cos_sin_cache(seq_len)` (the rotary caches of
    Llama-derived code, set in the method it calls, in a subclass too), `if self.table is
    None: self.table = ...` or its `else:` form (`if self.cache is not None: ... else: ...;
    self.cache = ...`, litgpt's adapter prefix). A recomputation finds the check already passed and writes
    nothing: such writes are not state that moves twice. Only the `if` statements of
    methods are read, and only the statements directly under them."""
    found: set[str] = set()
    for cls in (n for n in definitions(getattr(tree, "body", ())) if isinstance(n, ast.ClassDef)):
        for method in definitions(cls.body):
            if not isinstance(method, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in statements(method.body):
                if isinstance(node, ast.If):
                    found |= _checked_then_set(node)
    return frozenset(found)


def _checked_then_set(node: ast.If) -> set[str]:
    checked = {self_attribute(n) for n in walk(node.test) if isinstance(n, ast.Attribute)} - {None}
    if not checked:
        return set()
    assigned: set[str] = set()
    # Either branch: `if self.cache is not None: k = self.cache else: ...; self.cache = k`
    for statement in (*node.body, *node.orelse):
        if isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Call):
            if self_attribute(statement.value.func) is not None:  # `self._set_cos_sin_cache(seq_len)`
                return checked
        elif isinstance(statement, ast.Assign):
            assigned.update(self_attribute(target) for target in statement.targets)
    return checked & assigned


SUPER_CALL = "super()."  # `MethodFacts.methods`: a base's method called through `super()`


def methods_of(
    node: ast.ClassDef,
    lines: Sequence[str],
    resolve: Callable[[ast.AST], str | None],
    checked: Callable[[], frozenset[str]] = frozenset,
    module_functions: Mapping[str, ast.FunctionDef] | None = None,
    module_names: frozenset[str] = frozenset(),
) -> tuple[MethodFacts, ...]:
    """What each method of a class (and each function nested in one) does when it runs in
    training: the random operations it runs (also in the module-level functions of the file
    it calls, `module_functions`: DropPath's `drop_path(x, self.p, self.training)`), the
    `self` attributes it uses, calls, puts in eval mode and writes (not the `checked`
    attributes: `checked_attributes`)."""
    # Only classes whose text can matter to a region are summarised method by method.
    text = "\n".join(lines[node.lineno - 1 : node.end_lineno or node.lineno])
    if not any(word in text for word in _REGION_WORDS):
        return ()
    never_true = flags_never_set(node) | (attached_from_outside(node) if "hasattr(" in text else frozenset())
    may_draw_unrestored = "rand" in text or "generator" in text
    generators = generator_attributes(node, resolve) if may_draw_unrestored else frozenset()
    checked_here = checked()
    methods = []
    # Methods, and the functions nested in them (`forward._inner_forward`): those close
    # over `self` and are what the mm* libraries checkpoint.
    pending = [
        (method.name, method)
        for method in node.body
        if isinstance(method, (ast.FunctionDef, ast.AsyncFunctionDef)) and method.name != "__init__"
    ]
    while pending:
        name, method = pending.pop(0)
        pending.extend(
            (f"{name}.{inner.name}", inner)
            for inner in definitions(method.body)
            if isinstance(inner, (ast.FunctionDef, ast.AsyncFunctionDef))
        )
        random: list[str] = []
        random_attributes: list[tuple[str, str]] = []
        attributes: set[str] = set()
        called: set[str] = set()
        evaluated: set[str] = set()
        for inner in walk(method):
            if isinstance(inner, ast.Attribute) and isinstance(inner.value, ast.Name) and inner.value.id == "self":
                attributes.add(inner.attr)
            elif isinstance(inner, ast.Call):
                if (
                    isinstance(inner.func, ast.Attribute)
                    and (inner.func.attr == "eval" or (inner.func.attr == "train" and is_false(first_argument(inner))))
                    and isinstance(inner.func.value, ast.Attribute)
                    and isinstance(inner.func.value.value, ast.Name)
                    and inner.func.value.value.id == "self"
                ):
                    evaluated.add(inner.func.value.attr)
                description = random_call(inner, resolve)
                if description:
                    random.append(f"{description} (line {inner.lineno})")
                    attribute = probability_attribute(inner, resolve)
                    if attribute is not None:
                        random_attributes.append((random[-1], attribute))
                elif isinstance(inner.func, ast.Name) and inner.func.id in (module_functions or {}):
                    helper = (module_functions or {})[inner.func.id]
                    random.extend(
                        f"`{helper.name}`: {found} (line {call.lineno})" for call in walk(helper)
                        if isinstance(call, ast.Call) and (found := random_call(call, resolve))
                    )
                    random.extend(
                        f"{UNRESTORED}`{helper.name}`: {found.removeprefix(UNRESTORED)}"
                        for found, _ in unrestored_draws(helper, resolve)
                    )
        if may_draw_unrestored:  # Python's, NumPy's or an explicit generator's draws (CKPT036)
            for found, attribute in unrestored_draws(method, resolve, generators, never_true):
                random.append(found)
                if attribute is not None:
                    random_attributes.append((found, attribute))
        # The methods it calls where training can reach them (`super().forward(x)` as
        # `super().forward`: its base's).
        for statement in in_training(method.body, never_true):
            for inner in walk(statement):
                if not (isinstance(inner, ast.Call) and isinstance(inner.func, ast.Attribute)):
                    continue
                receiver = inner.func.value
                if isinstance(receiver, ast.Name) and receiver.id == "self":
                    called.add(inner.func.attr)
                elif (
                    isinstance(receiver, ast.Call) and isinstance(receiver.func, ast.Name) and receiver.func.id == "super"
                    and not receiver.args
                ):
                    called.add(f"{SUPER_CALL}{inner.func.attr}")
        methods.append(
            MethodFacts(
                name, tuple(random), tuple(sorted(attributes)), tuple(sorted(called)), tuple(sorted(evaluated)),
                tuple(state_mutations(method.body, never_true, checked_here, _module_level_list(method, resolve, module_names))),
                tuple(checkpoint_calls(method.body, resolve)),
                tuple(random_attributes),
            )
        )
    return tuple(methods)


def _module_level_list(
    method: ast.FunctionDef | ast.AsyncFunctionDef, resolve: Callable[[ast.AST], str | None], module_names: frozenset[str]
):
    """Whether an expression in `method` is a name the module assigns (`module_names`) and
    the method does not bind, or a name imported from the project (`stats.ACT_NORMS`); not a
    library's (`sys.path`)."""
    local = bound_names(method)

    def module_level(expr: ast.AST) -> bool:
        root = expr
        while isinstance(root, ast.Attribute):
            root = root.value
        if not isinstance(root, ast.Name) or root.id in local or root.id == "self":
            return False
        if root.id in module_names:
            return True
        name = resolve(expr)
        return name is not None and not name.startswith(LIBRARY_PREFIXES) and not name.startswith("builtins")

    return module_level


def checkpoint_calls(
    body: Sequence[ast.stmt],
    resolve: Callable[[ast.AST], str | None],
    flags: tuple[str, ...] = (),
    loops: Mapping[str, str] | None = None,
) -> Iterator[CheckpointCall]:
    """The `torch.utils.checkpoint` calls of a body (not of functions nested in it), each
    with the `self` flags of the `if` tests it sits under (`if self.with_cp and
    x.requires_grad:` -> `with_cp`) and whether a `return` returns its value; `loops`: the
    loop variables over `self` containers in scope (`layer` -> `self.layers[*]`)."""
    loops = loops or {}
    for statement in body:
        if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        if isinstance(statement, ast.If):
            yield from _checkpoints_in(statement.test, resolve, flags, loops)
            yield from checkpoint_calls(statement.body, resolve, flags + guard_flags(statement.test), loops)
            yield from checkpoint_calls(statement.orelse, resolve, flags, loops)
            continue
        blocks = [getattr(statement, name, None) for name in ("body", "orelse", "finalbody")]
        blocks += [handler.body for handler in getattr(statement, "handlers", ())]
        blocks = [block for block in blocks if isinstance(block, list)]
        if not blocks:
            returned = statement.value if isinstance(statement, ast.Return) else None
            yield from _checkpoints_in(statement, resolve, flags, loops, returned)
            continue
        for header in ("test", "iter", "items"):
            part = getattr(statement, header, None)
            for node in part if isinstance(part, list) else [part] if part is not None else []:
                yield from _checkpoints_in(node, resolve, flags, loops)
        inner_loops = loops
        if isinstance(statement, (ast.For, ast.AsyncFor)) and isinstance(statement.target, ast.Name):
            source = dotted(statement.iter)
            if source is not None and source.startswith("self."):
                inner_loops = {**loops, statement.target.id: f"{source}[*]"}
        for block in blocks:
            yield from checkpoint_calls(block, resolve, flags, inner_loops)


def _checkpoints_in(
    node: ast.AST, resolve, flags: tuple[str, ...], loops: Mapping[str, str], returned: ast.AST | None = None
) -> Iterator[CheckpointCall]:
    for inner in walk(node):
        if isinstance(inner, ast.Call) and resolve(inner.func) in TORCH_CHECKPOINT_FUNCTIONS:
            given = keyword_argument(inner, "use_reentrant")
            if isinstance(given, ast.Constant) and isinstance(given.value, bool):
                reentrant = given.value
            else:  # left out: torch's reentrant default; a variable or `**kwargs`: not known
                reentrant = None if given is not None or any(k.arg is None for k in inner.keywords) else True
            function = inner.args[0] if inner.args else keyword_argument(inner, "function")
            written = (dotted(function) or "") if function is not None else ""
            yield CheckpointCall(
                inner.lineno, reentrant, flags, returned=inner is returned,
                callable=loops.get(written, written), reads=_region_reads(inner, function),
            )


def _region_reads(call: ast.Call, function: ast.AST | None) -> tuple[str, ...]:
    """The names a checkpoint call hands its region (positional arguments after the
    callable), and the names and `self.<attr>` a lambda callable reads."""
    found = [arg.id for arg in call.args[1:] if isinstance(arg, ast.Name)]
    if isinstance(function, ast.Lambda):
        own = {a.arg for a in (*function.args.posonlyargs, *function.args.args, *function.args.kwonlyargs)}
        for node in ast.walk(function.body):
            if isinstance(node, ast.Name) and node.id not in own:
                found.append(node.id)
            elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self":
                found.append(f"self.{node.attr}")
    return tuple(dict.fromkeys(found))


def guard_flags(test: ast.AST, other: str | None = None, ignored: frozenset[str] = frozenset()) -> tuple[str, ...]:
    """The `self.<flag>` attributes an `if` test needs true (the parts of an `and`); any
    other part (but a name in `ignored`) adds `other` when given."""
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
        return tuple(flag for value in test.values for flag in guard_flags(value, other, ignored))
    if isinstance(test, ast.Attribute) and isinstance(test.value, ast.Name) and test.value.id == "self":
        return (test.attr,)
    if other is None or (isinstance(test, ast.Name) and test.id in ignored):
        return ()
    return (other,)


def probability_attribute(call: ast.Call, resolve: Callable[[ast.AST], str | None]) -> str | None:
    """The `self` attribute a dropout call takes its probability from (`p=self.drop`), else None."""
    name = resolve(call.func) or ""
    if name not in DROPOUT_FUNCTIONS:
        return None
    probability = keyword_argument(call, "p") or (call.args[1] if len(call.args) > 1 else None)
    if isinstance(probability, ast.Attribute) and isinstance(probability.value, ast.Name) and probability.value.id == "self":
        return probability.attr
    return None


def random_call(call: ast.Call, resolve: Callable[[ast.AST], str | None]) -> str | None:
    """A call that draws random numbers in training (dropout with a non-zero probability,
    `scaled_dot_product_attention(dropout_p=...)`), described; else None."""
    name = resolve(call.func) or ""
    short = name.rsplit(".", 1)[-1]
    if name in RANDOM_SAMPLING_FUNCTIONS:
        return f"`{short}`"
    if name in DROPOUT_FUNCTIONS:
        probability = keyword_argument(call, "p") or (call.args[1] if len(call.args) > 1 else None)
        if is_zero(probability) or is_false(keyword_argument(call, "training")):
            return None
        return f"`{short}`"
    if isinstance(call.func, ast.Attribute) and call.func.attr in RANDOM_TENSOR_METHODS and name == "":
        return f"`{call.func.attr}`"  # `x.new_empty(shape).bernoulli_(keep)`
    if short == "scaled_dot_product_attention" and name.startswith("torch."):
        probability = keyword_argument(call, "dropout_p") or (call.args[4] if len(call.args) > 4 else None)
        if probability is None or is_zero(probability):
            return None
        if isinstance(probability, ast.IfExp) and is_zero(probability.orelse):
            pass  # `dropout_p if self.training else 0.0`: random in training
        return "`scaled_dot_product_attention(dropout_p=...)`"
    return None
