"""Third-party `forward` signatures as data (`ckptlint.model.library.third_party_signatures`): the
table's shape, which entries a project's open_clip version picks, and CKPT032 reading them
in a project that declares (or does not declare) its open_clip version."""

from __future__ import annotations

import importlib.metadata

import pytest

from ckptlint.model.library.third_party_signatures import FORWARD_SIGNATURES, forward_signatures
from ckptlint.versions import TargetVersion, TargetVersions, Version, VersionSource
from conftest import json_findings

RAB = "open_clip.transformer.ResidualAttentionBlock"
CUSTOM = "open_clip.transformer.CustomResidualAttentionBlock"


def targeting(version: str | None) -> TargetVersions:
    declared = {}
    if version is not None:
        declared["open-clip-torch"] = TargetVersion(Version.parse(version), VersionSource.CONFIG, "test")
    return TargetVersions(declared, use_installed=False)


def slots(cls: str, version: str | None) -> list[tuple[str, ...]]:
    return [tuple(p.name for p in entry.parameters) for entry in forward_signatures(cls, targeting(version))]


def test_entries_of_one_class_do_not_overlap_and_say_where_they_were_read():
    for cls, entries in FORWARD_SIGNATURES.items():
        for entry in entries:
            assert entry.cls == cls
            assert entry.read_in, cls
            assert entry.parameters and all(p.kind in ("positional", "keyword", "*", "**") for p in entry.parameters)
        for index, first in enumerate(entries):
            for second in entries[index + 1 :]:
                assert not first.versions.overlaps(second.versions), (cls, str(first.versions), str(second.versions))


def test_the_version_picks_the_signature():
    assert slots(RAB, "2.20") == [("q_x", "k_x", "v_x", "attn_mask")]
    assert slots(RAB, "2.11") == [("q_x", "k_x", "v_x", "attn_mask")]
    assert slots(RAB, "2.10.1") == [("x", "attn_mask")]
    assert slots(RAB, "1.3") == []  # `open_clip.transformer` came with 2.2
    assert slots("open_clip.model.ResidualAttentionBlock", "2.0.2") == [("x", "attn_mask")]
    assert slots("open_clip.model.ResidualAttentionBlock", "2.20") == []
    # Not known: every entry.
    assert slots(RAB, None) == [("x", "attn_mask"), ("q_x", "k_x", "v_x", "attn_mask")]
    assert slots(CUSTOM, "3.3") == [("x", "attn_mask")]
    assert slots("timm.models.vision_transformer.Block", "2.20") == []


@pytest.fixture
def installed(monkeypatch):
    """No distribution is installed: the linter's own environment does not pick versions."""

    def version(name: str) -> str:
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "version", version)


TOWER = """
import torch.nn as nn
from torch.utils.checkpoint import checkpoint
from open_clip.transformer import ResidualAttentionBlock


class TextTower(nn.Module):
    def __init__(self, width, layers):
        super().__init__()
        self.resblocks = nn.ModuleList([ResidualAttentionBlock(width, 8) for _ in range(layers)])

    def forward(self, x, attn_mask=None):
        for r in self.resblocks:
            if self.grad_checkpointing:
                x = checkpoint(r, x, attn_mask, use_reentrant=False)
            else:
                x = r(x, attn_mask=attn_mask)
        return x
"""


@pytest.mark.parametrize(
    ("requirement", "reported"),
    [
        ("open-clip-torch>=2.20.0", True),
        ("open_clip_torch==2.24.0", True),
        ("open-clip-torch>=2.0,<2.11", False),  # (x, attn_mask) in every version it admits
        ("open-clip-torch>=2.0", False),  # admits both signatures: only what holds for both
        (None, False),  # not declared: the same
    ],
)
def test_the_declared_open_clip_version_decides(cli, make_project, installed, requirement, reported):
    files = {"towers/text.py": TOWER}
    if requirement is not None:
        files["requirements.txt"] = f"torch>=2.4\n{requirement}\n"
    root = make_project(files)
    result = cli(["check", "--no-cache", "--output-format", "json", "--select", "CKPT032", "."], root)
    expected = [
        (
            "towers/text.py",
            14,
            21,
            "CKPT032",
            "`attn_mask` is passed positionally into parameter `k_x` of `ResidualAttentionBlock.forward` "
            "(open-clip-torch>=2.11), while the non-checkpointed branch passes it as `attn_mask=`: with "
            "checkpointing on, the value lands in the wrong parameter; pass the inputs in "
            "`ResidualAttentionBlock.forward`'s parameter order",
        )
    ]
    assert json_findings(result, root, with_message=True) == (expected if reported else [])


def test_what_open_clip_models_hold_carries_its_versions():
    from ckptlint.model.library.open_clip import attribute_values, created_models, instance_versions
    from ckptlint.model.form.values import Instance

    clip = Instance("open_clip.model.CLIP")
    assert clip in created_models()
    (transformer,) = attribute_values(clip, "transformer")
    assert transformer.cls == "open_clip.transformer.Transformer"
    assert str(instance_versions(transformer)) == "open-clip-torch>=2.2"
    (blocks,) = attribute_values(transformer, "resblocks")
    assert blocks.cls == "torch.nn.ModuleList"
    held = {member.cls: str(instance_versions(member)) for member in blocks.members[0]}
    assert held == {
        "open_clip.transformer.ResidualAttentionBlock": "open-clip-torch>=2.2",
        "open_clip.transformer.CustomResidualAttentionBlock": "open-clip-torch>=3.0",
    }
    # Other classes and attributes: the facts do not say.
    assert attribute_values(Instance("open_clip.coca_model.CoCa"), "transformer") is None
    assert attribute_values(clip, "visual") is None


FROZEN = """
import open_clip
import torch.nn as nn
from torch.utils.checkpoint import checkpoint


class FrozenOpenCLIPEmbedder(nn.Module):
    def __init__(self, arch="ViT-H-14"):
        super().__init__()
        model, _, _ = open_clip.create_model_and_transforms(arch, pretrained="laion2b_s32b_b79k")
        self.model = model

    def freeze(self):
        self.model = self.model.eval()

    def text_transformer_forward(self, x, attn_mask=None):
        for i, r in enumerate(self.model.transformer.resblocks):
            if self.model.transformer.grad_checkpointing:
                x = checkpoint(r, x, attn_mask, use_reentrant=False)
            else:
                x = r(x, attn_mask=attn_mask)
        return x
"""


@pytest.mark.parametrize(
    ("requirement", "reported"),
    [
        ("open-clip-torch==2.24.0", True),
        ("open-clip-torch>=2.20.0,<3", True),
        # 3.x text towers may hold CustomResidualAttentionBlocks, whose second slot is the mask.
        ("open-clip-torch>=2.20.0", False),
        ("open-clip-torch==3.3.0", False),
        # Before 2.11 ResidualAttentionBlock.forward was (x, attn_mask=None).
        ("open-clip-torch==2.10.1", False),
        (None, False),
    ],
)
def test_blocks_of_a_model_open_clip_builds(cli, make_project, installed, requirement, reported):
    files = {"encoders.py": FROZEN}
    if requirement is not None:
        files["requirements.txt"] = f"{requirement}\n"
    root = make_project(files)
    result = cli(["check", "--no-cache", "--output-format", "json", "--select", "CKPT032", "."], root)
    assert json_findings(result, root) == ([("encoders.py", 18, 21, "CKPT032")] if reported else [])
