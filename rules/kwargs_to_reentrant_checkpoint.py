from __future__ import annotations

from dataclasses import replace

from ckptlint.lazy_libcst import cst

from ckptlint.analysis.checkpoint_sites import (
    SITE_REQUIRES,
    SITE_TRIGGERS,
    CheckpointApi,
    CheckpointSite,
    Reentrancy,
    SiteKind,
)
from ckptlint.analysis.callees import Callee, calls_in, code_of, contains, is_literal
from ckptlint.analysis.cst_walk import walk
from ckptlint.analysis.forwarding_helpers import (
    ForwardingHelper,
    forwarded_keywords,
    forwarding_helper,
    helper_called,
    passes_reentrant,
)
from ckptlint.analysis.hf_checkpointing_func import calls_hf_checkpointing_func, reentrant_hf_calls
from ckptlint.analysis.site_scopes import SiteScopes
from ckptlint.analysis.transforms import set_keyword
from ckptlint.model.library.open_clip import instance_versions
from ckptlint.model.library.third_party_signatures import forward_signatures
from ckptlint.model.form.values import FunctionRef, Instance
from ckptlint.rule import Invalid, Replacement, Valid
from ckptlint.types import Applicability
from ckptlint.versions import Applies, VersionRange

# torch before `use_reentrant` (1.4 to 1.10, `torch/utils/checkpoint.py`): `preserve =
# kwargs.pop('preserve_rng_state', True); if kwargs: raise ValueError("Unexpected keyword
# arguments: " + ",".join(arg for arg in kwargs))`, the reentrant `CheckpointFunction` always.
TORCH_WITHOUT_THE_FLAG = VersionRange.of("torch", max="1.11")


# A transformers model's own layer loop (remote-code style), and the call enabling checkpointing.
_HF_LAYER_LOOP = """
from transformers import PretrainedConfig, PreTrainedModel

class TinyModel(PreTrainedModel):
    config_class = PretrainedConfig
    supports_gradient_checkpointing = True

    def forward(self, h, attention_mask=None):
        for layer in self.layers:
            if self.gradient_checkpointing and self.training:
                h = self._gradient_checkpointing_func(layer.__call__, h, {passed})
            else:
                h = layer(h, attention_mask=attention_mask)
        return h

model = TinyModel(PretrainedConfig())
model.gradient_checkpointing_enable({enable})
"""
_NON_REENTRANT = 'gradient_checkpointing_kwargs={"use_reentrant": False}'

# open_clip's pretrained text tower, run block by block (Stability's generative-models style):
# the blocks come from what `create_model_and_transforms` returns (`model/open_clip_models.py`).
_OPEN_CLIP_PRETRAINED = """
import open_clip
import torch.nn as nn
from torch.utils.checkpoint import checkpoint

class FrozenOpenCLIPEmbedder(nn.Module):
    def __init__(self, arch="ViT-H-14", version="laion2b_s32b_b79k"):
        super().__init__()
        model, _, _ = open_clip.create_model_and_transforms(arch, pretrained=version)
        self.model = model

    def text_transformer_forward(self, x, attn_mask=None):
        for r in self.model.transformer.resblocks:
            if self.model.transformer.grad_checkpointing:
                x = checkpoint(r, x, attn_mask, use_reentrant=False)
            else:
                x = r(x, attn_mask=attn_mask)
        return x
"""

# A project module checkpointing blocks of open_clip (`{block}`), the mask passed `{passed}`.
_OPEN_CLIP_BLOCKS = """
import torch.nn as nn
from torch.utils.checkpoint import checkpoint
from open_clip.transformer import {block}

class TextTower(nn.Module):
    def __init__(self, width, layers):
        super().__init__()
        self.resblocks = nn.ModuleList([{block}(width, 8) for _ in range(layers)])

    def forward(self, x, attn_mask=None):
        for r in self.resblocks:
            if self.grad_checkpointing:
                x = checkpoint(r, x, {passed}, use_reentrant=False)
            else:
                x = r(x, attn_mask=attn_mask)
        return x
"""


