"""A helper that takes any model is resolved at its call sites in other files, and a warm run
sees a change at a call site: the finding in the helper's file follows the caller's edit."""

from __future__ import annotations

from pathlib import Path

from conftest import json_findings

NETS = """
import torch.nn as nn


class ConvBN(nn.Module):
    def __init__(self):
        super().__init__()
        self.bn = nn.BatchNorm2d(8)

    def forward(self, x):
        return self.bn(x)


class ConvGN(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = nn.GroupNorm(2, 8)

    def forward(self, x):
        return self.norm(x)


class Net(nn.Module):
    def __init__(self, block=ConvBN):
        super().__init__()
        self.blocks = nn.ModuleList([block() for _ in range(2)])
"""

HELPER = """
from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import checkpoint_wrapper


def wrap_blocks(model):
    for index, block in enumerate(model.blocks):
        model.blocks[index] = checkpoint_wrapper(block)
    return model
"""

# A training script (the index reads files that name training, checkpointing, modules or
# norms; a caller naming none of them is not read).
TRAIN = """
from helpers import wrap_blocks
from nets import ConvGN, Net

model = wrap_blocks(Net({arguments}))
model.train()
"""


def test_the_finding_in_a_helper_follows_its_call_sites(cli, make_project):
    root = make_project({"nets.py": NETS, "helpers.py": HELPER, "train.py": TRAIN.format(arguments="")})
    first = json_findings(cli(["--output-format", "json", "."], root), root, with_message=True)
    assert [f[:4] for f in first] == [("helpers.py", 6, 31, "CKPT010")]
    assert "model.blocks (as passed at train.py:4) -> ConvBN.bn -> (torch.nn.BatchNorm2d)" in first[0][4]
    # The caller now passes the GroupNorm network: the helper's file is unchanged, its result is not.
    (root / "train.py").write_text(TRAIN.format(arguments="block=ConvGN").lstrip("\n"))
    assert json_findings(cli(["--output-format", "json", "."], root), root) == []
    # A second caller with BatchNorm brings it back, naming that call site.
    (root / "eval_bn.py").write_text("from helpers import wrap_blocks\nfrom nets import Net\n\nwrap_blocks(Net())  # ckpt\n")
    third = json_findings(cli(["--output-format", "json", "."], root), root, with_message=True)
    assert [f[:4] for f in third] == [("helpers.py", 6, 31, "CKPT010")]
    assert "as passed at " in third[0][4] and "eval_bn.py:4" in third[0][4]


def test_the_message_names_the_projects_own_call_site_before_a_tests(cli, make_project):
    # `tests/a_test.py` sorts before `train.py`; the script's call is what the user runs.
    test = "from helpers import wrap_blocks\nfrom nets import Net\n\n\ndef test_wrap():\n    wrap_blocks(Net())  # ckpt\n"
    root = make_project(
        {"nets.py": NETS, "helpers.py": HELPER, "train.py": TRAIN.format(arguments=""), "tests/a_test.py": test}
    )
    found = json_findings(cli(["--output-format", "json", "."], root), root, with_message=True)
    assert [f[:4] for f in found] == [("helpers.py", 6, 31, "CKPT010")]
    assert "model.blocks (as passed at train.py:4 and 1 more call site)" in found[0][4]


def test_a_helper_nobody_calls_is_not_reported(cli, make_project):
    root = make_project({"nets.py": NETS, "helpers.py": HELPER})
    assert json_findings(cli(["--output-format", "json", "."], root), root) == []


BLOCK = """
import torch.nn as nn
import torch.utils.checkpoint as cp


class Block(nn.Module):
    def __init__(self, dim, norm_layer):
        super().__init__()
        self.norm = norm_layer(dim)

    def forward(self, x):
        def _inner_forward(x):
            return self.norm(x)

        return cp.checkpoint(_inner_forward, x, use_reentrant=False)
"""


def test_a_constructor_argument_without_default_is_what_the_project_builds_it_with(cli, make_project):
    model = "import torch.nn as nn\nfrom blocks import Block\n\nstem = Block(8, {norm})\n"
    root = make_project({"blocks.py": BLOCK, "model.py": model.format(norm="nn.BatchNorm2d")})
    [finding] = json_findings(cli(["--output-format", "json", "."], root), root, with_message=True)
    assert finding[:4] == ("blocks.py", 14, 16, "CKPT010")
    assert "Block.norm -> (torch.nn.BatchNorm2d), Block as constructed at model.py:4" in finding[4]
    (root / "model.py").write_text(model.format(norm="nn.LayerNorm"))
    assert json_findings(cli(["--output-format", "json", "."], root), root) == []


