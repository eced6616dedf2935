from __future__ import annotations

import re

from ckptlint.lazy_libcst import cst

from ckptlint.analysis.fsdp import absolute_names
from ckptlint.analysis.hf_fixes import set_dict_key
from ckptlint.analysis.huggingface import has_star_kwargs, keyword_value
from ckptlint.analysis.site_scopes import SiteScopes
from ckptlint.analysis.transforms import remove_keyword, set_keyword
from ckptlint.model.form.values import Constant, Sequence
from ckptlint.rule import Replacement
from ckptlint.types import Applicability, Severity
from ckptlint.model.library.transformers import GC_KWARGS, GC_OUTSIDE_FSDP_UNIT_VERSIONS, HfCheckpointingKwargs
from ckptlint.model.library.torch import Reentrancy

SHARDING_OPTIONS = frozenset({"full_shard", "hybrid_shard", "hybrid_shard_zero2"})
# Both keywords of the call, as text: most files that mention `gradient_checkpointing` and
# `fsdp` (every transformers model) pass neither, and are never parsed for this rule.
_ENABLED_KEYWORD = re.compile(r"\bgradient_checkpointing[\s\\]*=[\s\\]*True\b")
_FSDP_KEYWORD = re.compile(r"\bfsdp[\s\\]*=(?!=)")


