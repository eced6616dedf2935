"""transformers' behaviour as data: gradient checkpointing (the kwargs it runs, its
defaults by version), its Trainer and argument classes, what a model class's name says,
which layers draw dropout masks. Each entry says where the behaviour was read."""

from __future__ import annotations

import ast
import enum
import re
from dataclasses import dataclass, replace

from ckptlint.lazy_libcst import cst
from ckptlint.model.library.torch import Reentrancy
from ckptlint.versions import Applies, TargetVersions, VersionRange

# transformers >= 4.35 `modeling_utils.py`: `gradient_checkpointing_enable()` sets, on every
# module with a `gradient_checkpointing` attribute, `_gradient_checkpointing_func =
# functools.partial(checkpoint, **gradient_checkpointing_kwargs)`; the layers' code calls
# `self._gradient_checkpointing_func(layer.__call__, hidden_states, ...)`: its first argument
# is what torch's checkpoint runs, now and again in backward.
HF_CHECKPOINTING_ATTRIBUTE = "_gradient_checkpointing_func"

# The argument classes whose `gradient_checkpointing` / `fsdp` fields the Trainer reads
# (TRL's configs subclass them: `TRAINING_ARGUMENTS_CLASSES`).
TRANSFORMERS_TRAINING_ARGUMENTS = frozenset(
    {
        "transformers.TrainingArguments",
        "transformers.training_args.TrainingArguments",
        "transformers.Seq2SeqTrainingArguments",
        "transformers.training_args_seq2seq.Seq2SeqTrainingArguments",
    }
)
# transformers before 5.0 turns `gradient_checkpointing_enable()` without kwargs into
# `{"use_reentrant": True}`; 5.0 into `{"use_reentrant": False}` (EVIDENCE Q4).
REENTRANT_DEFAULT_VERSIONS = VersionRange.of("transformers", max="5.0")
# Where transformers' gradient checkpointing runs outside the decoder layer's FSDP unit. Up to
# 4.51 the model's forward checkpoints `decoder_layer.__call__`, the FSDP wrapper's: a reentrant
# recomputation runs the unit's forward again and all-gathers it a second time in backward
# (measured, torch 2.13 CPU gloo 2 ranks, FSDP1 full_shard, a unit per decoder layer: 8
# backward all-gathers against 4 for Llama and GPT-2 on 4.51.3). 4.52 adds
# `modeling_layers.GradientCheckpointingLayer`, whose `__call__` checkpoints inside the wrapped
# layer, after FSDP's unshard: 4 against 4 for Llama on 4.52.4 (same gradients as
# non-reentrant). 4.52 converts 29 model families (Llama, Mistral, Qwen2/3, Gemma, Phi-3, ...;
# GPT-2 measured 8 there still), 4.53.0 all but 4 (glm4v, mllama, zamba, zamba2), 5.x all.
GC_OUTSIDE_FSDP_UNIT_VERSIONS = VersionRange.of("transformers", max="4.52")
TRANSFORMERS_TRAINERS = frozenset(
    {
        "transformers.Trainer", "transformers.trainer.Trainer", "transformers.Seq2SeqTrainer",
        "transformers.trainer_seq2seq.Seq2SeqTrainer",
    }
)


# How transformers names its model classes (`LlamaForCausalLM`, `AutoModelForSeq2SeqLM`,
# `BertModel`, `CLIPTextModelWithProjection`, `AutoBackbone`), and what it does not call a
# model (configs, tokenizers, processors, outputs, trainers; the TF and Flax twins).
MODEL_CLASS_NAME = re.compile(r"^(Auto\w*Model\w*|\w+(Model|ModelWithProjection|For[A-Z]\w*|Backbone))$")
NOT_MODEL_NAME = re.compile(r"(Config|Tokenizer\w*|Processor|FeatureExtractor|Output\w*|Mixin|Args|Arguments|Trainer)$")


