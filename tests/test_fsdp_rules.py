"""The FSDP rules (CKPT002-CKPT005) on multi-file projects, as users run them: the whole
project, or only the model file (as pre-commit passes it); and the project index behind
them (caching, invalidation, nested projects, the `fsdp` setting)."""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

import pytest

import ckptlint.model.file_facts.extraction
from ckptlint.model.file_facts.extraction import extract_facts
from ckptlint.model.file_facts.facts import EventKind, Impl
from ckptlint.model.index import ProjectIndex
from tests.conftest import json_findings

PYPROJECT = "[project]\nname = 'demo'\ndependencies = ['torch>=2.4']\n"

MODEL = """
import torch.nn as nn
from torch.utils.checkpoint import checkpoint


class Block(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.mlp = nn.Sequential(nn.Linear(dim, dim), nn.GELU())

    def forward(self, x):
        return x + self.mlp(x)


class Model(nn.Module):
    def __init__(self, dim=64, layers=4):
        super().__init__()
        self.blocks = nn.ModuleList(Block(dim) for _ in range(layers))

    def forward(self, x):
        for block in self.blocks:
            x = checkpoint(block, x)
        return x
"""

TRAIN_FSDP1 = """
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
from torch.distributed.fsdp.wrap import ModuleWrapPolicy

from pkg.model import Block, Model


def main():
    model = FSDP(Model(), auto_wrap_policy=ModuleWrapPolicy({Block}))
    return model
"""

TRAIN_DEEPSPEED = """
import deepspeed

from pkg.model import Model


def main(args):
    engine, *_ = deepspeed.initialize(args=args, model=Model())
    return engine
"""


def run(cli, root, *args):
    result = cli(["--output-format", "json", "--no-cache", *args], root)
    return json_findings(result, root)


def test_fsdp_in_another_file_makes_the_checkpoint_call_ckpt002(cli, make_project):
    root = make_project({"pkg/__init__.py": "", "pkg/model.py": MODEL, "train.py": TRAIN_FSDP1}, pyproject=PYPROJECT)
    whole = run(cli, root, ".")
    assert whole == [("pkg/model.py", 21, 17, "CKPT002")]
    # pre-commit passes only the changed model file: the index still sees train.py.
    assert run(cli, root, "pkg/model.py") == whole


# torch's own FSDP modules: `checkpoint_wrapper` (a CKPT002 trigger word) in an import, and
# checkpoints of another kind in docstrings.
STATE_DICT_HELPERS = """
import torch.distributed.algorithms._checkpoint.checkpoint_wrapper as checkpoint_wrapper


def clean(name):
    \"""Names in a state-dict checkpoint, without the wrapper's prefix.\"""
    return name.replace(checkpoint_wrapper._CHECKPOINT_PREFIX, "")
"""
# A site written without any of the site trigger words, found by name resolution.
UNUSUAL_IMPORT = """
import torch.nn as nn
from torch import nn, utils as U
from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import CheckpointImpl


class Block(nn.Module):
    def forward(self, x):
        return U.checkpoint.checkpoint(self.mlp, x)
"""


def test_libcst_parses_only_files_the_fsdp_rule_can_report_in(cli, make_project, record_calls):
    """CPython's tree (`Rule.may_apply_to_syntax`) spares the libcst parse of a file that
    names `checkpoint_wrapper` only in an import; a checkpoint site, however it is imported,
    is still parsed and reported."""
    import libcst

    files = {"pkg/__init__.py": "", "pkg/model.py": MODEL, "pkg/state.py": STATE_DICT_HELPERS,
             "pkg/unusual.py": UNUSUAL_IMPORT, "train.py": TRAIN_FSDP1}
    root = make_project(files, pyproject=PYPROJECT)
    parsed = record_calls(libcst, "parse_module", lambda text: next(p for p, t in files.items() if textwrap.dedent(t).lstrip("\n") == text))
    assert run(cli, root, ".") == [("pkg/model.py", 21, 17, "CKPT002"), ("pkg/unusual.py", 8, 16, "CKPT002")]
    assert sorted(parsed) == ["pkg/model.py", "pkg/unusual.py"]


