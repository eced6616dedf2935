from __future__ import annotations

import libcst as cst

from ckptlint.analysis.checkpoint_sites import (
    SITE_REQUIRES,
    SITE_TRIGGERS,
    CheckpointApi,
    CheckpointSite,
    Reentrancy,
    SiteKind,
)
from ckptlint.analysis.transforms import set_keyword
from ckptlint.rule import Invalid, Replacement, Rule, Valid
from ckptlint.types import Applicability
from ckptlint.versions import VersionRange


class KwargsToReentrantCheckpoint(Rule):
    """Keyword arguments passed to a reentrant `checkpoint`: a `ValueError` at runtime.

    ## What it does
    Finds calls to `torch.utils.checkpoint.checkpoint` that pass keyword arguments meant for
    the checkpointed function (anything but checkpoint's own `use_reentrant`,
    `preserve_rng_state`, `context_fn`, `determinism_check`, `debug`, `early_stop`), or
    `context_fn` / `debug`, while the reentrant implementation is in use: `use_reentrant=True`
    written out, or omitted (torch then defaults to reentrant).

    Also, with any implementation: keyword arguments passed through `checkpoint` to a
    function defined in the file that cannot accept them: a function by name, `self.<method>`,
    or the inner function of a local factory (`create_custom_forward(module)` returning
    `def custom_forward(*inputs)`, diffusers issue 11214). The non-reentrant implementation
    forwards the keywords, and the call raises `TypeError: ...custom_forward() got an
    unexpected keyword argument 'encoder_hidden_states'` (torch 2.13). No fix for this form:
    switching implementation cannot help.

    And: a value the non-checkpointed branch of the same `if` passes by keyword
    (`r(x, attn_mask=attn_mask)`) that the checkpointed branch passes positionally into a
    parameter of another name (`checkpoint(r, x, attn_mask)` lands in `k_x` of
    `forward(self, q_x, k_x=None, v_x=None, attn_mask=None)`), when the callee is a function
    of the file or the class of a module attribute built in `__init__`. Training with
    checkpointing then silently computes something else than without it. No fix.

    ## Why is this bad?
    The reentrant implementation cannot forward keyword arguments. The call raises
    `ValueError: Unexpected keyword arguments: <names>` (or, for `context_fn` / `debug`,
    `ValueError: Passing `context_fn` or `debug` is only supported when use_reentrant=False.`)
    the first time it runs in training, typically after the model was built and data loaded.

    ## Example
    ```python
    h = checkpoint(self.layer, h, attention_mask=mask)
    ```

    ## Use instead
    ```python
    h = checkpoint(self.layer, h, attention_mask=mask, use_reentrant=False)
    ```

    ## Fix safety
    The fix sets `use_reentrant=False`. It is **safe**: the call cannot run as written, and
    the non-reentrant implementation forwards keyword arguments to the function.

    Reported instead of CKPT001 at the same call. Not reported when `use_reentrant` is
    passed through a variable or an expression, or when `**kwargs` are splatted (they may
    carry `use_reentrant=False`). `checkpoint_sequential` rejects extra keywords in both
    implementations, so switching cannot help there; it is not covered by this rule.

    ## Evidence
    torch 2.13, `torch/utils/checkpoint.py`: `preserve = kwargs.pop("preserve_rng_state",
    True)`, then `if kwargs and use_reentrant: raise ValueError("Unexpected keyword
    arguments: " + ",".join(arg for arg in kwargs))`, then under reentrant `if context_fn is
    not noop_context_fn or debug is not False: raise ValueError(...)`. Measured:
    `checkpoint(f, x, scale=2.0, use_reentrant=True)` raises `ValueError: Unexpected keyword
    arguments: scale`; with `use_reentrant` omitted the deprecation warning is emitted, then
    the same ValueError; with `use_reentrant=False` the keywords reach `f`. Every torch that
    has the flag (1.11+) behaves this way. Re-checked by `tests/test_torch_semantics.py`.
    """

    code = "CKPT032"
    name = "kwargs-to-reentrant-checkpoint"
    message = (
        "{what} passed to a reentrant `checkpoint` ({reentrancy}): torch raises "
        "`ValueError: {error}` at runtime; pass `use_reentrant=False`"
    )
    fix = Applicability.SAFE
    targets = (VersionRange.of("torch", min="1.11"),)
    triggers = SITE_TRIGGERS
    requires = SITE_REQUIRES
    supersedes = ("CKPT001",)

    def __init__(self, context) -> None:
        super().__init__(context)
        # Functions defined in the file, by name (a name defined twice resolves to nothing),
        # and the methods of each class, for `self.<method>`.
        self._functions: dict[str, list[cst.FunctionDef]] = {}
        self._methods: dict[tuple[str, str], cst.FunctionDef] = {}
        self._classes: list[str] = []
        self._call_class: dict[cst.Call, str] = {}
        self._class_nodes: dict[str, cst.ClassDef] = {}
        # `self.<attr>` -> the class its value (or every element of it) is built from.
        self._attribute_classes: dict[tuple[str, str], str] = {}
        # Loop variable -> the expression iterated, for the loops that hold each call.
        self._loops: list[tuple[str, cst.BaseExpression]] = []
        self._call_loops: dict[cst.Call, tuple[tuple[str, cst.BaseExpression], ...]] = {}
        self._ifs: list[cst.If] = []

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        self._classes.append(node.name.value)
        self._class_nodes.setdefault(node.name.value, node)

    def visit_Assign(self, node: cst.Assign) -> None:
        if not self._classes or len(node.targets) != 1:
            return
        target = node.targets[0].target
        if isinstance(target, cst.Attribute) and isinstance(target.value, cst.Name) and target.value.value == "self":
            built = _built_class(node.value)
            if built is not None:
                self._attribute_classes[(self._classes[-1], target.attr.value)] = built

    def visit_For(self, node: cst.For) -> None:
        if isinstance(node.target, cst.Name):
            self._loops.append((node.target.value, node.iter))
        else:
            self._loops.append(("", node.iter))

    def leave_For(self, original_node: cst.For) -> None:
        self._loops.pop()

    def visit_If(self, node: cst.If) -> None:
        self._ifs.append(node)

    def leave_ClassDef(self, original_node: cst.ClassDef) -> None:
        self._classes.pop()

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._functions.setdefault(node.name.value, []).append(node)
        if self._classes:
            self._methods[(self._classes[-1], node.name.value)] = node

    def visit_Call(self, node: cst.Call) -> None:
        if self._classes:
            self._call_class[node] = self._classes[-1]
        if self._loops:
            self._call_loops[node] = tuple(self._loops)

    def visit_checkpoint_site(self, site: CheckpointSite) -> None:
        if site.kind is not SiteKind.CALL or site.api is not CheckpointApi.CHECKPOINT:
            return
        extra = site.extra_keywords()
        callee = self._local_callee(site) if extra else None
        if callee is not None:
            rejected = [name for name in extra if not _accepts_keyword(callee, name)]
            if rejected:
                self._report_rejected(site, callee, rejected)
                return
        if self._check_positional_slots(site):
            return
        self._check_reentrant(site, extra)

    def _check_positional_slots(self, site: CheckpointSite) -> bool:
        """The checkpointed call passes a value positionally into another parameter than the
        one the plain call of the other branch names for it."""
        callee = self._local_callee(site) or self._module_forward(site)
        if callee is None or site.function is None:
            return False
        function_code = _code(site.function)
        plain = [call for call in self._other_branch_calls(site) if _code(call.func) == function_code]
        if len(plain) != 1:
            return False
        slots = [p.name.value for p in (*callee.params.posonly_params, *callee.params.params)]
        keywords = {_code(arg.value): arg.keyword.value for arg in plain[0].args if arg.keyword is not None}
        for position, arg in enumerate(site.positional):
            expected = keywords.get(_code(arg.value))
            if arg.star or expected is None or position >= len(slots):
                continue
            slot = slots[position]
            if slot != expected:
                self.report(
                    site.node,
                    f"`{_code(arg.value)}` is passed positionally into parameter `{slot}` of "
                    f"`{callee.name.value}`, while the non-checkpointed branch passes it as `{expected}=`: with "
                    f"checkpointing on, the value lands in the wrong parameter; pass the inputs in `{callee.name.value}`'s "
                    "parameter order",
                )
                return True
        return False

    def _other_branch_calls(self, site: CheckpointSite) -> list[cst.Call]:
        for node in self._ifs:
            branches = [node.body, node.orelse.body if isinstance(node.orelse, cst.Else) else None]
            for index, branch in enumerate(branches):
                other = branches[1 - index]
                if branch is not None and other is not None and _contains(branch, site.node):
                    return _calls_in(other)
        return []

    def _module_forward(self, site: CheckpointSite) -> cst.FunctionDef | None:
        """`forward` of the class of a module attribute (`self.block`), or of the elements of
        one the enclosing loop iterates (`for block in self.blocks`)."""
        owner = self._call_class.get(site.node)
        function = site.function
        if owner is None or function is None:
            return None
        attribute = None
        if isinstance(function, cst.Attribute) and _is_self(function.value):
            attribute = function.attr.value
        elif isinstance(function, cst.Name):
            for variable, iterated in reversed(self._call_loops.get(site.node, ())):
                if variable == function.value and isinstance(iterated, cst.Attribute) and _is_self(iterated.value):
                    attribute = iterated.attr.value
                    break
        class_name = self._attribute_classes.get((owner, attribute)) if attribute else None
        node = self._class_nodes.get(class_name) if class_name else None
        if node is None:
            return None
        forwards = [s for s in node.body.body if isinstance(s, cst.FunctionDef) and s.name.value == "forward"]
        return _without_self(forwards[0]) if len(forwards) == 1 else None

    def _report_rejected(self, site: CheckpointSite, callee: cst.FunctionDef, rejected: list[str]) -> None:
        names = ", ".join(f"`{name}`" for name in rejected)
        signature = cst.Module([]).code_for_node(callee.params)
        self.report(
            site.node,
            f"keyword argument{'s' if len(rejected) > 1 else ''} {names} passed through `checkpoint` to "
            f"`{callee.name.value}({signature})`, which cannot accept "
            f"{'them' if len(rejected) > 1 else 'it'}: a TypeError as soon as checkpointing is on (a ValueError "
            "with the reentrant implementation); pass them positionally or give the function the parameters",
        )

    def _local_callee(self, site: CheckpointSite) -> cst.FunctionDef | None:
        """The function defined in this file that checkpoint will call: a function by name,
        `self.<method>` of the enclosing class, or the inner function a local factory returns
        (`create_custom_forward(module)`)."""
        function = site.function
        if isinstance(function, cst.Name):
            found = self._functions.get(function.value, [])
            return found[0] if len(found) == 1 else None
        if (
            isinstance(function, cst.Attribute)
            and isinstance(function.value, cst.Name)
            and function.value.value == "self"
            and site.node in self._call_class
        ):
            method = self._methods.get((self._call_class[site.node], function.attr.value))
            return _without_self(method) if method is not None else None
        if isinstance(function, cst.Call) and isinstance(function.func, cst.Name):
            factories = self._functions.get(function.func.value, [])
            if len(factories) == 1:
                return _returned_function(factories[0])
        return None

    def _check_reentrant(self, site: CheckpointSite, extra: list[str]) -> None:
        if not site.reentrancy.is_reentrant:
            return  # non-reentrant, or unknown (a variable, or a **kwargs splat that may set it)
        non_reentrant_only = site.non_reentrant_only_keywords()
        if extra:
            what = "keyword argument" + ("s " if len(extra) > 1 else " ") + ", ".join(f"`{k}`" for k in extra)
            error = "Unexpected keyword arguments: " + ",".join(extra)
        elif non_reentrant_only:
            what = " and ".join(f"`{k}`" for k in non_reentrant_only)
            error = "Passing `context_fn` or `debug` is only supported when use_reentrant=False."
        else:
            return
        reentrancy = (
            "`use_reentrant=True`" if site.reentrancy is Reentrancy.EXPLICIT_TRUE
            else "`use_reentrant` omitted, so torch defaults to reentrant"
        )
        self.report(
            site.node,
            self.message.format(what=what, reentrancy=reentrancy, error=error) + self.version_note(),
            replacements=[Replacement(site.node, set_keyword(site.node, "use_reentrant", cst.Name("False")))],
            fix_message="Set `use_reentrant=False`",
        )

    valid = [
        # The right slots: `None, None` fill k_x and v_x.
        Valid(
            """
            import torch.nn as nn
            from torch.utils.checkpoint import checkpoint

            class ResidualAttentionBlock(nn.Module):
                def forward(self, q_x, k_x=None, v_x=None, attn_mask=None):
                    return q_x

            class Transformer(nn.Module):
                def __init__(self, layers):
                    super().__init__()
                    self.resblocks = nn.ModuleList([ResidualAttentionBlock() for _ in range(layers)])

                def forward(self, x, attn_mask=None):
                    for r in self.resblocks:
                        if self.grad_checkpointing:
                            x = checkpoint(r, x, None, None, attn_mask, use_reentrant=False)
                        else:
                            x = r(x, attn_mask=attn_mask)
                    return x
            """
        ),
        # Non-reentrant, and the local function accepts the keywords (by name or **kwargs).
        Valid(
            """
            from torch.utils.checkpoint import checkpoint

            def run(hidden, mask=None):
                return hidden
            def run_any(hidden, **extra):
                return hidden

            y = checkpoint(run, x, mask=m, use_reentrant=False)
            z = checkpoint(run_any, x, scale=2.0, use_reentrant=False)
            """
        ),
        Valid(
            """
            from torch.utils.checkpoint import checkpoint

            def forward(self, h, mask):
                return checkpoint(self.layer, h, attention_mask=mask, use_reentrant=False)
            """
        ),
        # Only checkpoint's own keywords.
        Valid(
            """
            import torch
            y = torch.utils.checkpoint.checkpoint(
                f, x, use_reentrant=True, preserve_rng_state=False, determinism_check="none"
            )
            """
        ),
        # Unknown reentrancy: a variable, or **kwargs that may carry use_reentrant=False.
        Valid(
            """
            from torch.utils.checkpoint import checkpoint

            def forward(self, h, mask, reentrant, **ckpt_kwargs):
                h = checkpoint(self.layer, h, mask=mask, use_reentrant=reentrant)
                return checkpoint(self.layer, h, mask=mask, **ckpt_kwargs)
            """
        ),
        # The partial binds use_reentrant=False; keywords at the call are fine.
        Valid(
            """
            import functools
            from torch.utils.checkpoint import checkpoint

            ckpt = functools.partial(checkpoint, use_reentrant=False)
            y = ckpt(block, x, mask=mask)
            """
        ),
        # Not torch's checkpoint.
        Valid(
            """
            from deepspeed.checkpointing import checkpoint
            y = checkpoint(block, x, mask=mask)
            """
        ),
    ]
    invalid = [
        # open_clip-style: the plain branch names `attn_mask`, the checkpointed one puts it
        # in the second slot, `k_x`.
        Invalid(
            """
            import torch.nn as nn
            from torch.utils.checkpoint import checkpoint

            class ResidualAttentionBlock(nn.Module):
                def forward(self, q_x, k_x=None, v_x=None, attn_mask=None):
                    return q_x

            class Transformer(nn.Module):
                def __init__(self, layers):
                    super().__init__()
                    self.resblocks = nn.ModuleList([ResidualAttentionBlock() for _ in range(layers)])

                def forward(self, x, attn_mask=None):
                    for r in self.resblocks:
                        if self.grad_checkpointing:
                            x = checkpoint(r, x, attn_mask, use_reentrant=False)
                        else:
                            x = r(x, attn_mask=attn_mask)
                    return x
            """,
            line=16,
            column=21,
            message_contains="`attn_mask` is passed positionally into parameter `k_x` of `forward`",
        ),
        # A local factory's inner function takes only *inputs (diffusers issue 11214).
        Invalid(
            """
            import torch.utils.checkpoint

            def create_custom_forward(module):
                def custom_forward(*inputs):
                    return module(*inputs)
                return custom_forward

            def forward(self, hidden, context):
                return torch.utils.checkpoint.checkpoint(
                    create_custom_forward(self.attn), hidden, encoder_hidden_states=context, use_reentrant=False
                )
            """,
            line=9,
            column=12,
            message_contains="`encoder_hidden_states` passed through `checkpoint` to `custom_forward(*inputs)`",
        ),
        Invalid(
            """
            from torch.utils.checkpoint import checkpoint

            def forward(self, h, mask):
                return checkpoint(self.layer, h, attention_mask=mask)
            """,
            line=4,
            column=12,
            message_contains="Unexpected keyword arguments: attention_mask",
            expected_fix="""
            from torch.utils.checkpoint import checkpoint

            def forward(self, h, mask):
                return checkpoint(self.layer, h, attention_mask=mask, use_reentrant=False)
            """,
        ),
        Invalid(
            """
            import torch.utils.checkpoint as cp
            y = cp.checkpoint(f, x, use_reentrant=True, scale=2.0, bias=b)
            """,
            line=2,
            column=5,
            message_contains="Unexpected keyword arguments: bias,scale",
            expected_fix="""
            import torch.utils.checkpoint as cp
            y = cp.checkpoint(f, x, use_reentrant=False, scale=2.0, bias=b)
            """,
        ),
        Invalid(
            """
            from torch.utils.checkpoint import checkpoint, create_selective_checkpoint_contexts
            y = checkpoint(f, x, context_fn=policy)
            """,
            line=2,
            column=5,
            message_contains="only supported when use_reentrant=False",
            expected_fix="""
            from torch.utils.checkpoint import checkpoint, create_selective_checkpoint_contexts
            y = checkpoint(f, x, context_fn=policy, use_reentrant=False)
            """,
        ),
        # Through a partial that binds use_reentrant=True: the call's keyword overrides it.
        Invalid(
            """
            from functools import partial
            from torch.utils.checkpoint import checkpoint
            ckpt = partial(checkpoint, use_reentrant=True)
            y = ckpt(block, x, mask=mask)
            """,
            line=4,
            column=5,
            expected_fix="""
            from functools import partial
            from torch.utils.checkpoint import checkpoint
            ckpt = partial(checkpoint, use_reentrant=True)
            y = ckpt(block, x, mask=mask, use_reentrant=False)
            """,
        ),
    ]


