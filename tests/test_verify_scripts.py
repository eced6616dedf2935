"""Script mode on training code as people write it: reentrant checkpointing (the engine's
own backward inside the step's), torch's reentrant wrapper, a closure factory, Hugging Face
gradient checkpointing and its `Trainer`, `torch.compile`; and the parts that make that
work on every torch: the checkpoint internals read off torch's code, the generator's two
signatures, what cannot be switched off named, state that identifies a run left out."""

from __future__ import annotations

import inspect
import textwrap
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

import torch.utils.checkpoint as torch_checkpoint  # noqa: E402
from torch import nn  # noqa: E402

from ckptlint.runtime_check import verify, verify_script  # noqa: E402
from ckptlint.runtime_check._regions import modules_named  # noqa: E402
from ckptlint.runtime_check._state import is_run_identity  # noqa: E402
from ckptlint.runtime_check._switch import CheckpointInternals, GeneratorCall, untested_torch_warning  # noqa: E402

pytestmark = pytest.mark.torch

VERIFY = Path(__file__).resolve().parent.parent / "fixtures" / "verify"
TRAIN_REENTRANT = VERIFY / "train_reentrant.py"


def region_names(report) -> list[str]:
    return sorted(region.name for region in report.regions)


@pytest.mark.parametrize(
    "arguments, regions",
    [
        (["--impl", "checkpoint"], ["blocks.0", "blocks.1", "blocks.2", "blocks.3"]),
        (["--impl", "wrapper"], ["blocks.0", "blocks.1", "blocks.2", "blocks.3"]),
        (["--impl", "segments"], ["blocks.0-1", "blocks.2-3"]),
        (["--impl", "checkpoint", "--compile"], ["blocks.0", "blocks.1", "blocks.2", "blocks.3"]),
        (["--impl", "wrapper", "--compile"], ["blocks.0", "blocks.1", "blocks.2", "blocks.3"]),
    ],
)
def test_correct_reentrant_script_passes_with_regions_named_by_module(arguments, regions):
    report = verify_script(TRAIN_REENTRANT, arguments, repeat=1, measure_peak=False)
    assert report.verdict == "pass", report.to_text()
    assert report.errors == ()
    assert report.model == "Net"  # the eager module, inside torch.compile's wrapper too
    assert report.recomputation.reentrant_regions == len(regions)
    assert report.recomputation.checkpointed_region_recomputes == len(regions)
    assert region_names(report) == regions
    assert report.gradients.max_abs_diff == 0.0


def test_compiled_script_notes_that_its_eager_module_was_verified():
    report = verify_script(TRAIN_REENTRANT, ["--compile"], repeat=1, measure_peak=False)
    assert any("torch.compile'd: verified its eager module" in note for note in report.notes)
    assert report.attributes == ()  # dynamo's wrapper ids differ between runs: not compared


def test_reentrant_script_with_a_late_binding_closure_still_fails(tmp_path):
    script = tmp_path / "late.py"
    script.write_text(
        textwrap.dedent(
            """
            import torch
            from torch import nn
            from torch.utils.checkpoint import checkpoint

            class Net(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.layers = nn.ModuleList(nn.Linear(8, 8) for _ in range(3))

                def forward(self, x):
                    outputs = []
                    for layer in self.layers:
                        outputs.append(checkpoint(lambda t: torch.tanh(layer(t)), x, use_reentrant=True))
                    return torch.stack(outputs).sum()

            torch.manual_seed(0)
            model = Net()
            for step in range(2):
                model(torch.randn(4, 8, requires_grad=True)).backward()
            """
        )
    )
    report = verify_script(script, repeat=1, measure_peak=False)
    assert report.verdict == "fail"
    assert report.errors[0].code == "CKPT030"


def test_hugging_face_reentrant_gradient_checkpointing_in_a_training_loop(tmp_path):
    pytest.importorskip("transformers")
    script = tmp_path / "hf_loop.py"
    script.write_text(
        textwrap.dedent(
            """
            import torch
            from transformers import LlamaConfig, LlamaForCausalLM

            torch.manual_seed(0)
            config = LlamaConfig(vocab_size=128, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                 num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
            model = LlamaForCausalLM(config)
            model.config.use_cache = False
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": True})
            model.enable_input_require_grads()
            model.train()
            optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
            for step in range(2):
                ids = torch.randint(0, 128, (2, 16))
                model(input_ids=ids, labels=ids).loss.backward()
                optimizer.step()
                optimizer.zero_grad()
            """
        )
    )
    report = verify_script(script, repeat=1, measure_peak=False)
    assert report.verdict == "pass", report.to_text()
    assert report.recomputation.reentrant_regions == 2
    assert region_names(report) == ["model.layers.0", "model.layers.1"]


