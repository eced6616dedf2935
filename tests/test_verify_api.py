"""The runtime verifier's Python API (`ckptlint.runtime_check`), on the fixtures under
fixtures/verify/ and on small models written here, all on CPU. Verdicts, the parameters and
modules named, and the rule codes are exact; so is "the model is left as it was"."""

from __future__ import annotations

import dataclasses
import functools
import importlib.util
import json
import random
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402
from torch.utils.checkpoint import checkpoint, checkpoint_sequential  # noqa: E402

import torch.utils.checkpoint as torch_checkpoint  # noqa: E402
from ckptlint.runtime_check._switch import CheckpointInternals  # noqa: E402
from ckptlint.runtime_check import (  # noqa: E402
    AttributeChange,
    NoCheckpointingFound,
    NoTrainingStep,
    Report,
    VerifyError,
    verify,
    verify_case,
    verify_script,
)

pytestmark = pytest.mark.torch

VERIFY = Path(__file__).resolve().parent.parent / "fixtures" / "verify"
INTERNALS = CheckpointInternals.of_this_torch()
REAL_INTERNALS = {name: getattr(torch_checkpoint, name) for name in INTERNALS.function_names + INTERNALS.generator_names}
MODULE_CALL = torch.nn.Module.__call__
AUTOGRAD_BACKWARD = torch.autograd.backward

JSON_KEYS = {
    "verdict", "target", "model", "device", "dtype", "tolerance", "loss", "gradients", "buffers",
    "attributes", "rng", "memory", "time", "recomputation", "findings", "notes", "duration_s", "regions",
}  # fmt: skip


@functools.lru_cache(maxsize=None)
def case_report(name: str) -> Report:
    """Each fixture verified once per test session (the tests below read the same report)."""
    return verify_case(VERIFY / f"{name}.py")


