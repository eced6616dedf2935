"""timm's behaviour as data: its checkpointing helper, DropPath, its norm + activation
layers, and its architectures whose checkpointed blocks hold BatchNorm."""

from __future__ import annotations

import re
from collections.abc import Iterable

from ckptlint.model.form.values import ClassRef, Constant, FunctionRef, Value
from ckptlint.model.library.torch import CheckpointingHelper

# DropPath (`timm/layers/drop.py`) draws one mask per sample in training; `drop_path` with a
# probability (the second positional argument) draws none at 0.
TIMM_RANDOM_MODULES = frozenset({"timm.layers.DropPath", "timm.models.layers.DropPath", "timm.layers.drop.DropPath"})
TIMM_DROPOUT_FUNCTIONS = frozenset({"timm.layers.drop_path", "timm.layers.drop.drop_path"})

# timm's `checkpoint_seq(functions, x, every=1, flatten=False, skip_last=False, ...)` runs the
# members of `functions` (an `nn.Sequential`'s children, a list, `self.children()`) through
# `torch.utils.checkpoint.checkpoint` in segments of `every`; `skip_last=True` runs the last
# one plainly. Read in timm 0.6.13 (`timm/models/helpers.py:704`, not exported by
# `timm.models`), 0.9.16 and 1.0.9 (`timm/models/_manipulate.py:186`, exported by
# `timm.models`, and by `timm.models.helpers` through `from ._manipulate import *`), 1.0.15 and
# 1.0.31 (`_manipulate.py:212`, `:214`). Up to 1.0.9 it passes only `preserve_rng_state`
# (torch's reentrant default); 1.0.31 passes `use_reentrant=use_reentrant_ckpt()`, False unless
# TIMM_REENTRANT_CKPT is set (`timm/layers/config.py`): either way, the same is recomputed.
TIMM_CHECKPOINTING_HELPERS = {
    name: CheckpointingHelper(0, leaves_out=("skip_last", 4))
    for name in (
        "timm.models.checkpoint_seq", "timm.models._manipulate.checkpoint_seq", "timm.models.helpers.checkpoint_seq",
    )
}


# --- norm + activation layers --------------------------------------------------------------
#
# timm's norm + activation layers, as library facts: which class `get_norm_act_layer`
# gives for a norm layer, and which of those keep running statistics.
#
# timm's blocks (`InvertedResidual`, `ConvNormAct`, `BottleneckBlock`...) take a plain
# `norm_layer` (`nn.BatchNorm2d` by default) and build their norm with
# `get_norm_act_layer(norm_layer, act_layer)(channels)`. The function picks the class by the
# norm layer's name (`norm_layer.__name__.lower()` in `_NORM_TO_NORM_ACT_MAP`), by a string
# (`"batchnorm"`), or keeps a norm + act class, a function or a partial's target as it is:
# nothing the model could evaluate, so its answer is this table. Read in timm 1.0.29.dev0
# (`timm/layers/create_norm_act.py:31-145`: `_NORM_ACT_MAP`, `_NORM_TO_NORM_ACT_MAP`,
# `get_norm_act_layer`); timm 0.6 (`timm/models/layers/create_norm_act.py`) chose by name
# prefix and maps the batch, group and layer norms to the same classes. `BatchNormAct2d` and
# `SyncBatchNormAct` subclass `nn.BatchNorm2d` / `nn.SyncBatchNorm` and update the running
# statistics in training (`timm/layers/norm_act.py:57,97-98,153`).
#
# A project's own copy of timm's layers (a vendored `timm/` or `create_norm_act.py`) is timm:
# the same table answers for it.

_SHORT_NAME = "get_norm_act_layer"

# `_NORM_TO_NORM_ACT_MAP` (a class, by its lowercased name) and `_NORM_ACT_MAP` (a string,
# `_` removed, lowercased, up to a `-`), the norm + act layers of `timm.layers.norm_act`.
_BY_CLASS_NAME = {
    "batchnorm": "BatchNormAct2d", "batchnorm2d": "BatchNormAct2d",
    "groupnorm": "GroupNormAct", "groupnorm1": "GroupNorm1Act",
    "layernorm": "LayerNormAct", "layernorm2d": "LayerNormAct2d",
    "layernormfp32": "LayerNormActFp32", "layernorm2dfp32": "LayerNormAct2dFp32",
    "rmsnorm": "RmsNormAct", "rmsnorm2d": "RmsNormAct2d",
    "rmsnormfp32": "RmsNormActFp32", "rmsnorm2dfp32": "RmsNormAct2dFp32",
}
_BY_STRING = {key: value for key, value in _BY_CLASS_NAME.items() if not key.startswith("rms")}
NORM_ACT_CLASSES = frozenset(_BY_CLASS_NAME.values()) | {"SyncBatchNormAct", "FrozenBatchNormAct2d"}