def test_deepspeed_is_not_torch_fsdp(cli, make_project):
    root = make_project({"pkg/__init__.py": "", "pkg/model.py": MODEL, "train.py": TRAIN_DEEPSPEED}, pyproject=PYPROJECT)
    assert run(cli, root, ".") == [("pkg/model.py", 21, 17, "CKPT001")]


@pytest.mark.parametrize(
    ("setting", "train", "code"),
    [("no", TRAIN_FSDP1, "CKPT001"), ("yes", TRAIN_DEEPSPEED, "CKPT002"), ("auto", TRAIN_FSDP1, "CKPT002")],
)
def test_fsdp_setting_overrides_detection(cli, make_project, setting, train, code):
    pyproject = PYPROJECT + f'\n[tool.ckptlint]\nfsdp = "{setting}"\n'
    root = make_project({"pkg/__init__.py": "", "pkg/model.py": MODEL, "train.py": train}, pyproject=pyproject)
    assert run(cli, root, ".") == [("pkg/model.py", 21, 17, code)]


def test_result_cache_follows_changes_in_other_files(cli, make_project):
    """A cached result of model.py must not survive FSDP disappearing from train.py."""
    root = make_project({"pkg/__init__.py": "", "pkg/model.py": MODEL, "train.py": TRAIN_FSDP1}, pyproject=PYPROJECT)
    first = json_findings(cli(["--output-format", "json", "pkg/model.py"], root), root)
    assert [f[3] for f in first] == ["CKPT002"]
    (root / "train.py").write_text(textwrap.dedent(TRAIN_DEEPSPEED))
    second = json_findings(cli(["--output-format", "json", "pkg/model.py"], root), root)
    assert [f[3] for f in second] == ["CKPT001"]


def test_index_reextracts_only_changed_files(cli, make_project, record_calls):
    root = make_project({"pkg/__init__.py": "", "pkg/model.py": MODEL, "train.py": TRAIN_FSDP1}, pyproject=PYPROJECT)
    extracted = record_calls(ckptlint.model.file_facts.extraction, "extract_facts", lambda text, relative: relative)
    cli(["pkg/model.py"], root)
    assert sorted(extracted) == ["pkg/__init__.py", "pkg/model.py", "train.py"]
    extracted.clear()
    cli(["pkg/model.py"], root)
    assert extracted == []
    (root / "train.py").write_text(textwrap.dedent(TRAIN_FSDP1) + "\n# touched\n")
    cli(["pkg/model.py"], root)
    assert extracted == ["train.py"]


def test_nested_project_is_its_own_project(cli, make_project):
    """A directory with its own pyproject.toml: its FSDP use does not leak into the outer
    project, and its declared versions apply to its files."""
    root = make_project(
        {
            "model.py": MODEL,
            "examples/fsdp/pyproject.toml": "[project]\nname = 'ex'\ndependencies = ['transformers==4.46.0']\n",
            "examples/fsdp/train.py": """
                from accelerate import FullyShardedDataParallelPlugin

                plugin = FullyShardedDataParallelPlugin()
                model.gradient_checkpointing_enable()
            """,
        },
        pyproject=PYPROJECT,
    )
    assert run(cli, root, ".") == [("examples/fsdp/train.py", 4, 1, "CKPT002"), ("model.py", 21, 17, "CKPT001")]


def test_fsdp2_checkpoint_first_is_untouched(cli, make_project):
    root = make_project(
        {
            "parallelize.py": """
                from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import checkpoint_wrapper
                from torch.distributed.fsdp import fully_shard


                def apply_ac(model):
                    for name, block in model.layers.named_children():
                        model.layers.register_module(name, checkpoint_wrapper(block))


                def parallelize(model):
                    apply_ac(model)
                    for block in model.layers:
                        fully_shard(block)
                    fully_shard(model)
            """,
        },
        pyproject=PYPROJECT,
    )
    assert run(cli, root, ".") == []


SETUP_HELPERS = """
import functools

from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import (
    CheckpointImpl, apply_activation_checkpointing, checkpoint_wrapper,
)
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP


def apply_ac(model):
    wrapper = functools.partial(checkpoint_wrapper, checkpoint_impl=CheckpointImpl.NO_REENTRANT)
    apply_activation_checkpointing(model, checkpoint_wrapper_fn=wrapper)


def shard(model, policy):
    return FSDP(model, auto_wrap_policy=policy)
"""


