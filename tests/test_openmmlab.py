"""mmcv / mmengine in the project model: norm layers built from `norm_cfg` dicts, the names
`build_norm_layer` registers them under, `norm_eval` backbones, and `with_cp` blocks that
checkpoint inside another block's region (`ckptlint/model/library/openmmlab.py`,
`ckptlint/model/file_facts/norm_freezing.py`)."""

from __future__ import annotations

import ast
import textwrap

import pytest

from ckptlint.config import resolve_settings
from ckptlint.indexing import build_index
from ckptlint.model.file_facts.facts import CheckpointCall
from ckptlint.model.file_facts.method_behaviour import checkpoint_calls
from ckptlint.model.file_facts.norm_freezing import UNKNOWN_FLAG, batchnorm_frozen_under
from ckptlint.model.form.values import Constant, Instance, Mapping

BLOCK = """
from mmcv.cnn import ConvModule, build_norm_layer
from torch import nn


class Block(nn.Module):
    def __init__(self, channels, norm_cfg=dict(type="BN", requires_grad=True), postfix=1):
        super().__init__()
        self.norm1_name, norm1 = build_norm_layer(norm_cfg, channels, postfix=postfix)
        self.add_module(self.norm1_name, norm1)
        self.bn_a, self.bn_b = build_norm_layer(norm_cfg, channels)[1], build_norm_layer(dict(type="IN"), channels)[1]
        self.conv = ConvModule(channels, channels, 3, norm_cfg=norm_cfg)
        self.plain = ConvModule(channels, channels, 3)
        self.width = channels // 2

    @property
    def norm1(self):
        return getattr(self, self.norm1_name)
"""


@pytest.fixture
def model(make_project):
    def build(files: dict[str, str]):
        root = make_project(files)
        return build_index(root, resolve_settings(root), use_cache=False).denotation

    return build


def _classes(values) -> list[str]:
    return sorted(v.cls for v in values if isinstance(v, Instance))


def test_build_norm_layer_gives_the_class_its_type_names_and_its_name(model):
    denotation = model({"block.py": BLOCK})
    block = denotation.instance("block.Block")
    assert _classes(denotation.attribute(block, "norm1")) == ["torch.nn.BatchNorm2d"]  # through the property
    assert denotation.attribute(block, "norm1_name") == frozenset({Constant("bn1")})
    assert _classes(denotation.attribute(block, "bn_a")) == ["torch.nn.BatchNorm2d"]
    assert _classes(denotation.attribute(block, "bn_b")) == ["torch.nn.InstanceNorm2d"]
    # Assigned something the model cannot follow: not known, and not one of the added children.
    assert denotation.attribute(block, "width") == frozenset()


def test_conv_module_keeps_the_norm_config_it_was_built_with(model):
    denotation = model({"block.py": BLOCK})
    block = denotation.instance("block.Block")
    (conv,) = denotation.attribute(block, "conv")
    (plain,) = denotation.attribute(block, "plain")
    (config,) = conv.argument("norm_cfg")
    assert isinstance(config, Mapping) and dict(config.entries)["type"] == frozenset({Constant("BN")})
    assert plain.argument("norm_cfg") is None


def test_a_config_type_mmcv_does_not_register_builds_nothing_known(model):
    denotation = model({"block.py": BLOCK.replace('type="BN"', 'type="FrozenBN"')})
    block = denotation.instance("block.Block")
    assert "torch.nn.BatchNorm2d" not in _classes(denotation.attribute(block, "norm1"))


def _class(source: str) -> ast.ClassDef:
    return ast.parse(textwrap.dedent(source)).body[-1]


def _resolve(node: ast.AST) -> str | None:
    return {"_BatchNorm": "torch.nn.modules.batchnorm._BatchNorm", "nn.GroupNorm": "torch.nn.GroupNorm"}.get(ast.unparse(node))


