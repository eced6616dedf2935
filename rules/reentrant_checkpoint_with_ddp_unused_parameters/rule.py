from __future__ import annotations

from ckptlint.lazy_libcst import cst

from ckptlint.analysis.branches import branch_paths
from ckptlint.analysis.checkpoint_sites import SITE_TRIGGERS, CheckpointSite, SiteKind
from ckptlint.analysis.model_expressions import written_name
from ckptlint.analysis.ddp import DdpReach, ddp_reaching
from ckptlint.analysis.fsdp import absolute_names
from ckptlint.analysis.hf_fixes import with_non_reentrant_kwargs
from ckptlint.analysis.huggingface import gc_enable_kwargs, is_gc_enable_call, keyword_value
from ckptlint.analysis.regions import is_backward_call
from ckptlint.analysis.reentrancy import reports_explicit_reentrant, reports_implicit_reentrant
from ckptlint.analysis.site_scopes import SiteScopes
from ckptlint.analysis.trainers import (
    callee_name, handed_to_configuring_trainer, is_training_arguments, trainers_given, trl_defaults_non_reentrant,
)
from ckptlint.analysis.transforms import use_reentrant_false
from ckptlint.model.library.deepspeed import DEEPSPEED_CHECKPOINTING_HELPERS
from ckptlint.model.library.peft import GET_PEFT_MODEL
from ckptlint.model.library.transformers import (
    GC_KWARGS, TRAINER_DDP_FIND_UNUSED, TRAINER_DDP_STATIC_GRAPH, HfCheckpointingKwargs, KwargsShape,
)
from ckptlint.model.form.values import Instance
from ckptlint.rule import Replacement
from ckptlint.types import Applicability, Severity
from ckptlint.versions import Applies

from .openmmlab_config import CHECKPOINT_FLAGS, FIND_UNUSED, checkpointing_arguments, find_unused_setting, is_config, runs_reentrant

CRASH = (
    "the first backward raises `RuntimeError: Expected to mark a variable ready only once` (DDP marks the "
    "region's parameters unused after the forward, and the reentrant recomputation fires their hooks again)"
)
# DeepSpeed's reentrant `checkpoint` (an `autograd.Function`); its `non_reentrant_checkpoint` is not.
# What makes a `PeftModel` (`class PeftModel(PushToHubMixin, torch.nn.Module)`, peft 0.13 `peft_model.py`).
PEFT_MODEL_BUILDERS = GET_PEFT_MODEL | {"peft.PeftModel.from_pretrained", "peft.peft_model.PeftModel.from_pretrained"}
# A module run twice in one forward under any DDP without `static_graph` (CKPT006's evidence).
TWICE_CRASH = (
    "the second reentrant recomputation fires the hooks of the same parameters again, and the first backward "
    "raises `RuntimeError: Expected to mark a variable ready only once ... has been marked as ready twice`"
)
_DEEPSPEED_REENTRANT = frozenset(name for name in DEEPSPEED_CHECKPOINTING_HELPERS if name.endswith(".checkpoint"))