@pytest.mark.parametrize(("torch_version", "expected"), [("2.0", [("train.py", 6, 5, "CKPT003")]), ("2.4", [])])
def test_ckpt003_along_a_call_chain_in_other_modules(cli, make_project, torch_version, expected):
    root = make_project(
        {
            "setup_utils.py": SETUP_HELPERS,
            "train.py": """
                from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
                from setup_utils import apply_ac


                def main(model, policy):
                    apply_ac(model)
                    model = FSDP(model, auto_wrap_policy=policy)
                    return model
            """,
        },
        pyproject=f"[project]\nname = 'demo'\ndependencies = ['torch>={torch_version}']\n",
    )
    assert run(cli, root, ".") == expected


def test_ckpt003_when_both_steps_are_project_functions(cli, make_project):
    """Files without FSDP or checkpoint words are not analysed: the chain is followed from
    files that mention them (here, `shard_fsdp` names the sharding)."""
    root = make_project(
        {
            "setup_utils.py": SETUP_HELPERS,
            "train.py": """
                from setup_utils import apply_ac, shard as shard_fsdp


                def main(model, policy):
                    apply_ac(model)
                    model = shard_fsdp(model, policy)
                    return model
            """,
        },
        pyproject="[project]\nname = 'demo'\ndependencies = ['torch>=2.0']\n",
    )
    assert run(cli, root, ".") == [("train.py", 5, 5, "CKPT003")]


WRAPPER_HELPERS = """
from functools import partial
from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import (
    CheckpointImpl, apply_activation_checkpointing, checkpoint_wrapper,
)
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP

reentrant = partial(checkpoint_wrapper, checkpoint_impl=CheckpointImpl.REENTRANT)
non_reentrant = partial(checkpoint_wrapper, checkpoint_impl=CheckpointImpl.NO_REENTRANT)


def enable_ac(model, wrapper={default}):
    apply_activation_checkpointing(model, checkpoint_wrapper_fn=wrapper)


def wrap_fsdp(model, policy):
    return FSDP(model, auto_wrap_policy=policy)
"""


@pytest.mark.parametrize(
    ("default", "call", "expected"),
    [
        # The helper's default wrapper decides, at the call that leaves it out.
        ("reentrant", "enable_ac(model)", "reentrant: the default of `enable_ac`'s `wrapper`"),
        ("non_reentrant", "enable_ac(model)", None),
        # What the call passes decides, by keyword or by position.
        ("non_reentrant", "enable_ac(model, wrapper=reentrant)", "reentrant: the `wrapper` passed at train.py:5"),
        ("non_reentrant", "enable_ac(model, reentrant)", "reentrant: the `wrapper` passed at train.py:5"),
        ("reentrant", "enable_ac(model, wrapper=non_reentrant)", None),
        ("reentrant", "enable_ac(model, wrapper=checkpoint_wrapper)", None),
    ],
)
def test_ckpt003_when_a_parameter_of_the_helper_chooses_the_wrapper(cli, make_project, default, call, expected):
    """torch >= 2.1 handles non-reentrant wrappers around FSDP1 units: the implementation the
    call chooses decides (the helper alone does not say). The caller names the sharding
    (`wrap_fsdp`): files without FSDP words are not analysed for CKPT003."""
    root = make_project(
        {
            "helpers.py": WRAPPER_HELPERS.replace("{default}", default),
            "train.py": f"""
                from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import checkpoint_wrapper
                from helpers import enable_ac, non_reentrant, reentrant, wrap_fsdp

                def main(model, policy):
                    {call}
                    model = wrap_fsdp(model, policy)
                    return model
            """,
        },
        pyproject=PYPROJECT,
    )
    found = [f for f in json_findings(cli(["--output-format", "json", "--no-cache", "."], root), root, with_message=True) if f[3] == "CKPT003"]
    if expected is None:
        assert found == []
    else:
        assert [f[:4] for f in found] == [("train.py", 5, 5, "CKPT003")]
        assert expected in found[0][4] and "through `enable_ac` at train.py:5" in found[0][4]


