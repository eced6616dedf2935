from __future__ import annotations

from ckptlint.lazy_libcst import cst

from ckptlint.analysis.region_paths import region_running_stats, shown
from ckptlint.analysis.regions import RegionRule, mentions_checkpointing
from ckptlint.model.library.timm import TIMM_CREATE_MODEL, timm_checkpointed_batchnorm
from ckptlint.model.form.values import Constant, Instance, ordering_key
from ckptlint.types import Severity


class CheckpointedBatchnorm(RegionRule):
    """A checkpointed region holds BatchNorm (or another module with running statistics).

    ## What it does
    Finds checkpoint calls whose region (resolved through the project index, across files:
    `checkpoint(self.block, x)`, `checkpoint(self._forward, x)`, a lambda using `self`, a
    loop over `self.blocks`, `checkpoint_sequential(self.stage, ...)`, `checkpoint_wrapper(block)`
    and the composable `checkpoint(block)` over what `block` can be) holds a
    `BatchNorm1d/2d/3d`, `SyncBatchNorm`, `LazyBatchNorm*`, an `InstanceNorm*` with
    `track_running_stats=True`, or a class listed in the `stateful-modules` setting (e.g.
    `timm.layers.BatchNormAct2d`). The message names the path to the module
    (`Stage.block -> ConvBNAct.bn -> (torch.nn.BatchNorm2d)`). A helper that takes any model
    (`def wrap_blocks(model): ... checkpoint_wrapper(block)`) is resolved at its call sites in
    the project, and the message says where the model came from (`model.blocks (as passed at
    setup.py:40 <- train.py:10)`); a `checkpoint_seq`-style helper, which runs the module it is
    given under checkpoint, is reported at each call site that passes BatchNorm; so are timm's
    own `checkpoint_seq(self.blocks, x)` over the project's modules (every member is recomputed,
    whichever implementation timm picks; with `skip_last` not a literal False, nothing is said:
    read in timm 0.6.13 to 1.0.31) and DeepSpeed's `deepspeed.checkpointing.checkpoint(layer, x)`
    (which runs `layer` again in backward: read in 0.16.4; both in `ckptlint/model/library/combined.py`,
    `LIBRARY_CHECKPOINTING_HELPERS`). Likewise a
    constructor argument without a default (`def __init__(self, dim, norm_layer)`) is what
    the project's constructor calls pass (`Block as constructed at model.py:9`), and one given
    through a keyword dict completed item by item (`ba["norm_layer"] = self.norm_layer`,
    `kwargs.update(norm_layer=...)`, `kwargs.setdefault("norm_layer", ...)`, then
    `InvertedResidual(**ba)`: timm's `EfficientNetBuilder` idiom; the stored class is added to
    what the key held, the store may not run), with the block classes named through a star
    import (`from ._efficientnet_blocks import *`: every public name of that module). timm's `get_norm_act_layer(norm_layer,
    act_layer)` (the library, or a copy kept in the project) builds the norm + act class of
    the norm it is given: BatchNorm2d (or `"batchnorm"`) becomes `BatchNormAct2d`, which keeps
    running statistics; GroupNorm / LayerNorm become their Act versions, which keep none
    (read in timm 1.0.29.dev0, `timm/layers/create_norm_act.py`; `ckptlint/model/library/timm.py`).
    A timm model
    is known by the architecture it is created from: `model.set_grad_checkpointing()` on
    `timm.create_model("resnet50")` (or `efficientnet_b0`, `mobilenetv3_large_100`,
    `regnety_040`, `densenet121`, ...: 40 families, `ckptlint/model/library/timm.py`) is
    reported; ConvNeXt, ViT, Swin, `resnet50_gn` and other GroupNorm/LayerNorm variants are
    not, nor a name only known at runtime (`create_model(args.model)`). A torchvision model
    is known by its builder: `checkpoint(resnet.layer1, x)` on `torchvision.models.resnet50()`
    (ResNet / ResNeXt / Wide ResNet, DenseNet, VGG-BN, MobileNet v2/v3, EfficientNet, RegNet,
    ShuffleNet v2, MNASNet: which children hold BatchNorm was read by building each with
    torchvision 0.29.1, `TORCHVISION_MODELS` in `ckptlint/model/library/torchvision.py`).
    An architecture a run picks by name from a module of the project
    (`getattr(models, args.arch)()`, `models.__dict__[args.arch]()`, `vars(models)[name]()`)
    may be any public class or function that module defines (a package's `__init__`: also
    those it imports from the project); the region is reported when one of them puts
    BatchNorm in it, and nothing is said when none does (a module of GroupNorm networks).
    A factory taking a class or a name (timm's `get_norm_layer`: `if isinstance(norm_layer,
    str): norm_layer = _NORM_MAP[name]`) hands a class through: its table's BatchNorm is not
    among what `get_norm_layer(nn.GroupNorm)` gives. A class an object keeps and calls later
    is followed too: `self.norm_layer(dim)` in a helper method, or a field of a dataclass of
    layer factories handed to the blocks (`layers.conv_norm_act(...)`, timm's `LayerFn`).

    OpenMMLab code is read through mmcv's library facts (`ckptlint/model/openmmlab.py`):
    `build_norm_layer(norm_cfg, c)` builds the class its `type` names (`BN`, `SyncBN`,
    `MMSyncBN`: running statistics; `GN`, `LN`, `IN`: none), registered under the name it
    returns and read back through a `@property` (`self.norm1`); `ConvModule(...,
    norm_cfg=dict(type="BN"))` and `DepthwiseSeparableConvModule` hold one (none with
    `norm_cfg=None`, their default); `norm_cfg` is followed down constructors with its
    default (`dict(type="BN", requires_grad=True)`), so the mm* `with_cp` idiom
    (`if self.with_cp and x.requires_grad: out = cp.checkpoint(_inner_forward, x)`) over
    such a block is reported. A block below a backbone whose `train()` puts every BatchNorm
    in eval mode (`if mode and self.norm_eval: for m in self.modules(): if isinstance(m,
    _BatchNorm): m.eval()`, in the class or a base) is not, when `norm_eval` defaults to
    True and no constructor call of the project (its tests aside) sets it to False; the
    blocks below it are followed through class attributes (`arch_settings = {50:
    (Bottleneck, ...)}`), `nn.Sequential` subclasses filled by `super().__init__(*layers)`
    and `self.__setattr__(name, layer)`. Likewise a module the project hands to a helper
    that puts every BatchNorm below its argument in eval mode (`def freeze_bn(m): for x in
    m.modules(): if isinstance(x, nn.BatchNorm2d): x.eval()`, called as `freeze_bn(head)`),
    and the modules below it; a helper that only reads them (counts them) freezes nothing.
    The same for a module the project runs such a function on with `Module.apply`
    (`model.apply(set_bn_eval)` after `model.train()`, where `set_bn_eval(m)` puts `m` in eval
    mode when `isinstance(m, _BatchNorm)` or its class name holds "BatchNorm"), and for one
    whose BatchNorms are replaced by frozen copies: detectron2's
    `FrozenBatchNorm2d.convert_frozen_batchnorm(model)`, timm's `freeze_batch_norm_2d(model)`,
    or a project function of the same shape (a BatchNorm replaced by a `Frozen...Norm`, the
    children walked). A function that only sets `requires_grad=False` on them, initialises
    them, or converts them to `SyncBatchNorm` freezes nothing.

    A checkpoint behind `if self.<flag>` (the mm* `if self.with_cp and x.requires_grad:`, or
    the `else` of `if not self.use_checkpoint:`) in a class the project builds only with
    that flag off is not reported: the constructor stores a parameter defaulting to False,
    every construction leaves it out or passes False, at least one of them explicitly
    (`SpatialPrior(64, embed_dim, with_cp=False)`), so the region never runs. It is reported
    when a construction passes True (by keyword or by position), passes the builder's own
    parameter on (`with_cp=with_cp`: a config may set it), when the class is only ever built
    with its defaults (the flag is a switch for whoever builds it), registered, held as a
    value, or subclassed in the project. The same holds for CKPT011 and CKPT033.

    ## Why is this bad?
    In training mode BatchNorm updates `running_mean`, `running_var` and
    `num_batches_tracked` on every forward. The recomputation in backward is a second
    forward: the statistics are updated twice per step with the same batch (momentum applied
    twice, `num_batches_tracked` counts double), so the model evaluates with statistics that
    differ from the ones training without checkpointing produces. SyncBatchNorm also
    all-reduces again in backward.

    ## Example
    ```python
    x = checkpoint(self.conv_bn_act, x, use_reentrant=False)
    ```

    ## Use instead
    Checkpoint the convolutions and keep the BatchNorm outside the region, or use
    GroupNorm/LayerNorm, or put BatchNorm in eval mode (frozen statistics) when fine-tuning.

    Not reported for GroupNorm/LayerNorm/RMSNorm, `track_running_stats=False`, a BatchNorm
    the region's own code puts in eval mode (`self.bn.eval()`), or regions that cannot be
    resolved. No fix.

    ## Evidence
    torch 2.13 (CPU): a `Conv2d -> BatchNorm2d` block run once in training through
    `checkpoint` ends the step with `num_batches_tracked == 2` with either implementation
    (1 without checkpointing), and `running_mean` moved twice (`tests/test_closure_rules.py`).
    timm 1.0.29.dev0, read model by model: `ResNet.forward_features` runs
    `checkpoint_seq([self.layer1, ..., self.layer4], x)` when `grad_checkpointing` is set
    (`timm/models/resnet.py:750`), its blocks built with `norm_layer=nn.BatchNorm2d`;
    `EfficientNet` and `MobileNetV3` checkpoint `self.blocks` of `BatchNormAct2d` layers
    (`efficientnet.py:323`, `mobilenetv3.py:306`); each family's line is in
    `model/library/timm.py`, and every regex there was checked against all 1,302 names
    registered in `timm/models`.
    mmcv 1.7.2 and 2.2.0 (`mmcv/cnn/bricks/norm.py`, `conv_module.py`, read): the registered
    norm type names and what they build, `build_norm_layer`'s `(abbreviation + postfix,
    layer)` and `ConvModule`'s `with_norm = norm_cfg is not None`; the freezing `train()` is
    mmdet's / mmseg's `ResNet.train` (norm_eval: True in mmdet's ResNet, False in mmseg's,
    mmpose's and mmaction2's).
    torch 2.13 (CPU): a BatchNorm put in eval mode by `model.apply(set_bn_eval)` after
    `model.train()` and run under `checkpoint` keeps `num_batches_tracked == 0`; one whose
    parameters only have `requires_grad=False` still counts 1 per forward. detectron2
    (`detectron2/layers/batch_norm.py`) and timm (`timm/layers/norm_act.py`), read: their
    converters replace `BatchNorm2d` / `SyncBatchNorm` by `FrozenBatchNorm2d`, which holds
    buffers only and updates none.
    `checkpoint_sequential(seq, segments, x)` checkpoints the first `segments - 1` segments
    of `len(seq) // segments` members and runs the rest plainly: a BatchNorm there is updated
    once (measured: 1 in the last segment, 2 in the first), so with `seq` written member by
    member and `segments` a literal, only the checkpointed members count.
    """

    code = "CKPT010"
    severity = Severity.ERROR
    name = "checkpointed-batchnorm"
    message = "a checkpointed region holds BatchNorm"

    @classmethod
    def may_apply_to_project(cls, project, relative_path, settings, text) -> bool:
        return mentions_checkpointing(project, relative_path, settings, text) or (
            "set_grad_checkpointing" in text and "timm" in text
        )

    def finish(self) -> None:
        super().finish()
        for call in self._calls:
            if isinstance(call.func, cst.Attribute) and call.func.attr.value == "set_grad_checkpointing" and _enables(call):
                self._check_timm_model(call)

    def _check_timm_model(self, call: cst.Call) -> None:
        """`model.set_grad_checkpointing()` on `timm.create_model("<architecture>")` of a family
        whose checkpointed stages hold BatchNorm (`library.TIMM_BATCHNORM_CHECKPOINTED`)."""
        _, values = self.values_at(call, call.func.value)
        for value in sorted((v for v in values if isinstance(v, Instance) and v.cls in TIMM_CREATE_MODEL), key=ordering_key):
            names = sorted(c.value for _, found in value.arguments for c in found if isinstance(c, Constant))
            for name in names:
                family = timm_checkpointed_batchnorm(name)
                if family is None:
                    continue
                source, _ = family
                self.report(
                    call,
                    f"`set_grad_checkpointing` makes timm's `{name}` checkpoint blocks that hold BatchNorm ({source}): "
                    "in training their statistics are updated twice per step; checkpoint only with the BatchNorm "
                    "layers frozen (in eval mode), or pick an architecture with GroupNorm/LayerNorm",
                )
                return

    def check_region(self, node, region, api) -> None:
        project = self.context.project
        if region.owner is not None and region.owner in project.denotation.batchnorm_frozen_classes():
            return  # below a backbone whose `train()` keeps BatchNorm in eval mode (`norm_eval=True`)
        paths = region_running_stats(region, project, frozenset(self.context.settings.stateful_modules))
        if not paths:
            return
        self.report(
            node,
            f"`{api}` recomputes a region holding modules with running statistics ({shown(paths)}): in "
            "training their statistics are updated twice per step (and SyncBatchNorm all-reduces again in backward); "
            "keep BatchNorm outside the checkpointed region, or use GroupNorm/LayerNorm",
        )


def _enables(call: cst.Call) -> bool:
    """`set_grad_checkpointing(enable=True)` (timm's default) unless a literal False is passed."""
    given = next((a.value for a in call.args if a.keyword is None or a.keyword.value == "enable"), None)
    return not (isinstance(given, cst.Name) and given.value == "False")
