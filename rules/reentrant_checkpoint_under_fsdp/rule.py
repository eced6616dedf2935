from __future__ import annotations

from ckptlint.lazy_libcst import cst

from ckptlint.analysis.checkpoint_sites import SITE_TRIGGERS, CheckpointSite, may_hold_sites
from ckptlint.analysis.fsdp import (
    checkpoint_wrapper_impl,
    fsdp2_holds_class,
    fsdp2_only,
    fsdp_misses_class,
    fsdp_reaching_class,
    is_checkpoint_wrapper,
    is_partial,
    project_fsdp,
    wrapper_applications,
)
from ckptlint.analysis.hf_fixes import non_reentrant, with_non_reentrant_kwargs
from ckptlint.model.library.transformers import GC_KWARGS, HfCheckpointingKwargs, KwargsShape
from ckptlint.analysis.huggingface import gc_enable_kwargs, is_gc_enable_call, keyword_value
from ckptlint.model.library.transformers import GC_OUTSIDE_FSDP_UNIT_VERSIONS, REENTRANT_DEFAULT_VERSIONS
from ckptlint.analysis.reentrancy import reports_explicit_reentrant, reports_implicit_reentrant
from ckptlint.analysis.site_scopes import SiteScopes
from ckptlint.analysis.transforms import use_reentrant_false
from ckptlint.model.file_facts.facts import Impl
from ckptlint.rule import Replacement
from ckptlint.types import Applicability, Severity
from ckptlint.versions import Applies

from .fsdp_branches import FsdpBranches
from .hf_steps import kbit_preparations, kept_for_inference
from .messages import WHY, hf_message
from .syntax_gate import PREPARE_FOR_KBIT_WORD, collected
from .test_reach import ReachInTestFiles
from ckptlint.analysis.trainers import callee_name, handed_to_configuring_trainer, is_training_arguments, trainers_given, trl_defaults_non_reentrant