def test_hugging_face_trainer_with_reentrant_kwargs(tmp_path):
    pytest.importorskip("transformers")
    pytest.importorskip("accelerate")
    script = tmp_path / "hf_trainer.py"
    script.write_text(
        textwrap.dedent(
            f"""
            import torch
            from torch.utils.data import Dataset
            from transformers import LlamaConfig, LlamaForCausalLM, Trainer, TrainingArguments

            class Tokens(Dataset):
                def __init__(self):
                    self.ids = torch.randint(0, 128, (8, 16), generator=torch.Generator().manual_seed(0))
                def __len__(self):
                    return len(self.ids)
                def __getitem__(self, i):
                    return {{"input_ids": self.ids[i], "labels": self.ids[i]}}

            torch.manual_seed(0)
            config = LlamaConfig(vocab_size=128, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                 num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64, use_cache=False)
            args = TrainingArguments(
                output_dir={str(tmp_path / "out")!r}, per_device_train_batch_size=2, max_steps=2, report_to=[],
                gradient_checkpointing=True, gradient_checkpointing_kwargs={{"use_reentrant": True}},
                use_cpu=True, save_strategy="no", dataloader_num_workers=0, seed=0, disable_tqdm=True,
            )
            Trainer(model=LlamaForCausalLM(config), args=args, train_dataset=Tokens()).train()
            """
        )
    )
    report = verify_script(script, repeat=1, measure_peak=False)
    assert report.verdict == "pass", report.to_text()
    assert report.recomputation.reentrant_regions == 2
    assert region_names(report) == ["model.layers.0", "model.layers.1"]