class ReentrantCheckpointWithDdpUnusedParameters(SiteScopes):
    """Reentrant activation checkpointing in a model trained under DDP with `find_unused_parameters=True`.

    ## What it does
    Finds reentrant checkpointing in code that a torch `DistributedDataParallel` with
    unused-parameter detection trains:

    - the DDP settings: `DistributedDataParallel(model, find_unused_parameters=True)`,
      Lightning's `DDPStrategy(find_unused_parameters=True)` or `Trainer(strategy=
      "ddp_find_unused_parameters_true")` (and the `ddp_spawn` / `ddp_fork` / `ddp_notebook`
      spellings, also as a branch of `... if gpus > 1 else "auto"`), accelerate's `DistributedDataParallelKwargs(find_unused_parameters=True)`,
      `TrainingArguments(ddp_find_unused_parameters=True)` (not with `deepspeed=` or `fsdp=`,
      where the Trainer builds no torch DDP); none of them with `static_graph=True` (nor
      `ddp_static_graph=True`, nor a `_set_static_graph()` call in the file). A setting
      counts for its own program: the file holding it and what it imports (through any
      number of imports), or, in a helper module (`wrap_ddp(model)`), the programs of the
      files importing it; never another project folder's, a test's only for itself; and a
      `DistributedDataParallel(model, ...)` whose `model` the project model knows counts only
      for checkpoints in the classes that model is or holds (a GAN's discriminator or an EMA
      teacher wrapped with `find_unused_parameters=True` says nothing of the checkpointed
      generator);
    - the checkpointing: `checkpoint(...)` / `checkpoint_sequential(...)` with
      `use_reentrant=True` or without the argument (torch's default), DeepSpeed's
      `deepspeed.checkpointing.checkpoint(...)`, `model.gradient_checkpointing_enable(...)`
      whose kwargs run reentrant on the declared transformers (no kwargs before 5.0,
      `{"use_reentrant": True}`, a dict without the key), and
      `TrainingArguments(gradient_checkpointing=True, ddp_find_unused_parameters=True, ...)`
      whose kwargs do (not where TRL's config or trainer sets `use_reentrant=False` itself, nor
      handed to a project trainer that configures checkpointing: CKPT002's reading); also
      with `ddp_find_unused_parameters` left unset when the arguments go to a
      `Trainer(model=model, ...)` whose `model` the file last bound from peft's
      `get_peft_model(...)` / `PeftModel.from_pretrained(...)` and a launch script of the
      project runs the file on several processes (`torchrun --nproc_per_node 8 train.py`,
      `accelerate launch --multi_gpu` or `--num_processes` above 1, without `--deepspeed` /
      `--fsdp`): the Trainer's default is `find_unused_parameters=True` for any model that is
      not a `PreTrainedModel`, a `PeftModel` included.
    - an OpenMMLab config that sets `find_unused_parameters = True` (or
      `model_wrapper_cfg=dict(type="MMDistributedDataParallel", find_unused_parameters=True)`)
      and checkpoints its backbone with `with_cp=True` (OpenMMLab's blocks run
      `cp.checkpoint(_inner_forward, x)`, reentrant) or `use_checkpoint=True` (Swin / BEiT /
      FocalNet-style backbones), reported at the flag: where the dict's `type` names a class of
      the project, only when every checkpoint call its module makes behind `if self.<flag>:` is
      reentrant; `use_checkpoint` only through such project code.

    And, under any torch `DistributedDataParallel` (without `find_unused_parameters=True` too)
    that is not static, a reentrant checkpoint of one module that a forward runs twice
    (weights shared across steps, ALBERT or Universal-Transformer style): two reentrant
    `checkpoint(self.block, ...)` calls in one function that can both run (not the two arms
    of an `if`: the project model's branch paths), or one such call in a loop or
    comprehension (`for _ in range(self.depth)`; not `for block in self.blocks`,
    `self.blocks[i]`, `range(1)`), in a function that does not itself call `.backward()` (a
    training loop's iterations are forwards of their own). The module must be an attribute
    path of `self`.

    The finding names the DDP setting's place (and the module it wraps, when known).

    ## Why is this bad?
    With `find_unused_parameters=True`, DDP walks the autograd graph from the forward's
    outputs and marks every parameter it does not reach as ready at once. A reentrant
    checkpoint runs its region under `no_grad`, so the region's parameters are not in that
    graph; in backward the recomputation runs them again and their gradient hooks fire, and
    DDP raises on the first backward. The run cannot train at all on more than one process.

    ## Example
    ```python
    # model.py
    def forward(self, x):
        for block in self.blocks:
            x = checkpoint(block, x, use_reentrant=True)
        return x

    # train.py
    model = DistributedDataParallel(Model().cuda(), device_ids=[rank], find_unused_parameters=True)
    ```

    ## Use instead
    ```python
    x = checkpoint(block, x, use_reentrant=False)
    ```
    (or `static_graph=True` when the graph is the same on every step, or
    `find_unused_parameters=False` when every parameter is used.)

    ## Fix safety
    The fix sets `use_reentrant=False` (or `gradient_checkpointing_kwargs={"use_reentrant":
    False}`). It is **unsafe**: it switches the implementation (see CKPT001), although the code
    cannot train under this DDP as it is. No fix for DeepSpeed's `checkpoint` (its own
    `non_reentrant_checkpoint` is the choice) nor in an OpenMMLab config (the backbone's code
    decides). Reported instead of CKPT001 at the same call.

    Not reported: `use_reentrant=False`, `checkpoint_wrapper` without `checkpoint_impl`
    (non-reentrant), values only known at runtime (a variable, `**kwargs`), transformers'
    default on transformers 5 or later (non-reentrant) or when the targeted version is not
    known, DDP without `find_unused_parameters=True` (its default is False) but for a module run twice, a
    `TrainingArguments` without `ddp_find_unused_parameters` on its own (the Trainer turns it
    off for a checkpointing `PreTrainedModel`), DeepSpeed and FSDP runs, a checkpointed
    function of tensors alone (no parameter is recomputed).

    ## In training recipes
    Also reported in YAML / JSON recipes and launch scripts: `gradient_checkpointing: true`
    whose kwargs are reentrant (as for CKPT002) beside `ddp_find_unused_parameters: true` (or
    `--ddp_find_unused_parameters True` on the command line), without FSDP, DeepSpeed
    (`deepspeed:`, the `deepspeed` launcher, an accelerate config's `distributed_type:
    DEEPSPEED`) or `ddp_static_graph: true`. Reported at the checkpointing setting; the fix
    (unsafe) is CKPT002's.

    ## Evidence
    Measured on torch 2.13.0+cpu with gloo, 2 processes, a model `a -> checkpoint(relu(b(.)))
    -> c`, 3 steps each: reentrant with `find_unused_parameters=True` raises on the first
    backward `RuntimeError: Expected to mark a variable ready only once. This error is caused
    by one of the following reasons: 1) Use of a module parameter outside the `forward`
    function. ... 2) Reused parameters in multiple reentrant backward passes. ... Parameter at
    index 3 with name b.bias has been marked as ready twice. This means that multiple autograd
    engine hooks have fired for this particular parameter during this iteration.`;
    non-reentrant with `find_unused_parameters=True`, reentrant with `static_graph=True` (with
    or without `find_unused_parameters=True`) and reentrant under plain DDP all run. A module
    checkpointed twice in one forward (`checkpoint(self.block, x)` twice, and the same call in
    `for _ in range(2)`), reentrant, raises the same error under plain DDP (`Parameter at index
    3 with name block.0.bias has been marked as ready twice`) and with
    `find_unused_parameters=True`; it runs with `static_graph=True`, non-reentrant, or
    checkpointed once (re-measured on torch 2.13.0+cpu, gloo, 2 processes, 3 steps each). transformers 5.17 with
    accelerate 1.15 under `torchrun --nproc_per_node 2` (CPU): `Trainer` with
    `gradient_checkpointing_kwargs={"use_reentrant": True}` on a model that is not a
    `PreTrainedModel` raises the same error in the first step (the Trainer's
    `find_unused_parameters` default for such models is True: `trainer.py`
    `_build_accelerator_args`, and 4.46.3 `_wrap_model`); with `use_reentrant=False`, or with
    `ddp_find_unused_parameters=False`, it trains. Threads: pytorch/pytorch#24005,
    huggingface/transformers#4659, huggingface/accelerate#2017, microsoft/FocalNet#4,
    bytedance/ibot#30, OFA-Sys/Chinese-CLIP#13.
    """

    code = "CKPT006"
    severity = Severity.ERROR
    name = "reentrant-checkpoint-with-ddp-unused-parameters"
    message = "reentrant checkpointing under DDP with find_unused_parameters=True"
    fix = Applicability.UNSAFE
    triggers = (*SITE_TRIGGERS, b"gradient_checkpointing_enable", b"gradient_checkpointing=", b"with_cp", b"use_checkpoint", b"deepspeed")
    supersedes = ("CKPT001",)
    uses_project = True

    @classmethod
    def may_apply_to_project(cls, project, relative_path, settings, text) -> bool:
        return (
            bool(project.ddp_uses_reaching(relative_path, plain_too=True))
            or (FIND_UNUSED in text and any(flag in text for flag in CHECKPOINT_FLAGS))
            or ("Trainer" in text and project.parallel_launch_of(relative_path) is not None)
        )

    def __init__(self, context) -> None:
        super().__init__(context)
        self._bound_calls: dict[cst.Call, cst.Name | None] = {}

    def visit_Assign(self, node: cst.Assign) -> None:
        super().visit_Assign(node)
        if isinstance(node.value, cst.Call) and len(node.targets) == 1 and isinstance(node.targets[0].target, cst.Name):
            self._bound_calls[node.value] = node.targets[0].target

    # --- torch checkpoint sites ---------------------------------------------------------

    def visit_checkpoint_site(self, site: CheckpointSite) -> None:
        if reports_explicit_reentrant(site):
            how, call = "`use_reentrant=True`", site.keywords["use_reentrant"].call
        elif reports_implicit_reentrant(site, self.context.sites, self.context):
            how, call = "`use_reentrant` omitted: torch defaults to reentrant", site.node
        else:
            return
        reach = self._reach(site.node)
        if reach is None:
            self._check_run_twice(site, how, call)
            return
        if self.recomputes_tensors_only(site):
            return
        self.report(
            site.node,
            f"reentrant `{site.api.short_name}` ({how}) in a model trained under DDP with unused-parameter "
            f"detection ({reach.describe()}): {CRASH}; pass `use_reentrant=False`",
            replacements=[use_reentrant_false(call)],
            fix_message="Set `use_reentrant=False`",
        )

    def _reach(self, call: cst.Call, *, plain_too: bool = False) -> DdpReach | None:
        return ddp_reaching(self.context, self._owner(self._call_scopes.get(call, ())), plain_too=plain_too)

    # --- a module checkpointed twice in one forward ----------------------------------------

    def _check_run_twice(self, site: CheckpointSite, how: str, call: cst.Call) -> None:
        """A reentrant checkpoint of `self.<module>` that one forward runs twice (two calls
        that can both run, or one call in a loop), in a model that any DDP without
        `static_graph=True` wraps."""
        module = _self_attribute(site.function) if site.kind is SiteKind.CALL else None
        again = self._run_again(site, module) if module is not None else None
        if again is None:
            return
        reach = self._reach(site.node, plain_too=True)
        if reach is None or self.recomputes_tensors_only(site):
            return
        self.report(
            site.node,
            f"reentrant `{site.api.short_name}` ({how}) of `{module}`, which one forward runs twice "
            f"({again}), in a model trained under DDP ({reach.describe()}) without `static_graph=True`: "
            f"{TWICE_CRASH}; pass `use_reentrant=False` (or `static_graph=True` if the graph is the same on every step)",
            replacements=[use_reentrant_false(call)],
            fix_message="Set `use_reentrant=False`",
        )

    def _run_again(self, site: CheckpointSite, module: str) -> str | None:
        """Where one forward runs the site's module again, said for a message: a loop (or
        comprehension) around the site in its function, not `range(0)` / `range(1)` (the
        module, an attribute of `self`, is the same on every iteration); or another
        reentrant checkpoint of the same module in the same function that can run with it
        (the project model's branch paths). Not in a function that runs backward itself: the
        iterations of a training loop are forwards of their own."""
        scopes = self._call_scopes.get(site.node, ())
        if not scopes or self._runs_backward(scopes):
            return None
        for iterable in self._call_loops.get(site.node, {}).values():
            if not _runs_at_most_once(iterable):
                return f"in the loop at line {self.context.position(iterable).start.line}"
        paths = branch_paths(self.context)
        path = paths.get(site.node)
        for other in self.context.sites:
            other_path = paths.get(other.node)
            if (
                other is not site and other.kind is SiteKind.CALL and _self_attribute(other.function) == module
                and self._call_scopes.get(other.node) == scopes
                and path is not None and other_path is not None and not path.exclusive_with(other_path)
                and (reports_explicit_reentrant(other) or reports_implicit_reentrant(other, self.context.sites, self.context))
            ):
                return f"again at line {self.context.position(other.node).start.line}"
        return None

    def _runs_backward(self, scopes: tuple[tuple[str, str], ...]) -> bool:
        """Whether the function of `scopes` (or one inside it) calls `.backward(...)`."""
        return any(is_backward_call(c) and self._call_scopes[c][: len(scopes)] == scopes for c in self._calls)

    # --- DeepSpeed, Hugging Face, OpenMMLab configs ----------------------------------------

    def finish(self) -> None:
        for call in self._calls:
            if is_gc_enable_call(call):
                if not self.runs_project_method(call):
                    self._check_gc_enable(call)
            elif _names_checkpoint(call):
                names = absolute_names(self.context, call.func)
                if names and names <= _DEEPSPEED_REENTRANT and (reach := self._reach(call)) is not None:
                    self.report(
                        call,
                        f"DeepSpeed's reentrant `checkpoint` in a model trained under DDP with unused-parameter "
                        f"detection ({reach.describe()}): {CRASH}; use `deepspeed.checkpointing.non_reentrant_checkpoint` "
                        "or torch's `checkpoint(..., use_reentrant=False)`",
                    )
            elif keyword_value(call, "gradient_checkpointing") is not None and is_training_arguments(self.context, call):
                self._check_bound_calls(call)
        if FIND_UNUSED in self.context.text and is_config(self.context.module):
            self._check_config()

    def _check_gc_enable(self, call: cst.Call) -> None:
        kwargs = gc_enable_kwargs(call)
        reentrancy, applies = kwargs.reentrancy(self.context.versions)
        if not reentrancy.is_reentrant or applies is not Applies.YES:
            return
        # The model whose checkpointing it turns on stands for the checkpoint's class.
        _, values = self.values_at(call, call.func.value)
        classes = sorted({value.cls for value in values if isinstance(value, Instance)})
        owner = classes[0] if len(classes) == 1 else None
        reach = ddp_reaching(self.context, owner)
        if reach is None:
            return
        new_call = with_non_reentrant_kwargs(call, positional_kwargs=True)
        self.report(
            call,
            f"Hugging Face gradient checkpointing runs reentrant ({_why(kwargs)}) in a model trained under DDP "
            f"with unused-parameter detection ({reach.describe()}): {CRASH}; pass "
            '`gradient_checkpointing_kwargs={"use_reentrant": False}`',
            replacements=[Replacement(call, new_call)] if new_call is not None else [],
            fix_message='Pass `gradient_checkpointing_kwargs={"use_reentrant": False}`',
        )

    def _check_bound_calls(self, call: cst.Call) -> None:
        """`TrainingArguments(gradient_checkpointing=True, ddp_find_unused_parameters=True)`
        whose kwargs run reentrant: the Trainer hands both to its own DDP."""
        flag = keyword_value(call, TRAINER_DDP_FIND_UNUSED)
        enabled = keyword_value(call, "gradient_checkpointing")
        if not _is_true(enabled) or _is_true(keyword_value(call, TRAINER_DDP_STATIC_GRAPH)):
            return
        if flag is None:
            # The Trainer's default: True for a model that is not a `PreTrainedModel`.
            default = self._trainer_default(call)
            if default is None:
                return
        elif not _is_true(flag):
            return
        deepspeed = keyword_value(call, "deepspeed")
        fsdp = keyword_value(call, "fsdp")
        if (deepspeed is not None and not _is_none(deepspeed)) or (fsdp is not None and not _is_off(fsdp)):
            return  # no torch DDP then
        trainers = trainers_given(self.context, self._calls, self._bound_calls.get(call))
        if handed_to_configuring_trainer(self.context, trainers):
            return
        kwargs = HfCheckpointingKwargs.of(keyword_value(call, GC_KWARGS), trainer_path=True)
        if kwargs.shape is not KwargsShape.WITH_FLAG and trl_defaults_non_reentrant(self.context, call, trainers):
            return
        reentrancy, applies = kwargs.reentrancy(self.context.versions)
        if not reentrancy.is_reentrant or applies is not Applies.YES:
            return
        if flag is not None:
            setting = f"`ddp_find_unused_parameters=True` (line {self.context.position(flag).start.line})"
        else:
            setting = default
        new_call = with_non_reentrant_kwargs(call)
        self.report(
            call,
            f"`{callee_name(call)}(gradient_checkpointing=True)` runs reentrant ({_why(kwargs)}) with "
            f"{setting}: {CRASH}; pass "
            '`gradient_checkpointing_kwargs={"use_reentrant": False}`',
            replacements=[Replacement(call, new_call)] if new_call is not None else [],
            fix_message='Pass `gradient_checkpointing_kwargs={"use_reentrant": False}`',
        )

    def _trainer_default(self, arguments: cst.Call) -> str | None:
        """`ddp_find_unused_parameters` left unset where the Trainer sets it True: the arguments
        go to a `Trainer(model=...)` whose model the file binds from peft's `get_peft_model` /
        `PeftModel.from_pretrained` (a `PeftModel`, not a `PreTrainedModel`), and a launch
        script of the project runs this file on several processes; described for a message."""
        if any(arg.star for arg in arguments.args):
            return None
        launch = self.context.project.parallel_launch_of(self.context.relative_path)
        name = self._bound_calls.get(arguments)
        if launch is None:
            return None
        for trainer in self._calls:
            if not callee_name(trainer).endswith("Trainer"):
                continue
            # `Trainer(model=model, args=args)` or `args=TrainingArguments(...)` written inline.
            if not any(
                arg.value is arguments or (name is not None and isinstance(arg.value, cst.Name) and arg.value.value == name.value)
                for arg in trainer.args
            ):
                continue
            model = keyword_value(trainer, "model")
            if model is None and trainer.args and trainer.args[0].keyword is None:
                model = trainer.args[0].value
            if isinstance(model, cst.Name) and self._bound_to_peft_model(model.value, trainer):
                return (
                    f"`ddp_find_unused_parameters` unset, which the Trainer makes `find_unused_parameters=True` for "
                    f"the `PeftModel` `{model.value}` (not a `PreTrainedModel`), launched on several processes at {launch}"
                )
        return None

    def _bound_to_peft_model(self, name: str, before: cst.Call) -> bool:
        """Whether the last `name = <call>` of the file before `before` wraps a model with peft."""
        line = self.context.position(before).start.line
        bindings = sorted(
            (self.context.position(call).start.line, call) for call, target in self._bound_calls.items()
            if target.value == name and self.context.position(call).start.line < line
        )
        if not bindings:
            return False
        names = absolute_names(self.context, bindings[-1][1].func)
        return bool(names) and names <= PEFT_MODEL_BUILDERS

    def _check_config(self) -> None:
        setting = find_unused_setting(self.context.module, self._calls)
        if setting is None:
            return
        line = self.context.position(setting).start.line
        for arg, backbone in checkpointing_arguments(self._calls):
            flag = arg.keyword.value
            if not runs_reentrant(self.context.project, flag, backbone):
                continue
            self.report(
                arg,
                f"`{flag}=True` checkpoints the backbone reentrantly in an OpenMMLab config that "
                f"sets `find_unused_parameters = True` (line {line}): {CRASH}; set `find_unused_parameters = False` "
                "if every parameter is used, or make the backbone's checkpoint non-reentrant",
            )


