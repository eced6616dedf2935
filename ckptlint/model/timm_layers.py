"""timm's norm + activation layers, as library facts: which class `get_norm_act_layer`
gives for a norm layer, and which of those keep running statistics.

timm's blocks (`InvertedResidual`, `ConvNormAct`, `BottleneckBlock`...) take a plain
`norm_layer` (`nn.BatchNorm2d` by default) and build their norm with
`get_norm_act_layer(norm_layer, act_layer)(channels)`. The function picks the class by the
norm layer's name (`norm_layer.__name__.lower()` in `_NORM_TO_NORM_ACT_MAP`), by a string
(`"batchnorm"`), or keeps a norm + act class, a function or a partial's target as it is:
nothing the model could evaluate, so its answer is this table. Read in timm 1.0.29.dev0
(`timm/layers/create_norm_act.py:31-145`: `_NORM_ACT_MAP`, `_NORM_TO_NORM_ACT_MAP`,
`get_norm_act_layer`); timm 0.6 (`timm/models/layers/create_norm_act.py`) chose by name
prefix and maps the batch, group and layer norms to the same classes. `BatchNormAct2d` and
`SyncBatchNormAct` subclass `nn.BatchNorm2d` / `nn.SyncBatchNorm` and update the running
statistics in training (`timm/layers/norm_act.py:57,97-98,153`).

A project's own copy of timm's layers (a vendored `timm/` or `create_norm_act.py`) is timm:
the same table answers for it.
"""

from __future__ import annotations

from collections.abc import Iterable

from ckptlint.model.values import ClassRef, Constant, FunctionRef, Value

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
