"""mmcv / mmengine in the library facts: norm layers built from configuration dicts.

OpenMMLab code never names its norm class: `build_norm_layer(dict(type="BN"), c)` returns
`(name, layer)`, `ConvModule(..., norm_cfg=dict(type="BN"))` holds one, and the dict comes
down through constructors (`norm_cfg=dict(type="BN", requires_grad=True)`). What a type name
builds was read in mmcv's source: `mmcv/cnn/bricks/norm.py` registers the same names in 1.7.2
(`NORM_LAYERS`) and 2.2.0 (mmengine's `MODELS`): `BN`/`BN2d` -> `nn.BatchNorm2d`, `BN1d`,
`BN3d`, `SyncBN` -> `nn.SyncBatchNorm` (through `parrots_wrapper`), `GN` -> `nn.GroupNorm`,
`LN` -> `nn.LayerNorm`, `IN`/`IN1d`/`IN2d`/`IN3d` -> `nn.InstanceNorm*`; `mmcv/ops/sync_bn.py`
registers `MMSyncBN`, mmcv's own SyncBatchNorm, whose forward updates `running_mean` /
`running_var` in training like torch's. `build_norm_layer` passes the dict's other keys to
the class (`track_running_stats`, `momentum`) and pops `requires_grad`. `ConvModule` builds
a norm layer exactly when `norm_cfg is not None` (its default is None, in 1.x and 2.x);
`DepthwiseSeparableConvModule` gives its two ConvModules `dw_norm_cfg` / `pw_norm_cfg`, each
`norm_cfg` when left at `'default'`.
"""

from __future__ import annotations

from collections.abc import Iterable

from ckptlint.model.library.torch import CONTAINER_MODULES
from ckptlint.model.form.values import Constant, Instance, Mapping, Value, arguments_of

MMCV_NORM_LAYERS = {
    "BN": "torch.nn.BatchNorm2d",
    "BN1d": "torch.nn.BatchNorm1d",
    "BN2d": "torch.nn.BatchNorm2d",
    "BN3d": "torch.nn.BatchNorm3d",
    "SyncBN": "torch.nn.SyncBatchNorm",
    "MMSyncBN": "mmcv.ops.SyncBatchNorm",
    "GN": "torch.nn.GroupNorm",
    "LN": "torch.nn.LayerNorm",
    "IN": "torch.nn.InstanceNorm2d",
    "IN1d": "torch.nn.InstanceNorm1d",
    "IN2d": "torch.nn.InstanceNorm2d",
    "IN3d": "torch.nn.InstanceNorm3d",
}
# mmcv's own SyncBatchNorm keeps running statistics (`mmcv/ops/sync_bn.py`).
MMCV_NORMS_WITH_RUNNING_STATS = frozenset({"mmcv.ops.SyncBatchNorm", "mmcv.ops.sync_bn.SyncBatchNorm"})

_ROOTS = ("mmcv.", "mmengine.")
# The configuration keys `build_norm_layer` consumes itself.
_NOT_PASSED = frozenset({"type", "requires_grad"})


def is_mmcv(name: str, short: str) -> bool:
    """Whether an absolute name is mmcv's / mmengine's `short` (`mmcv.cnn.ConvModule`,
    `mmcv.cnn.bricks.conv_module.ConvModule`), also in a copy of mmcv a project keeps in
    its tree (`annotator.uniformer.mmcv.cnn.build_norm_layer`)."""
    return (name.startswith(_ROOTS) or ".mmcv." in name) and name.rsplit(".", 1)[-1] == short


def norm_layers(configs: Iterable[Value]) -> set[Instance]:
    """The norm layers `build_norm_layer(cfg, ...)` builds for the configuration dicts
    `configs` may be: one instance per known `type`, built with the dict's constant keys."""
    found: set[Instance] = set()
    for config in configs:
        if not isinstance(config, Mapping):
            continue
        entries = dict(config.entries)
        for kind in entries.get("type", ()):
            if isinstance(kind, Constant) and kind.value in MMCV_NORM_LAYERS:
                passed = [
                    (key, values) for key, values in config.entries
                    if isinstance(key, str) and key not in _NOT_PASSED and values
                    and all(isinstance(v, Constant) for v in values)
                ]
                found.add(Instance(MMCV_NORM_LAYERS[kind.value], arguments_of(passed)))
    return found


