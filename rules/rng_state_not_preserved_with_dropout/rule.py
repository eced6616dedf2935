from __future__ import annotations

import re

from ckptlint.lazy_libcst import cst

from ckptlint.analysis.checkpoint_sites import SITE_REQUIRES, SITE_TRIGGERS, CheckpointSite, SiteKind, literal_bool
from ckptlint.model.library.torch import Reentrancy
from ckptlint.analysis.region_paths import region_randomness, shown
from ckptlint.analysis.regions import RegionRule
from ckptlint.model.script_models.steps import StepKind
from ckptlint.analysis.script_models import script_models
from ckptlint.analysis.transforms import remove_dict_entry, remove_keyword
from ckptlint.analysis.fsdp import absolute_names
from ckptlint.analysis.huggingface import checkpointed_lora_dropout
from ckptlint.model.library.peft import GET_PEFT_MODEL
from ckptlint.model.library.transformers import transformers_random_checkpoint, transformers_random_layer
from ckptlint.model.form.values import Constant
from ckptlint.rule import Replacement
from ckptlint.types import Applicability, Severity


class RngStateNotPreservedWithDropout(RegionRule):
    """`preserve_rng_state=False` on a checkpoint whose region draws random numbers.

    ## What it does
    Finds `checkpoint(...)` and `checkpoint_sequential(...)` called with
    `preserve_rng_state=False` (written in the call, bound by a `functools.partial`, or an
    entry of a dict literal or `dict(...)` call splatted into it: `**ckpt_kwargs`,
    `**self.ckpt_kwargs`; or an expression the project model finds False wherever the project
    sets it, or whose option defaults to False in every declaration of it:
    `preserve_rng_state=self.cfg.preserve_rng` with a dataclass field `preserve_rng: bool =
    False`, a module constant; reported without a fix, the knob being the project's), and
    `checkpoint_wrapper(Block(...), preserve_rng_state=False)` /
    `apply_activation_checkpointing(..., checkpoint_wrapper_fn=partial(checkpoint_wrapper,
    preserve_rng_state=False), check_fn=lambda m: isinstance(m, Block))` (the partial inline or
    bound to a name in the file; the wrapper passes the keyword on to `checkpoint`; also
    `preserve_rng_state=flag` where the project passes the helper holding it False, or a call
    leaves out a parameter whose default is False: `def apply_ac(model, preserve_rng=False)`
    called as `apply_ac(model)`), whose region holds randomness: `nn.Dropout*`, `nn.AlphaDropout`, timm's `DropPath`, the
    children of torchvision models that hold dropout or stochastic depth (`convnext_tiny()
    .features`, `efficientnet_b0().classifier`),
    `F.dropout*`, torch's random sampling functions (`torch.rand`, `rand_like`, `randn`,
    `randn_like`, `randint`, `randint_like`, `randperm`, `normal`, `bernoulli`, `poisson`,
    `multinomial`), `F.gumbel_softmax`, the in-place samplers (`x.normal_()`, `uniform_`,
    `bernoulli_`, `random_`, `exponential_`, `geometric_`, `cauchy_`, `log_normal_`), or
    `scaled_dot_product_attention` with a non-zero `dropout_p`, in the region's own code or in the modules it runs (transitively,
    across the project's files). The region is resolved through the project index:
    `checkpoint(self.block, x)`, `checkpoint(self._forward, x)`, a lambda using `self.<attr>`,
    a loop over `self.blocks`, a function outside classes (`checkpoint(attn_core, q, k, v)`:
    its own random calls and those of what it calls). Where it cannot be resolved, nothing is
    reported. Also
    `model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"preserve_rng_state":
    False})` on a transformers model whose layers draw dropout masks under their
    configuration's defaults (BERT, RoBERTa, GPT-2, T5, BART, OPT...: the table in
    `ckptlint/model/library/transformers.py`; an Auto class counts by the Hub checkpoint it loads, written
    as a literal and named as its family publishes it, `bert-base-uncased`, `gpt2`,
    `facebook/opt-125m`, not `sentence-transformers/all-MiniLM-L6-v2`; the families read
    from the configs of transformers 5.17.0 and 4.46.3;
    not Llama, Mistral, Qwen2 or ViT, whose dropout defaults to 0), unless the file sets
    dropout itself; the same on any model given LoRA adapters with a non-zero `lora_dropout`
    (`get_peft_model(model, LoraConfig(lora_dropout=0.05))`, `model.add_adapter(config)`, the
    config written there or bound to a name in the file; the dropout a literal, or the
    parameter of a helper of the file that its call gives a non-zero literal; not adapters
    only on `lm_head`),
    the kwargs written in the call, bound to a dict, or in the `TrainingArguments` of a
    Trainer that turns checkpointing on; and those layers wrapped by class
    (`check_fn=lambda m: isinstance(m, BertLayer)`).

    ## Why is this bad?
    With `preserve_rng_state=False` the recomputation in backward draws *new* random
    numbers: the dropout masks of the recomputed forward differ from the ones the loss was
    computed with, and the gradients belong to a different network. Nothing fails; training
    is just worse (OLMo-core measured a loss of 2.49 instead of 2.19; litgpt's LoRA recipe
    and accelerate's FSDP2 checkpointing shipped this).

    ## Example
    ```python
    x = checkpoint(self.block, x, use_reentrant=False, preserve_rng_state=False)
    ```

    ## Use instead
    ```python
    x = checkpoint(self.block, x, use_reentrant=False)
    ```

    ## Fix safety
    The fix removes the argument (torch's default, `True`, saves and restores the CPU and
    device RNG states around the recomputation). It is **safe**: it only costs saving the RNG
    state per region.

    Not reported for regions without randomness (e.g. `nn.Dropout(0.0)`, LayerNorm blocks) or
    that cannot be resolved, nor for a checkpoint behind `if self.with_cp` in a class the
    project builds only with the flag off (as CKPT010 says).

    ## Evidence
    torch 2.13 (CPU): a block `Linear -> Dropout(0.5)` checkpointed with
    `preserve_rng_state=False` gives input gradients that differ from the unchecked run (the
    recomputed mask differs), with either implementation; with the default they match
    exactly (`tests/test_closure_rules.py`). The same through `apply_activation_checkpointing(
    ..., checkpoint_wrapper_fn=partial(checkpoint_wrapper, preserve_rng_state=False))`: the
    wrapper hands the keyword to `checkpoint`, and the gradients differ; with the plain
    `checkpoint_wrapper` they match. transformers 5.17 `gradient_checkpointing_enable`
    stores `functools.partial(checkpoint, **gradient_checkpointing_kwargs)` on each layer
    (4.35 to 4.x the same; EVIDENCE Q4): a tiny `LlamaForCausalLM` with `attention_dropout=0.3`
    and `{"use_reentrant": False, "preserve_rng_state": False}` has those keywords on
    `layers[0]._gradient_checkpointing_func` and gradients 0.128 away from the unchecked run
    (0.0 with the default). LoRA: peft's `LoraLayer.update_layer` makes `lora_dropout` an
    `nn.Dropout(p)` when `p > 0` (else `nn.Identity`), run inside the checkpointed layer.
    Random sampling (torch 2.13, CPU, `tanh(op(Linear(x)))` under non-reentrant `checkpoint`
    with `preserve_rng_state=False`): input gradients differ from the unchecked step by 0.36
    (`x + randn_like(x)`), 0.62 (`randn`, `normal`), 0.39 (`rand`), 1.28 (`randint`,
    `randint_like`), 1.67 (`poisson`), 1.94 / 1.18 (`randperm` / `multinomial` indices), 0.016
    (`gumbel_softmax`), 1.23 / 0.27 (`exponential_` / `cauchy_`); 0 with the default. The list
    of samplers is the "Random sampling" section of the torch 2.13 reference. Hub checkpoints:
    transformers 5.17's configuration docstrings name the checkpoint each family's defaults
    reproduce (`google-bert/bert-base-uncased`, `openai-community/gpt2`, `google-t5/t5-small`,
    `facebook/opt-350m`, ...), the names the checkpoint table follows.
    """

    code = "CKPT033"
    severity = Severity.ERROR
    name = "rng-state-not-preserved-with-dropout"
    message = "`preserve_rng_state=False` with randomness in the region"
    fix = Applicability.SAFE
    triggers = (*SITE_TRIGGERS, b"checkpoint_wrapper", b"gradient_checkpointing_enable", b"gradient_checkpointing_kwargs")
    reached_through_aliases = True  # torch's checkpoint under another module's name
    requires = (*SITE_REQUIRES, b"preserve_rng_state")
    words_in_code_only = False  # `gradient_checkpointing_kwargs={"preserve_rng_state": False}`

    @classmethod
    def may_apply_to_project(cls, project, relative_path, settings, text) -> bool:
        return True  # only torch's checkpoint calls are checked: the trigger words decide

    def __init__(self, context) -> None:
        super().__init__(context)
        self._bound: dict[str, list[cst.BaseExpression]] = {}  # name -> values assigned in this file

    def visit_Assign(self, node: cst.Assign) -> None:
        super().visit_Assign(node)
        for target in node.targets:
            if isinstance(target.target, cst.Name):
                self._bound.setdefault(target.target.value, []).append(node.value)

    def check_wrapped(self, node: cst.Call, region, what: str, api: str) -> None:
        """`checkpoint_wrapper(Block(...), preserve_rng_state=False)`, or
        `apply_activation_checkpointing(..., checkpoint_wrapper_fn=partial(checkpoint_wrapper,
        preserve_rng_state=False), check_fn=...)` (the partial inline or bound to a name)."""
        found = self._wrapper_keyword(node)
        if found is None:
            return
        call, keyword, passed = found
        random = region_randomness(region, self.context.project, frozenset(self.context.settings.stateful_modules))
        if not random:
            return
        if passed is not None:  # False where the project passes it: no edit here fits every caller
            written = cst.Module([]).code_for_node(keyword.value)
            self.report(
                node,
                f"`{api}` with `preserve_rng_state={written}`, False{passed}, checkpoints `{what}`, which draws "
                f"random numbers ({shown(random)}): the recomputation in backward draws new masks, so gradients "
                "belong to a different network than the loss; keep the RNG state preserved",
            )
            return
        self.report(
            node,
            f"`{api}` with `preserve_rng_state=False` checkpoints `{what}`, which draws "
            f"random numbers ({shown(random)}): the recomputation in backward draws new masks, so gradients belong "
            "to a different network than the loss; remove `preserve_rng_state=False`",
            replacements=[Replacement(call, remove_keyword(call, "preserve_rng_state"))],
            fix_message="Remove `preserve_rng_state=False`",
        )

    def finish(self) -> None:
        super().finish()
        # `model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={...,
        # "preserve_rng_state": False})` (or those kwargs in the `TrainingArguments` of a
        # Trainer that turns checkpointing on): transformers hands the dict to `checkpoint` for
        # every layer it checkpoints. A file that sets the architecture's dropout itself
        # (`hidden_dropout_prob=0.0` at load, `config.resid_pdrop = 0`) may have turned it
        # off: its defaults are not judged there; LoRA dropout is read from the `LoraConfig`.
        sets_dropout = bool(_SETS_DROPOUT.search(self.context.text))
        for history in script_models(self.context).histories:
            layer = transformers_random_layer(history.model_class.name) if history.model_class is not None else None
            loaded = ""
            if layer is None and history.model_class is not None and history.checkpoint is not None and (
                history.model_class.short_name.startswith("AutoModel")
            ):
                layer = transformers_random_checkpoint(history.checkpoint)
                loaded = f" loaded from `{history.checkpoint}`"
            for step in history.of_kind(StepKind.GC_ENABLED, StepKind.TRAINER):
                if step.kind is StepKind.TRAINER and step.enables_checkpointing is not True:
                    continue
                entry = _preserve_rng_state_false(
                    self.context.cst_node_at(step.kwargs.node, cst.Dict) if step.kwargs is not None else None
                )
                if entry is None:
                    continue
                if layer is not None and not sets_dropout:
                    random = (f"the layers of `{history.model_class.short_name}`{loaded}, which draw random numbers "
                              f"(({layer}: dropout on under its configuration's defaults))")
                else:
                    dropout = self._lora_dropout(history, step)
                    if dropout is None:
                        continue
                    random = (f"decoder layers holding LoRA adapters with `lora_dropout={dropout}`, which draw "
                              "dropout masks")
                dictionary, element = entry
                api = "`gradient_checkpointing_enable`" if step.kind is StepKind.GC_ENABLED else "`TrainingArguments`"
                self.report(
                    self.context.cst_node_at(step.node, cst.Call),
                    f"{api} with `preserve_rng_state=False` checkpoints {random}: the recomputation "
                    "in backward draws new masks, so gradients belong to a different network than the loss; remove "
                    "`preserve_rng_state=False`",
                    replacements=[Replacement(dictionary, remove_dict_entry(dictionary, element))],
                    fix_message="Remove `\"preserve_rng_state\": False`",
                )

    def _lora_dropout(self, history, checkpointing) -> str | None:
        """The non-zero `lora_dropout` of LoRA adapters added to the model on a path that
        can run with `checkpointing` (`get_peft_model(model, LoraConfig(lora_dropout=0.05))`,
        `model.add_adapter(config)`), when the `LoraConfig` says so in this file."""
        names = lambda expr: absolute_names(self.context, expr) if isinstance(expr, (cst.Name, cst.Attribute)) else set()  # noqa: E731
        for step in history.of_kind(StepKind.PEFT_WRAPPED, StepKind.ADAPTER_ADDED):
            call = self.context.cst_node_at(step.node, cst.Call)
            if step.exclusive_with(checkpointing) or not isinstance(call, cst.Call):
                continue
            if step.kind is StepKind.PEFT_WRAPPED:
                if not names(call.func) or not names(call.func) <= GET_PEFT_MODEL:
                    continue
                config = _argument(call, "peft_config", 1)
            elif isinstance(call.func, cst.Attribute) and call.func.attr.value == "add_adapter":
                config = _argument(call, "adapter_config", 0)
            else:
                continue
            if isinstance(config, cst.Name) and len(self._bound.get(config.value, ())) == 1:
                config = self._bound[config.value][0]
            dropout = checkpointed_lora_dropout(config, names, step.known)
            if dropout:
                return dropout
        return None

    def _wrapper_keyword(self, node: cst.Call) -> tuple[cst.Call, cst.Arg, str | None] | None:
        """The `preserve_rng_state=` keyword of a wrapper call (or of the partial it is given)
        that is False: written so (None), or a parameter the project passes False for (where)."""
        candidates = [node]
        wrapper_fn = next((a.value for a in node.args if a.keyword and a.keyword.value == "checkpoint_wrapper_fn"), None)
        if isinstance(wrapper_fn, cst.Call):
            candidates.append(wrapper_fn)
        elif isinstance(wrapper_fn, cst.Name) and len(self._bound.get(wrapper_fn.value, ())) == 1:
            value = self._bound[wrapper_fn.value][0]
            if isinstance(value, cst.Call):
                candidates.append(value)
        for call in candidates:
            for arg in call.args:
                if arg.keyword is not None and arg.keyword.value == "preserve_rng_state":
                    if literal_bool(arg.value) is Reentrancy.EXPLICIT_FALSE:
                        return call, arg, None
                    if isinstance(arg.value, cst.Name):
                        _, values = self.values_at(call, arg.value)
                        if any(isinstance(v, Constant) and v.value is False for v in values):
                            sites = self._falsy_sites(call, arg.value.value)
                            if sites:
                                return call, arg, f" as passed at {sites}"
                            if all(isinstance(v, Constant) and v.value is False for v in values):
                                sites = self._falsy_sites(call, arg.value.value, by_default=True)
                                if sites:
                                    return call, arg, f" by default, as called at {sites}"
        return None

    def _falsy_sites(self, call: cst.Call, parameter: str, by_default: bool = False) -> str:
        """Where the project passes False for a parameter of the function holding `call`
        (`by_default`: where it leaves out a parameter whose default is False)."""
        scopes = self._call_scopes.get(call, ())
        if not scopes or scopes[-1][0] != "function":
            return ""
        function = ".".join([self._module, *(name for _, name in scopes)])
        denotation = self.context.project.denotation
        sites = denotation.default_runs_at(function, parameter) if by_default else denotation.falsy_passed_at(function, parameter)
        return ", ".join(f"{path}:{line}" for path, line in sites[:3]) + (" and more" if len(sites) > 3 else "")

    def visit_checkpoint_site(self, site: CheckpointSite) -> None:
        keyword = site.keywords.get("preserve_rng_state")
        if keyword is None:
            return
        flag = literal_bool(keyword.value)
        # `preserve_rng_state=self.cfg.preserve_rng`: False wherever the project sets it, or
        # by the default of every declaration of the option (no fix: the knob stays).
        configured = self.configured_flag(site, "preserve_rng_state", False) if flag is Reentrancy.UNKNOWN else None
        if flag is not Reentrancy.EXPLICIT_FALSE and configured is None:
            return
        if site.kind is SiteKind.CALL and self.guard_never_holds(site.node):
            return
        region = self.site_region(site)
        if region is None:
            return
        random = region_randomness(region, self.context.project, frozenset(self.context.settings.stateful_modules))
        if not random:
            return
        if configured is not None:
            self.report(
                site.node,
                f"`{site.api.short_name}` with {configured}, recomputes a region that draws random numbers "
                f"({shown(random)}): the recomputation in backward draws new masks, so gradients belong to a different "
                "network than the loss; leave `preserve_rng_state` at its default (True)",
            )
            return
        self.report(
            site.node,
            f"`{site.api.short_name}` with `preserve_rng_state=False` recomputes a region that draws random numbers "
            f"({shown(random)}): the recomputation in backward draws new masks, so gradients belong to a different network "
            "than the loss; remove `preserve_rng_state=False`",
            replacements=[
                Replacement(keyword.container, remove_keyword(keyword.container, "preserve_rng_state"))
                if isinstance(keyword.container, cst.Call)  # an argument of a splatted `dict(...)`
                else Replacement(keyword.container, remove_dict_entry(keyword.container, keyword.entry))
                if keyword.call is None  # an entry of a splatted dict (`**ckpt_kwargs`)
                else Replacement(keyword.call, remove_keyword(keyword.call, "preserve_rng_state"))
            ] if keyword.call is not None or keyword.container is not None else [],  # not: a partial of another module
            fix_message="Remove `preserve_rng_state=False`",
        )


_SETS_DROPOUT = re.compile(r"(?<!lora_)dropout\w*\s*=|pdrop\w*\s*=|dropout_rate")


def _argument(call: cst.Call, keyword: str, position: int) -> cst.BaseExpression | None:
    positional = [arg.value for arg in call.args if arg.keyword is None and not arg.star]
    named = [arg.value for arg in call.args if arg.keyword is not None and arg.keyword.value == keyword]
    return named[0] if named else positional[position] if position < len(positional) else None


def _preserve_rng_state_false(node: cst.BaseExpression | None) -> tuple[cst.Dict, cst.DictElement] | None:
    """The `"preserve_rng_state": False` entry of a literal `gradient_checkpointing_kwargs`."""
    if not isinstance(node, cst.Dict):
        return None
    for element in node.elements:
        if (
            isinstance(element, cst.DictElement)
            and isinstance(element.key, cst.SimpleString)
            and element.key.evaluated_value == "preserve_rng_state"
            and literal_bool(element.value) is Reentrancy.EXPLICIT_FALSE
        ):
            return node, element
    return None
