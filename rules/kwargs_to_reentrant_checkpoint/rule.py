from __future__ import annotations

from ckptlint.lazy_libcst import cst

from ckptlint.analysis.checkpoint_sites import SITE_REQUIRES, SITE_TRIGGERS, CheckpointApi, CheckpointSite, SiteKind
from ckptlint.model.library.torch import Reentrancy
from ckptlint.analysis.site_scopes import SiteScopes
from ckptlint.analysis.transforms import use_reentrant_false
from ckptlint.types import Applicability, Severity
from ckptlint.versions import Applies

from .arguments import dropped_arguments, misplaced_input, rejected_keywords, too_many_inputs
from .callees import Callee, calls_in, checkpointed_callees, code_of, contains
from .helper_calls import TORCH_WITHOUT_THE_FLAG, ForwardingHelperCalls
from .hf_checkpointing_func import (
    args_only_call_message,
    args_only_installer,
    calls_hf_checkpointing_func,
    reentrant_call_message,
    reentrant_hf_calls,
)

class KwargsToReentrantCheckpoint(ForwardingHelperCalls, SiteScopes):
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
    block whose `forward` ckptlint holds as data (`model/library/third_party_signatures.py`: open_clip's
    `ResidualAttentionBlock`, `forward(self, q_x, k_x=None, v_x=None, attn_mask=None)` from
    open-clip-torch 2.11, `(self, x, attn_mask=None)` before; its
    `CustomResidualAttentionBlock`, `(self, x, attn_mask=None)`), constructed by the project
    or held by a model open_clip's factories return (`model, _, _ =
    open_clip.create_model_and_transforms(...)`, then `model.transformer.resblocks`:
    `model/library/open_clip.py`; from open_clip 3.0 those may be custom blocks). The version
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
    severity = Severity.ERROR
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
        args_only = [call for call in self._hf_calls if self._args_only_installer(call) is not None]
        for call in args_only:
            keywords = [arg.keyword.value for arg in call.args if arg.keyword is not None]
            if not keywords:
                continue  # a `**kwargs` splat alone may be empty
            self.report(call, args_only_call_message(keywords, self._args_only_installer(call)))
        for found in reentrant_hf_calls(self.context, [c for c in self._hf_calls if c not in args_only]):
            self.report(found.call, reentrant_call_message(found))
        # A name torch's checkpoint on some bindings only (DeepSpeed's on another): what the
        # checkpointed branch passes still differs from the plain one where it is torch's.
        for site in self.context.possible_sites:
            if site.api is CheckpointApi.CHECKPOINT:
                self._check_arguments(site)

    def _args_only_installer(self, call: cst.Call) -> str | None:
        return args_only_installer(self.context.project, self._owner(self._call_scopes.get(call, ())))

    def visit_checkpoint_site(self, site: CheckpointSite) -> None:
        if site.kind is not SiteKind.CALL or site.api is not CheckpointApi.CHECKPOINT:
            return
        extra = site.extra_keywords()
        callees = self._callees(site) if extra else []
        rejecting = [c for c in callees if any(not c.accepts(name) for name in extra)]
        if callees and len(rejecting) == len(callees):  # every function it may call rejects one
            callee = callees[0]
            self.report(site.node, rejected_keywords(callee, [name for name in extra if not callee.accepts(name)]))
            return
        if self._check_arguments(site):
            return
        self._check_reentrant(site, extra)

    def _check_arguments(self, site: CheckpointSite) -> bool:
        """Too many inputs for the callee, an input in another slot than the one the plain
        branch names for it, or what the plain branch passes dropped (`arguments.py`):
        reported, and nothing more is said of the site."""
        callees = self._callees(site)
        problem = too_many_inputs(site, callees)
        plain = self._plain_call(site) if problem is None and site.function is not None else None
        if plain is not None:
            problem = misplaced_input(site, callees, plain) or dropped_arguments(
                site, plain, self._function_of.get(site.node), lambda node: self.context.position(node).start.line
            )
        if problem is None:
            return False
        self.report(site.node, problem)
        return True

    def _plain_call(self, site: CheckpointSite) -> cst.Call | None:
        """The one call of the checkpointed function in the other branch of the `if`."""
        function_code = code_of(site.function)
        plain = [call for call in self._other_branch_calls(site) if code_of(call.func) == function_code]
        return plain[0] if len(plain) == 1 else None

    def _other_branch_calls(self, site: CheckpointSite) -> list[cst.Call]:
        for node in self._ifs:
            branches = [node.body, node.orelse.body if isinstance(node.orelse, cst.Else) else None]
            for index, branch in enumerate(branches):
                other = branches[1 - index]
                if branch is not None and other is not None and contains(branch, site.node):
                    return calls_in(other)
        return []

    def _callees(self, site: CheckpointSite) -> list[Callee]:
        found = self._callees_at.get(site.node)
        if found is None:
            found = self._callees_at[site.node] = (
                checkpointed_callees(self.values_at(site.node, site.function)[1], self.context)
                if site.function is not None else []
            )
        return found

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
                use_reentrant_false(site.node)
            ],
            fix_message="Set `use_reentrant=False`",
        )