# Registries that resolve mmcv's norm type names: mmcv 1.x's `NORM_LAYERS`, mmengine's
# `MODELS` (where mmcv 2.x registers them) and the downstream `MODELS` registries whose
# parent it is (`mmdet.registry.MODELS`, `mmseg.registry.MODELS`, a project's own child).
_NORM_REGISTRIES = ("NORM_LAYERS", "MODELS")


def registered_norm_class(registry: str, key: object) -> str | None:
    """The class a norm registry builds for a type name (`MODELS.build(dict(type="SyncBN"))`)."""
    if registry.rsplit(".", 1)[-1] not in _NORM_REGISTRIES or not isinstance(key, str):
        return None
    return MMCV_NORM_LAYERS.get(key)


def is_norm_registry(registry: str) -> bool:
    return registry.rsplit(".", 1)[-1] in _NORM_REGISTRIES


def norm_layer_name(configs: Iterable[Value], postfix: Iterable[Value]) -> frozenset[Value]:
    """The name `build_norm_layer` returns beside the layer: mmcv's `infer_abbr` of the class
    (`bn` for BatchNorm and SyncBatchNorm, `gn`, `ln`, `in`) and the postfix (`bn1`), when
    the configuration's type and the postfix are known."""
    postfixes = {str(v.value) for v in postfix if isinstance(v, Constant) and isinstance(v.value, (int, str))}
    if not postfixes or len(postfixes) != len(set(postfix)):
        return frozenset()
    kinds = {
        kind.value for config in configs if isinstance(config, Mapping)
        for kind in dict(config.entries).get("type", ()) if isinstance(kind, Constant)
    }
    if not kinds or not kinds <= MMCV_NORM_LAYERS.keys():
        return frozenset()
    abbreviations = {_ABBREVIATIONS[kind.rstrip("123d") if kind.startswith(("BN", "IN")) else kind] for kind in kinds}
    return frozenset(Constant(a + p) for a in abbreviations for p in postfixes)


_ABBREVIATIONS = {"BN": "bn", "SyncBN": "bn", "MMSyncBN": "bn", "GN": "gn", "LN": "ln", "IN": "in"}


# mmcv's conv blocks and the keyword arguments their norm layers are built from.
_CONV_MODULES = {
    "ConvModule": ("norm_cfg",),
    "DepthwiseSeparableConvModule": ("norm_cfg", "dw_norm_cfg", "pw_norm_cfg"),
}


def conv_module_config_keys(name: str) -> tuple[str, ...]:
    """The `*_cfg` keyword arguments that decide what an mmcv conv block holds (kept on its
    `Instance`); empty for any other class."""
    for short, keys in _CONV_MODULES.items():
        if is_mmcv(name, short):
            return keys
    return ()


def conv_module_norms(instance: Instance) -> set[Instance]:
    """The norm layers an mmcv `ConvModule` / `DepthwiseSeparableConvModule` holds, from
    the configuration it was built with (none when `norm_cfg` is left at None)."""
    keys = conv_module_config_keys(instance.cls)
    if not keys:
        return set()
    shared = instance.argument("norm_cfg") or frozenset()
    if keys == ("norm_cfg",):
        return norm_layers(shared)
    found: set[Instance] = set()
    for key in keys[1:]:
        own = instance.argument(key)
        defaulted = own is None or any(isinstance(v, Constant) and v.value == "default" for v in own)
        found |= norm_layers(shared if defaulted else own)
    return found


# Other libraries' containers that are torch's with an `init_cfg` keyword: mmengine's
# (`mmengine/model/base_module.py`: `class ModuleList(BaseModule, nn.ModuleList)`, whose
# `__init__(self, modules=None, init_cfg=None)` hands `modules` to `nn.ModuleList.__init__`;
# `Sequential(*args, init_cfg=None)`, `ModuleDict(modules=None, init_cfg=None)` alike; read at
# mmengine v0.10.x), and mmcv's before 2.0 (`mmcv/runner/base_module.py`, v1.7, the same).
LIBRARY_CONTAINERS = frozenset(
    f"{module}.{name}"
    for module in ("mmengine.model", "mmengine.model.base_module", "mmcv.runner", "mmcv.runner.base_module")
    for name in CONTAINER_MODULES
)