def _accepts_keyword(function: cst.FunctionDef, name: str) -> bool:
    params = function.params
    if isinstance(params.star_kwarg, cst.Param):
        return True
    return any(p.name.value == name for p in (*params.params, *params.kwonly_params))


def _without_self(method: cst.FunctionDef) -> cst.FunctionDef:
    params = method.params
    if params.params and params.params[0].name.value in ("self", "cls"):
        return method.with_changes(params=params.with_changes(params=params.params[1:]))
    if params.posonly_params and params.posonly_params[0].name.value in ("self", "cls"):
        return method.with_changes(params=params.with_changes(posonly_params=params.posonly_params[1:]))
    return method


def _returned_function(factory: cst.FunctionDef) -> cst.FunctionDef | None:
    """The nested function a factory returns by name, when it returns exactly that."""
    if not isinstance(factory.body, cst.IndentedBlock):
        return None
    nested = {s.name.value: s for s in factory.body.body if isinstance(s, cst.FunctionDef)}
    returned = [
        small.value.value
        for statement in factory.body.body
        if isinstance(statement, cst.SimpleStatementLine)
        for small in statement.body
        if isinstance(small, cst.Return) and isinstance(small.value, cst.Name)
    ]
    return nested.get(returned[0]) if len(returned) == 1 else None