def load_fixture(name: str):
    spec = importlib.util.spec_from_file_location(f"verify_fixture_{name}", VERIFY / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def error_codes(report: Report) -> set[str | None]:
    return {f.code for f in report.errors}


def assert_checkpointing_restored() -> None:
    for name, real in REAL_INTERNALS.items():
        assert getattr(torch_checkpoint, name) is real
    composable = sys.modules.get("torch.distributed._composable.checkpoint_activation")
    for name, real in REAL_INTERNALS.items():
        if composable is not None and hasattr(composable, name):
            assert getattr(composable, name) is real


# --- the fixtures -----------------------------------------------------------------------------


def test_per_layer_checkpointed_transformer_passes_with_its_saving():
    report = case_report("transformer_stack")
    assert report.verdict == "pass" and report.passed and report.exit_code == 0
    assert report.findings == ()
    assert report.gradients.compared == 53
    assert report.gradients.mismatched == ()
    assert report.gradients.max_abs_diff == 0.0 and report.gradients.max_rel_diff == 0.0
    assert report.loss.matches and report.loss.abs_diff == 0.0 and report.loss.source == "loss_fn"
    assert report.tolerance.exact
    assert report.rng.generators == ("cpu",) and report.rng.mismatched == ()
    recomputation = report.recomputation
    assert (recomputation.regions, recomputation.reentrant_regions) == (4, 0)
    assert recomputation.baseline_module_forwards == 0
    assert recomputation.checkpointed_region_recomputes == 4
    assert recomputation.checkpointed_module_forwards == 48  # 12 modules per block
    activations = report.memory.activations
    assert activations.metric == "saved_tensor_bytes"
    assert activations.saving >= 0.5
    assert 0 < activations.checkpointed_bytes < activations.baseline_bytes
    peak = report.memory.peak
    assert peak is not None and peak.metric == "cpu_profiler_peak_live_bytes"
    assert 0 < peak.checkpointed_bytes < peak.baseline_bytes
    assert report.time.baseline_s > 0 and report.time.checkpointed_s > 0
    ratios = sorted(c / b for b, c in zip(report.time.baseline_samples, report.time.checkpointed_samples))
    assert report.time.overhead == ratios[len(ratios) // 2]  # the median of the pairs' ratios (5 pairs)


def test_batchnorm_in_a_region_fails_naming_each_norm_layer():
    report = case_report("batchnorm_in_checkpoint")
    assert report.verdict == "fail" and report.exit_code == 1
    # One cause line for the kind, naming every module it covers.
    assert [(f.code, f.subject) for f in report.errors] == [("CKPT010", "stages.0.bn")]
    assert report.errors[0].message.startswith(
        "2 modules (BatchNorm2d: stages.0-1.bn) updated their running statistics twice: in 'stages.0.bn', "
    )
    assert "num_batches_tracked is 2 with checkpointing, 1 without" in report.errors[0].message
    counters = [m for m in report.buffers.mismatched if m.name.endswith("num_batches_tracked")]
    assert [(m.name, m.baseline, m.checkpointed, m.code, m.module) for m in counters] == [
        ("stages.0.bn.num_batches_tracked", "1", "2", "CKPT010", "stages.0.bn"),
        ("stages.1.bn.num_batches_tracked", "1", "2", "CKPT010", "stages.1.bn"),
    ]
    assert {m.name for m in report.buffers.mismatched} == {
        f"stages.{i}.bn.{b}" for i in (0, 1) for b in ("running_mean", "running_var", "num_batches_tracked")
    }
    assert report.buffers.compared == 6
    # Train-mode BatchNorm normalises with batch statistics: the gradients are exact.
    assert report.gradients.mismatched == () and report.gradients.max_abs_diff == 0.0


def test_late_binding_lambda_fails_naming_the_parameters_and_the_variable():
    report = case_report("late_binding_lambda")
    assert report.verdict == "fail"
    assert error_codes(report) == {"CKPT030"}
    assert {(m.name, m.kind, m.code) for m in report.gradients.mismatched} == {
        (f"layers.{i}.{p}", "value", "CKPT030") for i in (0, 1, 2) for p in ("weight", "bias")
    }
    assert all(m.max_abs_diff > 1e-3 for m in report.gradients.mismatched)
    closure = [f for f in report.errors if f.subject == "layer"]
    assert len(closure) == 1
    assert "captures `layer`" in closure[0].message
    assert "module 'layers.0' (Linear)" in closure[0].message and "module 'layers.3' (Linear)" in closure[0].message
    assert "late_binding_lambda.py:24" in closure[0].message
    assert report.loss.matches  # the forward is right; only the recomputation is wrong


def test_dropout_without_rng_state_fails_on_gradients_and_rng():
    report = case_report("dropout_without_rng_state")
    assert report.verdict == "fail"
    assert error_codes(report) == {"CKPT033"}
    assert report.rng.mismatched == ("cpu",)
    rng = [f for f in report.errors if f.subject == "rng"]
    assert len(rng) == 1 and "preserve_rng_state=False" in rng[0].message and "3 region(s)" in rng[0].message
    assert {m.name for m in report.gradients.mismatched} == {
        "blocks.0.0.weight", "blocks.0.0.bias", "blocks.0.3.weight", "blocks.0.3.bias",
        "blocks.1.0.weight", "blocks.1.0.bias", "blocks.1.3.weight", "blocks.1.3.bias",
        "blocks.2.0.weight", "blocks.2.0.bias", "blocks.2.3.weight",
    }  # fmt: skip
    assert {m.code for m in report.gradients.mismatched} == {"CKPT033"}
    assert report.loss.matches


@pytest.mark.filterwarnings("ignore:None of the inputs have requires_grad=True")
def test_reentrant_checkpoint_after_frozen_embedding_fails_with_missing_gradients():
    report = case_report("reentrant_frozen_input")
    assert report.verdict == "fail"
    assert error_codes(report) == {"CKPT007"}
    block_parameters = {
        f"blocks.{i}.{p}" for i in (0, 1) for p in ("norm.weight", "norm.bias", "ff.0.weight", "ff.0.bias", "ff.2.weight", "ff.2.bias")
    }
    assert {m.name for m in report.gradients.mismatched} == block_parameters
    assert {(m.kind, m.checkpointed) for m in report.gradients.mismatched} == {("missing_checkpointed", "None")}
    assert report.gradients.compared == 14  # 12 block parameters and the head; the embedding is frozen
    explanation = [f for f in report.errors if f.subject == "blocks.0"]
    assert len(explanation) == 1 and "2 reentrant checkpoint call(s) received no input that requires grad" in explanation[0].message
    assert report.recomputation.reentrant_regions == 2
    assert report.recomputation.checkpointed_module_forwards == 0
    assert report.recomputation.checkpointed_region_recomputes == 0


def test_stateful_counter_fails_naming_module_and_attributes():
    report = case_report("stateful_counter")
    assert report.verdict == "fail"
    assert report.attributes == (
        AttributeChange("block", "calls", "1", "2"),
        AttributeChange("block", "seen", "list of length 1", "list of length 2"),
    )
    assert [(f.code, f.subject) for f in report.errors] == [("CKPT011", "block.calls"), ("CKPT011", "block.seen")]
    assert "CountingBlock" in report.errors[0].message
    assert report.gradients.mismatched == ()


def test_hugging_face_model_with_gradient_checkpointing_passes():
    pytest.importorskip("transformers")
    report = case_report("hf_tiny_llama")
    assert report.verdict == "pass" and report.findings == ()
    assert report.model == "LlamaForCausalLM"
    assert report.loss.source == "output.loss"
    assert report.gradients.compared == 21 and report.gradients.max_abs_diff == 0.0
    assert report.recomputation.regions == 2 and report.recomputation.checkpointed_region_recomputes == 2
    assert report.memory.activations.saving > 0.5


@pytest.mark.filterwarnings("ignore:None of the inputs have requires_grad=True")
def test_hugging_face_layers_after_frozen_embeddings_answer_to_ckpt021():
    # A LoRA-style setup by hand: the base frozen, reentrant gradient checkpointing, no
    # input grads. The same missing gradients as reentrant_frozen_input, but the cure is
    # transformers' own, so the cause is CKPT021's, not CKPT007's. transformers 5 enables
    # input grads itself for an `input_ids` model (`gradient_checkpointing_enable`); taking
    # them away gives what older releases do without PEFT's help.
    pytest.importorskip("transformers")
    case = load_fixture("hf_tiny_llama").make_case()
    model = case["model"]
    # Each enable registers a hook and forgets the previous one's handle: remove it first.
    model.disable_input_require_grads()
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": True})
    model.disable_input_require_grads()
    model.model.embed_tokens.weight.requires_grad_(False)
    report = verify(model, case["inputs"])
    assert report.verdict == "fail"
    causes = [f for f in report.errors if f.role == "cause"]
    assert [f.code for f in causes] == ["CKPT021"]
    assert "enable_input_require_grads()" in causes[0].message
    assert {m.code for m in report.gradients.mismatched} == {"CKPT021"}
    assert any(m.name.startswith("model.layers.0.") for m in report.gradients.mismatched)


def test_training_script_passes_in_script_mode():
    report = verify_script(VERIFY / "train.py", ["--steps", "2"])
    assert report.verdict == "pass"
    assert report.model == "TinyGPT"
    assert report.gradients.compared == 41  # 3 blocks
    assert report.recomputation.regions == 3
    assert report.notes[0] == (
        "script mode: the step runs from the first training-mode forward of TinyGPT in train.py to the backward() "
        "after it; the script ran for a warm-up and for each measured step, and went on after each measured step to "
        "have its next steps timed (a script that trains fewer steps than --repeat asks is run again for the rest)"
    )
    assert report.loss.source == "the scalar that train.py:47 calls backward() on: `loss.backward()`"
    assert f"loss: {report.loss.source}" in report.notes
    assert sys.argv[0] != str(VERIFY / "train.py")  # sys.argv restored
    assert str(VERIFY) not in sys.path
    assert torch.nn.Module.__call__ is MODULE_CALL
    assert_checkpointing_restored()


def test_script_mode_verifies_a_loss_checkpointed_outside_the_model():
    report = verify_script(VERIFY / "train_chunked_loss.py", ["--steps", "2"])
    assert report.verdict == "pass" and report.findings == ()
    assert report.model == "Encoder" and report.gradients.compared == 10
    assert report.recomputation.regions == 4  # the four loss chunks; the model itself checkpoints nothing
    assert report.recomputation.checkpointed_region_recomputes == 4
    assert report.loss.source == "the scalar that train_chunked_loss.py:66 calls backward() on: `loss.backward()`"
    assert report.memory.activations.saving > 0.5  # the logits are never held
    assert torch.nn.Module.__call__ is MODULE_CALL and torch.autograd.backward is AUTOGRAD_BACKWARD
    assert_checkpointing_restored()


def test_script_mode_finds_a_late_binding_closure_in_the_loss():
    report = verify_script(VERIFY / "train_chunked_loss.py", ["--steps", "2", "--late-binding"])
    assert report.verdict == "fail"
    cause = report.findings[0]
    assert (cause.role, cause.code, cause.subject) == ("cause", "CKPT030", "start")
    assert "captures `start`, which was 0 when the region ran and is 192 at backward" in cause.message
    assert {m.name for m in report.gradients.mismatched} >= {"head.weight", "embed.weight"}
    assert {f.explained_by for f in report.findings[1:]} == {"CKPT030 start"}


def test_script_whose_step_differs_between_runs_is_an_error(tmp_path):
    (tmp_path / "clock.py").write_text(
        "import time\n"
        "import torch\n"
        "from torch import nn\n"
        "from torch.utils.checkpoint import checkpoint\n"
        "\n"
        "body = nn.Linear(4, 4)\n"
        "x = torch.full((2, 4), time.perf_counter_ns() % 1000 / 7.0)\n"
        "checkpoint(body, x, use_reentrant=False).sum().backward()\n"
    )
    with pytest.raises(VerifyError, match="does not start its first training step from the same parameters and inputs"):
        verify_script(tmp_path / "clock.py")
    assert torch.nn.Module.__call__ is MODULE_CALL and torch.autograd.backward is AUTOGRAD_BACKWARD


def test_script_that_checkpoints_its_whole_model_at_top_level_is_verified(tmp_path):
    (tmp_path / "outer.py").write_text(
        "import torch\n"
        "from torch import nn\n"
        "from torch.utils.checkpoint import checkpoint\n"
        "\n"
        "torch.manual_seed(0)\n"
        "body = nn.Sequential(nn.Linear(8, 32), nn.Tanh(), nn.Linear(32, 8))\n"
        "for step in range(2):\n"
        "    checkpoint(body, torch.randn(4, 8), use_reentrant=False).pow(2).mean().backward()\n"
    )
    report = verify_script(tmp_path / "outer.py", repeat=1)
    assert report.verdict == "pass" and report.model == "Sequential"
    assert report.recomputation.regions == 1 and report.recomputation.checkpointed_region_recomputes == 1
    assert [r.name for r in report.regions] == ["(model)"]


def test_script_mode_shows_each_warning_of_the_script_once(tmp_path, recwarn):
    (tmp_path / "noisy.py").write_text(
        "import warnings\n"
        "import torch\n"
        "from torch import nn\n"
        "from torch.utils.checkpoint import checkpoint\n"
        "\n"
        "warnings.warn('this script is old', FutureWarning)\n"
        "model = nn.Linear(4, 4)\n"
        "checkpoint(model, torch.ones(2, 4), use_reentrant=False).sum().backward()\n"
    )
    verify_script(tmp_path / "noisy.py", repeat=2)  # six runs of the script
    assert [str(w.message) for w in recwarn if issubclass(w.category, FutureWarning)] == ["this script is old"]


def test_script_that_never_calls_backward_is_an_error(tmp_path):
    (tmp_path / "forward_only.py").write_text("import torch\nfrom torch import nn\n\nnn.Linear(4, 4)(torch.randn(2, 4))\n")
    with pytest.raises(NoTrainingStep, match="ran a training forward of Linear but never called backward"):
        verify_script(tmp_path / "forward_only.py")


def test_script_that_never_trains_is_an_error():
    with pytest.raises(NoTrainingStep, match="finished without training"):
        verify_script(VERIFY / "evaluate.py")
    assert torch.nn.Module.__call__ is MODULE_CALL


def test_json_has_the_documented_keys():
    payload = json.loads(case_report("batchnorm_in_checkpoint").to_json())
    assert set(payload) == JSON_KEYS
    assert payload["verdict"] == "fail"
    assert set(payload["gradients"]) == {"compared", "max_abs_diff", "max_rel_diff", "mismatched"}
    assert set(payload["buffers"]) == {"compared", "mismatched"}
    assert set(payload["memory"]) == {"metric", "baseline_bytes", "checkpointed_bytes", "saving", "peak"}
    assert set(payload["memory"]["peak"]) == {"metric", "baseline_bytes", "checkpointed_bytes", "saving"}
    assert set(payload["time"]) == {
        "baseline_s", "checkpointed_s", "overhead", "overhead_range", "resolved", "spread", "repeats", "samples",
    }  # fmt: skip
    assert len(payload["time"]["samples"]["baseline"]) == len(payload["time"]["samples"]["checkpointed"]) == 5
    assert {(f["severity"], f["code"], f["subject"]) for f in payload["findings"]} == {
        ("error", "CKPT010", "stages.0.bn"),  # one cause line for both norm layers
    }
    counter = next(b for b in payload["buffers"]["mismatched"] if b["name"] == "stages.1.bn.num_batches_tracked")
    assert counter == {
        "name": "stages.1.bn.num_batches_tracked",
        "kind": "value",
        "max_abs_diff": 1.0,
        "max_rel_diff": 1.0,
        "baseline": "1",
        "checkpointed": "2",
        "code": "CKPT010",
        "module": "stages.1.bn",
    }


def test_text_starts_with_the_verdict_and_html_is_self_contained():
    passing, failing = case_report("transformer_stack"), case_report("late_binding_lambda")
    assert passing.to_text().startswith("PASS  ")
    assert failing.to_text().startswith("FAIL  ") and "(CKPT030)" in failing.to_text().splitlines()[0]
    page = failing.to_html()
    assert page.startswith("<!DOCTYPE html>") and page.rstrip().endswith("</html>")
    assert page.count("<svg") == 3 and page.count("<polyline") == 4  # saved bytes and live bytes, two runs each; regions
    assert page.count('aria-label="activation bytes saved and recompute time per checkpointed region"') == 1
    assert "layers.0.weight" in page and "CKPT030" in page
    for fetch in ("src=", "href=", "@import", "url(", "<script"):
        assert fetch not in page
    assert page.count("http") == page.count('xmlns="http://www.w3.org/2000/svg"')


def test_findings_are_ranked_cause_first_and_each_symptom_names_its_cause():
    dropout, closure = case_report("dropout_without_rng_state"), case_report("late_binding_lambda")
    assert (dropout.findings[0].role, dropout.findings[0].code, dropout.findings[0].subject) == ("cause", "CKPT033", "rng")
    assert [f.subject for f in dropout.causes] == ["rng"]
    assert {(f.role, f.explained_by) for f in dropout.findings[1:]} == {("symptom", "CKPT033 rng")}
    assert (closure.findings[0].role, closure.findings[0].code, closure.findings[0].subject) == ("cause", "CKPT030", "layer")
    assert {f.explained_by for f in closure.errors[1:]} == {"CKPT030 layer"}
    payload = json.loads(dropout.to_json())["findings"]
    assert payload[0]["role"] == "cause" and payload[0]["explained_by"] is None
    assert payload[1]["role"] == "symptom" and payload[1]["explained_by"] == "CKPT033 rng"
    page = dropout.to_html()
    assert page.index('<div class="cause"><h2>Cause</h2>') < page.index("<h2>Summary</h2>")
    assert "<li><strong>CKPT033</strong> <code>rng</code>: the cpu random generator state" in page
    assert '<div class="cause">' not in case_report("transformer_stack").to_html()


def test_state_changed_twice_explains_the_gradients_of_its_own_module():
    class Scaled(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.linear = nn.Linear(8, 8)
            self.calls = 0.0

        def forward(self, x):
            self.calls += 1.0  # the recomputation runs with 2.0
            return self.linear(x) * torch.tensor(self.calls)

    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.blocks = nn.ModuleList(Scaled() for _ in range(2))

        def forward(self, x):
            for block in self.blocks:
                x = checkpoint(block, x, use_reentrant=False)
            return x

    torch.manual_seed(0)
    report = verify(Net(), torch.randn(4, 8), repeat=1, measure_peak=False)
    assert [(f.role, f.code, f.subject, f.explained_by) for f in report.errors] == [
        ("cause", "CKPT011", "blocks.0.calls", None),
        ("cause", "CKPT011", "blocks.1.calls", None),
        ("symptom", "CKPT011", "blocks.0.linear.weight", "CKPT011 blocks.0.calls"),
        ("symptom", "CKPT011", "blocks.0.linear.bias", "CKPT011 blocks.0.calls"),
        ("symptom", "CKPT011", "blocks.1.linear.weight", "CKPT011 blocks.1.calls"),
        ("symptom", "CKPT011", "blocks.1.linear.bias", "CKPT011 blocks.1.calls"),
    ]  # and no "recomputation computed something else" guess beside the known cause


def test_rank_findings_orders_causes_by_what_they_explain():
    from ckptlint.runtime_check._ranking import rank_findings
    from ckptlint.runtime_check._types import Finding

    given = [
        Finding("warning", None, "memory", "low saving"),
        Finding("error", "CKPT033", "w1", "gradient differs", role="symptom"),
        Finding("error", "CKPT010", "bn", "running stats twice", role="cause"),
        Finding("error", None, "loss", "the loss differs"),
        Finding("error", "CKPT033", "rng", "preserve_rng_state=False", role="cause"),
        Finding("error", None, "w2", "gradient differs", role="symptom"),
    ]
    ranked = rank_findings(given)
    assert [(f.subject, f.explained_by) for f in ranked] == [
        ("rng", None),
        ("bn", None),
        ("loss", None),
        ("w1", "CKPT033 rng"),
        ("w2", None),  # two causes: a symptom without a code is not pinned on either
        ("memory", None),
    ]


def test_text_report_shows_every_cause_when_it_cuts_the_differences():
    from ckptlint.runtime_check._types import Finding

    report = case_report("dropout_without_rng_state")
    symptoms = tuple(
        Finding("error", "CKPT033", f"w{i}", "the gradient differs", role="symptom", explained_by="CKPT033 rng") for i in range(20)
    )
    causes = tuple(Finding("error", code, subject, "why", role="cause") for code, subject in (("CKPT033", "rng"), ("CKPT010", "bn")))
    text = dataclasses.replace(report, findings=causes + symptoms).to_text()
    listed = text.split("the differences they explain):\n", 1)[1].split("\n\n", 1)[0].splitlines()
    assert listed[:2] == ["  error    cause    CKPT033  rng: why", "  error    cause    CKPT010  bn: why"]
    assert listed[2:12] == [
        f"  error    symptom  CKPT033  w{i}: the gradient differs (explained by CKPT033 rng)" for i in range(10)
    ]
    assert listed[12:] == ["  ... and 10 more difference(s) of the same kind (--json lists them all)"]


def test_step_time_is_a_median_with_its_range_and_noise_is_not_a_ratio():
    from ckptlint.runtime_check._types import Timing

    report = case_report("transformer_stack")
    clear = Timing((0.010, 0.011, 0.010, 0.012, 0.010), (0.020, 0.021, 0.020, 0.024, 0.021))
    assert (clear.baseline_s, clear.checkpointed_s) == (0.010, 0.021)
    assert clear.ratios == pytest.approx((2.0, 21 / 11, 2.0, 2.0, 2.1)) and clear.overhead == 2.0
    assert clear.resolved and clear.overhead_range == pytest.approx((2.0, 2.0))
    row = next(line for line in dataclasses.replace(report, time=clear).to_text().splitlines() if "step time" in line)
    assert row.split() == ["step", "time", "(median", "of", "5)", "10.0", "ms", "±5%", "21.0", "ms", "±2%", "x2.00", "(x2.00-x2.00)"]

    # A loaded machine: each pair's ratio says something else.
    noisy = Timing((0.010, 0.004, 0.030, 0.011, 0.009), (0.012, 0.025, 0.008, 0.011, 0.006))
    assert noisy.ratios == pytest.approx((1.2, 6.25, 0.8 / 3, 1.0, 2 / 3))
    assert not noisy.resolved and noisy.overhead_range == pytest.approx((2 / 3, 1.2))
    text = dataclasses.replace(report, time=noisy).to_text()
    assert "no difference beyond the noise between steps (x0.67-x1.20)" in text
    assert "x1.00 " not in text  # the median ratio is not claimed
    payload = json.loads(dataclasses.replace(report, time=noisy).to_json())["time"]
    assert payload["resolved"] is False and payload["overhead_range"] == [0.6667, 1.2]
    assert payload["samples"] == {"baseline": [0.01, 0.004, 0.03, 0.011, 0.009], "checkpointed": [0.012, 0.025, 0.008, 0.011, 0.006]}

    single = Timing((0.010,), (0.015,))
    assert "x1.50 (one step each: noise unknown)" in dataclasses.replace(report, time=single).to_text()


def test_memory_warnings_are_relative_to_the_step_and_explain_what_applies():
    from ckptlint.runtime_check._regions import RegionCall
    from ckptlint.runtime_check._types import MemoryFigure
    from ckptlint.runtime_check._verify import _memory_warnings

    saved = MemoryFigure("saved_tensor_bytes", 1000, 100)
    quiet: list = []
    _memory_warnings(saved, MemoryFigure("cpu_profiler_peak_live_bytes", 10_000_000, 10_400_000), quiet)
    assert quiet == []  # 4% more peak: within what one step's allocations vary by
    risen: list = []
    _memory_warnings(saved, MemoryFigure("cpu_profiler_peak_live_bytes", 10_000_000, 12_000_000), risen)
    assert [f.subject for f in risen] == ["memory"]
    assert "(9.54 MiB -> 11.44 MiB, 20% more)" in risen[0].message and "checkpoint_sequential" not in risen[0].message
    sequential = RegionCall("non-reentrant", True, True, "checkpoint_sequential.<locals>.run_function.<locals>.forward", None, None, (), {})
    segments: list = []
    _memory_warnings(saved, MemoryFigure("cpu_profiler_peak_live_bytes", 10_000_000, 12_000_000), segments, [sequential])
    assert "checkpoint_sequential's segments are recomputed whole" in segments[0].message


def test_each_checkpointed_region_is_profiled_with_its_saving_and_recompute_time():
    report = case_report("transformer_stack")
    assert sorted(r.name for r in report.regions) == ["blocks.0", "blocks.1", "blocks.2", "blocks.3"]
    assert {r.site for r in report.regions} == {"fixtures/verify/transformer_stack.py:65"} or all(
        r.site.endswith("transformer_stack.py:65") for r in report.regions
    )
    assert {r.calls for r in report.regions} == {1}
    assert len({r.saved_bytes for r in report.regions}) == 1  # four identical blocks save the same bytes
    measured = report.memory.activations.baseline_bytes - report.memory.activations.checkpointed_bytes
    assert abs(sum(r.saved_bytes for r in report.regions) - measured) < 0.05 * measured
    assert all(r.recompute_s > 0 for r in report.regions)
    per_ms = [r.saved_bytes_per_ms for r in report.regions]
    assert per_ms == sorted(per_ms, reverse=True)
    payload = json.loads(report.to_json())["regions"]
    assert set(payload[0]) == {"name", "site", "calls", "saved_bytes", "recompute_s", "saved_bytes_per_ms", "costs_more_than_it_saves"}
    assert "budget" not in json.loads(report.to_json())


def test_a_loss_checkpointed_in_chunks_is_one_region_of_four_calls():
    report = verify_script(VERIFY / "train_chunked_loss.py", ["--steps", "2"], repeat=1)
    (region,) = report.regions
    assert region.name.startswith("chunk_loss (") and region.site.endswith("train_chunked_loss.py:47")
    assert region.calls == 4
    assert abs(region.saved_bytes - 4 * 64 * 512 * 4) <= 64  # the four chunks' logits (64 x 512 float32 each)


def test_a_region_output_kept_after_it_is_charged_to_the_region_and_the_report_says_so():
    class Gated(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.body = nn.Sequential(nn.Linear(64, 256), nn.Tanh())  # tanh saves its output...
            self.gate = nn.Parameter(torch.ones(256))

        def forward(self, x):
            return checkpoint(self.body, x, use_reentrant=False) * self.gate  # ...and so does this product

    report = verify(Gated(), torch.randn(32, 64), repeat=1, measure_peak=False)
    assert report.verdict == "pass"
    (region,) = report.regions
    measured = report.memory.activations.baseline_bytes - report.memory.activations.checkpointed_bytes
    assert (region.name, region.saved_bytes - measured) == ("body", 32 * 256 * 4)  # the output, still held
    assert measured == 0  # checkpointing this region saves nothing: its one activation is kept anyway
    assert "the regions' savings add up to 32.0 KiB, the step's measured saving is 0.0 KiB: a region's output kept by the op after it is charged to the region (see regions in the docs)" in report.notes


def test_region_costs_rank_by_return_and_flag_regions_that_cost_more_than_they_save():
    from ckptlint.runtime_check._profile import region_costs
    from ckptlint.runtime_check._regions import RegionCall

    def call(module, site):
        return RegionCall("non-reentrant", True, True, "", module, None, (), {}, site=site)

    calls = [call("blocks.0", "m.py:9"), call("blocks.1", "m.py:9"), call("head", "m.py:12"), call("head", "m.py:12")]
    saved = {0: 4_000_000, 1: 4_000_000, 2: 10_000, 3: 10_000}
    samples = [{0: 0.002, 1: 0.002, 2: 0.001, 3: 0.001}, {0: 0.004, 1: 0.002, 2: 0.001, 3: 0.002}, {0: 0.002, 1: 0.003, 2: 0.002, 3: 0.001}]
    costs = region_costs(calls, saved, samples)
    assert [(c.name, c.site, c.calls, c.saved_bytes, c.recompute_s, c.costs_more_than_it_saves) for c in costs] == [
        ("blocks.0", "m.py:9", 1, 4_000_000, 0.002, False),
        ("blocks.1", "m.py:9", 1, 4_000_000, 0.002, False),
        ("head", "m.py:12", 2, 20_000, 0.003, True),
    ]
    assert costs[0].saved_bytes_per_ms == 2_000_000


def test_memory_budget_picks_the_cheapest_regions_that_fit():
    from ckptlint.runtime_check._profile import budget_plan
    from ckptlint.runtime_check._types import RegionCost

    costs = (
        RegionCost("a", "m.py:1", 1, 600, 0.001),
        RegionCost("b", "m.py:1", 1, 500, 0.004),
        RegionCost("c", "m.py:1", 1, 450, 0.002),
        RegionCost("d", "m.py:1", 1, 0, 0.001),
    )
    plan = budget_plan(costs, 2000, 1000)  # 1000 bytes must go: a+c (3 ms) beats a+b (5 ms) and b+c (6 ms)
    assert (plan.fits, plan.checkpoint, plan.held_bytes, plan.recompute_s, plan.method) == (True, ("a", "c"), 950, 0.003, "exact")
    assert budget_plan(costs, 2000, 2500).checkpoint == ()  # fits as it is
    short = budget_plan(costs, 2000, 100)
    assert (short.fits, short.checkpoint, short.held_bytes) == (False, ("a", "b", "c"), 450)
    many = tuple(RegionCost(f"r{i}", "m.py:1", 1, 100, 0.001 * (1 + i % 3)) for i in range(20))
    greedy = budget_plan(many, 2000, 1500)
    assert greedy.method == "greedy" and greedy.fits and greedy.held_bytes <= 1500
    assert greedy.recompute_s == pytest.approx(0.005)  # five of the 1 ms regions


def test_region_table_advice_and_chart_in_the_reports():
    from ckptlint.runtime_check._types import BudgetPlan, RegionCost

    report = dataclasses.replace(
        case_report("transformer_stack"),
        regions=(
            RegionCost("blocks.0", "model.py:65", 1, 2 * 2**20, 0.002),
            RegionCost("head", "model.py:80", 2, 2048, 0.004, costs_more_than_it_saves=True),
        ),
        budget=BudgetPlan(3 * 2**20, True, ("blocks.0",), 2 * 2**20, 0.002, "exact"),
    )
    text = report.to_text()
    table = text.split("best return first):\n", 1)[1].split("\n\n", 1)[0].splitlines()
    assert [line.split("  ")[1:2] + line.split()[1:] for line in table][1:] == [
        ["blocks.0", "model.py:65", "1", "2.00", "MiB", "2.0", "ms", "1.00", "MiB/ms"],
        ["head", "model.py:80", "2", "2.0", "KiB", "4.0", "ms", "0.5", "KiB/ms"],
    ]
    assert (
        "  - head (model.py:80) costs more than it saves: 2.0 KiB of activations for 4.0 ms of recompute per step, "
        "under a quarter of the step's bytes per ms: a candidate to stop checkpointing"
    ) in text
    assert (
        "  - memory budget 3.00 MiB: checkpoint blocks.0 (2.00 MiB held, 2.0 ms of recompute per step, exact); "
        "head need not be checkpointed"
    ) in text
    page = report.to_html()
    assert 'aria-label="activation bytes saved and recompute time per checkpointed region"' in page
    assert page.count('fill="#d62728"/>') == 1  # the region that costs more than it saves
    assert json.loads(report.to_json())["budget"] == {
        "budget_bytes": 3 * 2**20, "fits": True, "checkpoint": ["blocks.0"], "held_bytes": 2 * 2**20,
        "recompute_s": 0.002, "method": "exact",
    }  # fmt: skip


def test_report_is_frozen():
    report = case_report("transformer_stack")
    with pytest.raises(dataclasses.FrozenInstanceError):
        report.verdict = "fail"  # type: ignore[misc]


# --- the model is handed back as it came -------------------------------------------------------


def test_model_gradients_rng_and_python_state_are_unchanged():
    counter = load_fixture("stateful_counter").make_case()
    norm = load_fixture("batchnorm_in_checkpoint").make_case()
    for model, inputs in ((counter["model"], counter["inputs"]), (norm.model, norm.inputs)):
        for parameter in model.parameters():
            parameter.grad = torch.full_like(parameter, 0.5)
        grads = [p.grad for p in model.parameters()]
        state = {k: v.clone() for k, v in model.state_dict().items()}
        buffers = [b for b in model.buffers()]
        attributes = {n: dict(vars(m)) for n, m in model.named_modules()}
        torch_rng, python_rng = torch.get_rng_state(), random.getstate()
        report = verify(model, inputs)
        assert report.verdict == "fail"
        assert [p.grad for p in model.parameters()] == grads  # the same tensor objects
        assert all(torch.equal(p.grad, torch.full_like(p, 0.5)) for p in model.parameters())
        assert all(torch.equal(state[k], v) for k, v in model.state_dict().items())
        assert [b for b in model.buffers()] == buffers
        assert {n: dict(vars(m)) for n, m in model.named_modules()} == attributes
        assert torch.equal(torch.get_rng_state(), torch_rng) and random.getstate() == python_rng
        assert model.training
    assert counter["model"].block.calls == 0 and counter["model"].block.seen == []
    assert norm.model.stages[0].bn.num_batches_tracked.item() == 0
    assert_checkpointing_restored()


def test_input_gradients_are_compared_and_restored():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 8), nn.Tanh(), nn.Linear(8, 8))
    wrapped = _Checkpointed(model, use_reentrant=True)
    x = torch.randn(4, 8, requires_grad=True)
    report = verify(wrapped, x)
    assert report.verdict == "pass"
    assert report.gradients.compared == 5  # four parameters and input[0]
    assert x.grad is None


# --- checkpoint paths, and what is not checkpointing -------------------------------------------


class _Checkpointed(nn.Module):
    def __init__(self, inner: nn.Module, use_reentrant: bool) -> None:
        super().__init__()
        self.inner, self.use_reentrant = inner, use_reentrant

    def forward(self, x):
        return checkpoint(self.inner, x, use_reentrant=self.use_reentrant)


def _mlp(width: int = 16) -> nn.Module:
    return nn.Sequential(nn.Linear(width, 2 * width), nn.Tanh(), nn.Linear(2 * width, width))


class _Sequential(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.layers = nn.Sequential(*[_mlp() for _ in range(4)])

    def forward(self, x):
        return checkpoint_sequential(self.layers, 2, x, use_reentrant=False)


class _FunctionalRegion(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.randn(16, 16) / 4)

    def forward(self, x):
        return checkpoint(lambda t: torch.tanh(t @ self.weight) @ self.weight, x, use_reentrant=False)


def _wrapped(implementation: str) -> nn.Module:
    from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import (
        CheckpointImpl,
        apply_activation_checkpointing,
        checkpoint_wrapper,
    )

    model = nn.Sequential(_mlp(), _mlp(), nn.Linear(16, 1))
    impl = CheckpointImpl.REENTRANT if implementation == "reentrant" else CheckpointImpl.NO_REENTRANT
    apply_activation_checkpointing(
        model,
        checkpoint_wrapper_fn=functools.partial(checkpoint_wrapper, checkpoint_impl=impl),
        check_fn=lambda module: isinstance(module, nn.Sequential) and len(module) == 3,
    )
    return model


def _composable() -> nn.Module:
    from torch.distributed._composable import checkpoint as composable_checkpoint

    model = nn.Sequential(_mlp(), _mlp())
    composable_checkpoint(model[0])
    return model


PASSING = {
    "reentrant": lambda: _Checkpointed(_mlp(), use_reentrant=True),
    "non-reentrant": lambda: _Checkpointed(_mlp(), use_reentrant=False),
    "checkpoint_sequential": _Sequential,
    "function region": _FunctionalRegion,
    "apply_activation_checkpointing reentrant": lambda: _wrapped("reentrant"),
    "apply_activation_checkpointing non-reentrant": lambda: _wrapped("non-reentrant"),
    "fsdp2 composable checkpoint": _composable,
}


@pytest.mark.parametrize("kind", sorted(PASSING))
def test_every_checkpoint_path_is_switched_off_and_verified(kind):
    torch.manual_seed(0)
    x = torch.randn(8, 16, requires_grad=True)  # reentrant regions need an input that requires grad
    report = verify(PASSING[kind](), x)
    assert report.verdict == "pass", report.to_text()
    assert report.recomputation.regions >= 1
    assert report.recomputation.baseline_module_forwards == 0
    assert report.recomputation.checkpointed_region_recomputes >= 1
    assert report.gradients.max_abs_diff == 0.0
    assert_checkpointing_restored()


def test_no_checkpointing_is_an_error():
    with pytest.raises(NoCheckpointingFound, match="^no checkpointing found: the step made no torch.utils.checkpoint call"):
        verify(_mlp(), torch.randn(4, 16))
    assert_checkpointing_restored()


def test_torch_compiled_model_is_verified_through_its_eager_module():
    torch.manual_seed(0)
    compiled = torch.compile(_Sequential(), backend="eager")
    report = verify(compiled, torch.randn(8, 16))
    assert report.verdict == "pass"
    assert report.model == "_Sequential"
    assert any("`_orig_mod`" in note for note in report.notes)


# --- state the recomputation reads ---------------------------------------------------------------


class _MutatedArgument(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(16, 16)

    def forward(self, x):
        options = {"scale": 1.0}
        y = checkpoint(lambda t, o: torch.tanh(self.linear(t) * o["scale"]), x, options, use_reentrant=False)
        options["scale"] = 3.0
        return y


class _Flag(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(16, 16)
        self.use_tanh = True

    def forward(self, x):
        return torch.tanh(self.linear(x)) if self.use_tanh else torch.relu(self.linear(x))


class _FlagToggledBeforeBackward(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.inner = _Flag()

    def forward(self, x):
        y = checkpoint(self.inner, x, use_reentrant=False)
        self.inner.use_tanh = not self.inner.use_tanh
        return y


class _EvalBeforeBackward(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.block = nn.Sequential(nn.Linear(16, 16), nn.Dropout(0.5), nn.Linear(16, 16))

    def forward(self, x):
        y = checkpoint(self.block, x, use_reentrant=False)
        self.block.eval()
        return y


def test_argument_changed_before_backward_is_ckpt031():
    torch.manual_seed(0)
    report = verify(_MutatedArgument(), torch.randn(8, 16))
    assert report.verdict == "fail"
    assert error_codes(report) == {"CKPT031"}
    assert {m.name for m in report.gradients.mismatched} == {"linear.weight", "linear.bias"}
    cause = next(f for f in report.errors if f.subject == "argument 1 (dict)")
    assert "{'scale': 1.0} -> {'scale': 3.0}" in cause.message


def test_flag_changed_before_backward_is_ckpt031():
    torch.manual_seed(0)
    report = verify(_FlagToggledBeforeBackward(), torch.randn(8, 16))
    assert report.verdict == "fail"
    assert error_codes(report) == {"CKPT031"}
    cause = next(f for f in report.errors if f.subject == "`inner.use_tanh`")
    assert "(True -> False)" in cause.message
    # The model keeps its flag: the step was replayed, not run for real.
    assert report.attributes == ()


def test_checkpointed_step_that_raises_is_a_failure():
    torch.manual_seed(0)
    model = _EvalBeforeBackward().train()
    report = verify(model, torch.randn(8, 16))
    assert report.verdict == "fail"
    step = next(f for f in report.errors if f.subject == "step")
    assert step.code == "CKPT031"
    assert "raises CheckpointError" in step.message
    assert [f.subject for f in report.errors if f.subject != "step"] == ["`block.training`"]
    assert report.loss.checkpointed is None
    assert model.block.training  # handed back in training mode
    assert_checkpointing_restored()


# --- options and errors -------------------------------------------------------------------------


def test_tolerance_defaults_and_overrides():
    torch.manual_seed(0)
    model = _Checkpointed(_mlp(), use_reentrant=False)
    x = torch.randn(8, 16)
    assert verify(model, x).tolerance.source == "exact (CPU float32 recomputation is deterministic)"
    loose = verify(model, x, rtol=1e-3, atol=1e-6)
    assert (loose.tolerance.rtol, loose.tolerance.atol, loose.tolerance.exact) == (1e-3, 1e-6, False)
    half = verify(_Checkpointed(_mlp(), use_reentrant=False).to(torch.bfloat16), x.to(torch.bfloat16))
    assert half.dtype == "bfloat16"
    assert (half.tolerance.rtol, half.tolerance.atol, half.tolerance.source) == (1.6e-2, 1e-5, "bfloat16 on cpu")


def test_tolerance_absorbs_differences_but_not_rng_or_buffers():
    report = verify_case(VERIFY / "dropout_without_rng_state.py", rtol=10.0, atol=10.0)
    assert report.gradients.mismatched == ()
    assert report.gradients.max_abs_diff > 0
    assert error_codes(report) == {"CKPT033"}  # the RNG state still differs


def test_unusable_steps_raise_verify_error():
    model = _Checkpointed(_mlp(), use_reentrant=False)
    with pytest.raises(VerifyError, match=r"the loss \(loss_fn\) is not a scalar tensor: got a tensor of shape \[4, 16\]"):
        verify(model, torch.randn(4, 16), loss_fn=lambda output: output)
    frozen = _Checkpointed(_mlp(), use_reentrant=False).requires_grad_(False)
    with pytest.raises(VerifyError, match="no parameter that requires grad"):
        verify(frozen, torch.randn(4, 16))
    with pytest.raises(VerifyError, match="fails with checkpointing switched off"):
        verify(model, torch.randn(4, 3))
    with pytest.raises(VerifyError, match="must be a torch.nn.Module"):
        verify(lambda x: x, torch.randn(4, 16))
    assert_checkpointing_restored()


class _OwnRecompute(torch.autograd.Function):
    """Recomputation by hand (as DeepSpeed's or Megatron's checkpointing does): the block's
    forward runs again inside backward, outside torch.utils.checkpoint."""

    @staticmethod
    def forward(ctx, block, x):
        ctx.block = block
        ctx.save_for_backward(x)
        with torch.no_grad():
            return block(x)

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        with torch.enable_grad():
            x = x.detach().requires_grad_(True)
            torch.autograd.backward(ctx.block(x), grad)
        return None, x.grad


class _HandRolledRecompute(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.first, self.second = _mlp(), _mlp()

    def forward(self, x):
        return _OwnRecompute.apply(self.second, checkpoint(self.first, x, use_reentrant=False))


def test_recomputation_ckptlint_cannot_switch_off_is_an_error():
    # The block (a Sequential) and its three layers: 4 module forwards inside backward.
    # The message names the code that recomputed (not a guess at which library it is).
    with pytest.raises(
        VerifyError,
        match=r"backward still re-ran 4 module forward\(s\) by _OwnRecompute\.backward \(test_verify_api\.py:\d+\): the model "
        r"checkpoints through an implementation that does not go through torch\.utils\.checkpoint",
    ):
        verify(_HandRolledRecompute(), torch.randn(4, 16))
    assert_checkpointing_restored()


def test_case_target_errors(tmp_path):
    with pytest.raises(VerifyError, match="target not found"):
        verify_case(tmp_path / "missing.py")
    (tmp_path / "broken.py").write_text("import not_a_module_anywhere\n")
    with pytest.raises(VerifyError, match="cannot import .*ModuleNotFoundError"):
        verify_case(tmp_path / "broken.py")
    (tmp_path / "incomplete.py").write_text("def make_case():\n    return {'model': None}\n")
    with pytest.raises(VerifyError, match=r"must return a mapping or object with `model` and `inputs` \(no model and inputs\)"):
        verify_case(tmp_path / "incomplete.py")
    with pytest.raises(VerifyError, match="defines no `build`"):
        verify_case(tmp_path / "incomplete.py", "build")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_step_reports_cuda_figures():
    module = load_fixture("transformer_stack")
    case = module.make_case()
    model, tokens = case["model"].cuda(), case["inputs"].cuda()
    torch.cuda.manual_seed_all(0)
    report = verify(model, tokens)
    assert report.verdict == "pass", report.to_text()
    assert report.device.startswith("cuda")
    assert report.memory.peak is not None and report.memory.peak.metric == "cuda_max_memory_allocated"
    assert report.memory.peak.checkpointed_bytes < report.memory.peak.baseline_bytes
    assert "cuda:0" in report.rng.generators
    assert not report.tolerance.exact
    # Timed by CUDA events: every sample is the device's time for the step.
    assert len(report.time.baseline_samples) == len(report.time.checkpointed_samples) == 5
    assert all(t > 0 for t in report.time.baseline_samples + report.time.checkpointed_samples)
    assert sorted(r.name for r in report.regions) == ["blocks.0", "blocks.1", "blocks.2", "blocks.3"]
    assert all(r.saved_bytes > 0 and r.recompute_s > 0 for r in report.regions)


def test_script_mode_replays_the_scripts_autocast(tmp_path):
    (tmp_path / "amp.py").write_text(
        "import torch\n"
        "from torch import nn\n"
        "from torch.utils.checkpoint import checkpoint\n"
        "\n"
        "class Net(nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.body = nn.Sequential(nn.Linear(8, 32), nn.GELU(), nn.Linear(32, 8))\n"
        "\n"
        "    def forward(self, x):\n"
        "        if not torch.is_autocast_enabled('cpu'):\n"
        "            raise RuntimeError('this model runs under autocast only')\n"
        "        return checkpoint(self.body, x, use_reentrant=False)\n"
        "\n"
        "model = Net()\n"
        "with torch.autocast('cpu', dtype=torch.bfloat16):\n"
        "    loss = model(torch.randn(4, 8)).float().pow(2).mean()\n"
        "loss.backward()\n"
    )
    report = verify_script(tmp_path / "amp.py")
    assert report.verdict == "pass"  # each run is the script's own, under its own autocast
    assert not torch.is_autocast_enabled("cpu")


def test_kwargs_to_reentrant_checkpoint_points_to_ckpt032():
    class Masked(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.linear = nn.Linear(4, 4)

        def forward(self, x):
            return checkpoint(lambda t, mask: self.linear(t) * mask, x, mask=torch.ones(4), use_reentrant=True)

    with pytest.raises(VerifyError, match=r"ValueError: Unexpected keyword arguments: mask \(CKPT032"):
        verify(Masked(), torch.randn(2, 4, requires_grad=True))


def test_script_that_swallows_the_capture_still_yields_its_first_step(tmp_path):
    (tmp_path / "stubborn.py").write_text(
        "import torch\n"
        "from torch import nn\n"
        "from torch.utils.checkpoint import checkpoint\n"
        "\n"
        "class Net(nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.body = nn.Sequential(nn.Linear(8, 32), nn.GELU(), nn.Linear(32, 8))\n"
        "\n"
        "    def forward(self, x):\n"
        "        return checkpoint(self.body, x, use_reentrant=False)\n"
        "\n"
        "model = Net()\n"
        "for step in range(3):\n"
        "    try:\n"
        "        model(torch.randn(4, 8)).sum().backward()\n"
        "    except:  # noqa: E722\n"
        "        print('ignored')\n"
    )
    report = verify_script(tmp_path / "stubborn.py")
    assert report.verdict == "pass"
    assert report.recomputation.regions == 1
    assert torch.nn.Module.__call__ is MODULE_CALL
