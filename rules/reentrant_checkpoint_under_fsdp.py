from __future__ import annotations

import ast

from ckptlint.lazy_libcst import cst

from ckptlint.analysis.branches import BranchPath, branch_paths
from ckptlint.analysis.checkpoint_sites import SITE_TRIGGERS, CheckpointSite, may_hold_sites, written_names
from ckptlint.analysis.fsdp import (
    absolute_names,
    checkpoint_wrapper_impl,
    fsdp_misses_class,
    fsdp_reaching_class,
    is_checkpoint_wrapper,
    is_partial,
    project_fsdp,
    wrapper_applications,
)
from ckptlint.analysis.hf_fixes import non_reentrant, with_non_reentrant_kwargs
from ckptlint.analysis.huggingface import gc_enable_kwargs, is_gc_enable_call, keyword_value
from ckptlint.analysis.reentrancy import reports_explicit_reentrant, reports_implicit_reentrant
from ckptlint.analysis.site_scopes import SiteScopes
from ckptlint.analysis.transforms import set_keyword
from ckptlint.model.file_facts.facts import Impl
from ckptlint.model.library.transformers import GC_ENABLE, GC_KWARGS, HfCheckpointingKwargs, KwargsShape
from ckptlint.model.library.transformers import REENTRANT_DEFAULT_VERSIONS
from ckptlint.model.library.trl import (
    TRL_CONFIGS, TRL_NON_REENTRANT_CONFIGS, TRL_NON_REENTRANT_DEFAULT, TRL_NON_REENTRANT_TRAINERS, TRL_TRAINERS, is_trl_name,
)
from ckptlint.model.syntax.names import is_test_function, is_test_path
from ckptlint.rule import Invalid, Replacement, Valid
from ckptlint.types import Applicability
from ckptlint.versions import Applies

WHY = (
    "under FSDP1 the recomputation all-gathers every unit it covers a second time in backward, "
    "several reentrant regions in one FSDP unit crash backward, and FSDP2 leaks memory"
)


def _collected(tree: ast.Module) -> bool:
    """Whether CPython's tree holds what `visit_Call` and `visit_Assign` collect and `finish`
    can report (and a little more: `gradient_checkpointing_enable` called by a bare name).
    Of the `partial(...)` calls, only one of torch's wrapper is checked: its first argument
    names `checkpoint_wrapper`, or a name an import binds to it (`as cw`)."""
    partials: list[ast.expr] = []  # their first arguments
    wrappers: set[str] = set()  # names imports bind to a `checkpoint_wrapper`
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
            if (
                name in (GC_ENABLE, PREPARE_FOR_KBIT_WORD) or "checkpoint_wrapper" in name
                or any(keyword.arg == "gradient_checkpointing" for keyword in node.keywords)
            ):
                return True
            if name == "partial" and node.args:
                partials.append(node.args[0])
        elif isinstance(node, ast.Assign):
            if any(isinstance(target, ast.Attribute) and target.attr == GC_KWARGS for target in node.targets):
                return True
        elif isinstance(node, ast.alias) and node.asname and "checkpoint_wrapper" in node.name.rsplit(".", 1)[-1]:
            wrappers.add(node.asname)
    return any(
        "checkpoint_wrapper" in written or written in wrappers for first in partials for written in written_names(first)
    )


