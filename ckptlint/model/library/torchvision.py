"""torchvision's models as data: which children of the model a builder returns hold
BatchNorm or draw random numbers."""

from __future__ import annotations

import re

# torchvision's model builders (`torchvision.models.resnet50(weights=...)`) and which of the
# model's children hold BatchNorm or draw random numbers in training (Dropout with p > 0,
# `StochasticDepth`): read by building each with `weights=None` (torchvision 0.29.1 on torch
# 2.13). Builders not listed (GoogLeNet, Inception v3, MaxViT, detection models) are not
# followed. `(builder pattern, children with BatchNorm, children drawing random numbers,
# every child in order)`: `nn.Sequential(*list(resnet.children())[:-2])` keeps the order.
_RESNET = ("conv1", "bn1", "relu", "maxpool", "layer1", "layer2", "layer3", "layer4", "avgpool", "fc")
_HEADED = ("features", "avgpool", "classifier")
TORCHVISION_MODELS = (
    (r"resnet\d+|resnext\d+_\w+|wide_resnet\d+_\d+", frozenset({"bn1", "layer1", "layer2", "layer3", "layer4"}), frozenset(), _RESNET),
    (r"densenet\d+", frozenset({"features"}), frozenset(), ("features", "classifier")),
    (r"vgg\d+_bn", frozenset({"features"}), frozenset({"classifier"}), _HEADED),
    (r"vgg\d+", frozenset(), frozenset({"classifier"}), _HEADED),
    (r"mobilenet_v2", frozenset({"features"}), frozenset({"classifier"}), ("features", "classifier")),
    (r"mobilenet_v3\w*", frozenset({"features"}), frozenset({"classifier"}), _HEADED),
    (r"efficientnet_\w+", frozenset({"features"}), frozenset({"features", "classifier"}), _HEADED),
    (r"convnext_\w+", frozenset(), frozenset({"features"}), _HEADED),
    (r"swin_\w+", frozenset(), frozenset({"features"}), ("features", "norm", "permute", "avgpool", "flatten", "head")),
    (r"regnet_\w+", frozenset({"stem", "trunk_output"}), frozenset(), ("stem", "trunk_output", "avgpool", "fc")),
    (r"shufflenet_v2_\w+", frozenset({"conv1", "stage2", "stage3", "stage4", "conv5"}), frozenset(),
     ("conv1", "maxpool", "stage2", "stage3", "stage4", "conv5", "fc")),
    (r"mnasnet\w+", frozenset({"layers"}), frozenset({"classifier"}), ("layers", "classifier")),
    (r"squeezenet\w+", frozenset(), frozenset({"classifier"}), ("features", "classifier")),
    (r"alexnet", frozenset(), frozenset({"classifier"}), _HEADED),
    (r"vit_\w+", frozenset(), frozenset(), ("conv_proj", "encoder", "heads")),
)
_TORCHVISION_BUILDER = re.compile(r"^torchvision\.models\.(?:\w+\.)?(?P<builder>\w+)$")


def torchvision_model(name: str) -> tuple[frozenset[str], frozenset[str], tuple[str, ...]] | None:
    """(children with BatchNorm, children drawing random numbers, every child in order) of
    the model a torchvision builder returns (`torchvision.models.resnet50`,
    `torchvision.models.resnet.resnet50`)."""
    match = _TORCHVISION_BUILDER.match(name)
    if match is None:
        return None
    for pattern, statistics, randomness, children in TORCHVISION_MODELS:
        if re.fullmatch(pattern, match["builder"]):
            return statistics, randomness, children
    return None


def torchvision_holds(name: str, kind: str) -> bool | None:
    """Whether a torchvision model (`torchvision.models.resnet50`) or one of its children
    (`torchvision.models.resnet50.layer1`) holds what `kind` asks for ("statistics" or
    "randomness"); None when the name is not one."""
    builder, _, child = name.partition(".<child>.")
    facts = torchvision_model(builder)
    if facts is None:
        return None
    parts = facts[0] if kind == "statistics" else facts[1] if kind == "randomness" else frozenset()
    return bool(parts) if not child else child in parts
