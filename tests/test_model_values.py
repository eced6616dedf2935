"""What the project model says an expression denotes, asked directly: literal-keyed tables,
class attributes and dataclass fields, and values passed by the project before annotations."""

from __future__ import annotations

from ckptlint.config import resolve_settings
from ckptlint.indexing import build_index
from ckptlint.model.evaluation.denotation import Denotation
from ckptlint.model.form.values import ClassRef, Constant, Frame, Instance

MODELS = """
from dataclasses import dataclass, field

import torch.nn as nn

NORMS = {"bn": nn.BatchNorm2d, "ln": nn.LayerNorm}


def build_norm(name="bn", channels=8):
    if name in NORMS:
        return NORMS[name](channels)
    return None


@dataclass
class Config:
    width: int = 8
    norm: str = "ln"
    head_norm: str = field(default="bn")


class Conv(nn.Module):
    def __init__(self, norm="bn"):
        super().__init__()
        self.none = build_norm(None)
        self.missing = build_norm("gn")
        self.tuple_key = build_norm((norm, norm))
        self.named = build_norm(norm)


class Encoder(nn.Module):
    def __init__(self, cfg: Config):
        super().__init__()
        self.norm = build_norm(cfg.norm)
        self.head = build_norm(cfg.head_norm)
"""


def _denotation(make_project, files: dict[str, str]) -> Denotation:
    root = make_project({"models.py": MODELS, **files})
    return Denotation(build_index(root, resolve_settings(root), use_cache=False, jobs=1))


def _classes(values) -> set[str]:
    return {v.cls for v in values if isinstance(v, Instance)}


def test_a_literal_key_a_table_lacks_gives_nothing(make_project):
    denotation = _denotation(make_project, {})
    conv = denotation.instance("models.Conv")
    assert denotation.attribute(conv, "none") == frozenset()
    assert denotation.attribute(conv, "missing") == frozenset()
    assert denotation.attribute(conv, "tuple_key") == frozenset()
    assert _classes(denotation.attribute(conv, "named")) == {"torch.nn.BatchNorm2d"}


def test_a_module_dict_member_is_found_by_its_name(make_project):
    # `nn.ModuleDict(dict(...))` (litgpt's `transformer`) and a dict literal: by attribute
    # and by literal key; an entry whose module is not known leaves the others' names in place.
    code = '''
import torch.nn as nn

class Net(nn.Module):
    def __init__(self, norm_class):
        super().__init__()
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(8, 8), ln=norm_class(8), h=nn.ModuleList(nn.BatchNorm1d(8) for _ in range(2))
        ))
        self.heads = nn.ModuleDict({"drop": nn.Dropout(0.1), "bn": nn.BatchNorm1d(8)})
        self.grown = nn.ModuleDict({"drop": nn.Dropout(0.1)})
        self.grown["bn"] = nn.BatchNorm1d(8)
'''
    denotation = _denotation(make_project, {"net.py": code})
    net = denotation.instance("net.Net")
    frame = Frame("net.Net.__init__", "net", (), net)
    transformer = ("attr", ("name", "self"), "transformer")
    assert _classes(denotation.evaluate(("attr", transformer, "h"), frame)) == {"torch.nn.ModuleList"}
    assert _classes(denotation.evaluate(("attr", transformer, "wte"), frame)) == {"torch.nn.Embedding"}
    assert denotation.evaluate(("attr", transformer, "ln"), frame) == frozenset()
    heads = ("attr", ("name", "self"), "heads")
    assert _classes(denotation.evaluate(("index", heads, ("const", "bn")), frame)) == {"torch.nn.BatchNorm1d"}
    assert _classes(denotation.evaluate(("attr", heads, "drop"), frame)) == {"torch.nn.Dropout"}
    # A member added later by key is still found.
    grown = ("attr", ("name", "self"), "grown")
    assert _classes(denotation.evaluate(("index", grown, ("const", "bn")), frame)) == {"torch.nn.BatchNorm1d"}