def _code(node: cst.CSTNode) -> str:
    return cst.Module([]).code_for_node(node)


def _is_self(node: cst.BaseExpression) -> bool:
    return isinstance(node, cst.Name) and node.value == "self"


def _built_class(value: cst.BaseExpression) -> str | None:
    """`Block(...)`, or `nn.ModuleList([Block(...) for ...])` / `nn.ModuleList(Block(...) for ...)`
    / `nn.Sequential(*[Block(...) ...])`: the class name when it is a plain name."""
    if not isinstance(value, cst.Call):
        return None
    if isinstance(value.func, cst.Name):
        return value.func.value
    if isinstance(value.func, cst.Attribute) and value.func.attr.value in ("ModuleList", "Sequential") and value.args:
        inner = value.args[0].value
        if isinstance(inner, (cst.ListComp, cst.GeneratorExp)):
            return _built_class(inner.elt)
    return None


def _contains(tree: cst.CSTNode, node: cst.CSTNode) -> bool:
    found = False

    class Finder(cst.CSTVisitor):
        def on_visit(self, current: cst.CSTNode) -> bool:
            nonlocal found
            if current is node:
                found = True
            return not found

    tree.visit(Finder())
    return found


def _calls_in(tree: cst.CSTNode) -> list[cst.Call]:
    calls: list[cst.Call] = []

    class Collector(cst.CSTVisitor):
        def visit_Call(self, call: cst.Call) -> None:
            calls.append(call)

    tree.visit(Collector())
    return calls