def test_ckpt002_names_where_a_reentrant_partial_is_applied(cli, make_project):
    root = make_project(
        {
            "helpers.py": WRAPPER_HELPERS.replace("{default}", "reentrant"),
            "train.py": """
                from helpers import enable_ac, non_reentrant, wrap_fsdp

                def main(model, policy):
                    model = wrap_fsdp(model, policy)
                    enable_ac(model)
                    enable_ac(model, wrapper=non_reentrant)
                    return model
            """,
        },
        pyproject=PYPROJECT,
    )
    found = json_findings(cli(["--output-format", "json", "--no-cache", "."], root), root, with_message=True)
    assert [f[:4] for f in found] == [("helpers.py", 7, 13, "CKPT002")]
    assert (
        "(applied by `apply_activation_checkpointing` at helpers.py:12 as the default of `enable_ac`'s `wrapper`, "
        "called at train.py:5)" in found[0][4]
    )


def test_unsafe_fixes_leave_a_clean_project(cli, make_project):
    root = make_project(
        {
            "pkg/__init__.py": "",
            "pkg/model.py": MODEL,
            "train.py": """
                import functools
                from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
                from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import (
                    CheckpointImpl, apply_activation_checkpointing, checkpoint_wrapper,
                )
                from transformers import TrainingArguments


                def main(model, policy):
                    wrapper = functools.partial(checkpoint_wrapper, checkpoint_impl=CheckpointImpl.REENTRANT)
                    apply_activation_checkpointing(model, checkpoint_wrapper_fn=wrapper)
                    model = FSDP(model, auto_wrap_policy=policy)
                    args = TrainingArguments("out", fsdp="full_shard", gradient_checkpointing=True)
                    return model, args
            """,
        },
        pyproject=PYPROJECT.replace("['torch>=2.4']", "['torch>=2.4', 'transformers==4.46.3']"),  # reentrant HF default
    )
    before = run(cli, root, ".")
    assert [f[3] for f in before] == ["CKPT002", "CKPT002", "CKPT003", "CKPT004"]
    result = cli(["--fix", "--unsafe-fixes", "--no-cache", "."], root)
    assert result.exit_code == 0, result.stdout
    for path in ("pkg/model.py", "train.py"):
        ast.parse((root / path).read_text())
    assert run(cli, root, ".") == []
    fixed = (root / "train.py").read_text()
    assert "model = FSDP(model, auto_wrap_policy=policy)\n    apply_activation_checkpointing(model," in fixed
    assert 'fsdp_config={"activation_checkpointing": True}' in fixed and "gradient_checkpointing=True" not in fixed


def test_class_wrapped_in_another_file_double_checkpointing(cli, make_project):
    root = make_project(
        {
            "blocks.py": """
                import torch.nn as nn
                from torch.utils.checkpoint import checkpoint


                class ResidualBlock(nn.Module):
                    def forward(self, x):
                        return x + checkpoint(self.body, x, use_reentrant=True)
            """,
            "train.py": """
                from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import apply_activation_checkpointing

                from blocks import ResidualBlock

                apply_activation_checkpointing(model, check_fn=lambda m: isinstance(m, ResidualBlock))
            """,
        },
        pyproject=PYPROJECT,
    )
    result = cli(["--output-format", "json", "--no-cache", "blocks.py"], root)
    findings = json_findings(result, root, with_message=True)
    assert [f[:4] for f in findings] == [("blocks.py", 7, 20, "CKPT005")]
    assert "train.py:5" in findings[0][4]


# --- the index ---------------------------------------------------------------------------


def test_index_facts_round_trip_through_json():
    facts = extract_facts(textwrap.dedent(SETUP_HELPERS), "setup_utils.py")
    from ckptlint.model.file_facts.facts import FileFacts

    assert FileFacts.from_json(facts.to_json()) == facts
    [apply_ac] = [f for f in facts.functions if f.name == "setup_utils.apply_ac"]
    assert [(e.kind, e.target, e.impl) for e in apply_ac.events] == [
        (EventKind.CHECKPOINT, "model", Impl.NON_REENTRANT)
    ]