def is_model_class_name(name: str) -> bool:
    short = name.rsplit(".", 1)[-1]
    return bool(MODEL_CLASS_NAME.match(short)) and not NOT_MODEL_NAME.search(short) and not short.startswith(("TF", "Flax"))


# What a model's `forward` returns. transformers `utils/generic.py` (5.17; 4.x the same):
# `class ModelOutput(OrderedDict)`, and every output class (`modeling_outputs.py`, each
# model's `modeling_*.py`) is a `@dataclass` subclass of it; diffusers' `BaseOutput`
# (`utils/outputs.py`) is an `OrderedDict` subclass too. A model returns one unless
# `return_dict` is False: 5.17's `can_return_tuple` takes the call's `return_dict`, else
# `self.config.return_dict` (default True, `configuration_utils.py`), then `.to_tuple()`;
# 4.x's forwards `return_dict if return_dict is not None else self.config.use_return_dict`.
MODEL_OUTPUT_BASES = frozenset(
    {
        "transformers.ModelOutput", "transformers.utils.ModelOutput", "transformers.utils.generic.ModelOutput",
        "transformers.file_utils.ModelOutput", "transformers.modeling_outputs.ModelOutput",
        "diffusers.utils.BaseOutput", "diffusers.utils.outputs.BaseOutput",
    }
)
# The keyword (call or config) that makes a model return a tuple instead.
RETURN_DICT = "return_dict"
# The class methods that build a model of the class they are called on
# (`CLIPVisionModel.from_pretrained(name)`, `AutoModel.from_config(config)`).
MODEL_LOADERS = frozenset({"from_pretrained", "from_config", "_from_config"})


def is_model_output_class(name: str) -> bool:
    """A transformers output class by its absolute name (`transformers.modeling_outputs.
    BaseModelOutputWithPooling`, `transformers.models.clip.modeling_clip.CLIPOutput`)."""
    if name in MODEL_OUTPUT_BASES or name.startswith("transformers.modeling_outputs."):
        return True
    short = name.rsplit(".", 1)[-1]
    return name.startswith("transformers.") and short.endswith("Output") and short[:1].isupper()


def is_model_loader(name: str) -> bool:
    """`transformers.CLIPVisionModel.from_pretrained`: it returns a model, not a tensor."""
    owner, _, method = name.rpartition(".")
    return method in MODEL_LOADERS and is_transformers_model(owner)


def is_transformers_model(name: str) -> bool:
    """A model class transformers defines (`transformers.CLIPVisionModel`,
    `transformers.AutoModel`), whose `forward` returns a `ModelOutput` by default."""
    return name.startswith("transformers.") and is_model_class_name(name)


# The parts of a model that are its input embeddings (`model.embed_tokens`, GPT-2's `wte`,
# T5's `shared`, `get_input_embeddings()`): input grads are enabled through them.
EMBEDDING_PARTS = re.compile(r"embed|^wte$|^shared$|^get_input_embeddings$", re.IGNORECASE)


# The attributes transformers models keep their layer stacks in (`LlamaModel.layers`,
# `BertEncoder.layer`, `GPT2Model.h`, `T5Stack.block`, CLIP's `encoder.layers`, timm-style
# `blocks`): what gradient checkpointing wraps.
LAYER_STACKS = frozenset({"layers", "layer", "h", "block", "blocks"})


# PEFT's adapters added through a model's own methods (transformers' PEFT integration).
ADAPTER_METHODS = frozenset({"add_adapter", "load_adapter"})


# --- which layers draw dropout masks --------------------------------------------------------