class HfCheckpointingWithFsdpFullShard(SiteScopes):
    """`TrainingArguments(gradient_checkpointing=True, fsdp="full_shard ...")`.

    ## What it does
    Finds Hugging Face `TrainingArguments` (and `Seq2SeqTrainingArguments`, TRL's configs
    built on it such as `SFTConfig` / `DPOConfig` / `GRPOConfig`, and the project's own
    subclasses of any of them) that turn on `gradient_checkpointing=True` together with an
    `fsdp` value containing `full_shard` or `hybrid_shard` (a string such as
    `"full_shard auto_wrap"`, a list of strings, or `FSDPOption.FULL_SHARD`), written there
    or held by a constant the project model evaluates (`FSDP_MODE = "full_shard auto_wrap"`,
    in the module or imported from another; every value it may have must shard).

    Only where the targeted transformers is older than 4.52 (declared, configured or
    installed); on a transformers that is not known, reported with the versions it holds for
    named in the message, as every version-keyed rule is (DESIGN, "Target versions"). From
    4.52 the decoder layer checkpoints inside its own FSDP unit and nothing is added: CKPT002
    then decides, which is quiet for a `fsdp` that auto-wraps each layer (see Evidence).

    Not when the checkpointing is known to run non-reentrant (`gradient_checkpointing_kwargs=
    {"use_reentrant": False}`, or no kwargs on transformers >= 5.0, whose default it is): that
    recomputation runs inside each unit's backward, after FSDP's own all-gather, and adds none.

    ## Why is this bad?
    With parameters sharded, transformers' own gradient checkpointing (reentrant) before 4.52
    checkpoints the FSDP unit's own `__call__` (`self._gradient_checkpointing_func(
    decoder_layer.__call__, ...)` in the model's forward): the recomputation runs the unit's
    forward again, and every layer's parameters are all-gathered once more in backward. `fsdp_config={"activation_checkpointing": True}` makes
    accelerate apply torch's checkpoint wrapper inside the FSDP units instead.

    ## Example
    ```python
    args = TrainingArguments(
        "out",
        fsdp="full_shard auto_wrap",
        gradient_checkpointing=True,
    )
    ```

    ## Use instead
    ```python
    args = TrainingArguments(
        "out",
        fsdp="full_shard auto_wrap",
        fsdp_config={"activation_checkpointing": True},
    )
    ```

    ## Fix safety
    The fix removes `gradient_checkpointing=True` and sets `"activation_checkpointing": True`
    in `fsdp_config` (merged into a dict literal, or added as a new argument). It is
    **unsafe**: accelerate's wrapper checkpoints the modules the FSDP wrap policy selects,
    which may differ from the layers transformers checkpoints. No fix when `fsdp_config` is
    a variable or a path to a JSON file. Reported instead of CKPT002 at the same call.
    `shard_grad_op` (ZeRO-2 style, parameters not resharded after forward) is not reported.

    ## In training recipes
    Also reported in YAML / JSON recipes and launch scripts: `gradient_checkpointing: true`
    (or `--gradient_checkpointing True`, or LLaMA-Factory's default) with `fsdp: full_shard`
    / `hybrid_shard`, or with an accelerate config whose FSDP reshards after forward
    (`fsdp_sharding_strategy: FULL_SHARD` / `1` / `HYBRID_SHARD`, the default), e.g.
    `accelerate launch --config_file fsdp.yaml train.py --gradient_checkpointing True`,
    reported at the flag. FSDP1 only there: a recipe's FSDP2 (`fsdp_version: 2`) unshards in
    its pre-backward hook and skips the unshard of a recomputed forward, so CKPT002 decides
    (quiet under FSDP2, where no harm is measured). No fix there.

    ## Evidence
    Measured on torch 2.13 (CPU, gloo, 2 ranks, FSDP1 `FULL_SHARD`, `use_orig_params=True`,
    `ModuleWrapPolicy({<decoder layer>})` as accelerate's `TRANSFORMER_BASED_WRAP` makes, a
    4-layer Llama / GPT-2 with `gradient_checkpointing_enable(gradient_checkpointing_kwargs=
    {"use_reentrant": True})`, all-gathers counted by patching `dist.all_gather_into_tensor`
    and `_all_gather_base`), backward all-gathers with reentrant / non-reentrant kwargs:
    transformers 4.51.3 Llama 8 / 4, GPT-2 8; 4.52.4 Llama 4 / 4, GPT-2 8; 4.53.0 GPT-2 4;
    5.17 Llama 4 / 4, GPT-2 4; gradients identical to the non-reentrant run in each. The
    release that changed it: 4.52.0 adds `modeling_layers.py` (`class
    GradientCheckpointingLayer(nn.Module)`, whose `__call__` runs
    `self._gradient_checkpointing_func(partial(super().__call__, **kwargs), *args)` inside the
    wrapped layer) and makes 29 model families' decoder layers subclass it (Llama, Mistral,
    Qwen2, Qwen3, Gemma, Phi-3, Cohere, Granite, OLMo, Starcoder2, ...); 4.51.3 has no such
    file and `LlamaModel.forward` calls `self._gradient_checkpointing_func(
    decoder_layer.__call__, ...)`. 4.53.0 converts all but glm4v, mllama, zamba, zamba2
    (models still calling `_gradient_checkpointing_func` themselves: 195 files on 4.52.0, 4
    on 4.53.0, none on 5.17). 4.52.x with a model not converted (GPT-2, Mixtral, Gemma 2/3,
    Falcon, BLOOM, T5) is a known gap: the rule does not know the model `TrainingArguments`
    trains, and reporting 4.52 would be false for the Llama-family recipes most common there.
    transformers 5.17 `training_args.py` logs, when `fsdp` is set with
    `gradient_checkpointing`: "When using FSDP, prefer `activation_checkpointing` in
    `fsdp_config` over `gradient_checkpointing`; the latter introduces a redundant AllGather
    in the backward pass. Reference: https://github.com/huggingface/transformers/issues/30404".
    The measured cost of a reentrant checkpointed region around each FSDP1 unit on torch 2.13
    (CPU, gloo, 2 ranks) is 8 all-gathers in backward instead of 4; with `use_reentrant=False`
    it stays 4 (EVIDENCE Q5; `ckptlint verify` of
    `fixtures/verify_distributed/fsdp1_checkpoint_call_around_units.py` and of the same case
    non-reentrant, measured again for transformers' warning, which is unconditional in 5.17 though its
    all-gather is gone since 4.52). Setting both raises in
    the Trainer (`trainer.py`): "The activation_checkpointing in FSDP config and the
    gradient_checkpointing in training arg can't be set to True simultaneously".
    """

    code = "CKPT004"
    severity = Severity.WARNING
    name = "hf-checkpointing-with-fsdp-full-shard"
    message = (
        "`{callee}(gradient_checkpointing=True, fsdp={fsdp})`: with sharded parameters transformers' gradient "
        "checkpointing before 4.52 recomputes each layer outside its FSDP unit and all-gathers it again in "
        'backward; use `fsdp_config={{"activation_checkpointing": True}}` instead'
    )
    fix = Applicability.UNSAFE
    targets = (GC_OUTSIDE_FSDP_UNIT_VERSIONS,)
    triggers = (b"gradient_checkpointing",)
    requires = (b"fsdp",)
    supersedes = ("CKPT002",)
    uses_project = True  # the project's own subclasses of TrainingArguments

    def __init__(self, context) -> None:
        super().__init__(context)
        self._enabling: list[cst.Call] = []

    @classmethod
    def may_apply_to(cls, text: str) -> bool:
        return super().may_apply_to(text) and bool(_ENABLED_KEYWORD.search(text) and _FSDP_KEYWORD.search(text))

    def visit_Call(self, node: cst.Call) -> None:
        super().visit_Call(node)
        enabled = keyword_value(node, "gradient_checkpointing")
        if isinstance(enabled, cst.Name) and enabled.value == "True" and keyword_value(node, "fsdp") is not None:
            self._enabling.append(node)

    def finish(self) -> None:
        for call in self._enabling:
            fsdp = keyword_value(call, "fsdp")
            if not _shards_parameters(fsdp) and not (isinstance(fsdp, (cst.Name, cst.Attribute)) and self._evaluates_to_sharding(call, fsdp)):
                continue
            names = absolute_names(self.context, call.func)
            if not names or not all(self.context.project.is_training_arguments(name) for name in names):
                continue
            if not has_star_kwargs(call) and self._non_reentrant(call):
                continue
            self.report(
                call,
                self.message.format(callee=_callee(call), fsdp=cst.Module([]).code_for_node(fsdp)) + self.version_note(),
                replacements=_fix(call),
                fix_message='Move checkpointing to `fsdp_config={"activation_checkpointing": True}`',
            )

    def _non_reentrant(self, call: cst.Call) -> bool:
        """Whether the call's `gradient_checkpointing_kwargs` (or transformers' default for the
        targeted versions) are known to run the non-reentrant implementation, whose
        recomputation runs inside each FSDP1 unit's backward and all-gathers nothing more."""
        kwargs = HfCheckpointingKwargs.of(keyword_value(call, GC_KWARGS), trainer_path=True)
        reentrancy, _ = kwargs.reentrancy(self.context.versions)
        return reentrancy is Reentrancy.EXPLICIT_FALSE

    def _evaluates_to_sharding(self, call: cst.Call, fsdp: cst.BaseExpression) -> bool:
        """`fsdp=FSDP_MODE`: every value the project model finds for the name at the call is a
        string (or list of strings) naming full or hybrid sharding."""
        _, values = self.values_at(call, fsdp)
        return bool(values) and all(_sharding_value(value) for value in values)