@pytest.mark.parametrize(
    ("train", "frozen"),
    [
        ("if mode and self.norm_eval:\n    for m in self.modules():\n        if isinstance(m, _BatchNorm):\n            m.eval()", ("norm_eval",)),
        ("for _, m in self.named_modules():\n    if isinstance(m, (nn.GroupNorm, _BatchNorm)):\n        m.train(False)", ()),
        ("if self.frozen and self.norm_eval:\n    for m in self.modules():\n        if isinstance(m, _BatchNorm):\n            m.eval()", ("frozen", "norm_eval")),
        ("if mode and not self.train_bn:\n    for m in self.modules():\n        if isinstance(m, _BatchNorm):\n            m.eval()", (UNKNOWN_FLAG,)),
        # GroupNorm only, a submodule's modules, or nothing put in eval mode: not frozen.
        ("for m in self.modules():\n    if isinstance(m, nn.GroupNorm):\n        m.eval()", None),
        ("for m in self.head.modules():\n    if isinstance(m, _BatchNorm):\n        m.eval()", None),
        ("for m in self.modules():\n    if isinstance(m, _BatchNorm):\n        m.train()", None),
    ],
)
def test_what_a_train_override_freezes(train, frozen):
    body = textwrap.indent(train, " " * 8)
    source = f"class Backbone(nn.Module):\n    def train(self, mode=True):\n        super().train(mode)\n{body}\n"
    assert batchnorm_frozen_under(_class(source), _resolve) == frozen


def test_checkpoint_calls_record_reentrancy_and_their_guard():
    source = textwrap.dedent(
        """
        def forward(self, x):
            if self.with_cp and x.requires_grad:
                out = cp.checkpoint(self.inner, x)
            else:
                out = cp.checkpoint(self.inner, x, use_reentrant=False)
            for block in self.blocks:
                x = cp.checkpoint(block, x, **self.kwargs)

            def inner(y):
                return cp.checkpoint(self.inner, y, use_reentrant=True)
            return out
        """
    )
    function = ast.parse(source).body[0]
    resolve = lambda node: "torch.utils.checkpoint.checkpoint" if ast.unparse(node) == "cp.checkpoint" else None  # noqa: E731
    # (with what each region is given and reads: `CheckpointCall.callable` / `reads`, CKPT031)
    assert list(checkpoint_calls(function.body, resolve)) == [
        CheckpointCall(4, True, ("with_cp",), callable="self.inner", reads=("x",)),
        CheckpointCall(6, False, (), callable="self.inner", reads=("x",)),
        CheckpointCall(8, None, (), callable="self.blocks[*]", reads=("x",)),
    ]


# mmdet's `norm_eval`: every BatchNorm below the backbone kept in eval mode in training.
FREEZING_TRAIN = """
    def train(self, mode=True):
        super().train(mode)
        if mode and self.norm_eval:
            for m in self.modules():
                if isinstance(m, _BatchNorm):
                    m.eval()
"""

FREEZER = """
from torch import nn
from torch.nn.modules.batchnorm import _BatchNorm

from .block import Block


class Backbone(nn.Module):
    def __init__(self, norm_eval=True):
        super().__init__()
        self.norm_eval = norm_eval
        self.stages = nn.Sequential(Block(8), Block(8))

""" + FREEZING_TRAIN


def test_classes_below_a_freezing_backbone(model):
    denotation = model({"pkg/__init__.py": "", "pkg/block.py": BLOCK, "pkg/backbone.py": FREEZER})
    assert denotation.batchnorm_frozen_classes() == frozenset({"pkg.backbone.Backbone", "pkg.block.Block"})


def test_a_project_call_that_turns_norm_eval_off_unfreezes(model):
    build = "from .backbone import Backbone\n\nmodel = Backbone(norm_eval=False)\n"
    denotation = model({"pkg/__init__.py": "", "pkg/block.py": BLOCK, "pkg/backbone.py": FREEZER, "pkg/build.py": build})
    assert denotation.batchnorm_frozen_classes() == frozenset()