# transformers layers that draw dropout masks in training under their configuration's
# defaults, which the usual pretrained checkpoints keep (`BertConfig().hidden_dropout_prob ==
# 0.1`, GPT-2 `resid_pdrop` 0.1, T5 `dropout_rate` 0.1, BART / mBART / Pegasus / OPT `dropout`
# 0.1, Wav2Vec2 `hidden_dropout` 0.1; read from the configs of transformers 5.17.0, the same
# in 4.46.3). Llama, Mistral, Qwen2, Gemma, Phi, Falcon, Bloom, GPT-NeoX, GPT-J, ViT, CLIP,
# Swin, Whisper and ALBERT default to 0.0 and are not listed: a layer of theirs draws nothing
# unless a project turns dropout on.
TRANSFORMERS_RANDOM_LAYERS = frozenset(
    f"transformers.models.{family}.modeling_{family}.{layer}"
    for family, layers in (
        ("bert", ("BertLayer",)), ("roberta", ("RobertaLayer",)), ("xlm_roberta", ("XLMRobertaLayer",)),
        ("electra", ("ElectraLayer",)), ("deberta_v2", ("DebertaV2Layer",)), ("distilbert", ("TransformerBlock",)),
        ("mpnet", ("MPNetLayer",)), ("longformer", ("LongformerLayer",)), ("gpt2", ("GPT2Block",)),
        ("t5", ("T5Block",)), ("mt5", ("MT5Block",)), ("bart", ("BartEncoderLayer", "BartDecoderLayer")),
        ("mbart", ("MBartEncoderLayer", "MBartDecoderLayer")),
        ("pegasus", ("PegasusEncoderLayer", "PegasusDecoderLayer")), ("opt", ("OPTDecoderLayer",)),
        ("wav2vec2", ("Wav2Vec2EncoderLayer", "Wav2Vec2EncoderLayerStableLayerNorm")),
    )
    for layer in layers
)
# The model classes of those families (`BertForMaskedLM`, `GPT2LMHeadModel`, `T5Model`; not
# `T5GemmaModel`, another family): the layers gradient checkpointing wraps.
_RANDOM_FAMILIES = {
    layer.split(".")[2]: layer
    for layer in sorted(TRANSFORMERS_RANDOM_LAYERS, key=lambda name: ("Decoder" in name, len(name), name), reverse=True)
}
_FAMILY_PREFIXES = {
    "bert": "Bert", "roberta": "Roberta", "xlm_roberta": "XLMRoberta", "electra": "Electra", "deberta_v2": "DebertaV2",
    "distilbert": "DistilBert", "mpnet": "MPNet", "longformer": "Longformer", "gpt2": "GPT2", "t5": "T5", "mt5": "MT5",
    "bart": "Bart", "mbart": "MBart", "pegasus": "Pegasus", "opt": "OPT", "wav2vec2": "Wav2Vec2",
}
_RANDOM_MODEL_CLASS = re.compile(
    r"^(?P<prefix>" + "|".join(sorted(_FAMILY_PREFIXES.values(), key=len, reverse=True))
    + r")(?:Model|LMHeadModel|EncoderModel|For[A-Z]\w*)$"
)


# The Hub checkpoints of those families, by the name after the organisation, that an Auto class
# (`AutoModelForSequenceClassification.from_pretrained("bert-base-uncased")`) loads with the
# family's dropout: transformers 5.17's configuration docstrings say the defaults give the
# configuration of `google-bert/bert-base-uncased`, `FacebookAI/roberta-base`,
# `google/distilbert-base-uncased`, `google/electra-small-discriminator`, `microsoft/mpnet-base`,
# `allenai/longformer-base-4096`, `openai-community/gpt2`, `google-t5/t5-small`,
# `google/mt5-small`, `facebook/bart-large`, `facebook/mbart-large-cc25`,
# `google/pegasus-large`, `facebook/opt-350m`, `facebook/wav2vec2-base-960h`; the other sizes
# of each release share their dropout. A name not listed (a fine-tuned copy under another
# name, `sentence-transformers/all-MiniLM-L6-v2`) says nothing.
_RANDOM_CHECKPOINTS = {
    family: re.compile(pattern)
    for family, pattern in (
        ("bert", r"bert-(base|large)-"), ("roberta", r"roberta-(base|large)\b"),
        ("xlm_roberta", r"xlm-roberta-(base|large)\b"), ("distilbert", r"distilbert-base-"),
        ("electra", r"electra-(small|base|large)-"), ("deberta_v2", r"deberta-v[23]-"), ("mpnet", r"mpnet-base$"),
        ("longformer", r"longformer-(base|large)-"), ("gpt2", r"(distil)?gpt2(-medium|-large|-xl)?$"),
        ("t5", r"t5-(small|base|large|3b|11b)$"), ("mt5", r"mt5-(small|base|large|xl|xxl)$"),
        ("bart", r"bart-(base|large)\b"), ("mbart", r"mbart-large-"), ("pegasus", r"pegasus-"),
        ("opt", r"opt-\d+(\.\d+)?[mb]$"), ("wav2vec2", r"wav2vec2-(base|large)\b"),
    )
}


