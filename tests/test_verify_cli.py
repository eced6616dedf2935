"""`ckptlint verify` on the command line: every fixture under fixtures/verify/, script mode,
the output formats, and exit codes 0 (pass), 1 (fail), 2 (nothing verified)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from ckptlint.cli import main

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.torch

REPO_ROOT = Path(__file__).resolve().parent.parent
VERIFY = "fixtures/verify"

# fixture -> (exit code, rule codes of the errors, a subject the report must name)
CASES = {
    "transformer_stack": (0, set(), None),
    "batchnorm_in_checkpoint": (1, {"CKPT010"}, "stages.0.bn"),
    "late_binding_lambda": (1, {"CKPT030"}, "layers.0.weight"),
    "dropout_without_rng_state": (1, {"CKPT033"}, "rng"),
    "reentrant_frozen_input": (1, {"CKPT007"}, "blocks.1.ff.2.weight"),
    "stateful_counter": (1, {"CKPT011"}, "block.calls"),
    "hf_tiny_llama": (0, set(), None),
}


def invoke(args: list[str], cwd: Path = REPO_ROOT):
    old = Path.cwd()
    os.chdir(cwd)
    try:
        return CliRunner().invoke(main, args, catch_exceptions=False)
    finally:
        os.chdir(old)


@pytest.mark.filterwarnings("ignore:None of the inputs have requires_grad=True")
@pytest.mark.parametrize("name", sorted(CASES))
def test_fixture_verdicts_as_json(name):
    if name.startswith("hf_"):
        pytest.importorskip("transformers")
    exit_code, codes, subject = CASES[name]
    result = invoke(["verify", f"{VERIFY}/{name}.py:make_case", "--json", "--no-peak", "--repeat", "1"])
    assert result.exit_code == exit_code, result.output
    payload = json.loads(result.stdout)
    assert payload["verdict"] == ("pass" if exit_code == 0 else "fail")
    assert payload["target"] == f"{VERIFY}/{name}.py:make_case"
    errors = [f for f in payload["findings"] if f["severity"] == "error"]
    assert {f["code"] for f in errors} == codes
    if subject:
        assert subject in {f["subject"] for f in errors}
    assert payload["memory"]["peak"] is None  # --no-peak
    assert payload["time"]["repeats"] == 1


def test_passing_fixture_text_output():
    result = invoke(["verify", f"{VERIFY}/transformer_stack.py:make_case"])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0].startswith(f"PASS  {VERIFY}/transformer_stack.py:make_case: gradients of 53 tensors identical")
    table = "\n".join(lines)
    for row in ("loss", "gradients (53)", "activation memory", "peak memory (CPU profiler)", "step time"):
        assert f"  {row}" in table
    saving = float(lines[0].rsplit("activation memory ", 1)[1].split("%")[0])
    assert saving >= 50.0


def test_failing_fixture_text_output_names_the_module():
    result = invoke(["verify", f"{VERIFY}/batchnorm_in_checkpoint.py:make_case"])
    assert result.exit_code == 1
    assert result.stdout.splitlines()[0] == f"FAIL  {VERIFY}/batchnorm_in_checkpoint.py:make_case: 1 finding (CKPT010)"
    assert (
        "error    cause    CKPT010  stages.0.bn: 2 modules (BatchNorm2d: stages.0-1.bn) updated their running statistics twice"
        in result.stdout
    )


def test_text_output_puts_the_cause_first_and_names_it_on_each_difference():
    result = invoke(["verify", f"{VERIFY}/dropout_without_rng_state.py:make_case", "--no-peak"])
    assert result.exit_code == 1
    lines = result.stdout.splitlines()
    first = lines.index("findings (causes first, then the differences they explain):") + 1
    assert lines[first].startswith("  error    cause    CKPT033  rng: the cpu random generator state after the checkpointed step")
    assert lines[first + 1] == (
        "  error    symptom  CKPT033  blocks.0.0.weight: the gradient of `blocks.0.0.weight` differs: "
        + lines[first + 1].split(" differs: ", 1)[1].rsplit(" (explained by", 1)[0]
        + " (explained by CKPT033 rng)"
    )


def test_html_report(tmp_path):
    page = tmp_path / "report.html"
    result = invoke(["verify", f"{VERIFY}/late_binding_lambda.py:make_case", "--report", str(page), "--json"])
    assert result.exit_code == 1
    assert json.loads(result.stdout)["verdict"] == "fail"
    assert f"wrote {page}" in result.stderr
    html = page.read_text(encoding="utf-8")
    assert "<svg" in html and "<polyline" in html and "layers.2.bias" in html and "CKPT030" in html
    assert "<script" not in html and "src=" not in html and "href=" not in html


def test_tolerance_options_reach_the_report():
    result = invoke(["verify", f"{VERIFY}/stateful_counter.py:make_case", "--json", "--rtol", "0.001", "--atol", "1e-6", "--no-peak"])
    tolerance = json.loads(result.stdout)["tolerance"]
    assert tolerance == {"rtol": 0.001, "atol": 1e-06, "exact": False, "source": "rtol/atol given"}


def test_script_mode_passes_with_script_arguments():
    result = invoke(["verify", f"{VERIFY}/train.py", "--json", "--no-peak", "--", "--steps", "3", "--batch-size", "4"])
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)  # the script's own prints went to stderr
    assert payload["verdict"] == "pass"
    assert payload["model"] == "TinyGPT"
    assert payload["gradients"]["mismatched"] == []
    assert payload["memory"]["saving"] >= 0.5
    assert result.stderr.count("initial logits (2, 32, 96)") == 1  # the script ran 13 times; its output is shown once


def test_script_mode_failure_names_the_module(tmp_path):
    (tmp_path / "train_bn.py").write_text(
        textwrap.dedent(
            """
            import sys
            import torch
            from torch import nn
            from torch.utils.checkpoint import checkpoint

            class Net(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.body = nn.Sequential(nn.Linear(8, 16), nn.BatchNorm1d(16), nn.ReLU())
                    self.head = nn.Linear(16, 2)

                def forward(self, x):
                    return self.head(checkpoint(self.body, x, use_reentrant=False))

            if __name__ == "__main__":
                assert sys.argv[1:] == ["--epochs", "2"], sys.argv
                torch.manual_seed(0)
                model = Net()
                optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
                for epoch in range(int(sys.argv[2])):
                    try:
                        loss = nn.functional.cross_entropy(model(torch.randn(16, 8)), torch.randint(0, 2, (16,)))
                    except Exception:
                        print("this script swallows errors")
                        continue
                    loss.backward()
                    optimizer.step()
            """
        )
    )
    result = invoke(["verify", "train_bn.py", "--json", "--no-peak", "--", "--epochs", "2"], cwd=tmp_path)
    assert result.exit_code == 1, result.output
    payload = json.loads(result.stdout)
    assert [(f["code"], f["subject"]) for f in payload["findings"] if f["severity"] == "error"] == [("CKPT010", "body.1")]
    assert "this script swallows errors" not in result.output


def test_script_mode_passes_with_its_loss_checkpointed_outside_the_model():
    result = invoke(["verify", f"{VERIFY}/train_chunked_loss.py", "--json", "--no-peak", "--", "--steps", "2"])
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert payload["verdict"] == "pass" and payload["recomputation"]["regions"] == 4
    assert payload["loss"]["source"] == "the scalar that train_chunked_loss.py:66 calls backward() on: `loss.backward()`"


def test_memory_budget_option(tmp_path):
    result = invoke(["verify", f"{VERIFY}/transformer_stack.py:make_case", "--json", "--no-peak", "--repeat", "1", "--memory-budget", "100MiB"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["budget"] == {
        "budget_bytes": 100 * 2**20, "fits": True, "checkpoint": [], "held_bytes": json.loads(result.stdout)["memory"]["baseline_bytes"],
        "recompute_s": 0.0, "method": "exact",
    }  # fmt: skip
    bad = invoke(["verify", f"{VERIFY}/transformer_stack.py:make_case", "--memory-budget", "lots"])
    assert bad.exit_code == 2 and "--memory-budget: 'lots' is not a byte count (e.g. 2000000, 512MiB, 1.5GiB)" in bad.stderr


def test_script_that_never_trains_exits_2():
    result = invoke(["verify", f"{VERIFY}/evaluate.py"])
    assert result.exit_code == 2
    assert result.stdout == ""
    assert "error: fixtures/verify/evaluate.py finished without training" in result.stderr
    assert "perplexity" in result.stderr  # the script ran


def test_script_timeout_exits_2(tmp_path):
    (tmp_path / "slow.py").write_text("import time\nwhile True:\n    time.sleep(0.05)\n")
    result = invoke(["verify", "slow.py", "--timeout", "0.5"], cwd=tmp_path)  # the script never ends
    assert result.exit_code == 2
    assert "error: slow.py ran for 0.5 s (--timeout) without a forward of an nn.Module" in result.stderr


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("import sys\nsys.exit(3)\n", "exited with status 3 before"),
        ("raise RuntimeError('no data')\n", "raised RuntimeError: no data (at "),
    ],
)
def test_script_that_stops_early_exits_2(tmp_path, source, message):
    (tmp_path / "script.py").write_text(source)
    result = invoke(["verify", "script.py"], cwd=tmp_path)
    assert result.exit_code == 2
    assert message in result.stderr


def test_usage_errors_exit_2(tmp_path):
    result = invoke(["verify", "missing.py:make_case"], cwd=tmp_path)
    assert result.exit_code == 2 and "error: target not found: missing.py" in result.stderr
    result = invoke(["verify", f"{VERIFY}/train.py:make_case"])
    assert result.exit_code == 2 and "defines no `make_case`" in result.stderr
    result = invoke(["verify", f"{VERIFY}/stateful_counter.py:make_case", "--", "--steps", "2"])
    assert result.exit_code == 2 and "apply only to script mode" in result.stderr
    (tmp_path / "plain.py").write_text(
        "import torch\n\ndef make_case():\n    return {'model': torch.nn.Linear(4, 4), 'inputs': torch.randn(2, 4)}\n"
    )
    result = invoke(["verify", "plain.py:make_case"], cwd=tmp_path)
    assert result.exit_code == 2 and "error: no checkpointing found" in result.stderr


def test_verify_as_a_real_process():
    env = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "CLICOLOR_FORCE")}
    result = subprocess.run(
        [sys.executable, "-m", "ckptlint", "verify", f"{VERIFY}/train.py", "--json", "--", "--steps", "2"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    payload = json.loads(result.stdout)
    assert payload["verdict"] == "pass" and payload["memory"]["peak"]["metric"] == "cpu_profiler_peak_live_bytes"
    assert "USDT" not in result.stderr  # the profiler's own logging is kept off the terminal


def test_without_torch_verify_says_how_to_install_it():
    script = textwrap.dedent(
        """
        import sys
        sys.modules["torch"] = None  # as if torch were not installed
        from ckptlint.cli import main
        main(["verify", "fixtures/verify/transformer_stack.py:make_case"])
        """
    )
    result = subprocess.run([sys.executable, "-c", script], cwd=REPO_ROOT, capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert "pip install 'ckptlint[runtime]'" in result.stderr