# peft's QLoRA preparation, which turns Hugging Face checkpointing on.
PREPARE_FOR_KBIT_WORD = "prepare_model_for_kbit_training"


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
    weight to be of same shape as normalized_shape, but got weight of shape [0]`). With
    FSDP2, reentrant checkpointing leaks memory (pytorch/pytorch#169349). The non-reentrant
    implementation has none of these problems in any layout measured.

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
    Also reported in YAML / JSON recipes and launch scripts (see the README's "Training
    recipes"): `gradient_checkpointing: true` under FSDP (`fsdp: shard_grad_op`, an accelerate
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
        return may_hold_sites(tree, project.checkpoint_aliases) or _collected(tree)

    def __init__(self, context) -> None:
        super().__init__(context)
        self.fsdp = project_fsdp(context)
        self._branches: dict[cst.Call, BranchPath] | None = None  # `branch_paths`, when first asked
        self._wrapping_calls: list[cst.Call] = []
        self._assignments: list[cst.Assign] = []
        self._bound_calls: dict[cst.Call, cst.Name] = {}  # `wrapper = partial(checkpoint_wrapper, ...)`
        self._tests: list[tuple[int, int]] | None = None  # line spans of a test file's tests

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
        if self._reached_in_test(node):
            super().report(node, message, **fix)

    def _reached_in_test(self, node: cst.CSTNode) -> bool:
        """In a test file, each test is a program of its own: the file's FSDP counts for a
        test when it is in that test, at the module's top level, or in a helper or fixture
        (a function that is no test); a wrap in another test reaches nothing here."""
        if self.context.settings.fsdp != "auto" or not is_test_path(self.context.relative_path):
            return True
        tests = self._test_functions()
        line = self.context.position(node).start.line
        holder = next((span for span in tests if span[0] <= line <= span[1]), None)
        if holder is None:
            return True
        uses = [u for u in self.context.project.fsdp_uses_reaching(self.context.relative_path)
                if u.path == self.context.relative_path]
        return any(holder[0] <= u.line <= holder[1] or not any(s[0] <= u.line <= s[1] for s in tests) for u in uses)

    def _test_functions(self) -> list[tuple[int, int]]:
        """The line spans of the file's tests: `test_*` functions, and methods of test classes."""
        if self._tests is None:
            spans = []
            for statement in self.context.module.body:
                nodes = [statement]
                if isinstance(statement, cst.ClassDef):
                    nodes = [s for s in statement.body.body if isinstance(s, cst.FunctionDef)]
                for function in nodes:
                    if isinstance(function, cst.FunctionDef) and is_test_function(function.name.value):
                        position = self.context.position(function)
                        spans.append((position.start.line, position.end.line))
            self._tests = spans
        return self._tests

    # --- torch checkpoint sites ---------------------------------------------------------

    def visit_checkpoint_site(self, site: CheckpointSite) -> None:
        if self.fsdp is None or self.recomputes_tensors_only(site):
            return  # a function of tensors alone: no FSDP unit or parameter in its recomputation
        if self._never_with_fsdp(site.node):
            return
        if fsdp_misses_class(self.context, self._owner(self._call_scopes.get(site.node, ()))):
            return  # every FSDP wrap of the project wraps models that do not hold this class
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
            replacements=[Replacement(call, set_keyword(call, "use_reentrant", cst.Name("False")))],
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
                # for inference is never checkpointed.
                if not self.runs_project_method(call) and not self._kept_for_inference(call):
                    self._check_hf(call, gc_enable_kwargs(call), "`gradient_checkpointing_enable`", positional=True)
            elif is_checkpoint_wrapper(self.context, call):
                self._check_wrapper(call)
            elif self._is_training_arguments(call):
                enabled = keyword_value(call, "gradient_checkpointing")
                if isinstance(enabled, cst.Name) and enabled.value == "True" and not self._handed_to_configuring_trainer(call):
                    kwargs = HfCheckpointingKwargs.of(keyword_value(call, GC_KWARGS), trainer_path=True)
                    if kwargs.shape is KwargsShape.WITH_FLAG or not self._trl_defaults_non_reentrant(call):
                        self._check_hf(call, kwargs, f"`{_callee(call)}(gradient_checkpointing=True)`")
        if self.fsdp is not None and PREPARE_FOR_KBIT_WORD in self.context.text:
            self._check_kbit_preparations()
        for assignment in self._assignments:
            kwargs = HfCheckpointingKwargs.of(assignment.value, trainer_path=True)
            reentrancy, applies = kwargs.reentrancy(self.context.versions)
            if kwargs.shape is KwargsShape.DEFAULT or not reentrancy.is_reentrant:
                continue
            new_value = non_reentrant(assignment.value)
            self.report(
                assignment,
                self._hf_message("`gradient_checkpointing_kwargs`", kwargs),
                replacements=[Replacement(assignment.value, new_value)] if new_value is not None else [],
                fix_message='Set `"use_reentrant": False`',
            )

    def _trainers_given(self, arguments: cst.Call) -> list[set[str]]:
        """The absolute names of each trainer the arguments (bound to a name) are handed to."""
        name = self._bound_calls.get(arguments)
        if name is None:
            return []
        return [
            absolute_names(self.context, call.func) for call in self._calls
            if _callee(call).endswith("Trainer")
            and any(isinstance(arg.value, cst.Name) and arg.value.value == name.value for arg in call.args)
        ]

    def _handed_to_configuring_trainer(self, arguments: cst.Call) -> bool:
        """Whether the arguments are handed to a trainer whose class (or a base of the
        project) sets how checkpointing runs (`args.gradient_checkpointing_kwargs
        .setdefault("use_reentrant", False)` in its `__init__`): the trainer decides."""
        project = self.context.project
        return any(
            (facts := project.class_named(c)) is not None and facts.configures_checkpointing
            for names in self._trainers_given(arguments) for absolute in names for c in project.ancestors(absolute)
        )

    def _trl_defaults_non_reentrant(self, arguments: cst.Call) -> bool:
        """Whether the targeted TRL sets `use_reentrant` to False for these arguments
        (`library.TRL_NON_REENTRANT_*`): a TRL config on 0.27, handed to a TRL trainer from
        0.28 on, both from 0.27 on. Only where the project's TRL version is known."""
        config = any(is_trl_name(n, TRL_CONFIGS) for n in absolute_names(self.context, arguments.func))
        trainer = any(is_trl_name(n, TRL_TRAINERS) for names in self._trainers_given(arguments) for n in names)
        if not (config or trainer):
            return False
        versions = TRL_NON_REENTRANT_DEFAULT if config and trainer else (
            TRL_NON_REENTRANT_CONFIGS if config else TRL_NON_REENTRANT_TRAINERS
        )
        return self.context.versions.applies((versions,)) is Applies.YES

    def _is_training_arguments(self, call: cst.Call) -> bool:
        names = absolute_names(self.context, call.func)
        return bool(names) and all(self.context.project.is_training_arguments(name) for name in names)

    def _never_with_fsdp(self, call: cst.Call) -> bool:
        """Whether every FSDP use that reaches the file is a call of this file on a branch
        that never runs with `call` (`if args.strategy == "fsdp": model = FSDP(model)` and
        `if args.strategy == "deepspeed": model.gradient_checkpointing_enable()`; in a method,
        `self.args.strategy` is the `args.strategy` the script's function stored there)."""
        relative = self.context.relative_path
        uses = self.context.project.fsdp_uses_reaching(relative) if self.context.settings.fsdp == "auto" else ()
        if not uses or any(use.path != relative for use in uses):
            return False
        if self._branches is None:
            self._branches = branch_paths(self.context.module)
        mine = self._branches.get(call)
        if mine is None or not (mine.branches or mine.conditions):
            return False
        lines = {use.line for use in uses}
        at_uses: dict[int, list] = {}
        for other, path in self._branches.items():
            line = self.context.position(other).start.line if path.branches or path.conditions else None
            if line in lines:
                at_uses.setdefault(line, []).append(path)
        mine = _as_seen_from_outside(mine)
        return all(
            at_uses.get(line) and all(_as_seen_from_outside(path).exclusive_with(mine) for path in at_uses[line])
            for line in lines
        )

    def _kept_for_inference(self, call: cst.Call) -> bool:
        """Whether the Hugging Face model whose checkpointing `call` enables is then kept for
        inference (`ModelHistory.kept_for_inference`: put in eval mode, never trained here)."""
        from ckptlint.analysis.script_models import StepKind, script_models

        return any(
            history.kept_for_inference(step)
            for history in script_models(self.context).histories
            for step in history.steps
            if step.kind is StepKind.GC_ENABLED and self.context.cst_node_at(step.node, cst.Call) is call
        )

    def _check_kbit_preparations(self) -> None:
        """`prepare_model_for_kbit_training(model)` on a model loaded in 4 or 8 bit turns
        Hugging Face checkpointing on (peft's `use_gradient_checkpointing=True`) with the
        `gradient_checkpointing_kwargs` it is given (peft 0.4 to 0.17: only on a quantized
        model; none given: transformers' default before 5.0, reentrant). No fix: peft before
        0.7 takes no `gradient_checkpointing_kwargs`."""
        from ckptlint.analysis.script_models import StepKind, script_models

        checked: set[cst.Call] = set()  # a call may prepare the models of several loads (4 bit, 8 bit)
        for history in script_models(self.context).histories:
            if history.quantized is not True:
                continue
            for step in history.of_kind(StepKind.KBIT_PREPARED):
                call = self.context.cst_node_at(step.node, cst.Call) if isinstance(step.node, ast.Call) else None
                if step.enables_checkpointing and call is not None and call not in checked and not history.kept_for_inference(step):
                    checked.add(call)
                    kwargs = step.kwargs or HfCheckpointingKwargs.of(None)
                    what = "`prepare_model_for_kbit_training` on a model loaded in 4 or 8 bit"
                    self._check_hf(call, kwargs, what, fixable=False)

    def _check_hf(
        self, call: cst.Call, kwargs: HfCheckpointingKwargs, what: str, positional: bool = False, fixable: bool = True
    ) -> None:
        reentrancy, applies = kwargs.reentrancy(self.context.versions)
        if not reentrancy.is_reentrant or self._never_with_fsdp(call):
            return
        note = f" (affects {REENTRANT_DEFAULT_VERSIONS}; target version unknown)" if applies is Applies.UNKNOWN else ""
        new_call = with_non_reentrant_kwargs(call, positional_kwargs=positional) if fixable else None
        self.report(
            call,
            self._hf_message(what, kwargs) + note,
            replacements=[Replacement(call, new_call)] if new_call is not None else [],
            fix_message='Pass `gradient_checkpointing_kwargs={"use_reentrant": False}`',
        )

    def _hf_message(self, what: str, kwargs: HfCheckpointingKwargs) -> str:
        why = {
            KwargsShape.DEFAULT: "transformers < 5.0 defaults to `use_reentrant=True`",
            KwargsShape.WITHOUT_FLAG: "a kwargs dict without `use_reentrant` replaces transformers' default, "
            "so torch's reentrant default applies",
            KwargsShape.WITH_FLAG: "`use_reentrant: True`",
        }[kwargs.shape]
        return (
            f"Hugging Face gradient checkpointing runs reentrant here ({what}: {why}) in a project that uses "
            f'FSDP ({self.fsdp}): {WHY}; pass `gradient_checkpointing_kwargs={{"use_reentrant": False}}`'
        )

    def _check_wrapper(self, call: cst.Call) -> None:
        impl, value = checkpoint_wrapper_impl(self.context, call)
        if value is None or _custom_checkpoint_fn(call) or self._never_with_fsdp(call):
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

    valid = [
        # A custom `checkpoint_fn`: it, not `checkpoint_impl`, decides the implementation.
        Valid(
            """
            from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import CheckpointImpl, checkpoint_wrapper
            from torch.distributed.fsdp import fully_shard
            from .checkpointing import pytree_reentrant_checkpoint

            def shard(model):
                for index, layer in enumerate(model.layers):
                    layer = checkpoint_wrapper(
                        layer, checkpoint_impl=CheckpointImpl.REENTRANT, checkpoint_fn=pytree_reentrant_checkpoint
                    )
                    model.layers[index] = fully_shard(layer)
            """
        ),
        # A wrapper's own `gradient_checkpointing_enable(self)`, handing on to its Hugging Face
        # model's (InternVideo's xtuner models): the call it makes is the one checked.
        Valid(
            """
            import torch.nn as nn
            from torch.distributed.fsdp import fully_shard
            from transformers import AutoModelForCausalLM

            class Finetune(nn.Module):
                def __init__(self, path):
                    super().__init__()
                    self.llm = AutoModelForCausalLM.from_pretrained(path)
                    self.gradient_checkpointing_enable()

                def gradient_checkpointing_enable(self):
                    self.llm.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})

            def shard(model):
                fully_shard(model)
            """,
            target_versions={"transformers": "4.46"},
        ),
        # The trainer the arguments are handed to sets the non-reentrant default itself.
        Valid(
            """
            from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
            from transformers import Trainer, TrainingArguments

            class RLTrainer(Trainer):
                def __init__(self, model, args, train_dataset=None):
                    if args.gradient_checkpointing:
                        args.gradient_checkpointing_kwargs = args.gradient_checkpointing_kwargs or {}
                        args.gradient_checkpointing_kwargs.setdefault("use_reentrant", False)
                    super().__init__(model=model, args=args, train_dataset=train_dataset)

            def prepare_reference(model, policy):
                return FSDP(model, auto_wrap_policy=policy)

            args = TrainingArguments(output_dir="out", gradient_checkpointing=True)
            RLTrainer(model="Qwen/Qwen3-1.7B", args=args).train()
            """,
            target_versions={"transformers": "4.46"},
        ),
        # A function of the logits alone, checkpointed after the sharded model's forward: no
        # FSDP unit and no parameter in its recomputation (CKPT001's, not this rule's).
        Valid(
            """
            import torch
            from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
            from torch.utils.checkpoint import checkpoint

            def entropy_from_logits(logits):
                probabilities = torch.softmax(logits, dim=-1)
                return torch.logsumexp(logits, dim=-1) - (probabilities * logits).sum(-1)

            def forward_micro_batch(module, batch):
                logits = module(**batch).logits
                return logits, checkpoint(entropy_from_logits, logits)

            def build(module, policy):
                return FSDP(module, auto_wrap_policy=policy)
            """
        ),
        # The option defaults to False (`store_true`), or its declarations disagree.
        Valid(
            """
            import argparse
            from dataclasses import dataclass
            from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
            from torch.utils.checkpoint import checkpoint

            parser = argparse.ArgumentParser()
            parser.add_argument("--use_reentrant", action="store_true")

            @dataclass
            class Sweep:
                reentrant: bool = True

            @dataclass
            class Other:
                reentrant: bool = False

            def forward(self, x, args, sweep):
                y = checkpoint(self.block, x, use_reentrant=args.use_reentrant)
                return checkpoint(self.block, y, use_reentrant=sweep.reentrant)

            model = FSDP(Model())
            """
        ),
        # Non-reentrant everywhere, FSDP in the same project.
        Valid(
            """
            from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
            from torch.utils.checkpoint import checkpoint

            def forward(self, x):
                return checkpoint(self.block, x, use_reentrant=False)

            model = FSDP(Model())
            """
        ),
        # No FSDP anywhere in the project: CKPT001's business, not this rule's.
        Valid(
            """
            import deepspeed
            from torch.utils.checkpoint import checkpoint

            def forward(self, x):
                return checkpoint(self.block, x, use_reentrant=True)

            engine, *_ = deepspeed.initialize(model=Model(), config="ds.json")
            """
        ),
        # checkpoint_wrapper's own default is non-reentrant; a variable is not known.
        Valid(
            """
            import functools
            from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import (
                apply_activation_checkpointing, checkpoint_wrapper,
            )
            from torch.distributed.fsdp import fully_shard

            def setup(model, impl):
                wrapper = functools.partial(checkpoint_wrapper, checkpoint_impl=impl)
                apply_activation_checkpointing(model, checkpoint_wrapper_fn=wrapper)
                apply_activation_checkpointing(model, checkpoint_wrapper_fn=checkpoint_wrapper)
                fully_shard(model)
            """
        ),
        # transformers 5 defaults to non-reentrant; kwargs from a variable are unknown.
        Valid(
            """
            from transformers import AutoModelForCausalLM, TrainingArguments
            from torch.distributed.fsdp import FullyShardedDataParallel

            model = AutoModelForCausalLM.from_pretrained("x")
            model.gradient_checkpointing_enable()
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=cfg.gc_kwargs)
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
            model = FullyShardedDataParallel(model)
            """,
            target_versions={"transformers": "5.0"},
        ),
        # A reference model enabled like the policy, then kept for inference: Hugging Face
        # checkpoints only in training mode.
        Valid(
            """
            from accelerate import FullyShardedDataParallelPlugin
            from transformers import AutoModelForCausalLM

            plugin = FullyShardedDataParallelPlugin(sharding_strategy="FULL_SHARD")
            reference = AutoModelForCausalLM.from_pretrained("x")
            reference.gradient_checkpointing_enable()
            reference.eval()
            trainer = DPOLoop(policy, reference_model=reference)
            """,
            target_versions={"transformers": "4.46"},
        ),
        # One script, two strategies: checkpointing only with DeepSpeed, FSDP only without it
        # (also across a method reading `self.args`).
        Valid(
            """
            import argparse
            from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
            from transformers import AutoModelForCausalLM

            class Module:
                def configure_model(self):
                    if self.args.strategy == "deepspeed":
                        self.model.gradient_checkpointing_enable()

            args = argparse.ArgumentParser().parse_args()
            model = AutoModelForCausalLM.from_pretrained("m", use_cache=False)
            if args.strategy == "deepspeed":
                model.gradient_checkpointing_enable()
            if args.strategy == "fsdp":
                model = FSDP(model)
            """,
            target_versions={"transformers": "4.45"},
        ),
        # peft enables checkpointing only on a quantized model, and as it is told.
        Valid(
            """
            import torch
            from accelerate import FullyShardedDataParallelPlugin
            from peft import prepare_model_for_kbit_training
            from transformers import AutoModelForCausalLM, BitsAndBytesConfig

            plugin = FullyShardedDataParallelPlugin(sharding_strategy="FULL_SHARD")
            full = AutoModelForCausalLM.from_pretrained("m", torch_dtype=torch.bfloat16)
            full = prepare_model_for_kbit_training(full)
            quantized = AutoModelForCausalLM.from_pretrained("m", quantization_config=BitsAndBytesConfig(load_in_4bit=True))
            quantized = prepare_model_for_kbit_training(quantized, gradient_checkpointing_kwargs={"use_reentrant": False})
            frozen = AutoModelForCausalLM.from_pretrained("m", load_in_8bit=True)
            frozen = prepare_model_for_kbit_training(frozen, use_gradient_checkpointing=False)
            """,
            target_versions={"transformers": "4.44", "peft": "0.10"},
        ),
        # A project function called `checkpoint_wrapper` is not torch's.
        Valid(
            """
            from torch.distributed.fsdp import FullyShardedDataParallel as FSDP

            def checkpoint_wrapper(module, checkpoint_impl=None):
                return module

            layer = checkpoint_wrapper(Block(), checkpoint_impl=CheckpointImpl.REENTRANT)
            model = FSDP(model)
            """
        ),
        # TRL defaults to non-reentrant (`library.TRL_NON_REENTRANT_*`): from 0.28 every
        # trainer, on 0.27 every config; a kwargs dict without the key gets it too.
        Valid(
            """
            from accelerate import FullyShardedDataParallelPlugin
            from trl import SFTConfig, SFTTrainer

            plugin = FullyShardedDataParallelPlugin()
            args = SFTConfig("out", gradient_checkpointing=True)
            trainer = SFTTrainer(model=model, args=args, train_dataset=data)
            """,
            target_versions={"transformers": "4.46", "trl": "0.29"},
        ),
        Valid(
            """
            from accelerate import FullyShardedDataParallelPlugin
            from transformers import Trainer
            from trl import DPOConfig

            plugin = FullyShardedDataParallelPlugin()
            args = DPOConfig("out", gradient_checkpointing=True, gradient_checkpointing_kwargs={"preserve_rng_state": True})
            trainer = Trainer(model=model, args=args)
            """,
            target_versions={"transformers": "4.46", "trl": "0.27.1"},
        ),
        Valid(
            """
            from accelerate import FullyShardedDataParallelPlugin
            from transformers import TrainingArguments
            from trl.trainer.grpo_trainer import GRPOTrainer

            plugin = FullyShardedDataParallelPlugin()
            args = TrainingArguments("out", gradient_checkpointing=True)
            trainer = GRPOTrainer(model=model, args=args, reward_funcs=reward)
            """,
            target_versions={"transformers": "4.46", "trl": "1.9"},
        ),
    ]
    invalid = [
        # The wrap builds the class a config default picks from a table; a run may pick the
        # subclass, whose own forward checkpoints reentrant.
        Invalid(
            """
            from dataclasses import dataclass
            import torch.nn as nn
            from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
            from torch.utils.checkpoint import checkpoint

            class VisionTransformer(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.blocks = nn.ModuleList(nn.Linear(8, 8) for _ in range(4))

            class ViTWithRegisters(VisionTransformer):
                def forward(self, x):
                    for block in self.blocks:
                        x = checkpoint(block, x, use_reentrant=True)
                    return x

            @dataclass
            class TrainConfig:
                arch: str = "vit_base"

            ARCHS = {"vit_base": VisionTransformer, "vit_reg": ViTWithRegisters}

            def build(cfg=TrainConfig()):
                return FSDP(ARCHS[cfg.arch]())
            """,
            line=14,
            column=17,
            expected_fix="""
            from dataclasses import dataclass
            import torch.nn as nn
            from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
            from torch.utils.checkpoint import checkpoint

            class VisionTransformer(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.blocks = nn.ModuleList(nn.Linear(8, 8) for _ in range(4))

            class ViTWithRegisters(VisionTransformer):
                def forward(self, x):
                    for block in self.blocks:
                        x = checkpoint(block, x, use_reentrant=False)
                    return x

            @dataclass
            class TrainConfig:
                arch: str = "vit_base"

            ARCHS = {"vit_base": VisionTransformer, "vit_reg": ViTWithRegisters}

            def build(cfg=TrainConfig()):
                return FSDP(ARCHS[cfg.arch]())
            """,
        ),
        # A factory's closure runs the modules it closes over (not a function of tensors alone).
        Invalid(
            """
            from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
            from torch.utils.checkpoint import checkpoint

            def checkpoint_segments(functions, x, step):
                def run_function(start, end, functions):
                    def forward(inputs):
                        for j in range(start, end + 1):
                            inputs = functions[j](inputs)
                        return inputs
                    return forward

                for start in range(0, len(functions) - step, step):
                    x = checkpoint(run_function(start, start + step - 1, functions), x)
                return x

            def shard(model):
                return FSDP(model)
            """,
            line=13,
            column=13,
            expected_fix="""
            from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
            from torch.utils.checkpoint import checkpoint

            def checkpoint_segments(functions, x, step):
                def run_function(start, end, functions):
                    def forward(inputs):
                        for j in range(start, end + 1):
                            inputs = functions[j](inputs)
                        return inputs
                    return forward

                for start in range(0, len(functions) - step, step):
                    x = checkpoint(run_function(start, start + step - 1, functions), x, use_reentrant=False)
                return x

            def shard(model):
                return FSDP(model)
            """,
        ),
        # Reentrant unless the environment says otherwise.
        Invalid(
            """
            import os
            from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
            from torch.utils.checkpoint import checkpoint

            USE_REENTRANT = os.environ.get("USE_REENTRANT", "true").lower() in ("1", "true")
            FAST_PATH_REENTRANT = bool(int(os.getenv("FAST_PATH_REENTRANT", "0")))

            def block(layer, x):
                x = checkpoint(layer, x, use_reentrant=USE_REENTRANT)
                return checkpoint(layer, x, use_reentrant=FAST_PATH_REENTRANT)

            model = FSDP(model, auto_wrap_policy=policy)
            """,
            line=9,
            column=9,
            message_contains="`USE_REENTRANT` read from the environment, `USE_REENTRANT` unset",
        ),
        # `use_reentrant` from a config whose default is True.
        Invalid(
            """
            from dataclasses import dataclass, field
            from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
            from torch.utils.checkpoint import checkpoint

            @dataclass
            class TrainConfig:
                use_reentrant: bool = field(default=True)

            def forward(self, x, cfg: TrainConfig):
                return checkpoint(self.block, x, use_reentrant=cfg.use_reentrant)

            model = FSDP(Model())
            """,
            line=10,
            column=12,
            message_contains="whose default is True: `TrainConfig.use_reentrant` at ",
        ),
        Invalid(
            """
            from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
            from torch.utils.checkpoint import checkpoint

            def forward(self, x):
                return checkpoint(self.block, x, use_reentrant=True)

            model = FSDP(Model())
            """,
            line=5,
            column=12,
            expected_fix="""
            from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
            from torch.utils.checkpoint import checkpoint

            def forward(self, x):
                return checkpoint(self.block, x, use_reentrant=False)

            model = FSDP(Model())
            """,
        ),
        # Omitted: torch's default is reentrant. Reported instead of CKPT001.
        Invalid(
            """
            import torch
            from torch.distributed.fsdp import fully_shard

            y = torch.utils.checkpoint.checkpoint(block, x)
            fully_shard(model)
            """,
            line=4,
            column=5,
            expected_fix="""
            import torch
            from torch.distributed.fsdp import fully_shard

            y = torch.utils.checkpoint.checkpoint(block, x, use_reentrant=False)
            fully_shard(model)
            """,
        ),
        # The wrapper through a partial handed to apply_activation_checkpointing.
        Invalid(
            """
            from functools import partial
            from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import (
                CheckpointImpl, apply_activation_checkpointing, checkpoint_wrapper,
            )
            from torch.distributed.fsdp import fully_shard

            wrapper = partial(checkpoint_wrapper, checkpoint_impl=CheckpointImpl.REENTRANT)
            apply_activation_checkpointing(model, checkpoint_wrapper_fn=wrapper)
            fully_shard(model)
            """,
            line=7,
            column=11,
            message_contains="(applied by `apply_activation_checkpointing` at example.py:8)",
            expected_fix="""
            from functools import partial
            from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import (
                CheckpointImpl, apply_activation_checkpointing, checkpoint_wrapper,
            )
            from torch.distributed.fsdp import fully_shard

            wrapper = partial(checkpoint_wrapper, checkpoint_impl=CheckpointImpl.NO_REENTRANT)
            apply_activation_checkpointing(model, checkpoint_wrapper_fn=wrapper)
            fully_shard(model)
            """,
        ),
        # transformers 4.x: no kwargs means `{"use_reentrant": True}`.
        Invalid(
            """
            from accelerate import FullyShardedDataParallelPlugin

            plugin = FullyShardedDataParallelPlugin(sharding_strategy="FULL_SHARD")
            model.gradient_checkpointing_enable()
            """,
            line=4,
            column=1,
            target_versions={"transformers": "4.46"},
            message_contains="transformers < 5.0 defaults to `use_reentrant=True`",
            expected_fix="""
            from accelerate import FullyShardedDataParallelPlugin

            plugin = FullyShardedDataParallelPlugin(sharding_strategy="FULL_SHARD")
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
            """,
        ),
        # QLoRA under FSDP: peft turns checkpointing on with transformers' reentrant default.
        Invalid(
            """
            from accelerate import FullyShardedDataParallelPlugin
            from peft import prepare_model_for_kbit_training
            from transformers import AutoModelForCausalLM, BitsAndBytesConfig

            plugin = FullyShardedDataParallelPlugin(sharding_strategy="FULL_SHARD")
            model = AutoModelForCausalLM.from_pretrained("m", quantization_config=BitsAndBytesConfig(load_in_4bit=True))
            model = prepare_model_for_kbit_training(model)
            """,
            line=7,
            column=9,
            target_versions={"transformers": "4.44", "peft": "0.10"},
            message_contains="`prepare_model_for_kbit_training` on a model loaded in 4 or 8 bit",
        ),
        # The same strategy on both branches: they run together.
        Invalid(
            """
            from torch.distributed.fsdp import FullyShardedDataParallel as FSDP

            if args.strategy == "fsdp":
                model.gradient_checkpointing_enable()
            if args.strategy == "fsdp":
                model = FSDP(model)
            """,
            line=4,
            column=5,
            target_versions={"transformers": "4.45"},
            expected_fix="""
            from torch.distributed.fsdp import FullyShardedDataParallel as FSDP

            if args.strategy == "fsdp":
                model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
            if args.strategy == "fsdp":
                model = FSDP(model)
            """,
        ),
        # Evaluated before training, then trained: the eval does not keep it for inference.
        Invalid(
            """
            from accelerate import FullyShardedDataParallelPlugin
            from transformers import AutoModelForCausalLM

            def train():
                plugin = FullyShardedDataParallelPlugin(sharding_strategy="FULL_SHARD")
                model = AutoModelForCausalLM.from_pretrained("x")
                model.gradient_checkpointing_enable()
                model.eval()
                evaluate(model)
                model.train()
            """,
            line=7,
            column=5,
            target_versions={"transformers": "4.46"},
            expected_fix="""
            from accelerate import FullyShardedDataParallelPlugin
            from transformers import AutoModelForCausalLM

            def train():
                plugin = FullyShardedDataParallelPlugin(sharding_strategy="FULL_SHARD")
                model = AutoModelForCausalLM.from_pretrained("x")
                model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
                model.eval()
                evaluate(model)
                model.train()
            """,
        ),
        # Put in eval mode, then handed to a Trainer, which trains it (`model.train()`).
        Invalid(
            """
            from accelerate import FullyShardedDataParallelPlugin
            from transformers import AutoModelForCausalLM, Trainer

            plugin = FullyShardedDataParallelPlugin(sharding_strategy="FULL_SHARD")
            model = AutoModelForCausalLM.from_pretrained("x")
            model.gradient_checkpointing_enable()
            model.eval()
            Trainer(model, args).train()
            """,
            line=6,
            column=1,
            target_versions={"transformers": "4.46"},
            expected_fix="""
            from accelerate import FullyShardedDataParallelPlugin
            from transformers import AutoModelForCausalLM, Trainer

            plugin = FullyShardedDataParallelPlugin(sharding_strategy="FULL_SHARD")
            model = AutoModelForCausalLM.from_pretrained("x")
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
            model.eval()
            Trainer(model, args).train()
            """,
        ),
        # A dict without the key replaces transformers' default in every version.
        Invalid(
            """
            from torch.distributed.fsdp import FullyShardedDataParallel

            model.gradient_checkpointing_enable({"preserve_rng_state": False})
            model = FullyShardedDataParallel(model)
            """,
            line=3,
            column=1,
            target_versions={"transformers": "5.17"},
            expected_fix="""
            from torch.distributed.fsdp import FullyShardedDataParallel

            model.gradient_checkpointing_enable({"preserve_rng_state": False, "use_reentrant": False})
            model = FullyShardedDataParallel(model)
            """,
        ),
        # The Trainer path, with FSDP from a Lightning-free accelerate plugin elsewhere.
        Invalid(
            """
            from accelerate import FullyShardedDataParallelPlugin
            from transformers import TrainingArguments

            plugin = FullyShardedDataParallelPlugin()
            args = TrainingArguments("out", gradient_checkpointing=True)
            """,
            line=5,
            column=8,
            target_versions={"transformers": "4.40"},
            expected_fix="""
            from accelerate import FullyShardedDataParallelPlugin
            from transformers import TrainingArguments

            plugin = FullyShardedDataParallelPlugin()
            args = TrainingArguments("out", gradient_checkpointing=True, gradient_checkpointing_kwargs={"use_reentrant": False})
            """,
        ),
        Invalid(
            """
            from torch.distributed.fsdp import fully_shard

            fully_shard(model)
            training_args.gradient_checkpointing_kwargs = {"use_reentrant": True}
            """,
            line=4,
            column=1,
            expected_fix="""
            from torch.distributed.fsdp import fully_shard

            fully_shard(model)
            training_args.gradient_checkpointing_kwargs = {"use_reentrant": False}
            """,
        ),
        # Before TRL 0.27 the trainers leave transformers' default; from 0.28 a TRL config
        # handed to transformers' own Trainer does too; a `use_reentrant` given stays.
        Invalid(
            """
            from accelerate import FullyShardedDataParallelPlugin
            from trl import SFTConfig, SFTTrainer

            plugin = FullyShardedDataParallelPlugin()
            args = SFTConfig("out", gradient_checkpointing=True)
            trainer = SFTTrainer(model=model, args=args, train_dataset=data)
            """,
            line=5,
            column=8,
            target_versions={"transformers": "4.46", "trl": "0.26"},
            message_contains="transformers < 5.0 defaults to `use_reentrant=True`",
            expected_fix="""
            from accelerate import FullyShardedDataParallelPlugin
            from trl import SFTConfig, SFTTrainer

            plugin = FullyShardedDataParallelPlugin()
            args = SFTConfig("out", gradient_checkpointing=True, gradient_checkpointing_kwargs={"use_reentrant": False})
            trainer = SFTTrainer(model=model, args=args, train_dataset=data)
            """,
        ),
        Invalid(
            """
            from accelerate import FullyShardedDataParallelPlugin
            from transformers import Trainer
            from trl import SFTConfig

            plugin = FullyShardedDataParallelPlugin()
            args = SFTConfig("out", gradient_checkpointing=True)
            trainer = Trainer(model=model, args=args)
            """,
            line=6,
            column=8,
            target_versions={"transformers": "4.46", "trl": "0.28"},
            expected_fix="""
            from accelerate import FullyShardedDataParallelPlugin
            from transformers import Trainer
            from trl import SFTConfig

            plugin = FullyShardedDataParallelPlugin()
            args = SFTConfig("out", gradient_checkpointing=True, gradient_checkpointing_kwargs={"use_reentrant": False})
            trainer = Trainer(model=model, args=args)
            """,
        ),
    ]


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




def _as_seen_from_outside(path: BranchPath) -> BranchPath:
    """A branch path with `self.` dropped from its conditions: a method's `if
    self.args.strategy == "deepspeed":` tests the options its script's `args` holds."""
    return BranchPath(path.branches, tuple((atom.removeprefix("self."), truth) for atom, truth in path.conditions))


def _callee(call: cst.Call) -> str:
    func = call.func
    return func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(func, cst.Name) else "..."