def transformers_random_checkpoint(model_id: str) -> str | None:
    """The layer of the family a Hub checkpoint id names, when its layers draw dropout masks
    (`bert-base-uncased`, `google-bert/bert-base-uncased` -> `...modeling_bert.BertLayer`)."""
    name = model_id.rsplit("/", 1)[-1]
    return next((_RANDOM_FAMILIES[f] for f, pattern in _RANDOM_CHECKPOINTS.items() if pattern.match(name)), None)


def transformers_random_layer(model_class: str) -> str | None:
    """The layer of a transformers model class whose family draws dropout masks under its
    configuration's defaults (`BertForMaskedLM` -> `...modeling_bert.BertLayer`), else None."""
    match = _RANDOM_MODEL_CLASS.match(model_class.rsplit(".", 1)[-1])
    if match is None:
        return None
    family = next(f for f, prefix in _FAMILY_PREFIXES.items() if prefix == match["prefix"])
    return _RANDOM_FAMILIES.get(family)
# --- transformers: what a model class's name says -------------------------------------------

# --- model classes -----------------------------------------------------------------------


class MainInput(str, enum.Enum):
    """A model's `main_input_name`, as far as transformers' input-grads logic cares."""

    INPUT_IDS = "input_ids"
    OTHER = "not input_ids"  # pixel_values, input_features, input_values...
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class ModelClass:
    """What a model's class says about it."""

    name: str  # as resolved (`transformers.AutoModelForCausalLM`), or as written
    generative: bool | None  # decodes with a KV cache (decoder or encoder-decoder)
    main_input: MainInput

    @property
    def short_name(self) -> str:
        return self.name.rsplit(".", 1)[-1]


# Generative heads: a decoder (or encoder-decoder) that builds a KV cache when `use_cache`.
_GENERATIVE_SUFFIXES = ("ForCausalLM", "ForConditionalGeneration", "LMHeadModel", "ForSeq2SeqLM", "ForSpeechSeq2Seq")
_GENERATIVE_AUTO = frozenset(
    {
        "AutoModelForCausalLM", "AutoModelForSeq2SeqLM", "AutoModelForVision2Seq", "AutoModelForImageTextToText",
        "AutoModelForSpeechSeq2Seq", "AutoPeftModelForCausalLM", "AutoPeftModelForSeq2SeqLM",
    }
)
# LM heads whose configs have no `use_cache` (XLNet has `use_mems`): no KV cache to turn off.
_NO_CACHE_PREFIXES = ("XLNet", "OpenAIGPT", "XLM", "Flaubert")
# Heads and towers whose `main_input_name` is not `input_ids` (checked against transformers'
# own classes in tests/test_hf_rules.py); the exceptions are text models with such heads.
# Not AutoModelForSpeechSeq2Seq: half of what it maps to in 5.17 (Voxtral, Granite Speech...)
# takes `input_ids`.
_OTHER_INPUT_SUFFIXES = (
    "ForImageClassification", "ForSemanticSegmentation", "ForObjectDetection", "ForDepthEstimation", "ForCTC",
    "ForAudioClassification", "ForMaskedImageModeling", "ForVideoClassification", "ForUniversalSegmentation",
    "ForInstanceSegmentation", "ForKeypointDetection", "Backbone", "ForAudioFrameClassification", "ForXVector",
    "ForImageSegmentation", "ForImageSuperResolution",
)
_TEXT_WITH_IMAGE_HEADS = ("ImageGPT", "ShieldGemma2", "OwlViT", "Owlv2")
_OTHER_INPUT_FAMILIES = re.compile(
    r"^(ViT(?!s)|ViTMAE|ViTMSN|Deit|DeiT|Beit|BEiT|Swin|Swinv2|ConvNext|ConvNextV2|Dinov2|CLIPVision|SiglipVision|"
    r"Siglip2Vision|Whisper(?!ForCausalLM)|Wav2Vec2|Hubert|WavLM|Speech2Text(?!ForCausalLM))"
)
_OTHER_INPUT_AUTO = frozenset(
    {
        "AutoModelForImageClassification", "AutoModelForSemanticSegmentation", "AutoModelForObjectDetection",
        "AutoModelForDepthEstimation", "AutoModelForCTC", "AutoModelForAudioClassification",
        "AutoModelForVideoClassification", "AutoModelForMaskedImageModeling",
        "AutoModelForImageSegmentation", "AutoModelForInstanceSegmentation", "AutoModelForUniversalSegmentation",
        "AutoModelForKeypointDetection", "AutoModelForAudioFrameClassification", "AutoModelForAudioXVector",
        "AutoBackbone",
    }
)
_INPUT_IDS_SUFFIXES = ("ForCausalLM", "LMHeadModel", "ForTokenClassification", "ForQuestionAnswering", "ForMultipleChoice")