def test_src_layout_and_src_package_spell_one_module():
    """`src/pkg/mod.py` is `pkg.mod` whether the project imports it as `pkg.mod` (setuptools'
    src layout) or as `src.pkg.mod` (a `src` package): both resolve to the same definitions."""
    from ckptlint.model.syntax.names import absolute_import, canonical_name, module_name

    assert module_name("src/trainkit/policies/__init__.py") == "trainkit.policies"
    assert module_name("src/train.py") == "train"
    assert module_name("src/__init__.py") == "src"
    assert canonical_name("src.trainkit.finetune.main") == "trainkit.finetune.main"
    assert canonical_name("src") == "src"
    assert absolute_import("trainkit.finetune", False, "src.trainkit.policies") == "trainkit.policies"
    assert absolute_import("trainkit.finetune", False, ".policies") == "trainkit.policies"


def test_a_package_that_re_exports_a_helper_resolves_to_its_definition(tmp_path):
    """`from pkg.policies import helper`, where `pkg/policies/__init__.py` imports it from a
    submodule: the helper's effects are found where it is defined."""
    from ckptlint.config import resolve_settings
    from ckptlint.indexing import build_index

    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'pkg'\n")
    policies = tmp_path / "src" / "pkg" / "policies"
    policies.mkdir(parents=True)
    (tmp_path / "src" / "pkg" / "__init__.py").write_text("")
    (policies / "__init__.py").write_text("from pkg.policies.activation import wrap\n")
    (policies / "activation.py").write_text(
        "from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import apply_activation_checkpointing\n\n"
        "def wrap(model):\n    apply_activation_checkpointing(model)\n"
    )
    index = build_index(tmp_path, resolve_settings(tmp_path), use_cache=False)
    effects = index.parameter_effects("pkg.policies.wrap", 0)
    assert [(e.path, e.line, e.function) for e in effects] == [
        ("src/pkg/policies/activation.py", 4, "pkg.policies.activation.wrap")
    ]


def test_the_finding_names_the_construction_that_brings_the_batchnorm():
    """A block built with LayerNorm in one place and BatchNorm in another: the message names
    the BatchNorm construction (line 30), not the first one found (line 24)."""
    from ckptlint.config import resolve_settings
    from ckptlint.engine import lint_text
    from ckptlint.indexing import build_index

    root = Path(__file__).parent.parent / "fixtures" / "projects" / "classes_as_values"
    settings = resolve_settings(root)
    index = build_index(root, settings, use_cache=False)
    text = (root / "shared_block.py").read_text(encoding="utf-8")
    outcome = lint_text(text, root / "shared_block.py", settings, project=index)
    (finding,) = [d for d in outcome.diagnostics if d.code == "CKPT010"]
    assert "ResidualBlock as constructed at shared_block.py:30)" in finding.message


STEM = """
import torch.nn as nn
import torch.utils.checkpoint as cp


class Stem(nn.Module):
    def __init__(self, width=8, with_cp=False):
        super().__init__()
        self.with_cp = with_cp
        self.bn = nn.BatchNorm2d(width)

    def forward(self, x):
        if self.with_cp and x.requires_grad:
            return cp.checkpoint(self.bn, x, use_reentrant=False)
        return self.bn(x)
"""


def test_a_region_behind_a_flag_every_construction_turns_off_follows_the_constructions(cli, make_project):
    """`if self.with_cp` in a class the project builds only with the flag off never runs;
    a warm run sees a construction turning it on, by keyword or by position."""
    backbone = (
        "import torch.nn as nn\nfrom stem import Stem\n\n\nclass Backbone(nn.Module):\n"
        "    def __init__(self):\n        super().__init__()\n        self.stem = Stem({arguments})\n"
    )
    root = make_project({"stem.py": STEM, "backbone.py": backbone.format(arguments="8, with_cp=False")})
    assert json_findings(cli(["--output-format", "json", "."], root), root) == []
    for arguments in ("8, with_cp=True", "8, True"):
        (root / "backbone.py").write_text(backbone.format(arguments=arguments))
        assert [f[:4] for f in json_findings(cli(["--output-format", "json", "."], root), root)] == [
            ("stem.py", 13, 20, "CKPT010")
        ]
    # Only ever built with its defaults: a switch for whoever builds it, reported.
    (root / "backbone.py").write_text(backbone.format(arguments="8"))
    assert [f[:4] for f in json_findings(cli(["--output-format", "json", "."], root), root)] == [("stem.py", 13, 20, "CKPT010")]