class _Stage(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(4, 4, 3, padding=1)
        self.bn = nn.BatchNorm2d(4)

    def forward(self, x):
        return torch.relu(self.bn(self.conv(x)))


class _ResNetLike(nn.Module):
    """Six stages, each a BatchNorm checkpointed through a closure factory."""

    def __init__(self) -> None:
        super().__init__()
        self.stages = nn.ModuleList(_Stage() for _ in range(6))

    def forward(self, x):
        def run(stage):
            return lambda t: stage(t)

        for stage in self.stages:
            x = torch_checkpoint.checkpoint(run(stage), x, use_reentrant=False)
        return x.mean()


def test_batchnorm_in_many_regions_is_one_cause_line_naming_the_modules():
    torch.manual_seed(0)
    report = verify(_ResNetLike(), torch.randn(2, 4, 6, 6), lambda out: out, repeat=1, measure_peak=False)
    causes = [f for f in report.errors if f.role == "cause"]
    assert [(f.code, f.subject) for f in causes] == [("CKPT010", "stages.0.bn")]
    assert causes[0].message.startswith("6 modules (BatchNorm2d: stages.0-5.bn) updated their running statistics twice")
    assert region_names(report) == [f"stages.{i}" for i in range(6)]


def test_modules_in_one_phrase():
    assert modules_named(["blocks.3"]) == "blocks.3"
    assert modules_named(["blocks.0", "blocks.1", "blocks.2"]) == "blocks.0-2"
    assert modules_named(["blocks.0", "blocks.2"]) == "blocks.0, blocks.2"
    assert modules_named(["a", "b.c", "d", "e", "f"]) == "a, b.c, d and 2 more"
    assert modules_named(["stem", "stem"]) == "stem"


# --- switching checkpointing off on every torch ----------------------------------------------------


def test_checkpoint_internals_are_read_off_this_torch():
    internals = CheckpointInternals.of_this_torch()
    assert "CheckpointFunction" in internals.function_names
    assert internals.generator_names  # `_checkpoint_without_reentrant_generator` (<= 2.13) or `..._impl` (2.14+)
    for name in internals.generator_names:
        assert inspect.isgeneratorfunction(getattr(torch_checkpoint, name))


def _generator_before_2_14(fn, preserve_rng_state=True, context_fn=None, determinism_check="default", debug=False, early_stop=True, *args, **kwargs):
    yield


def _generator_since_2_14(fn, args, kwargs, *, preserve_rng_state=True, context_fn=None, determinism_check="default", debug=False, early_stop=True, respect_saved_tensors_hooks=None):
    yield


def test_generator_calls_are_read_through_either_signature():
    def region(x, scale=1.0):
        return x * scale

    def wrapped(x, scale=1.0):
        return region(x, scale)

    old = GeneratorCall.of(_generator_before_2_14, (region, False, None, "default", False, True, "x"), {"scale": 2.0})
    new = GeneratorCall.of(_generator_since_2_14, (region, ("x",), {"scale": 2.0}), {"preserve_rng_state": False})
    for call in (old, new):
        assert call.function is region
        assert call.region_args == ("x",)
        assert call.region_kwargs == {"scale": 2.0}
        assert call.option("preserve_rng_state") is False
        assert call.option("debug") is False
    args, kwargs = old.with_function(wrapped)
    assert args[0] is wrapped and args[-1] == "x" and kwargs == {"scale": 2.0}
    args, kwargs = new.with_function(wrapped)
    assert args == (wrapped, ("x",), {"scale": 2.0}) and kwargs == {"preserve_rng_state": False}


def test_a_torch_outside_the_tested_releases_is_warned_about():
    assert untested_torch_warning("2.13.0+cpu") is None
    assert untested_torch_warning("2.15.0") is None
    assert "outside the releases this verifier was tested on" in untested_torch_warning("2.99.0")
    assert "outside the releases" in untested_torch_warning("2.0.1")


def test_what_identifies_a_run_is_not_state():
    module = nn.Linear(2, 2)
    assert is_run_identity(module, "_torchdynamo_wrapper_id", 7)
    assert is_run_identity(module, "dynamo_ctx", object())
    assert is_run_identity(module, "owner_id", id(module))
    assert not is_run_identity(module, "calls", 3)
    assert not is_run_identity(module, "flag", True)


# --- how often a script runs -------------------------------------------------------------------


@pytest.fixture
def script_runs(monkeypatch):
    from ckptlint.runtime_check import _script

    runs: list[int] = []
    original = _script.ScriptStep._run_script

    def counted(self, state, switch):
        runs.append(1)
        return original(self, state, switch)

    monkeypatch.setattr(_script.ScriptStep, "_run_script", counted)
    return runs


def test_a_script_that_trains_long_enough_runs_three_times(script_runs):
    report = verify_script(TRAIN_REENTRANT, ["--steps", "8"], measure_peak=False)  # --repeat 5, the default
    assert report.verdict == "pass"
    assert len(script_runs) == 3  # a warm-up, without checkpointing, with it
    assert report.time.repeats == 5  # its steps 2-6 of each measured run, timed
    assert all(t > 0 for t in report.time.baseline_samples + report.time.checkpointed_samples)


def test_a_script_that_trains_too_few_steps_is_run_again_for_the_missing_pairs(script_runs):
    report = verify_script(TRAIN_REENTRANT, ["--steps", "3"], repeat=4, measure_peak=False)
    assert report.time.repeats == 4
    # Two later steps in each measured run; the other two pairs take a run each of both kinds.
    assert len(script_runs) == 3 + 2 * 2


def test_the_verifier_names_rule_codes_only_through_the_manifest():
    """Each code a verifier finding carries comes from `_hazards` (the generated manifest):
    no module of runtime_check spells one as a literal."""
    import ast
    import re

    from ckptlint.rule_manifest import RULE_MANIFEST
    from ckptlint.runtime_check import _hazards

    literals = []
    for path in sorted((Path(__file__).resolve().parent.parent / "runtime_check").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and re.fullmatch(r"CKPT\d{3}", node.value):
                literals.append(f"{path.name}:{node.lineno}")
    assert literals == []
    assert _hazards.HAZARD_CODES <= {rule.code for rule in RULE_MANIFEST}
    assert _hazards.CHECKPOINTED_BATCHNORM == "CKPT010" and _hazards.KWARGS_TO_REENTRANT == "CKPT032"