def classify_model_class(name: str, *, main_input_name: str | None = None) -> ModelClass:
    """A model class by its (qualified) name; `main_input_name` when its class body says."""
    short = name.rsplit(".", 1)[-1]
    if short in _GENERATIVE_AUTO:
        generative: bool | None = True
    elif short.endswith(_GENERATIVE_SUFFIXES):
        generative = not short.startswith(_NO_CACHE_PREFIXES)
    elif short.startswith("Auto") and short.endswith("Model"):
        generative = None  # AutoModel / AutoPeftModel: any architecture, decoders included
    else:
        generative = None if short.endswith("Model") else False
    if main_input_name is not None:
        main_input = MainInput.INPUT_IDS if main_input_name == "input_ids" else MainInput.OTHER
    elif short in _OTHER_INPUT_AUTO or (
        (short.endswith(_OTHER_INPUT_SUFFIXES) or _OTHER_INPUT_FAMILIES.match(short))
        and not short.startswith(_TEXT_WITH_IMAGE_HEADS)
    ):
        main_input = MainInput.OTHER
    elif short.endswith(_INPUT_IDS_SUFFIXES) or short in ("AutoModelForCausalLM", "AutoPeftModelForCausalLM"):
        main_input = MainInput.INPUT_IDS
    else:
        main_input = MainInput.UNKNOWN
    return ModelClass(name, generative, main_input)


# Auto classes whose families differ in main input, where a literal checkpoint id names the
# family: transformers 5.17 maps AutoModelForSpeechSeq2Seq to Whisper, Speech2Text and
# SeamlessM4T heads (`input_features`) but also to Voxtral or Granite Speech (`input_ids`);
# "openai/whisper-small", "facebook/s2t-small-librispeech-asr" load the former.
_CHECKPOINT_FAMILIES = {
    "AutoModelForSpeechSeq2Seq": re.compile(r"whisper|speech[-_]?to[-_]?text|(^|/)s2t-|seamless-m4t", re.IGNORECASE),
}


def with_checkpoint(model_class: ModelClass, checkpoint: str) -> ModelClass:
    """`model_class` loaded from the literal checkpoint id `checkpoint`: its main input where
    the id names a family the auto class maps to a head taking other inputs."""
    family = _CHECKPOINT_FAMILIES.get(model_class.short_name)
    if model_class.main_input is MainInput.UNKNOWN and family is not None and family.search(checkpoint):
        return replace(model_class, main_input=MainInput.OTHER)
    return model_class