# The norm + act layers that update running statistics in training, under the names timm
# exports them by (for `NORMS_WITH_RUNNING_STATS`).
NORM_ACT_WITH_RUNNING_STATS = frozenset(
    f"{module}.{name}"
    for module in ("timm.layers", "timm.layers.norm_act", "timm.models.layers", "timm.models.layers.norm_act")
    for name in ("BatchNormAct2d", "SyncBatchNormAct")
)


def is_norm_act_factory(name: str) -> bool:
    """Whether an absolute function name is timm's `get_norm_act_layer` (`timm.layers`,
    `timm.models.layers`, their `create_norm_act` modules), also in a copy of timm's layers
    a project keeps in its tree."""
    if name.rsplit(".", 1)[-1] != _SHORT_NAME:
        return False
    parts = name.split(".")
    return "timm" in parts or "create_norm_act" in parts


def norm_act_layers(factory: str, norm_layers: Iterable[Value]) -> set[Value]:
    """What `get_norm_act_layer(norm_layer)` (`factory`, its absolute name) gives for each
    value `norm_layer` may be: the norm + act class of a norm class (with what a `partial`
    of it binds) or of a string, from the `norm_act` module beside the factory's
    (`timm.layers.norm_act`, or a project copy's); a norm + act class or a function as it
    is. A class timm has no norm + act layer for raises there: nothing."""
    package = factory.rsplit(".", 1)[0].removesuffix(".create_norm_act")
    norm_act_module = f"{package}.norm_act"
    found: set[Value] = set()
    for value in norm_layers:
        if isinstance(value, ClassRef):
            short = value.name.rsplit(".", 1)[-1]
            if short in NORM_ACT_CLASSES:
                found.add(value)
            elif (target := _BY_CLASS_NAME.get(short.lower())) is not None:
                found.add(ClassRef(f"{norm_act_module}.{target}", value.bound))
        elif isinstance(value, Constant) and isinstance(value.value, str) and value.value:
            key = value.value.replace("_", "").lower().split("-")[0]
            if (target := _BY_STRING.get(key)) is not None:
                found.add(ClassRef(f"{norm_act_module}.{target}"))
        elif isinstance(value, FunctionRef):
            found.add(value)  # a function that builds a norm + act layer itself
    return found


# --- architectures whose checkpointed blocks hold BatchNorm -----------------------------
#
# timm's architectures whose checkpointed blocks hold BatchNorm: data for
# `timm_checkpointed_batchnorm`, with what `timm.create_model` is called.
#
# Read in timm 1.0.29.dev0 (pytorch-image-models, commit aa4b5850), model by model: what
# `forward_features` runs through `checkpoint_seq` / `checkpoint` once
# `set_grad_checkpointing(True)` sets `self.grad_checkpointing`, built with the constructor
# defaults and each `@register_model` function's arguments. Each entry is (a regex over the
# architecture names `create_model` accepts, without the pretrained tag; the file; where the
# BatchNorm is and which call checkpoints it). Checked mechanically against every name
# registered in `timm/models/*.py` (1,302): no regex matches a name of another file, and the
# variants that swap the norm (`resnet50_gn`, `regnety_040_sgn`, `*_evos`, `resnetv2_*_bit`,
# `maxxvit*`, the `vit_*_r26/r50` hybrids) are left out. Not listed: families whose
# `set_grad_checkpointing(True)` raises (`cspnet`, `dla`, `vgg`, ... assert it is not
# supported), LayerNorm / GroupNorm families (ViT, ConvNeXt, Swin, ...), `volo` (BatchNorm
# only in the unchecked stem), `rdnet` (the flag is never read). A model built with
# `features_only=True` checkpoints its backbone's children whatever the family: not covered.