def _shards_parameters(value: cst.BaseExpression | None) -> bool:
    """An `fsdp=` value naming full or hybrid sharding."""
    if isinstance(value, cst.SimpleString):
        return bool(SHARDING_OPTIONS & set(value.evaluated_value.lower().split()))
    if isinstance(value, (cst.List, cst.Tuple)):
        return any(_shards_parameters(element.value) for element in value.elements)
    if isinstance(value, cst.Attribute) and isinstance(value.value, cst.Name) and value.value.value == "FSDPOption":
        return value.attr.value.lower() in SHARDING_OPTIONS
    return False


def _sharding_value(value) -> bool:
    """A value of the project model naming full or hybrid sharding (`"full_shard auto_wrap"`,
    `["hybrid_shard", "auto_wrap"]`)."""
    if isinstance(value, Constant):
        return isinstance(value.value, str) and bool(SHARDING_OPTIONS & set(value.value.lower().split()))
    if isinstance(value, Sequence):
        return any(_sharding_value(element) for element in value.elements)
    return False


def _fix(call: cst.Call) -> list[Replacement]:
    config = keyword_value(call, "fsdp_config")
    enabled = cst.Name("True")
    if config is None:
        new_call = set_keyword(remove_keyword(call, "gradient_checkpointing"), "fsdp_config", cst.parse_expression('{"activation_checkpointing": True}'))
    elif isinstance(config, cst.Dict):
        without = remove_keyword(call, "gradient_checkpointing")
        new_call = set_keyword(without, "fsdp_config", set_dict_key(config, "activation_checkpointing", enabled))
    else:
        return []
    return [Replacement(call, new_call)]


def _callee(call: cst.Call) -> str:
    func = call.func
    return func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(func, cst.Name) else "..."