# --- gradient checkpointing: which implementation a configuration really runs -------------
#
# Hugging Face gradient checkpointing: which implementation a configuration really runs.
#
# transformers turns `gradient_checkpointing_kwargs` into `partial(checkpoint, **kwargs)`, and
# applies its own default only when the kwargs are `None`:
#
#     transformers < 5.0:  None -> {"use_reentrant": True}
#     transformers >= 5.0: None -> {"use_reentrant": False}
#     any version:         {"preserve_rng_state": False} (a dict without the key) -> torch's
#                          default, which is reentrant (with torch's warning)
#
# The `Trainer` path differs in one detail: from 5.0 it pops `every_n_layers` / `offload` from
# `TrainingArguments.gradient_checkpointing_kwargs` and passes `kwargs or None`, so `{}` or
# `{"offload": True}` there still gets the library default.

GC_ENABLE = "gradient_checkpointing_enable"
GC_KWARGS = "gradient_checkpointing_kwargs"
# Keys the Trainer (transformers >= 5.0) consumes itself before calling checkpoint.
TRAINER_OWN_KEYS = frozenset({"every_n_layers", "offload"})


class KwargsShape(str, enum.Enum):
    """What `gradient_checkpointing_kwargs` is."""

    DEFAULT = "not given (the library default applies)"
    WITH_FLAG = "a dict with `use_reentrant`"
    WITHOUT_FLAG = "a dict without `use_reentrant`"
    UNKNOWN = "not known statically"