def test_a_class_attribute_is_read_through_the_class_and_an_annotated_parameter(make_project):
    denotation = _denotation(make_project, {})
    frame = Frame("models.<module>", "models", (), None)
    assert denotation.evaluate(("attr", ("name", "Config"), "norm"), frame) == frozenset({Constant("ln")})
    assert denotation.evaluate(("attr", ("name", "Config"), "head_norm"), frame) == frozenset({Constant("bn")})
    encoder = denotation.instance("models.Encoder")
    assert _classes(denotation.attribute(encoder, "norm")) == {"torch.nn.LayerNorm"}
    assert _classes(denotation.attribute(encoder, "head")) == {"torch.nn.BatchNorm2d"}


def test_what_the_project_passes_comes_before_the_annotation(make_project):
    train = """
    from models import Config, Encoder

    model = Encoder(Config(norm="bn"))
    """
    denotation = _denotation(make_project, {"train.py": train})
    encoder = denotation.instance("models.Encoder")
    assert _classes(denotation.attribute(encoder, "norm")) == {"torch.nn.BatchNorm2d"}
    built = denotation.evaluate(("name", "model"), Frame("train.<module>", "train", (), None))
    (instance,) = built
    assert _classes(denotation.attribute(instance, "norm")) == {"torch.nn.BatchNorm2d"}
    config = dict(instance.arguments)["cfg"]
    assert {v.cls for v in config} == {"models.Config"} and not any(isinstance(v, ClassRef) for v in config)


def test_a_dataclass_built_by_position_says_nothing_of_its_fields(make_project):
    train = """
    from models import Config, Encoder

    model = Encoder(Config(16, "bn"))
    """
    denotation = _denotation(make_project, {"train.py": train})
    (instance,) = denotation.evaluate(("name", "model"), Frame("train.<module>", "train", (), None))
    (config,) = dict(instance.arguments)["cfg"]
    assert denotation.attribute(config, "norm") == frozenset()
    assert denotation.attribute(config, "head_norm") == frozenset()


def test_module_methods_that_return_the_module_keep_its_class(make_project):
    """`Encoder(cfg).train()`, `.to(device)`: nn.Module's `return self`; a project class's
    own method of the same name is what it returns."""
    denotation = _denotation(make_project, {"train.py": """
from models import Config, Conv, Encoder


class Wrapper:
    def to(self, device):
        return device


def main(device):
    encoder = Encoder(Config()).to(device).train()
    conv = Conv().requires_grad_(False)
    wrapped = Wrapper().to(device)
    return encoder, conv, wrapped
"""})
    frame = Frame("train.main", "train", (), None)
    assert _classes(denotation.evaluate(("name", "encoder"), frame)) == {"models.Encoder"}
    assert _classes(denotation.evaluate(("name", "conv"), frame)) == {"models.Conv"}
    assert _classes(denotation.evaluate(("name", "wrapped"), frame)) == set()


def test_values_sort_alike_under_every_hash_seed():
    """Findings name paths in the order of their values: `ordering_key` lists a set's items in
    order, where `repr` follows the process's hash seed (a timm model's CKPT010 message once
    named another block first on another run)."""
    import os
    import subprocess
    import sys

    values = "frozenset(Instance(name) for name in ('a.Basic', 'a.Bottle', 'b.Norm', 'c.Act', 'd.Conv', 'e.Down'))"
    code = f"from ckptlint.model.form.values import Instance, ordering_key; v = {values}; print(ordering_key(v)); print(repr(v))"
    runs = [
        subprocess.run(
            [sys.executable, "-c", code], env={**os.environ, "PYTHONHASHSEED": str(seed)}, capture_output=True, text=True, check=True
        ).stdout.splitlines()
        for seed in range(1, 5)
    ]
    assert len({keyed for keyed, _ in runs}) == 1
    assert len({plain for _, plain in runs}) > 1  # what `repr` would have sorted by
