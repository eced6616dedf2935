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

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        self._classes.append(node.name.value)

    def leave_ClassDef(self, original_node: cst.ClassDef) -> None:
        self._classes.pop()

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._functions.setdefault(node.name.value, []).append(node)
        if self._classes:
            self._methods[(self._classes[-1], node.name.value)] = node

    def visit_Call(self, node: cst.Call) -> None:
        if self._classes:
            self._call_class[node] = self._classes[-1]

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
        self._check_reentrant(site, extra)

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