class ReentrantCheckpointUnderFsdp(SiteScopes):
    """Reentrant activation checkpointing in a project that shards its model with torch FSDP.

    ## What it does
    In a project that uses torch FSDP anywhere (`FullyShardedDataParallel`, `fully_shard`,
    `TrainingArguments(fsdp=...)`, accelerate's `FullyShardedDataParallelPlugin`, Lightning's
    `FSDPStrategy`, in any file under the project root but its tests; or a launch script's
    `accelerate launch --config_file fsdp.yaml train.py` whose config says `distributed_type:
    FSDP` (a `.yaml`, `.yml` or `.conf` config: accelerate reads any config not named `.json`
    as YAML), or whose own options say `--use_fsdp` (in a `.sh` / `.bash` / `.slurm` / `.sbatch`
    file, inside a SLURM job's `srun ... bash -c "..."` too), which counts as the launched
    file's own use, as if it sharded itself; a test file counts
    only its own, and each of its tests only the wraps in it (or in the file's helpers,
    fixtures and top level): a test does not inherit FSDP from the package it tests or from
    another test, nor the package from a test that shards; a top-level training script that shards,
    and that no other top-level file imports, counts for itself, what it imports and the
    project's modules, not for the project's other top-level training scripts, which run on
    their own; a package function that shards, `wrap_with_fsdp(model)`, counts where it is
    called: for the package and for the scripts that call it, not for the training scripts
    that never do (one called by nothing the project model sees, an entry point run by
    `fire.Fire(main)`: not for the training scripts that never import its module); in a repository of separate projects, each in a top-level folder that
    is not a package (`beit/`, `dit/`, `PFPO/` side by side, the root marked by `.git`),
    FSDP counts only in its own folder and the folders its imports join it to (through
    any folder, or the root's own files); a package folder (`mypkg/__init__.py`) is never
    apart; a checkpoint in a class's code is not reached when every FSDP wrap of
    the project wraps models the project model knows and none of them holds that class or
    shares a project base class with it, which a table or a config default may pick
    instead),
    finds checkpointing that runs the *reentrant* implementation:

    - `checkpoint(...)` / `checkpoint_sequential(...)` with `use_reentrant=True`, or without
      the argument (torch's default is reentrant), or with `use_reentrant=args.<option>`
      where every declaration of that option in the project (a dataclass field, also
      `field(default=...)`; an argparse argument, `store_true` defaulting to False; a
      variable read from the environment, `USE_REENTRANT = os.environ.get("USE_REENTRANT",
      "1") == "1"`, true when the variable is unset; a key of a YAML configuration, as Hydra
      and OmegaConf load it, `model: {use_reentrant: true}`, where every YAML file of the
      project that sets the key agrees) defaults to True: the finding names the
      declaration, and has no fix (the default lives there); what the code itself sets
      decides first (`self.use_reentrant = False` is False whatever a YAML says); likewise any expression the
      project model finds True wherever it runs (`use_reentrant=self.reentrant` where every
      construction passes True, also from a config dataclass's default; `use_reentrant=not
      USE_REENTRANT` with `USE_REENTRANT = False` in a settings module);
    - `checkpoint_wrapper(..., checkpoint_impl=CheckpointImpl.REENTRANT)`, directly, through
      a project function that hands everything on to it (xtuner's `def
      checkpoint_wrapper(module, *args, **kwargs)`, in any file), or through a
      `functools.partial` handed to `apply_activation_checkpointing` (not with a custom
      `checkpoint_fn`, which torch runs whatever the implementation says); a partial is
      reported where it is written (the fix goes there), and the message names the
      `apply_activation_checkpointing` calls that apply it (directly, or as the default of a
      helper's parameter, with the project's calls that leave the parameter out); also
      `checkpoint_impl=impl` where the project model finds only the reentrant implementation
      (`impl = CheckpointImpl.REENTRANT if reentrant else ...` over a parameter defaulting to
      True that no call sets to False: no fix);
    - Hugging Face gradient checkpointing whose effective kwargs are reentrant:
      `gradient_checkpointing_enable()` without kwargs when the targeted transformers is
      older than 5.0 (it defaults to `{"use_reentrant": True}` there), a
      `gradient_checkpointing_kwargs` dict without `use_reentrant` in any version
      (transformers applies its default only when the kwargs are `None`, so
      `{"preserve_rng_state": False}` runs torch's reentrant default), or
      `{"use_reentrant": True}` in a call, a `TrainingArguments(...)` or an assignment to
      `args.gradient_checkpointing_kwargs`; and peft's `prepare_model_for_kbit_training(model)`
      on a model loaded in 4 or 8 bit, which turns it on with the `gradient_checkpointing_kwargs`
      it is given (none: transformers' default; no fix, peft before 0.7 takes no such
      argument). A `gradient_checkpointing_enable()` that runs a
      project class's own method (a wrapper's `def gradient_checkpointing_enable(self):`
      handing on to its model's) is not one: the call it makes is checked. Nor is one on a
      Hugging Face model the file then puts in eval mode (`.eval()`, `.train(False)`), never
      putting it back in training mode (`.train()`) nor handing it to a trainer: a model kept
      for inference (a DPO reference model loaded like the policy), which Hugging Face never
      checkpoints (`self.gradient_checkpointing and self.training`). Nor is checkpointing on a
      branch that never runs with any of the FSDP uses reaching it, all in the same file (`if
      args.strategy == "deepspeed":` beside `if args.strategy == "fsdp":`; `self.args.strategy`
      in a method counts as the script's `args.strategy`).

    The finding is at the checkpoint call even when FSDP is set up in another file: the
    model's `forward` in `model.py`, the wrap in `train.py`. The message names the FSDP use
    that reaches the checkpointed code: the `FullyShardedDataParallel` / `fully_shard` call
    whose model is, or holds among its modules, the class whose method checkpoints (with
    the name and class it wraps), not a wrap of another model elsewhere in the repository;
    when no wrap is known to hold it, a use whose model is not followed (a `Trainer`'s
    `fsdp=`, an accelerate plugin) before one known to wrap another model.

    ## Why is this bad?
    The reentrant implementation recomputes the region inside a nested backward that FSDP's
    hooks do not expect. Measured on torch 2.13 (CPU, gloo, 2 ranks, 4 blocks each an FSDP1
    unit): a reentrant `checkpoint` around each unit gives correct gradients but 8
    all-gathers in backward instead of 4 (every unit is unsharded again for the
    recomputation; transformers warns about this "redundant AllGather"); with several
    reentrant regions inside one FSDP1 unit, backward crashes (`RuntimeError: Expected
    weight to be of same shape as normalized_shape, but got weight of shape [0]`). The
    non-reentrant implementation has none of these problems in any layout measured.

    Per FSDP version, as measured on torch 2.13 and worded in the message:

    - FSDP1: both harms above; the message names them.
    - FSDP2 (`fully_shard`, an accelerate launch with `fsdp_version: 2`, a recipe's FSDP2):
      no harm measured, so nothing is reported where only FSDP2 reaches the code, or where the
      only wraps known to hold the checkpointed class are `fully_shard` ones (and no use whose
      model is not known is FSDP1). With a reentrant `checkpoint` around each `fully_shard`-ed
      block, 4 backward all-gathers as non-reentrant; four reentrant regions in one FSDP2 unit
      run (0 backward all-gathers, as non-reentrant); a tiny Llama with reentrant HF
      checkpointing gives the same gradients as non-reentrant (per-layer units and one unit);
      the live tensors after each of 8 steps stay constant (no growth). The leak of
      pytorch/pytorch#169349 is one open report on torch 2.9 CUDA, not reproduced on CPU;
      CKPT001 still reports torch's implicit reentrant default there, and CKPT007 a region
      whose inputs need no grad. ckptlint has no per-finding severity yet, so "not an error"
      is "not reported".
    - Hugging Face gradient checkpointing on transformers >= 4.52: each decoder layer
      checkpoints inside its own FSDP unit (`GradientCheckpointingLayer`, see CKPT004), so a
      unit per layer adds no all-gather (4 against 4); a unit holding several layers (a wrap
      without an auto-wrap policy) still crashes backward (4.53.0 and 5.17: `RuntimeError: The
      size of tensor a (0) must match the size of tensor b (32) at non-singleton dimension
      2`), and the message says only that. `TrainingArguments(fsdp="... auto_wrap")` there (on
      5.x any `fsdp`: its default policy is `TRANSFORMER_BASED_WRAP`, and its default
      `fsdp_version` 2, `training_args.py` 5.17) is not reported, nor a recipe's `fsdp:
      full_shard auto_wrap` or an accelerate config's `fsdp_auto_wrap_policy:
      TRANSFORMER_BASED_WRAP` (accelerate's own default is `NO_WRAP`: one unit, reported).

    ## Example
    ```python
    # model.py
    def forward(self, x):
        for block in self.blocks:
            x = checkpoint(block, x, use_reentrant=True)
        return x

    # train.py
    model = FSDP(Model(), auto_wrap_policy=ModuleWrapPolicy({Block}))
    ```

    ## Use instead
    ```python
    x = checkpoint(block, x, use_reentrant=False)
    ```

    ## Fix safety
    The fix sets `use_reentrant=False`, `CheckpointImpl.NO_REENTRANT`, or
    `gradient_checkpointing_kwargs={"use_reentrant": False}`. It is **unsafe**: it switches
    the implementation (see CKPT001).

    Not reported: `TrainingArguments(gradient_checkpointing=True)` handed to a trainer whose
    class (or a project base of it) sets how checkpointing runs
    (`args.gradient_checkpointing_kwargs.setdefault("use_reentrant", False)`), or where the
    project's TRL does that itself: TRL 0.27 in every config's `__post_init__` (`SFTConfig`,
    `DPOConfig`, `GRPOConfig`, ...), TRL 0.28 and later in every trainer's `__init__`
    (`SFTTrainer`, `DPOTrainer`, `GRPOTrainer`, ...), for a kwargs dict without the key too
    (read in trl's sources at each tag from v0.26.0 to v1.9.0; only where the project's TRL
    version is known: a config handed to transformers' own `Trainer` on TRL 0.28 is
    reported); `checkpoint_wrapper` without `checkpoint_impl` (its default is
    non-reentrant), values only known at runtime (a variable, `**kwargs`, a config field),
    projects without torch FSDP (DeepSpeed ZeRO, fairscale and DataParallel are not torch
    FSDP), a checkpointed project function of tensors alone (the entropy of the logits
    after the sharded model's forward: it runs no module and reads no parameter, so no FSDP
    hook runs in its recomputation; CKPT001 still applies). The `fsdp` setting (`auto`/`yes`/`no`) overrides the detection. Reported instead of
    CKPT001 at the same call; CKPT004 is reported instead of this rule for a
    `TrainingArguments` that also sets `fsdp="full_shard"`.

    ## In training recipes
    Also reported in YAML / JSON recipes and launch scripts (see docs/recipes.md): `gradient_checkpointing: true` under FSDP (`fsdp: shard_grad_op`, an accelerate
    config with `distributed_type: FSDP`, `--use_fsdp`) whose kwargs are reentrant, as above,
    with LLaMA-Factory's `use_reentrant_gc` (default `true`, forced off under FSDP2) and an
    entry point's own argument field (`{"use_reentrant": model_args.use_reentrant}`: the
    recipe's value, else the dataclass default) counted too. The fix (unsafe) sets a written
    `use_reentrant: true` to `false`, or adds `gradient_checkpointing_kwargs: {use_reentrant:
    false}` (`use_reentrant_gc: false`) on the line after the setting in a YAML block mapping;
    nothing else in the file changes. A TRL command (`trl sft`, `trl dpo`, `-m trl.cli ...`:
    a TRL config handed to a TRL trainer) on TRL 0.27 or later is not reported unless the
    recipe itself sets `use_reentrant: true` (TRL adds `False` to kwargs that leave it out).

    ## Evidence
    torch 2.13 FSDP1 and FSDP2 on CPU with gloo (EVIDENCE Q5); transformers 5.17
    `gradient_checkpointing_enable` replaces `None` kwargs by `{"use_reentrant": False}` and
    uses any dict as given (EVIDENCE Q4); transformers 4.x replaced `None` by
    `{"use_reentrant": True}` (`modeling_utils.py`, 4.35 to 4.57). transformers issue 30404
    is the redundant all-gather warning. A launch: `accelerate launch` turns a config file's
    `distributed_type: FSDP` (or `--use_fsdp`) into `ACCELERATE_USE_FSDP=true` and `FSDP_*`
    variables for the processes it starts, and `Accelerator()` builds its
    `FullyShardedDataParallelPlugin` from them when none is passed ("init from env variables",
    `accelerator.py`; `state.py` sets `DistributedType.FSDP`; accelerate 1.x).
    """

    code = "CKPT002"
    severity = Severity.ERROR
    name = "reentrant-checkpoint-under-fsdp"
    message = "reentrant checkpointing in a project that uses FSDP"
    fix = Applicability.UNSAFE
    # Not bare `gradient_checkpointing`: every transformers model file sets that flag.
    triggers = (
        *SITE_TRIGGERS, b"checkpoint_wrapper", b"gradient_checkpointing_enable", b"gradient_checkpointing_kwargs",
        b"gradient_checkpointing=", PREPARE_FOR_KBIT_WORD.encode(),
    )
    requires = (b"checkpoint",)
    supersedes = ("CKPT001",)
    uses_project = True

    @classmethod
    def may_apply_to(cls, text: str) -> bool:
        # peft's QLoRA preparation turns checkpointing on without the file naming it.
        return super().may_apply_to(text) or PREPARE_FOR_KBIT_WORD in text

    @classmethod
    def may_apply_to_project(cls, project, relative_path, settings, text) -> bool:
        return settings.fsdp == "yes" or (settings.fsdp == "auto" and bool(project.fsdp_uses_reaching(relative_path)))

    @classmethod
    def may_apply_to_syntax(cls, tree, text, project) -> bool:
        # What it reports: checkpoint sites, and the calls and assignments `visit_Call` and
        # `visit_Assign` collect (torch's FSDP modules name `checkpoint_wrapper` in imports only).
        return may_hold_sites(tree, project.checkpoint_aliases) or collected(tree)

    def __init__(self, context) -> None:
        super().__init__(context)
        # Only FSDP2 reaches the file: reentrant checkpointing measured harmless there.
        self.fsdp = None if fsdp2_only(context) else project_fsdp(context)
        self._fsdp_branches = FsdpBranches(context)
        self._wrapping_calls: list[cst.Call] = []
        self._assignments: list[cst.Assign] = []
        self._bound_calls: dict[cst.Call, cst.Name] = {}  # `wrapper = partial(checkpoint_wrapper, ...)`
        self._test_reach = ReachInTestFiles(context)

    # --- collection --------------------------------------------------------------------

    def visit_Call(self, node: cst.Call) -> None:
        super().visit_Call(node)
        if self.fsdp is None:
            return
        func = node.func
        name = func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(func, cst.Name) else ""
        if is_gc_enable_call(node) or name in ("checkpoint_wrapper", "partial") or "checkpoint_wrapper" in name:
            self._wrapping_calls.append(node)
        elif keyword_value(node, "gradient_checkpointing") is not None:
            self._wrapping_calls.append(node)

    def visit_Assign(self, node: cst.Assign) -> None:
        super().visit_Assign(node)
        if isinstance(node.value, cst.Call) and len(node.targets) == 1 and isinstance(node.targets[0].target, cst.Name):
            self._bound_calls[node.value] = node.targets[0].target
        if self.fsdp is not None and any(
            isinstance(t.target, cst.Attribute) and t.target.attr.value == GC_KWARGS for t in node.targets
        ):
            self._assignments.append(node)

    def report(self, node: cst.CSTNode, message: str | None = None, **fix) -> None:
        if self._test_reach.reaches(node):
            super().report(node, message, **fix)

    # --- torch checkpoint sites ---------------------------------------------------------

    def visit_checkpoint_site(self, site: CheckpointSite) -> None:
        if self.fsdp is None or self.recomputes_tensors_only(site):
            return  # a function of tensors alone: no FSDP unit or parameter in its recomputation
        if self._fsdp_branches.never_with(site.node):
            return
        owner = self._owner(self._call_scopes.get(site.node, ()))
        if fsdp_misses_class(self.context, owner):
            return  # every FSDP wrap of the project wraps models that do not hold this class
        if fsdp2_holds_class(self.context, owner):
            return  # only FSDP2 shards the model holding it: no harm measured there
        if reports_explicit_reentrant(site):
            how, call = "`use_reentrant=True`", site.keywords["use_reentrant"].call
        elif reports_implicit_reentrant(site, self.context.sites, self.context):
            how, call = "`use_reentrant` omitted: torch defaults to reentrant", site.node
        else:
            self._check_configured(site)
            return
        self.report(
            site.node,
            f"reentrant `{site.api.short_name}` ({how}) in a project that uses FSDP ({self._fsdp_reaching(site)}): "
            f"{WHY}; pass `use_reentrant=False`",
            replacements=[use_reentrant_false(call)],
            fix_message="Set `use_reentrant=False`",
        )

    def _fsdp_reaching(self, site: CheckpointSite) -> str:
        """The FSDP use the message names: the wrap of the model whose class holds the
        checkpoint, when the project model can tell (not an unrelated wrap elsewhere)."""
        owner = self._owner(self._call_scopes.get(site.node, ()))
        return fsdp_reaching_class(self.context, owner) or self.fsdp

    def _check_configured(self, site: CheckpointSite) -> None:
        """`use_reentrant=args.use_reentrant` that is True unless the run overrides it (every
        declaration of the option defaults to True, or the project model finds only True)."""
        configured = self.configured_reentrant(site)
        if configured is None:
            return
        self.report(
            site.node,
            f"`{site.api.short_name}` runs reentrant by default here ({configured}) in a project that uses FSDP "
            f"({self._fsdp_reaching(site)}): {WHY}; default the option to False (or pass `use_reentrant=False`)",
        )

    # --- wrappers and Hugging Face --------------------------------------------------------

    def finish(self) -> None:
        for call in self._wrapping_calls:
            if is_gc_enable_call(call):
                # A project class's own method: the call it makes is checked. A model kept
                # for inference is never checkpointed (asked last: it interprets the file).
                kwargs = gc_enable_kwargs(call)
                if (
                    not self.runs_project_method(call)
                    and self._hf_reentrant(call, kwargs)
                    and not kept_for_inference(self.context, call)
                ):
                    self._check_hf(call, kwargs, "`gradient_checkpointing_enable`", positional=True)
            elif is_checkpoint_wrapper(self.context, call):
                self._check_wrapper(call)
            elif is_training_arguments(self.context, call):
                enabled = keyword_value(call, "gradient_checkpointing")
                if not (isinstance(enabled, cst.Name) and enabled.value == "True"):
                    continue
                if self._units_per_layer(call):
                    continue
                trainers = trainers_given(self.context, self._calls, self._bound_calls.get(call))
                if not handed_to_configuring_trainer(self.context, trainers):
                    kwargs = HfCheckpointingKwargs.of(keyword_value(call, GC_KWARGS), trainer_path=True)
                    if kwargs.shape is KwargsShape.WITH_FLAG or not trl_defaults_non_reentrant(self.context, call, trainers):
                        self._check_hf(call, kwargs, f"`{callee_name(call)}(gradient_checkpointing=True)`")
        if self.fsdp is not None and PREPARE_FOR_KBIT_WORD in self.context.text:
            what = "`prepare_model_for_kbit_training` on a model loaded in 4 or 8 bit"
            for call, kwargs in kbit_preparations(self.context):
                self._check_hf(call, kwargs, what, fixable=False)
        for assignment in self._assignments:
            kwargs = HfCheckpointingKwargs.of(assignment.value, trainer_path=True)
            reentrancy, applies = kwargs.reentrancy(self.context.versions)
            if kwargs.shape is KwargsShape.DEFAULT or not reentrancy.is_reentrant:
                continue
            new_value = non_reentrant(assignment.value)
            self.report(
                assignment,
                hf_message("`gradient_checkpointing_kwargs`", kwargs, self.fsdp, self.context.versions),
                replacements=[Replacement(assignment.value, new_value)] if new_value is not None else [],
                fix_message='Set `"use_reentrant": False`',
            )

    def _units_per_layer(self, call: cst.Call) -> bool:
        """`TrainingArguments(fsdp=...)` that wraps each decoder layer in its own FSDP unit
        (`"auto_wrap"` in the option; on transformers >= 5.0 any `fsdp`, whose default policy is
        `TRANSFORMER_BASED_WRAP`, `training_args.py`), on a transformers that checkpoints inside
        the layer (>= 4.52): one reentrant region per unit, which adds nothing measured."""
        versions = self.context.versions
        if versions.applies((GC_OUTSIDE_FSDP_UNIT_VERSIONS,)) is not Applies.NO:
            return False
        fsdp = keyword_value(call, "fsdp")
        if fsdp is None:
            return False
        if versions.applies((REENTRANT_DEFAULT_VERSIONS,)) is Applies.NO:
            return True
        return _names_auto_wrap(fsdp)

    def _check_hf(
        self, call: cst.Call, kwargs: HfCheckpointingKwargs, what: str, positional: bool = False, fixable: bool = True
    ) -> None:
        if not self._hf_reentrant(call, kwargs):
            return
        _, applies = kwargs.reentrancy(self.context.versions)
        note = f" (affects {REENTRANT_DEFAULT_VERSIONS}; target version unknown)" if applies is Applies.UNKNOWN else ""
        new_call = with_non_reentrant_kwargs(call, positional_kwargs=positional) if fixable else None
        self.report(
            call,
            hf_message(what, kwargs, self.fsdp, self.context.versions) + note,
            replacements=[Replacement(call, new_call)] if new_call is not None else [],
            fix_message='Pass `gradient_checkpointing_kwargs={"use_reentrant": False}`',
        )

    def _hf_reentrant(self, call: cst.Call, kwargs: HfCheckpointingKwargs) -> bool:
        """Whether Hugging Face checkpointing turned on by `call` with `kwargs` runs reentrant
        here, on a path that FSDP can take."""
        return kwargs.reentrancy(self.context.versions)[0].is_reentrant and not self._fsdp_branches.never_with(call)

    def _check_wrapper(self, call: cst.Call) -> None:
        impl, value = checkpoint_wrapper_impl(self.context, call)
        if value is None or _custom_checkpoint_fn(call) or self._fsdp_branches.never_with(call):
            return
        # `checkpoint_impl=impl`, chosen elsewhere (`REENTRANT if reentrant else ...` over a
        # parameter defaulting to True): the project's to change, no fix.
        configured = self.configured_impl(call, value) if impl is Impl.UNKNOWN else None
        if impl is not Impl.REENTRANT and configured is None:
            return
        replacement = (
            value.with_changes(attr=cst.Name("NO_REENTRANT")) if isinstance(value, cst.Attribute) and configured is None else None
        )
        bound = self._bound_calls.get(call) if is_partial(self.context, call) else None
        applied = wrapper_applications(self.context, self._calls, bound) if bound is not None else []
        # Reported where the fix goes (the partial), naming where it takes effect.
        where = f" (applied by {'; '.join(applied)})" if applied else ""
        how = f"`CheckpointImpl.REENTRANT` ({configured})" if configured else "`CheckpointImpl.REENTRANT`"
        self.report(
            call,
            f"`checkpoint_wrapper` with {how}{where} in a project that uses FSDP ({self.fsdp}): "
            f"{WHY}; use `CheckpointImpl.NO_REENTRANT` (the default)",
            replacements=[Replacement(value, replacement)] if replacement is not None else [],
            fix_message="Use `CheckpointImpl.NO_REENTRANT`",
        )