TIMM_BATCHNORM_CHECKPOINTED: tuple[tuple[str, str, str], ...] = (
    # ---- ResNet family (timm/models/resnet.py ResNet; BN default norm_layer=nn.BatchNorm2d) ----
    (r"^(?:(?:eca|se)?res(?:net|next)(?:aa|blur|rs)?\d+[cdst]?(?:_\d+x\d+d|_pruned)?"
     r"|ecaresnetlight|senet154|test_resnet|wide_resnet(?:50|101)_2)$",
     "timm/models/resnet.py",
     "ResNet.forward_features: checkpoint_seq([layer1..layer4]) (resnet.py:750-751); blocks use norm_layer=nn.BatchNorm2d (resnet.py:487,99,209). Excludes resnet50_gn (GroupNorm)."),
    (r"^res2ne(?:t\d+(?:_\d+w_\d+s|d)|xt50)$",
     "timm/models/res2net.py",
     "Built as resnet.ResNet (res2net.py:132) with Bottle2neck blocks using ResNet's BatchNorm2d norm_layer; layer1..4 checkpointed (resnet.py:751)."),
    (r"^resnest\d+[de](?:_\d+s\d+x\d+d)?$",
     "timm/models/resnest.py",
     "Built as resnet.ResNet with ResNestBottleneck (norm_layer=nn.BatchNorm2d, resnest.py:42); layer1..4 checkpointed (resnet.py:751)."),
    (r"^skres(?:net|next)\d+d?(?:_32x4d)?$",
     "timm/models/sknet.py",
     "Built as resnet.ResNet with SelectiveKernel blocks (norm_layer=nn.BatchNorm2d, sknet.py:39,116); layer1..4 checkpointed (resnet.py:751)."),
    (r"^resnetv2_(?:18|34|50|101|152)[dt]?$",
     "timm/models/resnetv2.py",
     "ResNetStage.forward checkpoint_seq(self.blocks) (resnetv2.py:454-455); these variants pass norm_layer=BatchNormAct2d (resnetv2.py:1055-1142). _bit/_gn/_evos/_frn variants excluded."),
    # ---- EfficientNet / MobileNet family ----
    (r"^(?!(?:efficientnet_b[03](?:_g8)?_gn|test_efficientnet_(?:gn|ln|evos))$)"
     r"(?:(?:tf_|gc_)?efficientnet\w*|test_efficientnet\w*|(?:tf_)?mixnet_\w+|(?:se)?mnasnet_\w+|spnasnet_100"
     r"|mobilenetv[12]_\w+|mobilenet_edgetpu\w*|fbnetc_100|tinynet_[a-e])$",
     "timm/models/efficientnet.py",
     "EfficientNet.forward_features checkpoint_seq(self.blocks, flatten=True) (efficientnet.py:323-324); blocks built with norm_layer default nn.BatchNorm2d -> BatchNormAct2d (efficientnet.py:127-128, _gen_* norm_layer=partial(nn.BatchNorm2d)). NB efficientnet_b0_g16_evos is BN (evos norm commented out, efficientnet.py:2187)."),
    (r"^(?:(?:tf_)?mobilenetv3_\w+|mobilenetv4_\w+|fbnetv3_[bdg]|lcnet_\d+)$",
     "timm/models/mobilenetv3.py",
     "MobileNetV3.forward_features checkpoint_seq(self.blocks, flatten=True) (mobilenetv3.py:306-307); norm_layer default nn.BatchNorm2d -> BatchNormAct2d (mobilenetv3.py:95-96)."),
    (r"^hardcorenas_[a-f]$",
     "timm/models/hardcorenas.py",
     "Builds mobilenetv3.MobileNetV3 with norm_layer=partial(nn.BatchNorm2d) (hardcorenas.py:11,29); blocks checkpointed (mobilenetv3.py:306-307)."),
    # ---- RegNet ----
    (r"^regnet[vxyz]_\d{3,4}(?:_tv|_h)?$",
     "timm/models/regnet.py",
     "RegStage.forward checkpoint_seq(self.children()) (regnet.py:545-546); RegNetCfg.norm_layer='batchnorm' (regnet.py:62). Excludes regnety_040_sgn (GroupNormAct, regnet.py:977-979)."),
    # ---- DenseNet ----
    (r"^densenet(?:blur)?\d+d?$",
     "timm/models/densenet.py",
     "DenseLayer.call_checkpoint_bottleneck checkpoint(closure) over bottleneck_fn = conv1(norm1(cat)) with norm_layer=BatchNormAct2d (densenet.py:34,52,62-80,98)."),
    # ---- ByobNet-based (byobnet.py / byoanet.py / mobilevit.py) ----
    (r"^(?:gernet_[lms]|repvgg_\w+|resnet[56]1q|(?:gc|se|eca_|bat_)?resnext26ts|(?:gc|se|eca_)?resnet3[23]ts"
     r"|gcresnet50t|gcresnext50ts|regnetz_(?:b16|c16|d32|d8|e8)|mobileone_s\d"
     r"|resnet(?:50|101|50x4|50x16|50x64)_clip(?:_gap)?|resnet50_mlp|test_byobnet)$",
     "timm/models/byobnet.py",
     "ByobNet.forward_features checkpoint_seq(self.stages) (byobnet.py:1759-1760); ByoModelCfg.norm_layer='batchnorm' (byobnet.py:106). Excludes regnetz_*_evos (EvoNorm2dS0a, byobnet.py:2214-2249)."),
    (r"^(?:(?:eca_|se)?bot(?:net|next)\d+ts?_256|halo2botnet50ts_256|lamhalobotnet50ts_256|eca_halonext26ts"
     r"|halonet(?:26t|50ts|_h1)|sehalonet33ts|haloregnetz_b|lambda_resnet(?:26rpt_256|26t|50ts))$",
     "timm/models/byoanet.py",
     "Built as byobnet.ByobNet (byoanet.py:277-278), no norm_layer override -> 'batchnorm' in bottleneck/self-attn blocks; stages checkpointed (byobnet.py:1759-1760)."),
    (r"^mobilevit(?:_x{0,2}s|v2_\d{3})$",
     "timm/models/mobilevit.py",
     "Built as byobnet.ByobNet (mobilevit.py:576-586); conv/IR blocks use ByoModelCfg norm 'batchnorm' (only transformer_norm_layer is LN); stages checkpointed (byobnet.py:1759-1760)."),
    # ---- other CNNs ----
    (r"^convmixer_\d+_\d+(?:_ks9_p14)?$",
     "timm/models/convmixer.py",
     "ConvMixer.forward_features checkpoint_seq(self.blocks) (convmixer.py:92-93); each block has nn.BatchNorm2d (convmixer.py:41)."),
    (r"^cpubone_\w+$",
     "timm/models/cpubone.py",
     "CPUBone.forward_features checkpoint_seq(self.stages) (cpubone.py:853-854); stages built from FusedMBConv/MBConv/ConvLayer with norm_layer nn.BatchNorm2d (cpubone.py:527,738-771)."),
    (r"^ghostnet(?:v[23])?_\d{3}$",
     "timm/models/ghostnet.py",
     "GhostNet.forward_features checkpoint_seq(self.blocks, flatten=True) (ghostnet.py:824-825); GhostModule/GhostBottleneck use nn.BatchNorm2d (ghostnet.py:57,396,422)."),
    (r"^repghostnet_\d{3}$",
     "timm/models/repghost.py",
     "RepGhostNet.forward_features checkpoint_seq(self.blocks, flatten=True) (repghost.py:403-404); RepGhostModule/Bottleneck use nn.BatchNorm2d (repghost.py:50-65,176)."),
    (r"^(?:hgnet_(?:tiny|small|base)|hgnetv2_b[0-6])$",
     "timm/models/hgnet.py",
     "HighPerfGpuStage.forward checkpoint_seq(self.blocks) (hgnet.py:390-391); ConvBNAct has nn.BatchNorm2d (hgnet.py:69)."),
    (r"^rexnetr?_\d{3}$",
     "timm/models/rexnet.py",
     "RexNet.forward_features checkpoint_seq(self.features) (rexnet.py:449-450); LinearBottleneck uses ConvNormAct (default BatchNorm2d) (rexnet.py:77-98)."),
    (r"^tresnet_(?:m|l|xl|v2_l)$",
     "timm/models/tresnet.py",
     "TResNet.forward_features checkpoint_seq([layer1..layer4]) (tresnet.py:332-340); blocks use ConvNormAct with default BatchNorm2d (tresnet.py:45-111)."),
    (r"^(?:vovnet(?:39|57)a|eca_vovnet39b|ese_vovnet(?:19b_(?:dw|slim|slim_dw)|39b|57b|99b))$",
     "timm/models/vovnet.py",
     "OsaStage.forward checkpoint_seq(self.blocks) (vovnet.py:162-163); OsaBlock norm_layer=BatchNormAct2d (vovnet.py:55,121,178). Excludes ese_vovnet39b_evos (EvoNorm)."),
    (r"^xception(?:41|65|71)p?$",
     "timm/models/xception_aligned.py",
     "XceptionAligned.forward_features checkpoint_seq(self.blocks) (xception_aligned.py:330-331); registered norm_layer=nn.BatchNorm2d (xception_aligned.py:403-462)."),
    (r"^fasternet_(?:t[0-2]|[sml])$",
     "timm/models/fasternet.py",
     "FasterNetStage.forward checkpoint_seq(self.blocks) (fasternet.py:153-154); MLPBlock norm_layer=nn.BatchNorm2d (fasternet.py:73,84)."),
    (r"^starnet_s\w+$",
     "timm/models/starnet.py",
     "StarNet.forward_features checkpoint_seq(self.stages) (starnet.py:252-253); Block ConvBN(with_bn=True) nn.BatchNorm2d (starnet.py:46,62-65)."),
    (r"^inception_next_(?:atto|tiny|small|base)$",
     "timm/models/inception_next.py",
     "MetaNeXtStage.forward checkpoint_seq(self.blocks) (inception_next.py:243-244); MetaNeXtBlock norm_layer default nn.BatchNorm2d (inception_next.py:162,174,277)."),
    # ---- hybrid conv/attention models with BN ----
    (r"^(?:coatnet|maxvit)_\w+$",
     "timm/models/maxxvit.py",
     "MaxxVitStage.forward checkpoint_seq(self.blocks) (maxxvit.py:1261-1262); MbConvBlock uses conv_cfg.norm_layer -> 'batchnorm2d' for block_type 'mbconv' (maxxvit.py:145-147,553). maxxvit*/coatnext use ConvNeXt/LN conv blocks -> excluded."),
    (r"^levit_\w+$",
     "timm/models/levit.py",
     "Levit.forward_features checkpoint_seq(self.stages) (levit.py:858-859); LinearNorm/ConvNorm contain BatchNorm1d/2d (levit.py:60,93)."),
    (r"^efficientformer_l[137]$",
     "timm/models/efficientformer.py",
     "EfficientFormerStage.forward checkpoint_seq(self.blocks) (efficientformer.py:380-381); MetaBlock2d -> ConvMlpWithNorm norm_layer=nn.BatchNorm2d (efficientformer.py:208,218,281)."),
    (r"^efficientformerv2_(?:s[012]|l)$",
     "timm/models/efficientformer_v2.py",
     "EfficientFormerV2Stage.forward checkpoint_seq(self.blocks) (efficientformer_v2.py:634-635); ConvNorm/ConvMlpWithNorm norm 'batchnorm2d' (efficientformer_v2.py:80,433,651)."),
    (r"^efficientvit_[bl]\d$",
     "timm/models/efficientvit_mit.py",
     "EfficientVit/EfficientVitLarge.forward_features checkpoint_seq(self.stages) (efficientvit_mit.py:901-902,1064-1065); ConvNormAct/MBConv/LiteMLA norm nn.BatchNorm2d (efficientvit_mit.py:60,194,305,765,923)."),
    (r"^efficientvit_m\d$",
     "timm/models/efficientvit_msra.py",
     "EfficientVitMsra.forward_features checkpoint_seq(self.stages) (efficientvit_msra.py:646-647); ConvNorm has nn.BatchNorm2d (efficientvit_msra.py:43)."),
    (r"^fastvit_\w+$",
     "timm/models/fastvit.py",
     "FastVitStage.forward checkpoint_seq(self.blocks) (fastvit.py:1164-1165); RepMixer MobileOneBlock BN branches (fastvit.py:115,122) + ConvMlp ConvNormAct BN (fastvit.py:793) in every variant (mci3/mci4 LayerNorm2d only affects attention blocks)."),
    (r"^nextvit_(?:small|base|large)$",
     "timm/models/nextvit.py",
     "NextViT.forward_features checkpoint_seq(self.stages) + NextStage checkpoint_seq(self.blocks) (nextvit.py:492-493,696-697); norm_layer nn.BatchNorm2d/BatchNorm1d (nextvit.py:198,262,337,514)."),
    (r"^repvit_m\w+$",
     "timm/models/repvit.py",
     "RepVit.forward_features checkpoint_seq(self.stages) (repvit.py:517-518); ConvNorm/RepVggDw nn.BatchNorm2d (repvit.py:49,126)."),
    (r"^shvit_s[1-4]$",
     "timm/models/shvit.py",
     "StageBlock.forward checkpoint_seq(self.blocks) (shvit.py:277-278); BasicBlock conv/FFN/SHSA use Conv2dNorm with nn.BatchNorm2d (shvit.py:68,168-170,200,232)."),
    (r"^swiftformer_(?:xs|s|l1|l3)$",
     "timm/models/swiftformer.py",
     "Stage.forward checkpoint_seq(self.blocks) (swiftformer.py:337-338); ConvEncoder/LocalRepresentation/Mlp norm_layer nn.BatchNorm2d (swiftformer.py:86,125,203,243)."),
    (r"^tiny_vit_\w+$",
     "timm/models/tiny_vit.py",
     "TinyVit.forward_features checkpoint_seq(self.stages) (tiny_vit.py:704-705); ConvNorm (nn.BatchNorm2d, tiny_vit.py:46) in MBConv, PatchMerging and TinyVitBlock.local_conv (tiny_vit.py:102-138,383)."),
    (r"^visformer_(?:tiny|small)$",
     "timm/models/visformer.py",
     "Visformer.forward_features checkpoint_seq(self.stage1/2/3) (visformer.py:443-464); registered configs pass norm_layer=nn.BatchNorm2d (visformer.py:511,521) (class default is LayerNorm2d)."),
    (r"^xcit_\w+$",
     "timm/models/xcit.py",
     "Xcit.forward_features checkpoint(blk, x, Hp, Wp) over XCABlocks (xcit.py:618-619); XCABlock.local_mp = LPI with hard-coded nn.BatchNorm2d (xcit.py:158,327)."),
    (r"^vit_(?:small|base)_resnet(?:26d|50d(?:_s16)?)_224$",
     "timm/models/vision_transformer_hybrid.py",
     "VisionTransformer.set_grad_checkpointing -> HybridEmbed.set_grad_checkpointing -> backbone (resnet26d/50d features_only FeatureListNet) (vision_transformer.py:985-987, layers/hybrid_embed.py:201-203); FeatureDictNet._collect checkpoints every child but first/last incl. bn1, layer1.. (BN) (_features.py:292-297)."),
    # Deprecated names `create_model` still accepts, redirected to the families above
    # (`register_model_deprecations`: `gluon_resnet50_v1b` -> `resnet50.gluon_in1k`).
    (r"^(?:(?:gluon|ssl|swsl|tv|ig)_res(?:net|next)\w+|gluon_se(?:net154|resnext\w+)|seresnext26tn_32x4d"
     r"|tv_densenet121|regnetz_040h|tresnet_(?:[lm]|xl)_448|tresnet_m_miil_in21k"
     r"|mobilevitv2_(?:150|175|200)(?:_384)?_in22ft1k)$",
     "timm/models/{resnet,densenet,regnet,tresnet,mobilevit}.py",
     "deprecated names redirecting to BN-checkpointed models (e.g. gluon_resnet50_v1b -> resnet50.gluon_in1k)"),
)


# `timm.create_model(model_name, pretrained=False, ...)` (timm 1.0 `timm/models/_factory.py`):
# the model is named by its architecture (`resnet50`, `resnet50.a1_in1k`, `hf-hub:timm/...`).
TIMM_CREATE_MODEL = frozenset({"timm.create_model", "timm.models.create_model", "timm.models._factory.create_model"})


def timm_checkpointed_batchnorm(model_name: str) -> tuple[str, str] | None:
    """(source file, evidence) when timm's `model_name` (`resnet50`, `resnet50.a1_in1k`,
    `timm/resnet50.a1_in1k`, `hf-hub:timm/resnet50.a1_in1k`) checkpoints BatchNorm."""
    name = model_name
    for prefix in ("hf-hub:", "hf_hub:"):
        if name.startswith(prefix):
            name = name[len(prefix):]
            if not name.startswith("timm/"):
                return None  # another organisation's repository: its architecture is in its config
    name = name.removeprefix("timm/").split(".", 1)[0]
    for pattern, source, evidence in TIMM_BATCHNORM_CHECKPOINTED:
        if re.fullmatch(pattern, name):
            return source, evidence
    return None
