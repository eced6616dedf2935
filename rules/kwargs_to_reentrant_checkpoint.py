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

    def visit_checkpoint_site(self, site: CheckpointSite) -> None:
        if site.kind is not SiteKind.CALL or site.api is not CheckpointApi.CHECKPOINT:
            return
        if not site.reentrancy.is_reentrant:
            return  # non-reentrant, or unknown (a variable, or a **kwargs splat that may set it)
        extra = site.extra_keywords()
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