def _names_checkpoint(call: cst.Call) -> bool:
    func = call.func
    name = func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(func, cst.Name) else ""
    return name == "checkpoint"


def _self_attribute(expr: cst.BaseExpression | None) -> str | None:
    """`self.block` / `self.encoder.layer`: an attribute path of the instance, written out."""
    written = written_name(expr) if expr is not None else None
    return written if written is not None and written.startswith("self.") else None


def _runs_at_most_once(iterable: cst.BaseExpression) -> bool:
    """`range(1)`, `range(0)`, `[x]`, `()`: a loop whose body runs once or never."""
    if isinstance(iterable, (cst.List, cst.Tuple, cst.Set)):
        return len(iterable.elements) < 2
    if isinstance(iterable, cst.Call) and isinstance(iterable.func, cst.Name) and iterable.func.value == "range":
        values = [arg.value for arg in iterable.args]
        if len(values) == 1 and isinstance(values[0], cst.Integer):
            return values[0].evaluated_value < 2
    return False


def _why(kwargs: HfCheckpointingKwargs) -> str:
    if kwargs.shape is KwargsShape.WITH_FLAG:
        return '`{"use_reentrant": True}`'
    if kwargs.shape is KwargsShape.WITHOUT_FLAG:
        return "a kwargs dict without `use_reentrant` leaves torch's reentrant default"
    return "no kwargs: transformers < 5.0 defaults to `use_reentrant=True`"


def _is_true(value: cst.BaseExpression | None) -> bool:
    return isinstance(value, cst.Name) and value.value == "True"


def _is_none(value: cst.BaseExpression) -> bool:
    return isinstance(value, cst.Name) and value.value == "None"


def _is_off(value: cst.BaseExpression) -> bool:
    """`fsdp=""`, `fsdp=False`, `fsdp=None`, `fsdp=[]`: no FSDP."""
    if isinstance(value, cst.Name):
        return value.value in ("False", "None")
    if isinstance(value, cst.SimpleString):
        return not value.evaluated_value.strip()
    return isinstance(value, (cst.List, cst.Tuple)) and not value.elements