class KwargsToReentrantCheckpoint(SiteScopes):
    """Keyword arguments passed to a reentrant `checkpoint`: a `ValueError` at runtime.

    ## What it does
    Finds calls to `torch.utils.checkpoint.checkpoint` that pass keyword arguments meant for
    the checkpointed function (anything but checkpoint's own `use_reentrant`,
    `preserve_rng_state`, `context_fn`, `determinism_check`, `debug`, `early_stop`), or
    `context_fn` / `debug`, while the reentrant implementation is in use: `use_reentrant=True`
    written out, or omitted (torch then defaults to reentrant). The call may go through a
    `functools.partial(checkpoint, use_reentrant=True)` of the same module or of another one
    (`from .recompute import reentrant_ckpt`).

    Also, with any implementation: keyword arguments passed through `checkpoint` to a
    function defined in the file that cannot accept them: a function by name, `self.<method>`,
    or the inner function of a local factory (`create_custom_forward(module)` returning
    `def custom_forward(*inputs)`, diffusers issue 11214). The non-reentrant implementation
    forwards the keywords, and the call raises `TypeError: ...custom_forward() got an
    unexpected keyword argument 'encoder_hidden_states'` (torch 2.13). No fix for this form:
    switching implementation cannot help.

    And, with any implementation: more positional inputs than every function the call may
    run takes, none of them with `*args` (`checkpoint(r, x, None, None, attn_mask)` over
    blocks whose `forward(self, x, attn_mask=None)` takes two, as open_clip's
    `CustomTransformer` does from 2.29): `TypeError: forward() takes from 2 to 3 positional
    arguments but 5 were given` on the first checkpointed step (measured, torch 2.13, both
    implementations).

    And: a value the non-checkpointed branch of the same `if` passes by keyword
    (`r(x, attn_mask=attn_mask)`) that the checkpointed branch passes positionally into a
    parameter of another name (`checkpoint(r, x, attn_mask)` lands in `k_x` of
    `forward(self, q_x, k_x=None, v_x=None, attn_mask=None)`), when the callee is a function
    of the project or the class of a module attribute built in `__init__`, or a library
    block whose `forward` ckptlint holds as data (`model/third_party_signatures.py`: open_clip's
    `ResidualAttentionBlock`, `forward(self, q_x, k_x=None, v_x=None, attn_mask=None)` from
    open-clip-torch 2.11, `(self, x, attn_mask=None)` before; its
    `CustomResidualAttentionBlock`, `(self, x, attn_mask=None)`), constructed by the project
    or held by a model open_clip's factories return (`model, _, _ =
    open_clip.create_model_and_transforms(...)`, then `model.transformer.resblocks`:
    `model/open_clip_models.py`; from open_clip 3.0 those may be custom blocks). The version
    the project declares picks the signature; where it is not known, or the blocks may be of
    several classes, only a slot wrong for every one of them is reported. Training with
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

    A flag the project configures counts when it is True unless the run overrides it:
    `use_reentrant=self.use_reentrant` where the constructor defaults it to True and no call
    of the project passes another value (the project model evaluates it at the call), or an
    option every declaration of which defaults to True (a dataclass field, an argparse
    default, a YAML configuration's key, as CKPT002 reads them). Reported without a fix: defaulting the option to False
    is the project's change, not a rewrite of the call.

    Also: keywords passed to `self._gradient_checkpointing_func(...)` in a diffusers model
    (a `ModelMixin` subclass, or a project class whose `enable_gradient_checkpointing`
    defines it as `def _gradient_checkpointing_func(module, *args)`, as diffusers'
    `models/modeling_utils.py` does, read at its main branch of 2026-11): `TypeError`
    whatever the implementation.

    Also: a local wrapper that checkpoints and takes only `*args` (`def layer_(*args): return
    checkpoint(layer, *args, use_reentrant=False)`), called with keyword arguments in the
    function that defines it (`layer_(h, attn_mask=mask)`): Python raises `TypeError: ...
    got an unexpected keyword argument` whenever the wrapper is the one called, i.e. exactly
    when checkpointing is on. Reported at that call, without a fix.

    Also: a checkpointed call in one branch of an `if` that drops what the plain call of the
    other branch passes to the same function: a `**kwargs` the function builds up
    (`kwargs.update(...)`, `kwargs[key] = ...`) or a `*mask` keyword (an attention or padding
    mask) whose value the checkpointed call does not pass at all. With checkpointing on the
    region silently computes something else. A `**kwargs` received from the caller (it may be
    empty) and literal flags (`use_cache=False`) are not reported.

    Also: a helper of the file that hands its own `**kwargs` to `checkpoint` without
    `use_reentrant` (`def _checkpoint_forward(self, func, *args, **kwargs): return
    checkpoint(func, *args, **kwargs)`), called with keywords meant for `func`
    (`self._checkpoint_forward(self.attn, x, attention_mask=mask)`): they reach the reentrant
    implementation, `ValueError` whenever checkpointing is on. Reported at that call, without
    a fix (the flag belongs in the helper's call); not for calls that pass `use_reentrant`
    themselves or splat `**`, nor for keywords the helper binds to its own parameters. The
    helper may live in another module of the project (`utils/ckpt.py: def ckpt_forward(fn,
    *args, **kwargs)` imported by `model.py`, or a base class's `_checkpoint_forward` called
    as `self._checkpoint_forward(...)` in a subclass of another file): the project index
    records such helpers, and a file that calls one is checked even when it never names
    checkpoint. A helper that names `use_reentrant` anywhere
    (`kwargs.setdefault("use_reentrant", False)`) chooses for its callers and is none.

    Also, the decorator form: a project decorator whose wrapper hands its `**kwargs` to
    `checkpoint` without `use_reentrant` (`def checkpoint(fn): @functools.wraps(fn) def
    wrapper(*args, **kwargs): return torch.utils.checkpoint.checkpoint(fn, *args,
    **kwargs)`), on a function then called with keywords (`chunk_fwd(q, k, v, scale=s)`, in
    any module): `ValueError: Unexpected keyword arguments: scale` on every call. Reported at
    that call, without a fix. Not for a wrapper that sets the flag, one that binds the
    keyword itself (`def wrapper(self, x, mask=None, **kwargs)`), a decorator that calls no
    torch checkpoint, or calls passing the inputs by position.

    A tuple literal that packs a value the plain call passes by keyword
    (`checkpoint(blk, x, (rel_pos_bias,))` against `blk(x, rel_pos_bias=rel_pos_bias)`) is
    handed on as one argument: the parameter receives the tuple (`AttributeError: 'tuple'
    object has no attribute 'type_as'` in the block, measured on torch 2.13 with either
    implementation). Reported, without a fix. These branch comparisons also apply when the
    name `checkpoint` is bound to torch's by one import and to DeepSpeed's by another
    (`if os.getenv("ENV_TYPE") == "deepspeed": ... else: from torch.utils.checkpoint import
    checkpoint`): where torch's is the one imported, the branches differ.

    Also: a model's own layer loop (Hub remote code, a project's `PreTrainedModel`) calling
    transformers' `self._gradient_checkpointing_func(layer.__call__, h, attention_mask=mask)`
    with keywords for the layer, where the project runs it reentrant: the targeted
    transformers is before 5.0 and every `gradient_checkpointing_enable` call of the project
    leaves `gradient_checkpointing_kwargs` to the default (at least one does). Reported at the
    call, naming the enabling call, without a fix. Not where any enabling call passes kwargs
    (they may choose non-reentrant), for a call passing `use_reentrant` itself or splatting
    `**kwargs`, nor under transformers >= 5.0.

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
    Before the flag (torch 1.4 to 1.10, source as vendored by projects that copied it):
    `checkpoint(function, *args, **kwargs)` pops `preserve_rng_state`, then `if kwargs: raise
    ValueError("Unexpected keyword arguments: ...")` and runs the reentrant
    `CheckpointFunction`: the same crash, so the rule applies to every torch; a project
    targeting torch < 1.11 gets the finding without the fix (the flag does not exist there).
    The decorator form, measured on torch 2.13 (CPU): `@checkpoint def chunk_fwd(q, k, v,
    scale=None)` with the wrapper above, `chunk_fwd(q, q, q, scale=2.0)` emits the
    `use_reentrant` warning and raises `ValueError: Unexpected keyword arguments: scale`;
    `chunk_fwd(q, q, q, 2.0)` runs (`grad_fn` is `CheckpointFunctionBackward`, the reentrant
    implementation). transformers >= 4.35 `modeling_utils.py` `gradient_checkpointing_enable`
    stores `functools.partial(checkpoint, **gradient_checkpointing_kwargs)` as each layer's
    `_gradient_checkpointing_func`, the kwargs `{"use_reentrant": True}` when None before 5.0
    (4.35 to 4.39: no kwargs, torch's reentrant default), `{"use_reentrant": False}` from 5.0
    (EVIDENCE Q4). Run on CPU with transformers 5.17 and a tiny `LlamaForCausalLM`: after
    `gradient_checkpointing_enable()` the layer's function has keywords `{"use_reentrant":
    False}` and `f(layer, x, attention_mask=None)` runs; enabled with `{"use_reentrant":
    True}` (the 4.x default) the same call raises `ValueError: Unexpected keyword arguments:
    attention_mask`. transformers' own layers pass only positional arguments for this reason.
    """

    code = "CKPT032"
    name = "kwargs-to-reentrant-checkpoint"
    message = (
        "{what} passed to a reentrant `checkpoint` ({reentrancy}): torch raises "
        "`ValueError: {error}` at runtime; pass `use_reentrant=False`"
    )
    fix = Applicability.SAFE
    # Every torch: before the flag existed (< 1.11) every checkpoint was reentrant and any
    # extra keyword raised the same error; there the fix (the flag itself) cannot help.
    triggers = (*SITE_TRIGGERS, b"._gradient_checkpointing_func(")
    reached_through_aliases = True  # torch's checkpoint under another module's name
    requires = SITE_REQUIRES
    supersedes = ("CKPT001",)

    uses_project = True  # the callee may be defined in another file
    words_in_code_only = True  # sites and `_gradient_checkpointing_func(...)` calls only
    reached_through_forwarding = True  # a file calling another module's helper need not name checkpoint

    @classmethod
    def may_apply_to_project(cls, project, relative_path, settings, text) -> bool:
        # (or a partial of another module: `from .ckpt import reentrant_ckpt`)
        return cls.may_apply_to(text) or project.calls_forwarding(relative_path) or project.imports_checkpoint_alias(relative_path)

    def __init__(self, context) -> None:
        super().__init__(context)
        self._ifs: list[cst.If] = []
        self._functions: list[cst.FunctionDef] = []  # enclosing, innermost last
        # Functions taking only `*args` (`def layer_(*args): return checkpoint(layer, *args)`),
        # with the calls in their bodies and the function they are defined in.
        self._args_only: dict[cst.FunctionDef, tuple[set[cst.Call], cst.FunctionDef | None]] = {}
        self._keyword_calls: list[tuple[cst.Call, tuple[cst.FunctionDef, ...]]] = []
        self._function_of: dict[cst.Call, cst.FunctionDef] = {}  # each call's innermost function
        self._callees_at: dict[cst.Call, list[Callee]] = {}  # `_callees`, by checkpoint call
        self._hf_calls: list[cst.Call] = []  # `self._gradient_checkpointing_func(...)`

    def visit_If(self, node: cst.If) -> None:
        super().visit_If(node)
        self._ifs.append(node)

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        params = node.params
        if (
            isinstance(params.star_arg, cst.Param)
            and not params.params and not params.posonly_params and not params.kwonly_params
            and params.star_kwarg is None
        ):
            self._args_only[node] = (set(), self._functions[-1] if self._functions else None)
        self._functions.append(node)
        super().visit_FunctionDef(node)

    def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
        self._functions.pop()
        super().leave_FunctionDef(original_node)

    def visit_Call(self, node: cst.Call) -> None:
        super().visit_Call(node)
        if self._functions:
            self._function_of[node] = self._functions[-1]
        for function in self._functions:
            if function in self._args_only:
                self._args_only[function][0].add(node)
        if isinstance(node.func, cst.Name) and any(arg.keyword is not None for arg in node.args):
            self._keyword_calls.append((node, tuple(self._functions)))
        if calls_hf_checkpointing_func(node):
            self._hf_calls.append(node)

    def finish(self) -> None:
        """A wrapper that takes only `*args` and checkpoints, called with keywords in the
        function that defines it: `TypeError` whenever the wrapper is the one called."""
        checkpointing = {site.node for site in self.context.sites if site.api is CheckpointApi.CHECKPOINT}
        for wrapper, (calls, parent) in self._args_only.items():
            if not calls & checkpointing:
                continue
            name = wrapper.name.value
            for call, scope in self._keyword_calls:
                if call.func.value != name or call in calls or (scope[-1] if scope else None) is not parent:
                    continue
                keywords = [arg.keyword.value for arg in call.args if arg.keyword is not None]
                self.report(
                    call,
                    f"keyword argument{'s' if len(keywords) > 1 else ''} {', '.join(f'`{k}`' for k in keywords)} "
                    f"passed to `{name}(*{wrapper.params.star_arg.name.value})` (line "
                    f"{self.context.position(wrapper).start.line}), which checkpoints and takes no keywords: "
                    f"`TypeError: ...{name}() got an unexpected keyword argument '{keywords[0]}'` whenever "
                    f"`{name}` is the checkpointing wrapper; give it `**kwargs` and pass them on with "
                    "`use_reentrant=False`",
                )

        self._check_forwarding_helpers()
        args_only = [call for call in self._hf_calls if self._args_only_checkpointing_func(call) is not None]
        for call in args_only:
            keywords = [arg.keyword.value for arg in call.args if arg.keyword is not None]
            if not keywords:
                continue  # a `**kwargs` splat alone may be empty
            where = self._args_only_checkpointing_func(call)
            self.report(
                call,
                f"keyword argument{'s' if len(keywords) > 1 else ''} {', '.join(f'`{k}`' for k in keywords)} passed to "
                f"`_gradient_checkpointing_func`, which {where} defines as `(module, *args)`: `TypeError: "
                f"_gradient_checkpointing_func() got an unexpected keyword argument '{keywords[0]}'` on the first "
                "checkpointed training step, whatever the implementation; pass them positionally (in the order the "
                "block's forward takes them), or bind them with `functools.partial(block, ...)`",
            )
        for found in reentrant_hf_calls(self.context, [c for c in self._hf_calls if c not in args_only]):
            path, line = found.enabled_at
            names = ",".join(found.keywords)
            self.report(
                found.call,
                f"keyword argument{'s' if len(found.keywords) > 1 else ''} {', '.join(f'`{k}`' for k in found.keywords)} "
                "passed to `_gradient_checkpointing_func`, transformers' `partial(checkpoint, "
                "**gradient_checkpointing_kwargs)`: `gradient_checkpointing_enable()` leaves the kwargs to the "
                f"default ({path}:{line}), reentrant before transformers 5.0, and torch raises `ValueError: Unexpected "
                f"keyword arguments: {names}` on the first checkpointed step; pass them positionally, as "
                "transformers' own layers do, or enable checkpointing with "
                "`gradient_checkpointing_kwargs={\"use_reentrant\": False}`",
            )
        # A name torch's checkpoint on some bindings only (DeepSpeed's on another): what the
        # checkpointed branch passes still differs from the plain one where it is torch's.
        for site in self.context.possible_sites:
            if site.api is CheckpointApi.CHECKPOINT:
                self._check_too_many_inputs(site) or self._check_positional_slots(site) or self._check_dropped_keywords(site)

    def _args_only_checkpointing_func(self, call: cst.Call) -> str | None:
        """Who installs the `_gradient_checkpointing_func` a model's code calls, when it takes
        no keywords: diffusers' `ModelMixin.enable_gradient_checkpointing` defines it as
        `def _gradient_checkpointing_func(module, *args)` (diffusers `models/modeling_utils.py`,
        read at its main branch of 2026-11), as does a project class that copies it; transformers'
        `partial(checkpoint, ...)` takes keywords (the reentrant implementation then rejects
        them: `reentrant_hf_calls`)."""
        owner = self._owner(self._call_scopes.get(call, ()))
        if owner is None:
            return None
        project = self.context.project
        for ancestor in project.ancestors(owner):
            if ancestor.rsplit(".", 1)[-1] == "ModelMixin" and ancestor.startswith("diffusers."):
                return "diffusers' `ModelMixin.enable_gradient_checkpointing`"
            facts = project.class_named(ancestor)
            summary = project.function_summary(f"{ancestor}.enable_gradient_checkpointing._gradient_checkpointing_func") if facts else None
            if summary is not None and not any(p.kind == "**" for p in summary.parameters) and any(
                p.kind == "*" for p in summary.parameters
            ):
                return f"`{ancestor.rsplit('.', 1)[-1]}.enable_gradient_checkpointing` ({project.path_of(ancestor)})"
        return None

    def _check_forwarding_helpers(self) -> None:
        """A helper of the file that hands its `**kwargs` to `checkpoint` without
        `use_reentrant`, called with keywords for the checkpointed function: they reach the
        reentrant implementation (`analysis/forwarding_helpers.py`)."""
        helpers: dict[tuple[str | None, str], ForwardingHelper] = {}
        for site in self.context.sites:
            scopes = self._call_scopes.get(site.node, ())
            function = self._function_of.get(site.node)
            is_method = len(scopes) >= 2 and scopes[-2][0] == "class" and function is not None
            owner = self._owner(scopes) if is_method else None
            helper = forwarding_helper(site, function, owner)
            if helper is not None:
                helpers[(owner, helper.name)] = helper
        if self.context.versions.applies((TORCH_WITHOUT_THE_FLAG,)) is Applies.YES:
            return
        reported = self._check_indexed_helpers()
        for call in self._calls if helpers else ():
            if call in reported:
                continue
            helper = helper_called(call, helpers, self._owner(self._call_scopes.get(call, ())))
            forwarded = helper.forwarded(call) if helper is not None and call is not helper.site.node else None
            if not forwarded:
                continue
            names = ", ".join(f"`{k}`" for k in forwarded)
            how = (
                "with the `use_reentrant=True` this call passes" if passes_reentrant(call)
                else "with `use_reentrant=True`" if helper.site.reentrancy is Reentrancy.EXPLICIT_TRUE
                else "without `use_reentrant`, so torch defaults to reentrant"
            )
            self.report(
                call,
                f"keyword argument{'s' if len(forwarded) > 1 else ''} {names} passed through `{helper.name}` "
                f"(line {self.context.position(helper.function).start.line}), which hands its `**kwargs` to "
                f"`checkpoint` (line {self.context.position(helper.site.node).start.line}) {how}: torch raises "
                f"`ValueError: Unexpected keyword arguments: {','.join(forwarded)}` whenever checkpointing is on; "
                "pass `use_reentrant=False` in that call",
            )

    def _check_indexed_helpers(self) -> set[cst.Call]:
        """Calls of a helper of another module that hands its `**kwargs` to `checkpoint`
        without `use_reentrant`, or of a function (of any module) decorated by a decorator
        whose wrapper does, with keywords meant for the checkpointed function (the project
        index: `ckptlint.model.file_facts.forwarding`)."""
        project = self.context.project
        if not project.forwarding:
            return set()
        facts = project.files.get(self.context.relative_path)
        names = dict(facts.names) if facts is not None else {}
        reported: set[cst.Call] = set()
        words = project.forwarding_words
        for call in self._calls:
            called = call.func.value if isinstance(call.func, cst.Name) else (
                call.func.attr.value if isinstance(call.func, cst.Attribute) else None
            )
            if called not in words or not any(arg.keyword is not None for arg in call.args):
                continue
            target = self._indexed_target(call, names)
            if target is None:
                continue
            helper, decorated = target
            path = project.path_of(helper.name)
            if decorated is None and path == self.context.relative_path:
                continue  # a helper of this file: `_check_forwarding_helpers` reports it
            forwarded = forwarded_keywords(call, helper.accepted)
            if not forwarded:
                continue
            where = f"{path}, " if path is not None and path != self.context.relative_path else ""
            helper_name = helper.name.rsplit(".", 1)[-1]
            if decorated is None:
                through = f"`{helper_name}` ({where}line {helper.line}), which hands its `**kwargs`"
            else:
                decorated_path = project.path_of(decorated.name)
                decorated_where = (
                    f"{decorated_path}, " if decorated_path is not None and decorated_path != self.context.relative_path else ""
                )
                through = (
                    f"`{decorated.name.rsplit('.', 1)[-1]}` ({decorated_where}line {decorated.line}), decorated by "
                    f"`@{helper_name}` ({where}line {helper.line}), whose wrapper hands its `**kwargs`"
                )
            names_shown = ", ".join(f"`{k}`" for k in forwarded)
            self.report(
                call,
                f"keyword argument{'s' if len(forwarded) > 1 else ''} {names_shown} passed through {through} to "
                f"`checkpoint` (line {helper.checkpoint_line}{' of that file' if where else ''}) "
                + ("with the `use_reentrant=True` this call passes" if passes_reentrant(call)
                   else "reentrant (`use_reentrant` is not set to False there)")
                + ": "
                f"torch raises `ValueError: Unexpected keyword arguments: {','.join(forwarded)}` whenever checkpointing "
                "is on; pass `use_reentrant=False` in that call",
            )
            reported.add(call)
        return reported

    def _indexed_target(self, call: cst.Call, names: dict[str, str]):
        """What the index says a call calls: an imported (or the file's own) function by
        name, or `self.<method>` of the class holding the call or of a project base."""
        project = self.context.project
        func = call.func
        if isinstance(func, cst.Name):
            absolute = names.get(func.value)
            return project.forwarding_target(absolute) if absolute is not None else None
        if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == "self":
            owner = self._owner(self._call_scopes.get(call, ()))
            for ancestor in project.ancestors(owner) if owner is not None else ():
                found = project.forwarding_target(f"{ancestor}.{func.attr.value}")
                if found is not None:
                    return found
        return None

    def visit_checkpoint_site(self, site: CheckpointSite) -> None:
        if site.kind is not SiteKind.CALL or site.api is not CheckpointApi.CHECKPOINT:
            return
        extra = site.extra_keywords()
        callees = self._callees(site) if extra else []
        rejecting = [c for c in callees if any(not c.accepts(name) for name in extra)]
        if callees and len(rejecting) == len(callees):  # every function it may call rejects one
            callee = callees[0]
            self._report_rejected(site, callee, [name for name in extra if not callee.accepts(name)])
            return
        if self._check_too_many_inputs(site) or self._check_positional_slots(site) or self._check_dropped_keywords(site):
            return
        self._check_reentrant(site, extra)

    def _check_dropped_keywords(self, site: CheckpointSite) -> bool:
        """The plain call of the other branch passes what the checkpointed call drops: a
        `**kwargs` the function builds up (`kwargs.update(...)`, `kwargs["k"] = v`), or a
        mask. The region then computes something else than the plain forward, silently."""
        if site.function is None:
            return False
        function_code = code_of(site.function)
        plain = [call for call in self._other_branch_calls(site) if code_of(call.func) == function_code]
        if len(plain) != 1:
            return False
        passed = {code_of(arg.value) for arg in site.node.args}
        splats = [arg for arg in site.node.args if arg.star == "**"]
        dropped = []
        for arg in plain[0].args:
            if arg.star == "**" and code_of(arg.value) not in passed and self._built_up(arg.value, site.node):
                dropped.append(f"`**{code_of(arg.value)}`")
            elif (
                arg.keyword is not None
                and arg.keyword.value.endswith("mask")
                and not splats
                and not is_literal(arg.value)
                and code_of(arg.value) not in passed
            ):
                dropped.append(f"`{arg.keyword.value}={code_of(arg.value)}`")
        if not dropped:
            return False
        self.report(
            site.node,
            f"the checkpointed call drops {', '.join(dropped)}, which the non-checkpointed branch passes to "
            f"`{function_code}` (line {self.context.position(plain[0]).start.line}): with checkpointing on, the "
            "region computes something else, silently; pass the same arguments (with `use_reentrant=False` "
            "for keywords)",
        )
        return True

    def _built_up(self, expr: cst.BaseExpression, call: cst.Call) -> bool:
        """`kwargs` is a name the function holding `call` fills: `kwargs.update(...)`,
        `kwargs[key] = value`, or a dict literal with entries."""
        function = self._function_of.get(call)
        if function is None or not isinstance(expr, cst.Name):
            return False
        name = expr.value
        found = False

        class Finder(cst.CSTVisitor):
            def visit_Call(self, node: cst.Call) -> None:
                nonlocal found
                func = node.func
                if isinstance(func, cst.Attribute) and func.attr.value in ("update", "setdefault") and code_of(func.value) == name:
                    found = True

            def visit_AssignTarget(self, node: cst.AssignTarget) -> None:
                nonlocal found
                if isinstance(node.target, cst.Subscript) and code_of(node.target.value) == name:
                    found = True

        walk(function, Finder())
        return found

    def _check_positional_slots(self, site: CheckpointSite) -> bool:
        """The checkpointed call passes a value positionally into another parameter than the
        one the plain call of the other branch names for it. Where the callee may be one of
        several functions (a library block whose `forward` changed between versions, a loop
        over blocks of two classes), only when it does so for every one of them."""
        callees = self._callees(site)
        if not callees or site.function is None:
            return False
        function_code = code_of(site.function)
        plain = [call for call in self._other_branch_calls(site) if code_of(call.func) == function_code]
        if len(plain) != 1:
            return False
        # A value may be passed under several names (`k_x=image_embs, v_x=image_embs`).
        keywords: dict[str, list[str]] = {}
        for arg in plain[0].args:
            if arg.keyword is not None:
                keywords.setdefault(code_of(arg.value), []).append(arg.keyword.value)
        problems = [self._slot_problem(site, keywords, callee) for callee in callees]
        if any(problem is None for problem in problems):
            return False
        self.report(site.node, problems[0])
        return True

    def _check_too_many_inputs(self, site: CheckpointSite) -> bool:
        """More positional inputs than the function takes (open_clip's `CustomTransformer`
        checkpoints `checkpoint(r, x, None, None, attn_mask)` into
        `CustomResidualAttentionBlock.forward(x, attn_mask=None)`): `TypeError` on the first
        checkpointed step, whatever the implementation. Only when every function it may
        call takes fewer, and none has `*args`."""
        if site.function is None or any(arg.star for arg in site.positional):
            return False
        callees = self._callees(site)
        given = len(site.positional)

        def takes(callee: Callee) -> int | None:
            if any(p.kind == "*" for p in callee.parameters):
                return None
            return sum(p.kind == "positional" for p in callee.parameters)

        if not callees or not all((limit := takes(callee)) is not None and given > limit for callee in callees):
            return False
        callee = callees[0]
        self.report(
            site.node,
            f"`{code_of(site.node.func)}` hands {given} positional inputs to `{callee.name}`{callee.where}, which takes "
            f"{takes(callee)} (`{callee.signature()}`): `TypeError` on the first checkpointed step, whatever the "
            f"implementation; pass only the inputs `{callee.name}` takes",
        )
        return True

    def _slot_problem(self, site: CheckpointSite, keywords: dict[str, list[str]], callee: Callee) -> str | None:
        """What is wrong with the site's positional inputs for `callee`, if anything."""
        slots = [p.name for p in callee.parameters if p.kind == "positional"]
        for position, arg in enumerate(site.positional):
            if arg.star or position >= len(slots):
                continue
            packed = self._packed(arg.value, slots[position], keywords, callee)
            if packed is not None:
                return packed
            names = keywords.get(code_of(arg.value))
            if names is None:
                continue
            slot = slots[position]
            expected = " or ".join(f"{name}" for name in names)
            if slot not in names:
                return (
                    f"`{code_of(arg.value)}` is passed positionally into parameter `{slot}` of "
                    f"`{callee.name}`{callee.where}, while the non-checkpointed branch passes it as `{expected}=`: "
                    f"with checkpointing on, the value lands in the wrong parameter; pass the inputs in "
                    f"`{callee.name}`'s parameter order"
                )
        return None

    def _packed(self, value: cst.BaseExpression, slot: str, keywords: dict[str, list[str]], callee: Callee) -> str | None:
        """A tuple literal packing values the plain call passes by keyword
        (`checkpoint(blk, x, (rel_pos_bias,))` against `blk(x, rel_pos_bias=rel_pos_bias)`):
        checkpoint hands the tuple on as one argument, so the parameter receives a tuple."""
        if not isinstance(value, cst.Tuple) or any(isinstance(e, cst.StarredElement) for e in value.elements):
            return None
        packed = [code_of(element.value) for element in value.elements]
        named = [(code, keywords[code]) for code in packed if code in keywords]
        if not named:
            return None
        code, names = named[0]
        expected = " or ".join(names)
        return (
            f"`{code_of(value)}` is passed positionally into parameter `{slot}` of `{callee.name}`{callee.where}: one "
            f"tuple, while the non-checkpointed branch passes `{code}` itself as `{expected}=`: checkpoint hands the "
            f"tuple on as it is, so with checkpointing on `{slot}` receives a tuple instead of the value; pass "
            f"{', '.join(f'`{p}`' for p in packed)} without the tuple, in `{callee.name}`'s parameter order"
        )

    def _other_branch_calls(self, site: CheckpointSite) -> list[cst.Call]:
        for node in self._ifs:
            branches = [node.body, node.orelse.body if isinstance(node.orelse, cst.Else) else None]
            for index, branch in enumerate(branches):
                other = branches[1 - index]
                if branch is not None and other is not None and contains(branch, site.node):
                    return calls_in(other)
        return []

    def _report_rejected(self, site: CheckpointSite, callee: Callee, rejected: list[str]) -> None:
        names = ", ".join(f"`{name}`" for name in rejected)
        self.report(
            site.node,
            f"keyword argument{'s' if len(rejected) > 1 else ''} {names} passed through `checkpoint` to "
            f"`{callee.name}({callee.signature()})`{callee.where}, which cannot accept "
            f"{'them' if len(rejected) > 1 else 'it'}: a TypeError as soon as checkpointing is on (a ValueError "
            "with the reentrant implementation); pass them positionally or give the function the parameters",
        )

    def _callees(self, site: CheckpointSite) -> list[Callee]:
        found = self._callees_at.get(site.node)
        if found is None:
            found = self._callees_at[site.node] = self._resolve_callees(site)
        return found

    def _resolve_callees(self, site: CheckpointSite) -> list[Callee]:
        """The functions checkpoint will call with the site's inputs, through the project
        model (any file): a function, `self.<method>`, the function a factory returns
        (`create_custom_forward(module)`), or a module's `forward` (`self.block`, a loop
        variable over `self.blocks`), or a library block's `forward` in each version the
        project may run (`model/third_party_signatures.py`). Empty when any of them is not
        known."""
        if site.function is None:
            return []
        _, values = self.values_at(site.node, site.function)
        denotation = self.context.project.denotation
        found: list[Callee] = []
        for value in denotation.runs(values):
            callee = None
            if isinstance(value, FunctionRef):
                summary = denotation.summary(value.name)
                bound = value.frame is not None and value.frame.self_instance is not None and value.frame.function == value.name
                callee = Callee.of(summary, skip_self=bound) if summary is not None else None
            elif isinstance(value, Instance) and self.context.project.class_named(value.cls) is not None:
                forward = denotation.method(value.cls, "forward")
                callee = Callee.of(forward, skip_self=True) if forward is not None else None
            elif isinstance(value, Instance):
                # A library block (open_clip's `ResidualAttentionBlock`): its `forward` in
                # each version the project may run, from the table. A block found through
                # what a library model holds (`open_clip_models.py`) exists in some versions
                # only; where the project runs none of them, it is not there.
                held_in = instance_versions(value)
                if held_in is not None and not self.context.versions.could_be(held_in):
                    continue
                signatures = [
                    signature for signature in forward_signatures(value.cls, self.context.versions)
                    if held_in is None or signature.versions.overlaps(held_in)
                ]
                if not signatures:
                    return []
                found.extend(Callee.of_library(signature) for signature in signatures)
                continue
            if callee is None:
                return []
            path = self.context.project.path_of(value.name if isinstance(value, FunctionRef) else value.cls)
            if path is not None and path != self.context.relative_path:
                callee = replace(callee, where=f" ({path})")
            found.append(callee)
        return list(dict.fromkeys(found))

    def _check_reentrant(self, site: CheckpointSite, extra: list[str]) -> None:
        configured = None
        if not site.reentrancy.is_reentrant:
            # Non-reentrant, or unknown: a **kwargs splat that may set it, or an expression
            # (`use_reentrant=self.use_reentrant`) the project only ever sets to True.
            configured = self.configured_reentrant(site) if extra else None
            if configured is None:
                return
        non_reentrant_only = site.non_reentrant_only_keywords()
        if extra:
            what = "keyword argument" + ("s " if len(extra) > 1 else " ") + ", ".join(f"`{k}`" for k in extra)
            error = "Unexpected keyword arguments: " + ",".join(extra)
        elif non_reentrant_only:
            what = " and ".join(f"`{k}`" for k in non_reentrant_only)
            error = "Passing `context_fn` or `debug` is only supported when use_reentrant=False."
        else:
            return
        flag = site.keywords.get("use_reentrant")
        # `use_reentrant=True` bound by a partial of another module (`from .ckpt import reentrant_ckpt`)
        bound_by = f", bound by `{site.imported_partial}`" if flag is not None and flag.call is None and site.imported_partial else ""
        reentrancy = (
            configured if configured is not None
            else f"`use_reentrant=True`{bound_by}" if site.reentrancy is Reentrancy.EXPLICIT_TRUE
            else "`use_reentrant` omitted, so torch defaults to reentrant"
        )
        if self.context.versions.applies((TORCH_WITHOUT_THE_FLAG,)) is Applies.YES:
            self.report(
                site.node,
                f"{what} passed to `checkpoint`: the targeted torch (< 1.11) has no `use_reentrant` and raises "
                f"`ValueError: {error}` for any keyword; bind them first (`functools.partial`, a closure) "
                "or target torch >= 1.11 and pass `use_reentrant=False`",
            )
            return
        # A configured flag is the project's to default to False: no fix overwrites the option.
        self.report(
            site.node,
            self.message.format(what=what, reentrancy=reentrancy, error=error),
            replacements=[] if configured else [
                Replacement(site.node, set_keyword(site.node, "use_reentrant", cst.Name("False")))
            ],
            fix_message="Set `use_reentrant=False`",
        )

    valid = [
        # Four inputs for a block that takes four, or `*args`; a loop over blocks of two
        # classes of which one takes four: not every callee rejects them.
        Valid(
            """
            import torch.nn as nn
            from torch.utils.checkpoint import checkpoint

            class QKVBlock(nn.Module):
                def forward(self, q_x, k_x=None, v_x=None, attn_mask=None):
                    return q_x

            class CustomBlock(nn.Module):
                def forward(self, x, attn_mask=None):
                    return x

            class AnyBlock(nn.Module):
                def forward(self, x, *rest):
                    return x

            class Tower(nn.Module):
                def __init__(self, custom):
                    super().__init__()
                    self.resblocks = nn.ModuleList([CustomBlock() if custom else QKVBlock(), AnyBlock()])

                def forward(self, x, attn_mask=None):
                    for r in self.resblocks:
                        x = checkpoint(r, x, None, None, attn_mask, use_reentrant=False)
                    return x
            """
        ),
        # transformers' `_gradient_checkpointing_func` given keywords: non-reentrant from 5.0,
        # or where the project enables it with `use_reentrant: False`; positional arguments;
        # the call choosing the implementation itself.
        Valid(_HF_LAYER_LOOP.format(passed="attention_mask=attention_mask", enable=""),
              target_versions={"transformers": "5.0"}),
        Valid(_HF_LAYER_LOOP.format(passed="attention_mask=attention_mask", enable=_NON_REENTRANT),
              target_versions={"transformers": "4.46"}),
        Valid(_HF_LAYER_LOOP.format(passed="attention_mask", enable=""), target_versions={"transformers": "4.46"}),
        Valid(_HF_LAYER_LOOP.format(passed="attention_mask=attention_mask, use_reentrant=False", enable=""),
              target_versions={"transformers": "4.46"}),
        # The helper's callers choose: `use_reentrant=False` passed through, inputs passed by
        # position, a keyword the helper binds itself; a helper that sets the flag.
        Valid(
            """
            import torch
            import torch.nn as nn

            def run(func, enable, *args, **kwargs):
                if enable:
                    return torch.utils.checkpoint.checkpoint(func, *args, **kwargs)
                return func(*args, **kwargs)

            def run_flat(func, *args, **kwargs):
                return torch.utils.checkpoint.checkpoint(func, *args, use_reentrant=False, **kwargs)

            class Block(nn.Module):
                def __init__(self, attn):
                    super().__init__()
                    self.attn = attn

                def forward(self, x, mask):
                    x = run(self.attn, self.training, x, attention_mask=mask, use_reentrant=False)
                    x = run(self.attn, self.training, x, mask)
                    x = run(self.attn, enable=self.training, *(x, mask))
                    return run_flat(self.attn, x, attention_mask=mask)
            """
        ),
        # Decorators that choose the flag (written, or `setdefault`), one that is no torch
        # checkpoint, a wrapper binding the keyword itself, positional inputs, the flag at the call.
        Valid(
            """
            import functools
            import torch
            import torch.utils.checkpoint as cp

            def checkpoint(fn):
                @functools.wraps(fn)
                def wrapper(*args, **kwargs):
                    return cp.checkpoint(fn, *args, use_reentrant=False, **kwargs)
                return wrapper

            def recompute(fn):
                @functools.wraps(fn)
                def wrapper(*args, **kwargs):
                    kwargs.setdefault("use_reentrant", False)
                    return cp.checkpoint(fn, *args, **kwargs)
                return wrapper

            def saved(fn):
                def wrapper(*args, **kwargs):
                    out = fn(*args, **kwargs)
                    torch.save(out, "out.pt")
                    return out
                return wrapper

            def recompute_method(method):
                def wrapper(self, x, mask=None, **kwargs):
                    return cp.checkpoint(method, self, x, mask, **kwargs)
                return wrapper

            def plain(fn):
                def wrapper(*args, **kwargs):
                    return cp.checkpoint(fn, *args, **kwargs)
                return wrapper

            @checkpoint
            def chunk_fwd(q, k, scale=None):
                return q * k

            @recompute
            def chunk_bwd(q, k, scale=None):
                return q * k

            @saved
            def decay(g, scale=1.0):
                return g * scale

            @plain
            def fused(q, k, scale=None):
                return q * k

            class Attention:
                @recompute_method
                def attend(self, x, mask=None):
                    return x

                def forward(self, q, k, s, mask):
                    y = chunk_fwd(q, k, scale=s) + chunk_bwd(q, k, scale=s) + decay(q, scale=s)
                    y = y + fused(q, k, s) + fused(q, k, scale=s, use_reentrant=False)
                    return y + self.attend(q, mask=mask)
            """
        ),
        # A tuple the plain branch passes as it is: the parameter takes a tuple.
        Valid(
            """
            from torch.utils.checkpoint import checkpoint

            def scaled(x, scales=None):
                return x

            def run(x, gain, training):
                if training:
                    y = checkpoint(scaled, x, (gain, 2.0), use_reentrant=False)
                else:
                    y = scaled(x, scales=(gain, 2.0))
                return y
            """
        ),
        # The same inputs positionally; `**kwargs` from the caller (may be empty); a literal flag dropped.
        Valid(
            """
            from torch.utils.checkpoint import checkpoint

            def forward(self, h, mask, **kwargs):
                for layer in self.layers:
                    if self.gradient_checkpointing:
                        h = checkpoint(layer, h, mask, use_reentrant=False)
                    else:
                        h = layer(h, attention_mask=mask, use_cache=False, **kwargs)
                return h
            """
        ),
        # The wrapper forwards keywords; a positional call of an `*args` wrapper.
        Valid(
            """
            from torch.utils.checkpoint import checkpoint

            def forward(self, h, mask):
                for layer in self.layers:
                    def layer_(*args, **kwargs):
                        return checkpoint(layer, *args, use_reentrant=False, **kwargs)
                    def plain_(*args):
                        return checkpoint(layer, *args, use_reentrant=False)
                    h = layer_(h, attn_mask=mask)
                    h = plain_(h, mask)
                return h
            """
        ),
        # One value passed under two names, positionally into both slots (open_clip's
        # cross-attention: `k_x=image_embs, v_x=image_embs`).
        Valid(
            """
            import torch.nn as nn
            from torch.utils.checkpoint import checkpoint

            class ResidualAttentionBlock(nn.Module):
                def forward(self, q_x, k_x=None, v_x=None, attn_mask=None):
                    return q_x

            class MultimodalTransformer(nn.Module):
                def __init__(self, layers):
                    super().__init__()
                    self.cross_attn = nn.ModuleList([ResidualAttentionBlock() for _ in range(layers)])

                def forward(self, image_embs, text_embs):
                    for cross_attn in self.cross_attn:
                        if self.grad_checkpointing:
                            text_embs = checkpoint(cross_attn, text_embs, image_embs, image_embs, None, use_reentrant=False)
                        else:
                            text_embs = cross_attn(text_embs, k_x=image_embs, v_x=image_embs)
                    return text_embs
            """
        ),
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
        # The option defaults to True, but the project builds the encoder non-reentrant.
        Valid(
            """
            import torch.nn as nn
            from torch.utils.checkpoint import checkpoint

            class Encoder(nn.Module):
                def __init__(self, layers, use_reentrant=True):
                    super().__init__()
                    self.layers = nn.ModuleList(layers)
                    self.use_reentrant = use_reentrant

                def forward(self, x, pad_mask=None):
                    for layer in self.layers:
                        x = checkpoint(layer, x, pad_mask=pad_mask, use_reentrant=self.use_reentrant)
                    return x

            def build(layers):
                return Encoder(layers, use_reentrant=False)
            """
        ),
        # open_clip's own block (`model/third_party_signatures.py`), the mask after `None, None`
        # for `k_x` and `v_x`: the right slot.
        Valid(
            _OPEN_CLIP_BLOCKS.format(block="ResidualAttentionBlock", passed="None, None, attn_mask"),
            target_versions={"open-clip-torch": "2.20"},
        ),
        # Before 2.11 the block's `forward` was `(x, attn_mask=None)`: the mask second is right.
        Valid(
            _OPEN_CLIP_BLOCKS.format(block="ResidualAttentionBlock", passed="attn_mask"),
            target_versions={"open-clip-torch": "2.10"},
        ),
        # The version not known: right for open_clip < 2.11, so nothing is said.
        Valid(_OPEN_CLIP_BLOCKS.format(block="ResidualAttentionBlock", passed="attn_mask")),
        # `CustomResidualAttentionBlock.forward(x, attn_mask=None)` in every version.
        Valid(
            _OPEN_CLIP_BLOCKS.format(block="CustomResidualAttentionBlock", passed="attn_mask"),
            target_versions={"open-clip-torch": "2.20"},
        ),
        # Blocks of either class: the mask second is right for the custom ones.
        Valid(
            """
            import torch.nn as nn
            from torch.utils.checkpoint import checkpoint
            from open_clip.transformer import CustomResidualAttentionBlock, ResidualAttentionBlock

            class TextTower(nn.Module):
                def __init__(self, width, layers):
                    super().__init__()
                    self.resblocks = nn.ModuleList(
                        [CustomResidualAttentionBlock(width, 8) if i % 2 else ResidualAttentionBlock(width, 8) for i in range(layers)]
                    )

                def forward(self, x, attn_mask=None):
                    for r in self.resblocks:
                        if self.grad_checkpointing:
                            x = checkpoint(r, x, attn_mask, use_reentrant=False)
                        else:
                            x = r(x, attn_mask=attn_mask)
                    return x
            """,
            target_versions={"open-clip-torch": "2.20"},
        ),
        # A library block the table does not hold (timm's): nothing known, nothing said.
        Valid(
            """
            import torch.nn as nn
            from torch.utils.checkpoint import checkpoint
            from timm.models.vision_transformer import Block

            class Tower(nn.Module):
                def __init__(self, width, layers):
                    super().__init__()
                    self.blocks = nn.ModuleList([Block(width, 8) for _ in range(layers)])

                def forward(self, x, attn_mask=None):
                    for blk in self.blocks:
                        if self.grad_checkpointing:
                            x = checkpoint(blk, x, attn_mask, use_reentrant=False)
                        else:
                            x = blk(x, attn_mask=attn_mask)
                    return x
            """,
            target_versions={"open-clip-torch": "2.20"},
        ),
        # From open_clip 3.0 a text tower's `Transformer` may hold `CustomResidualAttentionBlock`s
        # (`forward(x, attn_mask=None)`), where the mask second is right: nothing is said.
        Valid(_OPEN_CLIP_PRETRAINED, target_versions={"open-clip-torch": "3.0"}),
        Valid(_OPEN_CLIP_PRETRAINED),
        # The project's own class named like open_clip's: its own `forward` counts.
        Valid(
            """
            import torch.nn as nn
            from torch.utils.checkpoint import checkpoint

            class ResidualAttentionBlock(nn.Module):
                def forward(self, x, attn_mask=None):
                    return x

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
            target_versions={"open-clip-torch": "2.20"},
        ),
    ]
    invalid = [
        # open_clip's `CustomTransformer` (2.29 to 3.x): the `None, None` that fill
        # `ResidualAttentionBlock`'s `k_x` and `v_x` are two inputs too many for the custom
        # block, whose forward takes `(x, attn_mask)`.
        Invalid(
            """
            import torch.nn as nn
            from torch.utils.checkpoint import checkpoint

            class CustomBlock(nn.Module):
                def __init__(self, width):
                    super().__init__()
                    self.mlp = nn.Linear(width, width)

                def forward(self, x, attn_mask=None):
                    return x + self.mlp(x)

            class CustomTransformer(nn.Module):
                def __init__(self, width, layers):
                    super().__init__()
                    self.grad_checkpointing = False
                    self.resblocks = nn.ModuleList([CustomBlock(width) for _ in range(layers)])

                def forward(self, x, attn_mask=None):
                    for r in self.resblocks:
                        if self.grad_checkpointing:
                            x = checkpoint(r, x, None, None, attn_mask, use_reentrant=False)
                        else:
                            x = r(x, attn_mask=attn_mask)
                    return x
            """,
            line=21,
            column=21,
            message_contains="hands 4 positional inputs to `forward`, which takes 2 (`x, attn_mask=None`): `TypeError`",
        ),
        # diffusers' `_gradient_checkpointing_func(module, *args)` takes no keywords at all.
        Invalid(
            """
            import torch
            from diffusers import ModelMixin

            class VideoTransformer(ModelMixin):
                _supports_gradient_checkpointing = True

                def forward(self, hidden_states, kv_cache):
                    for index, block in enumerate(self.blocks):
                        if torch.is_grad_enabled() and self.gradient_checkpointing:
                            hidden_states = self._gradient_checkpointing_func(block, hidden_states, kv_cache=kv_cache[index])
                        else:
                            hidden_states = block(hidden_states, kv_cache=kv_cache[index])
                    return hidden_states
            """,
            line=10,
            column=33,
            message_contains="which diffusers' `ModelMixin.enable_gradient_checkpointing` defines as `(module, *args)`",
        ),
        # Beside a `**block_kwargs` splat, a keyword written at the call is still one.
        Invalid(
            """
            import torch
            from diffusers.models.modeling_utils import ModelMixin

            class AnimateTransformer(ModelMixin):
                def forward(self, hidden_states, kv_cache, block_kwargs):
                    for index, block in enumerate(self.blocks):
                        if torch.is_grad_enabled() and self.gradient_checkpointing:
                            hidden_states = self._gradient_checkpointing_func(
                                block, hidden_states, kv_cache=kv_cache.get(index), **block_kwargs
                            )
                    return hidden_states
            """,
            line=8,
            column=33,
            message_contains="keyword argument `kv_cache` passed to `_gradient_checkpointing_func`",
        ),
        # The keywords collected with `dict(...)`, then splatted: their names are known.
        Invalid(
            """
            import torch.utils.checkpoint as cp

            def run_layer(layer, h, mask, pos):
                kw = dict(attention_mask=mask, position_ids=pos)
                return cp.checkpoint(layer, h, use_reentrant=True, **kw)
            """,
            line=5,
            column=12,
            expected_fix="""
            import torch.utils.checkpoint as cp

            def run_layer(layer, h, mask, pos):
                kw = dict(attention_mask=mask, position_ids=pos)
                return cp.checkpoint(layer, h, use_reentrant=False, **kw)
            """,
            message_contains="keyword arguments `attention_mask`, `position_ids`",
        ),
        # A helper that forces the reentrant implementation and hands its **kwargs on: the
        # caller's keyword reaches it (a caller cannot pass `use_reentrant` a second time).
        Invalid(
            """
            from torch.utils.checkpoint import checkpoint

            def ckpt_reentrant(fn, *args, **kwargs):
                return checkpoint(fn, *args, use_reentrant=True, **kwargs)

            def attend(layer, x, mask):
                return ckpt_reentrant(layer, x, attention_mask=mask)
            """,
            line=7,
            column=12,
            message_contains="hands its `**kwargs` to `checkpoint` (line 4) with `use_reentrant=True`",
        ),
        # A pass-through helper whose caller chooses the reentrant implementation itself.
        Invalid(
            """
            from torch.utils.checkpoint import checkpoint

            def ckpt(fn, *args, **kwargs):
                return checkpoint(fn, *args, **kwargs)

            def attend(layer, x, mask):
                return ckpt(layer, x, attn_mask=mask, use_reentrant=True)
            """,
            line=7,
            column=12,
            message_contains="with the `use_reentrant=True` this call passes",
        ),
        # `use_reentrant` from a constructor option that defaults to True (nothing in the
        # project passes another value): the keywords crash every checkpointed step.
        Invalid(
            """
            import torch.nn as nn
            from torch.utils.checkpoint import checkpoint

            class Encoder(nn.Module):
                def __init__(self, layers, use_reentrant=True):
                    super().__init__()
                    self.layers = nn.ModuleList(layers)
                    self.use_reentrant = use_reentrant

                def forward(self, x, pad_mask=None):
                    for layer in self.layers:
                        x = checkpoint(layer, x, pad_mask=pad_mask, use_reentrant=self.use_reentrant)
                    return x
            """,
            line=12,
            column=17,
            message_contains="(`use_reentrant=self.use_reentrant`, True by default and wherever the project sets it)",
        ),
        # `checkpoint` chosen at import time (DeepSpeed's or torch's): where it is torch's, the
        # packed tuple lands in `rel_pos_bias` as a tuple.
        Invalid(
            """
            import os
            import torch.nn as nn

            if os.getenv("ENV_TYPE") == "deepspeed":
                from deepspeed.runtime.activation_checkpointing.checkpointing import checkpoint
            else:
                from torch.utils.checkpoint import checkpoint

            class Block(nn.Module):
                def forward(self, x, rel_pos_bias=None):
                    return x

            class Encoder(nn.Module):
                def __init__(self, depth, plain_layers=0):
                    super().__init__()
                    self.plain_layers = plain_layers
                    self.blocks = nn.ModuleList()
                    for _ in range(depth):
                        self.blocks.append(Block())

                def forward(self, x, rel_pos_bias=None):
                    checkpointed = self.grad_checkpointing and self.training
                    for index, blk in enumerate(self.blocks):
                        if index < self.plain_layers or not checkpointed:
                            x = blk(x, rel_pos_bias=rel_pos_bias)
                        else:
                            x = checkpoint(blk, x, (rel_pos_bias,))
                    return x
            """,
            line=27,
            column=21,
            message_contains="`(rel_pos_bias,)` is passed positionally into parameter `rel_pos_bias` of `forward`: one tuple",
        ),
        # A decorator whose wrapper hands its **kwargs to checkpoint: the decorated kernel's
        # keyword reaches the reentrant default.
        Invalid(
            """
            import functools
            import torch.utils.checkpoint

            def checkpoint(fn):
                @functools.wraps(fn)
                def wrapper(*args, **kwargs):
                    return torch.utils.checkpoint.checkpoint(fn, *args, **kwargs)
                return wrapper

            @checkpoint
            def chunk_fwd(q, k, v, scale=None):
                return q * k * v * scale

            def attention(q, k, v, s):
                return chunk_fwd(q, k, v, scale=s)
            """,
            line=15,
            column=12,
            message_contains="keyword argument `scale` passed through `chunk_fwd` (line 11), decorated by `@checkpoint` (line 4)",
        ),
        # A helper that hands its **kwargs to checkpoint, called with a keyword for the layer.
        Invalid(
            """
            import torch
            import torch.nn as nn

            class Block(nn.Module):
                def __init__(self, attn):
                    super().__init__()
                    self.attn = attn

                def _checkpoint_forward(self, func, *args, **kwargs):
                    if self.training:
                        return torch.utils.checkpoint.checkpoint(func, *args, **kwargs)
                    return func(*args, **kwargs)

                def forward(self, x, mask):
                    return self._checkpoint_forward(self.attn, x, attention_mask=mask)
            """,
            line=15,
            column=16,
            message_contains="keyword argument `attention_mask` passed through `_checkpoint_forward` (line 9)",
        ),
        # The checkpointed branch drops the mask and the keywords the plain branch builds up.
        Invalid(
            """
            from torch.utils.checkpoint import checkpoint

            def forward(self, h, mask, rope=None):
                kwargs = {}
                if rope is not None:
                    kwargs.update(rope=rope)
                for layer in self.layers:
                    if self.gradient_checkpointing and self.training:
                        h = checkpoint(layer, h, use_reentrant=False)
                    else:
                        h = layer(h, attention_mask=mask, **kwargs)
                return h
            """,
            line=9,
            column=17,
            message_contains="the checkpointed call drops `attention_mask=mask`, `**kwargs`, which the non-checkpointed branch passes to `layer` (line 11)",
        ),
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
        # A checkpointing wrapper taking only `*args`, called with a keyword when it is chosen.
        Invalid(
            """
            from torch.utils.checkpoint import checkpoint

            def forward(self, h, mask):
                for layer in self.layers:
                    if self.gradient_checkpointing and self.training:
                        def layer_(*args):
                            return checkpoint(layer, *args, use_reentrant=False)
                    else:
                        layer_ = layer
                    h = layer_(h, attn_mask=mask)
                return h
            """,
            line=10,
            column=13,
            message_contains="passed to `layer_(*args)` (line 6), which checkpoints and takes no keywords",
        ),
        # A model's own layer loop handing keywords to transformers' checkpoint function,
        # enabled with the default kwargs: reentrant before transformers 5.0.
        Invalid(
            _HF_LAYER_LOOP.format(passed="attention_mask=attention_mask", enable=""),
            line=10,
            column=21,
            message_contains="`ValueError: Unexpected keyword arguments: attention_mask`",
            target_versions={"transformers": "4.39"},
        ),
        # A project targeting torch 1.10: the same crash, and no flag to fix it with.
        Invalid(
            """
            from torch.utils.checkpoint import checkpoint

            def forward(self, h, mask):
                return checkpoint(self.layer, h, attention_mask=mask)
            """,
            line=4,
            column=12,
            message_contains="the targeted torch (< 1.11) has no `use_reentrant` and raises `ValueError: Unexpected keyword arguments: attention_mask`",
            target_versions={"torch": "1.10"},
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
        # open_clip's own block from 2.11 on: `forward(q_x, k_x=None, v_x=None, attn_mask=None)`
        # (`model/third_party_signatures.py`), the mask second lands in `k_x`.
        Invalid(
            _OPEN_CLIP_BLOCKS.format(block="ResidualAttentionBlock", passed="attn_mask"),
            line=13,
            column=21,
            message_contains=(
                "`attn_mask` is passed positionally into parameter `k_x` of `ResidualAttentionBlock.forward` "
                "(open-clip-torch>=2.11), while the non-checkpointed branch passes it as `attn_mask=`"
            ),
            target_versions={"open-clip-torch": "2.20"},
        ),
        # Blocks of the model `create_model_and_transforms` returns, open_clip 2.24: all
        # `ResidualAttentionBlock`s (`model/open_clip_models.py`).
        Invalid(
            _OPEN_CLIP_PRETRAINED,
            line=14,
            column=21,
            message_contains="parameter `k_x` of `ResidualAttentionBlock.forward` (open-clip-torch>=2.11)",
            target_versions={"open-clip-torch": "2.24"},
        ),
        # A keyword open_clip's block does not take, non-reentrant: a TypeError in training.
        Invalid(
            _OPEN_CLIP_BLOCKS.format(block="CustomResidualAttentionBlock", passed="mask=attn_mask"),
            line=13,
            column=21,
            message_contains=(
                "keyword argument `mask` passed through `checkpoint` to "
                "`CustomResidualAttentionBlock.forward(x, attn_mask=None)` (open-clip-torch>=2.2), which cannot accept it"
            ),
            target_versions={"open-clip-torch": "2.20"},
        ),
        # The same through `import open_clip` and the module path.
        Invalid(
            """
            import open_clip
            import torch.nn as nn
            from torch.utils.checkpoint import checkpoint

            class Adapter(nn.Module):
                def __init__(self, width):
                    super().__init__()
                    self.block = open_clip.transformer.ResidualAttentionBlock(width, 8)

                def forward(self, x, attn_mask=None):
                    if self.grad_checkpointing:
                        x = checkpoint(self.block, x, attn_mask, use_reentrant=False)
                    else:
                        x = self.block(x, attn_mask=attn_mask)
                    return x
            """,
            line=12,
            column=17,
            message_contains="parameter `k_x` of `ResidualAttentionBlock.forward` (open-clip-torch>=2.11)",
            target_versions={"open-clip-torch": "3.0"},
        ),
    ]