def test_index_follows_parameters_through_project_functions():
    index = ProjectIndex(
        None,
        {
            "setup_utils.py": extract_facts(textwrap.dedent(SETUP_HELPERS), "setup_utils.py"),
            "wrap.py": extract_facts("from setup_utils import shard\ndef outer(m, p):\n    return shard(m, p)\n", "wrap.py", prefilter=False),
        },
    )
    effects = index.parameter_effects("wrap.outer", 0)
    assert [(e.kind, e.auto_wrap, e.path, e.line) for e in effects] == [(EventKind.FSDP1, True, "setup_utils.py", 16)]
    assert index.parameter_effects("wrap.outer", 1) == []


# --- torch evidence ------------------------------------------------------------------------


def test_nested_checkpointing_recomputes_once_only_non_reentrant_and_last():
    """CKPT005's evidence: calls of a block's inner function per training step. Non-reentrant
    in non-reentrant recomputes once only when the block returns the inner checkpoint's
    value; with work after it, the inner function runs a third time."""
    torch = pytest.importorskip("torch")
    import functools
    import warnings

    import torch.nn as nn
    from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import (
        CheckpointImpl,
        apply_activation_checkpointing,
        checkpoint_wrapper,
    )
    from torch.utils.checkpoint import checkpoint

    calls = 0

    class Block(nn.Module):
        def __init__(self, inner, last):
            super().__init__()
            self.lin = nn.Linear(8, 8)
            self.after = nn.Linear(8, 8)
            self.inner_reentrant = inner
            self.last = last

        def body(self, x):
            nonlocal calls
            calls += 1
            return torch.tanh(self.lin(x))

        def forward(self, x):
            if self.inner_reentrant is None:
                return self.body(x)
            h = checkpoint(self.body, x, use_reentrant=self.inner_reentrant)
            return h if self.last else torch.tanh(self.after(h))

    def calls_per_step(inner, outer, last=True):
        nonlocal calls
        model = nn.Sequential(nn.Linear(8, 8), Block(inner, last), Block(inner, last))
        if outer is not None:
            wrapper = functools.partial(checkpoint_wrapper, checkpoint_impl=outer)
            apply_activation_checkpointing(model, checkpoint_wrapper_fn=wrapper, check_fn=lambda m: isinstance(m, Block))
        calls = 0
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model(torch.randn(4, 8)).sum().backward()
        return calls

    assert calls_per_step(None, None) == 2
    assert calls_per_step(False, None) == 4
    assert calls_per_step(False, CheckpointImpl.NO_REENTRANT) == 4
    assert calls_per_step(False, CheckpointImpl.REENTRANT) == 6
    assert calls_per_step(True, CheckpointImpl.NO_REENTRANT) == 6
    # Work after the inner checkpoint: a third run whatever the implementations.
    assert calls_per_step(False, None, last=False) == 4
    assert calls_per_step(False, CheckpointImpl.NO_REENTRANT, last=False) == 6
    assert calls_per_step(False, CheckpointImpl.REENTRANT, last=False) == 6
    assert calls_per_step(True, CheckpointImpl.NO_REENTRANT, last=False) == 6


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ('os.environ.get("R", "1") == "1"', True),
        ('os.environ.get("R", "0") == "1"', False),
        ('os.getenv("R", "true").lower() in ("1", "true", "yes")', True),
        ('bool(int(os.getenv("R", "1")))', True),
        ('bool(int(os.getenv("R", "0")))', False),
        ('strtobool(os.environ.get("R", "False"))', False),
        ('os.environ.get("R", "1") != "0"', True),
        ('os.environ["R"] == "1"', None),  # no default: unset raises, not judged
        ('os.environ.get("R") == "1"', None),
        ('flag == "1"', None),
    ],
)
def test_the_default_of_a_reentrancy_flag_read_from_the_environment(source, expected):
    import ast

    from ckptlint.model.file_facts.options import environment_default

    assert environment_default(ast.parse(source, mode="eval").body)[0] is expected


# --- which FSDP use a CKPT002 message names ------------------------------------------------

FIXTURE_TWO_WRAPS = Path(__file__).resolve().parent.parent / "fixtures" / "projects" / "fsdp_two_wraps"
WHY_AND_FIX = (
    "under FSDP1 the recomputation all-gathers every unit it covers a second time in backward, and several "
    "reentrant regions in one FSDP1 unit crash backward; pass `use_reentrant=False`"
)


def ckpt002_messages(cli, root, *paths) -> list[tuple]:
    result = cli(["--output-format", "json", "--no-cache", "--select", "CKPT002", *paths], root)
    return json_findings(result, root, with_message=True)