def test_norm_type_names_through_mmengine_registries(model):
    source = """
    from mmcv.cnn import NORM_LAYERS
    from mmengine.registry import MODELS
    from torch import nn


    class Head(nn.Module):
        def __init__(self, channels, norm="SyncBN"):
            super().__init__()
            self.built = MODELS.build(dict(type=norm, num_features=channels))
            self.looked_up = NORM_LAYERS.get("GN")
            self.unknown = MODELS.build(dict(type="MyNorm"))
    """
    denotation = model({"head.py": source})
    head = denotation.instance("head.Head")
    assert _classes(denotation.attribute(head, "built")) == ["torch.nn.SyncBatchNorm"]
    assert [v.name for v in denotation.attribute(head, "looked_up")] == ["torch.nn.GroupNorm"]
    assert denotation.attribute(head, "unknown") == frozenset()


def test_a_copy_of_mmcv_in_the_tree_is_read_as_mmcv(model):
    vendored = """
    NORM_LAYERS = {}


    def build_norm_layer(cfg, num_features, postfix=""):
        cfg_ = cfg.copy()
        layer_type = cfg_.pop("type")
        norm_layer = NORM_LAYERS.get(layer_type)
        return "norm" + str(postfix), norm_layer(num_features, **cfg_)
    """
    block = BLOCK.replace("from mmcv.cnn import", "from annotator.mmcv.cnn import")
    denotation = model({"annotator/__init__.py": "", "annotator/mmcv/__init__.py": "",
                        "annotator/mmcv/cnn/__init__.py": vendored, "annotator/block.py": block})
    instance = denotation.instance("annotator.block.Block")
    assert _classes(denotation.attribute(instance, "bn_a")) == ["torch.nn.BatchNorm2d"]


DETECTOR = """
from torch import nn
from torch.nn.modules.batchnorm import _BatchNorm


class Block(nn.Module):
    expansion = 1

    def __init__(self, channels):
        super().__init__()
        self.bn = nn.BatchNorm2d(channels)


class WideBlock(Block):
    pass


class Stage(nn.Sequential):
    def __init__(self, block, channels, depth):
        layers = []
        for _ in range(depth):
            layers.append(block(channels))
        super().__init__(*layers)


class ResNet(nn.Module):
    arch_settings = {18: (Block, (2, 2)), 50: (Block, (3, 4))}

    def __init__(self, depth, norm_eval=True):
        super().__init__()
        self.norm_eval = norm_eval
        self.block, stage_blocks = self.arch_settings[depth]
        for i, blocks in enumerate(stage_blocks):
            self.add_module(f"layer{i + 1}", Stage(self.block, 64, blocks))

""" + FREEZING_TRAIN + """

class WideResNet(ResNet):
    arch_settings = {50: (WideBlock, (3, 4))}

    def __init__(self, depth, **kwargs):
        super().__init__(depth, **kwargs)
        self.__setattr__("extra", Stage(WideBlock, 64, 1))
"""


def test_blocks_below_an_mmdet_style_backbone_and_its_subclasses_are_frozen(model):
    """Class attributes (`arch_settings`), a `Sequential` subclass filled through
    `super().__init__(*layers)`, `self.__setattr__(name, module)` and a subclass inheriting
    the freezing `train()`."""
    denotation = model({"detector.py": DETECTOR})
    assert denotation.batchnorm_frozen_classes() == frozenset(
        {"detector.ResNet", "detector.WideResNet", "detector.Stage", "detector.Block", "detector.WideBlock"}
    )
    tests = "from detector import ResNet\n\n\ndef test_unfrozen():\n    ResNet(18, norm_eval=False)\n"
    assert "detector.Block" in model({"detector.py": DETECTOR, "tests/test_backbone.py": tests}).batchnorm_frozen_classes()