def _custom_checkpoint_fn(call: cst.Call) -> bool:
    """`checkpoint_wrapper(m, impl, fn)` / `checkpoint_fn=fn`: torch ignores `checkpoint_impl`
    for choosing the implementation then (`CheckpointWrapper.__init__`, torch 2.13: only with
    `checkpoint_fn=None` does it build `partial(checkpoint, use_reentrant=impl == REENTRANT)`);
    the function given decides (xtuner's `pytree_reentrant_checkpoint`)."""
    given = keyword_value(call, "checkpoint_fn")
    if given is None:
        positional = [arg for arg in call.args if arg.keyword is None and not arg.star]
        given = positional[2].value if len(positional) > 2 else None
    return given is not None and not (isinstance(given, cst.Name) and given.value == "None")


def _names_auto_wrap(value: cst.BaseExpression) -> bool:
    """An `fsdp=` value naming `auto_wrap` (`"full_shard auto_wrap"`, `["full_shard", "auto_wrap"]`,
    `FSDPOption.AUTO_WRAP` among them)."""
    if isinstance(value, cst.SimpleString):
        return "auto_wrap" in value.evaluated_value.lower().split()
    if isinstance(value, (cst.List, cst.Tuple)):
        return any(_names_auto_wrap(element.value) for element in value.elements)
    if isinstance(value, cst.Attribute):
        return value.attr.value == "AUTO_WRAP"
    return False