def test_the_message_names_the_wrap_of_the_model_holding_the_checkpoint(cli):
    # reward.py:18 shards another model and comes first; train.py:15 shards the policy.
    expected = [
        (
            "two_wraps/model.py", 15, 20, "CKPT002",
            "reentrant `checkpoint` (`use_reentrant` omitted: torch defaults to reentrant) in a project that "
            "uses FSDP (`FullyShardedDataParallel` at two_wraps/train.py:15, which wraps `policy`, a `Policy`): "
            + WHY_AND_FIX,
        )
    ]
    assert ckpt002_messages(cli, FIXTURE_TWO_WRAPS, ".") == expected
    assert ckpt002_messages(cli, FIXTURE_TWO_WRAPS, "two_wraps/model.py") == expected


TRAINER = """
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP

from pkg.model import Model
from pkg.reward import Reward


class Trainer:
    def __init__(self):
        self.reward = FSDP(Reward())
        self.model = Model()

    def setup(self):
        self.model = FSDP(self.model)
"""

REWARD = """
import torch.nn as nn
from torch.distributed.fsdp import fully_shard


class Reward(nn.Module):
    def __init__(self):
        super().__init__()
        self.head = nn.Linear(4, 1)


def build_reward():
    reward = Reward()
    fully_shard(reward)
    return reward
"""

HF_TRAINER = """
from transformers import Trainer, TrainingArguments

from pkg.model import Model


def main(dataset):
    args = TrainingArguments("out", fsdp="full_shard")
    Trainer(model=Model(), args=args, train_dataset=dataset).train()
"""


def test_a_wrap_of_self_model_in_a_method_and_a_wrap_of_another_model_in_the_same_class(cli, make_project):
    root = make_project(
        {"pkg/__init__.py": "", "pkg/model.py": MODEL, "pkg/reward.py": REWARD, "pkg/trainer.py": TRAINER},
        pyproject=PYPROJECT,
    )
    ((*_, message),) = ckpt002_messages(cli, root, ".")
    assert "(`FullyShardedDataParallel` at pkg/trainer.py:13, which wraps `self.model`, a `Model`)" in message


def test_a_use_whose_model_is_not_known_comes_before_one_known_to_wrap_another_model(cli, make_project):
    root = make_project(
        {"pkg/__init__.py": "", "pkg/model.py": MODEL, "pkg/reward.py": REWARD, "train.py": HF_TRAINER},
        pyproject=PYPROJECT + "[tool.ckptlint]\ntarget-versions = {transformers = '4.46'}\n",
    )
    ((*_, message),) = ckpt002_messages(cli, root, "pkg/model.py")
    # pkg/reward.py:13 shards the reward model only; the Trainer's model is not followed.
    assert "(`TrainingArguments(fsdp=...)` at train.py:7)" in message


def test_a_wrap_of_a_known_model_reaches_only_the_classes_it_may_hold(make_project, cli):
    """Every FSDP wrap of the project wraps known models: a class none of them holds is not
    under FSDP (CKPT001 there), a subclass a config default's table may pick instead is."""
    root = make_project({
        "vit/__init__.py": "",
        "vit/model.py": """
            import torch.nn as nn
            from torch.utils.checkpoint import checkpoint

            class VisionTransformer(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.blocks = nn.ModuleList(nn.Linear(8, 8) for _ in range(4))

            class ViTWithRegisters(VisionTransformer):
                def forward(self, x):
                    for block in self.blocks:
                        x = checkpoint(block, x, use_reentrant=True)
                    return x

            class Captioner(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.proj = nn.Linear(8, 8)

                def forward(self, x):
                    return checkpoint(self.proj, x)
            """,
        "main_fsdp.py": """
            from dataclasses import dataclass
            from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
            from vit.model import VisionTransformer, ViTWithRegisters

            @dataclass
            class TrainConfig:
                arch: str = "vit_base"

            ARCHS = {"vit_base": VisionTransformer, "vit_reg": ViTWithRegisters}

            def build(cfg: TrainConfig):
                model = ARCHS[cfg.arch]()
                return FSDP(model)

            def main(cfg=TrainConfig()):
                model = build(cfg)
                model(None).sum().backward()
            """,
    }, pyproject="[project]\nname = 'vit'\ndependencies = ['torch>=2.4']\n")
    result = cli(["check", ".", "--no-cache", "--output-format", "json"], root)
    assert [(path, row, code) for path, row, _, code in json_findings(result, root)] == [
        ("vit/model.py", 12, "CKPT002"), ("vit/model.py", 21, "CKPT001"),
    ]