@dataclass(frozen=True)
class HfCheckpointingKwargs:
    """What a `gradient_checkpointing_kwargs` expression is, as far as reentrancy goes."""

    shape: KwargsShape
    flag: Reentrancy = Reentrancy.UNKNOWN  # the literal `use_reentrant` value, for WITH_FLAG
    # The dict (or None) written in the code, if any: a libcst node (`of`), or an `ast` node of
    # the file's tree (`of_ast`, in the steps of `ckptlint.model.script_models`).
    node: object = None

    @classmethod
    def of(cls, value: cst.BaseExpression | None, *, trainer_path: bool = False) -> HfCheckpointingKwargs:
        """What a libcst expression is (the rules'; libcst is imported by the time they ask)."""
        if value is None or (isinstance(value, cst.Name) and value.value == "None"):
            return cls(KwargsShape.DEFAULT, node=value)
        keys: dict[str, cst.BaseExpression] | None = None
        if isinstance(value, cst.Dict):
            keys = {}
            for element in value.elements:
                if not isinstance(element, cst.DictElement) or not isinstance(element.key, cst.SimpleString):
                    return cls(KwargsShape.UNKNOWN, node=value)  # `**other` or a computed key
                keys[element.key.evaluated_value] = element.value
        elif isinstance(value, cst.Call) and isinstance(value.func, cst.Name) and value.func.value == "dict":
            if any(arg.star or arg.keyword is None for arg in value.args):
                return cls(KwargsShape.UNKNOWN, node=value)
            keys = {arg.keyword.value: arg.value for arg in value.args}
        if keys is None:
            return cls(KwargsShape.UNKNOWN, node=value)
        flag = None
        if "use_reentrant" in keys:
            entry = keys["use_reentrant"]
            literal = entry.value if isinstance(entry, cst.Name) and entry.value in ("True", "False") else None
            flag = Reentrancy.UNKNOWN if literal is None else Reentrancy.EXPLICIT_TRUE if literal == "True" else Reentrancy.EXPLICIT_FALSE
        return cls._of_keys(set(keys), flag, value, trainer_path)

    @classmethod
    def of_ast(cls, value: ast.expr | None, *, trainer_path: bool = False) -> HfCheckpointingKwargs:
        """What an `ast` expression is (the project model's script interpreter's)."""
        if value is None or (isinstance(value, ast.Constant) and value.value is None):
            return cls(KwargsShape.DEFAULT, node=value)
        keys: dict[object, ast.expr] | None = None
        if isinstance(value, ast.Dict):
            keys = {}
            for key, entry in zip(value.keys, value.values):
                if not (isinstance(key, ast.Constant) and isinstance(key.value, (str, bytes))):
                    return cls(KwargsShape.UNKNOWN, node=value)  # `**other` or a computed key
                keys[key.value] = entry
        elif isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id == "dict":
            if value.args or any(keyword.arg is None for keyword in value.keywords):
                return cls(KwargsShape.UNKNOWN, node=value)
            keys = {keyword.arg: keyword.value for keyword in value.keywords}
        if keys is None:
            return cls(KwargsShape.UNKNOWN, node=value)
        flag = None
        if "use_reentrant" in keys:
            entry = keys["use_reentrant"]
            literal = entry.value if isinstance(entry, ast.Constant) and isinstance(entry.value, bool) else None
            flag = Reentrancy.UNKNOWN if literal is None else Reentrancy.EXPLICIT_TRUE if literal else Reentrancy.EXPLICIT_FALSE
        return cls._of_keys(set(keys), flag, value, trainer_path)

    @classmethod
    def _of_keys(cls, keys: set, flag: Reentrancy | None, node: object, trainer_path: bool) -> HfCheckpointingKwargs:
        """A dict with these keys (`flag`: its literal `use_reentrant`, None without the key)."""
        if flag is not None:
            return cls(KwargsShape.WITH_FLAG, flag, node)
        if trainer_path and keys <= TRAINER_OWN_KEYS:
            # From 5.0 the Trainer passes `kwargs or None`; before 5.0 these keys did not
            # exist. Either way not a dict torch sees without the flag.
            return cls(KwargsShape.UNKNOWN, node=node)
        return cls(KwargsShape.WITHOUT_FLAG, node=node)

    def reentrancy(self, versions: TargetVersions) -> tuple[Reentrancy, Applies]:
        """The implementation transformers will run, and whether that depends on a version
        that is not known (UNKNOWN: reentrant if the targeted transformers is < 5.0)."""
        if self.shape is KwargsShape.WITH_FLAG:
            return self.flag, Applies.YES
        if self.shape is KwargsShape.WITHOUT_FLAG:
            return Reentrancy.IMPLICIT, Applies.YES
        if self.shape is KwargsShape.DEFAULT:
            applies = versions.applies((REENTRANT_DEFAULT_VERSIONS,))
            if applies is Applies.NO:
                return Reentrancy.EXPLICIT_FALSE, Applies.YES
            return Reentrancy.EXPLICIT_TRUE, applies
        return Reentrancy.UNKNOWN, Applies.YES

    def reentrant_in(self, transformers_5: bool) -> bool | None:
        """Whether transformers before 5.0 (`transformers_5=False`) or from 5.0 on runs these
        kwargs with the reentrant implementation; None when that is not known statically."""
        if self.shape is KwargsShape.WITH_FLAG:
            return None if self.flag is Reentrancy.UNKNOWN else self.flag is Reentrancy.EXPLICIT_TRUE
        if self.shape is KwargsShape.WITHOUT_FLAG:
            return True
        if self.shape is KwargsShape.DEFAULT:
            return not transformers_5
        return None

# --- the Trainer under DDP ---------------------------------------------------------------

# `TrainingArguments(ddp_find_unused_parameters=...)` is what the Trainer hands torch's DDP as
# `find_unused_parameters`; left `None`, it is `not model.is_gradient_checkpointing` for a
# `PreTrainedModel` and True for any other model, a `PeftModel` included (transformers 5.17
# `trainer.py` `_build_accelerator_args`, which also says `or args.gradient_checkpointing`;
# 4.46.3 `trainer.py` `_wrap_model`, line 2003). `ddp_static_graph=True` passes
# `static_graph=True` (5.17). Under DeepSpeed or FSDP the Trainer builds no torch DDP.
TRAINER_DDP_FIND_UNUSED = "ddp_find_unused_parameters"
TRAINER_DDP_STATIC_GRAPH = "ddp_static_graph"