def test_a_subfolder_of_a_repository_of_separate_projects_does_not_inherit_another_folders_fsdp(cli, tmp_path):
    """A clone of a research monorepo (the root marked by `.git` alone): linting one project
    folder, FSDP sharding in a sibling folder that shares no import with it is no FSDP of its own."""
    (tmp_path / ".git").mkdir()
    files = {
        "lm/train_fsdp.py": (
            "import torch\nfrom torch.distributed.fsdp import FullyShardedDataParallel as FSDP\n"
            "from model import Decoder\n\n\ndef main():\n    model = FSDP(Decoder())\n"
            "    model(torch.randn(2, 8)).sum().backward()\n"
        ),
        "lm/model.py": "import torch.nn as nn\n\n\nclass Decoder(nn.Module):\n    pass\n",
        "seg/vit.py": (
            "import torch.nn as nn\nimport torch.utils.checkpoint as cp\n\n\nclass ViT(nn.Module):\n"
            "    def forward(self, x):\n        return cp.checkpoint(self.block, x)\n"
        ),
    }
    for relative, source in files.items():
        (tmp_path / relative).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / relative).write_text(source)
    for cwd in (tmp_path, tmp_path / "seg"):
        findings = json_findings(cli(["--output-format", "json", "--no-cache", "."], cwd), cwd)
        assert [f[3] for f in findings] == ["CKPT001"], findings
    # An import joining the folders brings the FSDP use to the backbone.
    (tmp_path / "seg/vit.py").write_text("from lm.model import Decoder\n" + files["seg/vit.py"])
    findings = json_findings(cli(["--output-format", "json", "--no-cache", "."], tmp_path), tmp_path)
    assert [f[3] for f in findings] == ["CKPT002"], findings


def test_an_entry_points_fsdp_reaches_no_training_script_that_never_imports_it(cli, make_project):
    """A package's `main()` that shards, called only by what the project model cannot see
    (`fire.Fire(main)`), reaches the package and what imports it, not a quickstart that
    trains with the package's own loop on one GPU and never imports that module."""
    root = make_project(
        {
            "cookbook/__init__.py": "",
            "cookbook/train_utils.py": "def train(model, loader):\n    for batch in loader:\n        model(**batch).loss.backward()\n",
            "cookbook/finetuning.py": (
                "import fire\nfrom torch.distributed.fsdp import FullyShardedDataParallel as FSDP\n"
                "from transformers import AutoModelForCausalLM\n\n"
                "def main(enable_fsdp=False):\n    model = AutoModelForCausalLM.from_pretrained('m')\n"
                "    model.gradient_checkpointing_enable()\n    if enable_fsdp:\n        model = FSDP(model)\n\n"
                "if __name__ == '__main__':\n    fire.Fire(main)\n"
            ),
            "quickstart/peft.py": (
                "from transformers import AutoModelForCausalLM\nfrom cookbook.train_utils import train\n\n"
                "model = AutoModelForCausalLM.from_pretrained('m')\nmodel.gradient_checkpointing_enable()\ntrain(model, [])\n"
            ),
            "quickstart/sharded.py": (
                "from transformers import AutoModelForCausalLM\nfrom cookbook import finetuning\nfrom cookbook.train_utils import train\n\n"
                "model = AutoModelForCausalLM.from_pretrained('m')\nmodel.gradient_checkpointing_enable()\ntrain(model, [])\n"
            ),
        },
        pyproject="[project]\nname = 'cookbook'\ndependencies = ['transformers==4.46.3']\n",
    )
    found = json_findings(cli(["check", "--output-format", "json", "--select", "CKPT002", "."], root), root)
    assert [(path, row, code) for path, row, _, code in found] == [
        ("cookbook/finetuning.py", 7, "CKPT002"), ("quickstart/sharded.py", 6, "CKPT002"),
    ]
