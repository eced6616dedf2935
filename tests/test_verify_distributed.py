"""`ckptlint verify --nproc N`: FSDP set-ups on 2 ranks under torchrun, gloo on CPU (nccl on
GPUs when the machine has two), from fixtures/verify_distributed/.

Each verification launches real processes (a few seconds each); a fixture is verified once
per backend and the tests read the same report. Deselect them all with `-m "not distributed"`.
The collective counts are exact: they are what torch 2.13 issues (EVIDENCE Q5).
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import shutil
import sys
import textwrap
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from ckptlint.cli import main

torch = pytest.importorskip("torch")
if not (torch.distributed.is_available() and torch.distributed.is_gloo_available()):
    pytest.skip("this torch has no gloo backend", allow_module_level=True)

from ckptlint.runtime_check import Report, VerifyError, verify_distributed  # noqa: E402

pytestmark = [pytest.mark.torch, pytest.mark.distributed]

REPO_ROOT = Path(__file__).resolve().parent.parent
FIXTURES = "fixtures/verify_distributed"
BACKENDS = [
    "gloo",
    pytest.param(
        "nccl",
        marks=pytest.mark.skipif(
            not torch.cuda.is_available() or torch.cuda.device_count() < 2, reason="nccl needs two GPUs"
        ),
    ),
]
# Every process a verification starts inherits this variable: the test finds them by it, and
# no other run on the machine carries the same value.
RUN_TAG = "CKPTLINT_TEST_RUN"


@contextlib.contextmanager
def tagged_processes() -> Iterator[str]:
    tag = uuid.uuid4().hex
    saved = os.environ.get(RUN_TAG)
    os.environ[RUN_TAG] = tag
    try:
        yield tag
    finally:
        if saved is None:
            del os.environ[RUN_TAG]
        else:
            os.environ[RUN_TAG] = saved


def processes_tagged(tag: str) -> list[int]:
    """Live processes started by the verification that carried `tag`: the launcher, the ranks
    and anything they started."""
    needle = f"{RUN_TAG}={tag}".encode()
    found = []
    if not Path("/proc").is_dir():  # no procfs: the ranks' own pids are still checked
        return found
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                if needle in (entry / "environ").read_bytes().split(b"\0") and pid_alive(int(entry.name)):
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


@functools.lru_cache(maxsize=None)
def report_of(name: str, backend: str) -> Report:
    with tagged_processes() as tag:
        report = verify_distributed(
            f"{REPO_ROOT / FIXTURES / name}.py:make_case", 2, backend=backend, timeout=180, repeat=1, measure_peak=False
        )
    assert processes_tagged(tag) == []
    return report


def invoke(args: list[str], cwd: Path = REPO_ROOT):
    """The CLI in this process; afterwards, no process of the run may be left."""
    old = Path.cwd()
    os.chdir(cwd)
    try:
        with tagged_processes() as tag:
            result = CliRunner().invoke(main, args, catch_exceptions=False)
        assert processes_tagged(tag) == []
        return result
    finally:
        os.chdir(old)


def collectives(report: Report) -> dict[tuple[str, str], tuple[int, int | None]]:
    """(kind, phase) -> (without checkpointing, checkpointed), for the kinds that were called."""
    return {
        (c.kind, c.phase): (c.baseline, c.checkpointed)
        for c in report.distributed.collectives
        if c.baseline or c.checkpointed
    }


def nesting(report: Report) -> dict[str, int]:
    return {n.pattern: n.count for n in report.distributed.nesting}


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return True


def assert_every_rank_is_gone(report: Report) -> None:
    pids = [status.pid for status in report.distributed.ranks]
    assert all(pid is not None for pid in pids), pids
    assert not [pid for pid in pids if pid_alive(pid)]


# --- correct set-ups pass, with their collectives -------------------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
def test_fsdp1_wrapped_then_checkpointed_passes_with_one_all_gather_per_unit(backend):
    report = report_of("fsdp1_wrap_then_checkpoint", backend)
    assert report.verdict == "pass", report.to_text()
    assert report.findings == ()
    assert report.gradients.compared == 28 and report.gradients.mismatched == ()
    run = report.distributed
    assert (run.world_size, run.backend, run.launcher, run.outcome) == (2, backend, "torch.distributed.run", "completed")
    assert run.fsdp == ("FSDP1",) and run.units == 5
    assert nesting(report) == {"FSDP(ResidualMLP)": 1, "FSDP(CheckpointWrapper(Block))": 4}
    assert collectives(report) == {
        ("all_gather", "forward"): (5, 5),
        ("all_gather", "backward"): (4, 4),
        ("reduce_scatter", "backward"): (5, 5),
    }
    # Sharded in two: each rank holds half of the parameters (plus FSDP's padding).
    full = run.full_parameter_bytes
    assert full == 4 * sum(p.numel() for p in _fixture_model().parameters())
    assert all(full / 2 <= held <= full / 2 + 64 for held in run.parameter_bytes_per_rank)
    reference = run.reference
    assert reference is not None and reference.baseline.compared == 28 and reference.baseline.mismatched == ()
    assert reference.checkpointed.mismatched == () and reference.baseline.max_abs_diff < 1e-6
    assert abs(reference.loss - reference.sharded_loss) < 1e-6
    assert [(s.rank, s.state) for s in run.ranks] == [(0, "finished"), (1, "finished")]
    assert report.recomputation.regions == 4 and report.recomputation.checkpointed_region_recomputes == 4
    assert report.memory.activations.saving > 0.5
    assert_every_rank_is_gone(report)


def _fixture_model() -> torch.nn.Module:
    sys.path.insert(0, str(REPO_ROOT / FIXTURES))
    try:
        from _blocks import ResidualMLP
    finally:
        sys.path.pop(0)
    return ResidualMLP()


@pytest.mark.parametrize("backend", BACKENDS)
def test_fsdp2_checkpointed_then_sharded_passes(backend):
    report = report_of("fsdp2_checkpoint_then_shard", backend)
    assert report.verdict == "pass", report.to_text()
    assert report.gradients.compared == 28 and report.gradients.mismatched == ()
    run = report.distributed
    assert run.fsdp == ("FSDP2",) and run.units == 5
    assert nesting(report) == {"fully_shard(ResidualMLP)": 1, "fully_shard(CheckpointWrapper(Block))": 4}
    assert collectives(report) == {
        ("all_gather", "forward"): (5, 5),
        ("all_gather", "backward"): (4, 4),
        ("reduce_scatter", "backward"): (5, 5),
    }
    assert run.reference is not None and run.reference.baseline.mismatched == ()


def test_passing_run_as_text():
    text = report_of("fsdp2_checkpoint_then_shard", "gloo").to_text()
    target = REPO_ROOT / FIXTURES / "fsdp2_checkpoint_then_shard.py"
    assert text.startswith(f"PASS  {target}:make_case on 2 ranks: gradients of 28 tensors identical")
    for line in (
        "  all-gathers in backward      4                      4             same",
        "  2 ranks under torch.distributed.run (backend gloo); FSDP2, 5 units",
        "  nesting: fully_shard(ResidualMLP) x1, fully_shard(CheckpointWrapper(Block)) x4",
        "  rank 1: finished",
    ):
        assert line in text, text
    assert "single-process reference (global batch): gradients of 28 tensors within tolerance" in text
    page = report_of("fsdp2_checkpoint_then_shard", "gloo").to_html()
    assert "<h2>Distributed</h2>" in page and "all-gathers in backward" in page and "<script" not in page


def test_script_mode_runs_an_unmodified_training_script_on_every_rank():
    result = invoke(
        ["verify", f"{FIXTURES}/train_fsdp2.py", "--nproc", "2", "--json", "--no-peak", "--repeat", "1", "--", "--steps", "2"]
    )
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert payload["verdict"] == "pass" and payload["model"] == "ResidualMLP"
    assert payload["gradients"]["compared"] == 28 and payload["gradients"]["mismatched"] == []
    run = payload["distributed"]
    assert run["backend"] == "gloo" and run["fsdp"] == ["FSDP2"] and run["reference"] is None
    assert "script mode: no single-process reference (it needs make_case(rank, world_size))" in payload["notes"]
    assert [r["state"] for r in run["ranks"]] == ["finished", "finished"]


# --- broken set-ups fail, naming the collectives or parameters and the rule -----------------------


@pytest.mark.parametrize("backend", BACKENDS)
def test_reentrant_checkpoint_wrapper_outside_fsdp1_units_all_gathers_twice(backend):
    report = report_of("fsdp1_checkpoint_then_wrap", backend)
    assert report.verdict == "fail"
    assert report.gradients.mismatched == () and report.gradients.compared == 28  # right gradients...
    assert collectives(report)[("all_gather", "backward")] == (4, 8)  # ...twice the communication
    assert collectives(report)[("all_gather", "forward")] == (5, 5)
    assert nesting(report) == {"FSDP(ResidualMLP)": 1, "CheckpointWrapper(FSDP(Block))": 4}
    assert [(f.code, f.subject) for f in report.errors] == [("CKPT003", "collectives")]
    message = report.errors[0].message
    assert "adds 4 all-gathers to backward (8 with checkpointing, 4 without, per rank)" in message
    assert "first at 'blocks.0'" in message
    extra = [c for c in report.distributed.collectives if c.extra]
    assert [(c.kind, c.phase, c.extra) for c in extra] == [("all_gather", "backward", 4)]


def test_the_same_nesting_with_blocks_called_by_keyword_is_the_same_finding():
    """torch's reentrant wrapper checkpoints a closure when the block gets keywords: the
    region is judged by the FSDP1 unit it ran, not by the function it was handed."""
    report = report_of("fsdp1_checkpoint_then_wrap_keywords", "gloo")
    assert report.verdict == "fail"
    assert collectives(report)[("all_gather", "backward")] == (4, 8)
    assert [(f.code, f.subject) for f in report.errors] == [("CKPT003", "collectives")]
    assert "first at 'blocks.0'" in report.errors[0].message


def test_reentrant_checkpoint_call_around_fsdp1_units_is_ckpt002():
    """Also the FSDP1 units FSDP builds by default (use_orig_params=False), whose gradients
    summon_full_params cannot gather: they must still match one process."""
    report = report_of("fsdp1_checkpoint_call_around_units", "gloo")
    assert report.verdict == "fail"
    assert [(f.code, f.subject) for f in report.errors] == [("CKPT002", "collectives")]
    assert "4 reentrant checkpoint call(s) run whole FSDP1 units (first: 'blocks.0')" in report.errors[0].message
    assert collectives(report)[("all_gather", "backward")] == (4, 8)
    assert nesting(report) == {"FSDP(CheckpointedMLP)": 1, "FSDP(Block)": 4}
    reference = report.distributed.reference
    assert reference.baseline.compared == 28 and reference.baseline.mismatched == ()


@pytest.mark.parametrize("backend", BACKENDS)
def test_frozen_region_under_fsdp2_with_reentrant_checkpointing_loses_its_gradients(backend):
    report = report_of("fsdp2_frozen_region_reentrant", backend)
    assert report.verdict == "fail"
    missing = [m.name for m in report.gradients.mismatched if m.kind == "missing_checkpointed"]
    assert len(missing) == 24 and len(report.gradients.mismatched) == 24
    assert {name.split(".")[0] for name in missing} == {"blocks"} and "blocks.3.down.weight" in missing
    assert {f.code for f in report.errors} == {"CKPT002", "CKPT007"}
    assert "blocks.0.up.weight" in {f.subject for f in report.errors}
    # The blocks get no backward at all with checkpointing: their units never all-gather there.
    before, after = collectives(report)[("all_gather", "backward")]
    assert after < before
    # Without checkpointing the sharded step matches one process; checkpointed, it does not.
    reference = report.distributed.reference
    assert reference.baseline.mismatched == () and len(reference.checkpointed.mismatched) == 24


def test_several_reentrant_regions_in_one_fsdp1_unit_crash_is_reported_exit_1():
    result = invoke(
        ["verify", f"{FIXTURES}/fsdp1_reentrant_regions_in_one_unit.py:make_case", "--nproc", "2", "--json", "--no-peak", "--repeat", "1"]
    )
    assert result.exit_code == 1, result.output
    payload = json.loads(result.stdout)
    assert payload["verdict"] == "fail"
    run = payload["distributed"]
    assert run["outcome"] == "crashed" and run["units"] == 1
    assert [n["pattern"] for n in run["nesting"]] == ["FSDP(CheckpointedMLP)"]
    crash = payload["findings"][0]
    assert crash["severity"] == "error" and crash["code"] == "CKPT002"
    assert crash["subject"] == f"rank {crash['rank']}"
    assert "crashed in phase 'checkpointed backward'" in crash["message"]
    assert "data is not allocated yet" in crash["message"]
    assert "4 reentrant checkpoint regions run inside one FSDP1 unit (the root unit)" in crash["message"]
    assert "_blocks.py:" in crash["message"]  # the user's frame where it failed
    crashed = [r for r in run["ranks"] if r["state"] == "crashed"]
    assert crashed and all(r["phase"] == "checkpointed backward" for r in crashed)
    assert {r["state"] for r in run["ranks"]} <= {"crashed", "stopped"}
    # The collectives up to the crash, next to the complete step without checkpointing.
    forward = next(c for c in run["collectives"] if (c["kind"], c["phase"]) == ("all_gather", "forward"))
    assert forward == {"kind": "all_gather", "phase": "forward", "baseline": 1, "checkpointed": 1, "extra": 0, "complete": False}
    assert not [r["pid"] for r in run["ranks"] if pid_alive(r["pid"])]


# --- hangs are stopped at the timeout ------------------------------------------------------------

STALLING_CASE = """
    import time

    import torch
    import torch.distributed as dist
    import torch.nn.functional as F
    from _blocks import Block, ResidualMLP, device, make_batch, mesh
    from torch.distributed.fsdp import fully_shard
    from torch.utils.checkpoint import checkpoint


    class StallingBlock(Block):
        def forward(self, x):
            recomputing = torch._C._current_graph_task_id() != -1
            if recomputing and dist.get_rank() == 0:
                time.sleep(3600)  # rank 0 stalls in the recomputation; rank 1 waits for it
            return super().forward(x)


    class Net(ResidualMLP):
        def __init__(self):
            super().__init__()
            self.blocks[2] = StallingBlock()

        def forward(self, x):
            h = self.stem(x)
            for block in self.blocks:
                h = checkpoint(block, h, use_reentrant=False)
            return self.head(h)


    def make_case(rank, world_size):
        torch.manual_seed(0)
        model = Net().to(device())
        for block in model.blocks:
            fully_shard(block, mesh=mesh())
        fully_shard(model, mesh=mesh())
        x, y = make_batch(rank, world_size)
        return {"model": model, "inputs": x, "loss_fn": lambda logits: F.cross_entropy(logits, y)}
"""


def test_a_step_that_hangs_is_stopped_at_the_timeout_and_reported(tmp_path):
    shutil.copy(REPO_ROOT / FIXTURES / "_blocks.py", tmp_path / "_blocks.py")
    (tmp_path / "stalling.py").write_text(textwrap.dedent(STALLING_CASE))
    timeout = 20
    result = invoke(
        ["verify", "stalling.py:make_case", "--nproc", "2", "--json", "--no-peak", "--repeat", "1", "--timeout", str(timeout)],
        cwd=tmp_path,
    )
    assert result.exit_code == 1, result.output
    payload = json.loads(result.stdout)
    run = payload["distributed"]
    assert payload["verdict"] == "fail" and run["outcome"] == "timed out" and run["timeout_s"] == timeout
    ranks = {r["rank"]: r for r in run["ranks"]}
    assert ranks[0]["state"] == "timed out" and ranks[0]["phase"] == "checkpointed backward"
    assert ranks[0]["location"].startswith("stalling.py:16 in forward")  # the time.sleep
    assert ranks[1]["state"] == "timed out" and ranks[1]["phase"] == "checkpointed backward"
    assert "torch.distributed" in ranks[1]["location"]  # waiting for rank 0 in a collective
    finding = payload["findings"][0]
    assert finding["subject"] == "rank 0" and finding["code"] is None  # non-reentrant: no rule to blame
    assert f"did not finish within --timeout {timeout} s" in finding["message"]
    assert not [r["pid"] for r in run["ranks"] if pid_alive(r["pid"])]


# --- nothing verified: exit 2 --------------------------------------------------------------------


def test_a_make_case_that_raises_exits_2_naming_the_rank(tmp_path):
    (tmp_path / "broken.py").write_text(
        "def make_case(rank, world_size):\n    raise RuntimeError(f'no data for rank {rank}')\n"
    )
    result = invoke(["verify", "broken.py:make_case", "--nproc", "2"], cwd=tmp_path)
    assert result.exit_code == 2, result.output
    assert result.stdout == ""
    assert "error: rank 0: broken.py:make_case: make_case(rank=0, world_size=2) raised RuntimeError: no data for rank 0" in result.stderr


def test_usage_errors_exit_2_before_launching(tmp_path):
    result = invoke(["verify", "missing.py:make_case", "--nproc", "2"], cwd=tmp_path)
    assert result.exit_code == 2 and "error: target not found: missing.py" in result.stderr
    result = invoke(["verify", f"{FIXTURES}/fsdp1_wrap_then_checkpoint.py:make_case", "--backend", "gloo"])
    assert result.exit_code == 2 and "--backend applies to distributed runs" in result.stderr
    if torch.cuda.device_count() < 2:
        result = invoke(["verify", f"{FIXTURES}/fsdp1_wrap_then_checkpoint.py:make_case", "--nproc", "2", "--backend", "nccl"])
        assert result.exit_code == 2 and "backend nccl needs one GPU per rank" in result.stderr
    with pytest.raises(VerifyError, match="apply only to script mode"):
        verify_distributed(f"{FIXTURES}/fsdp1_wrap_then_checkpoint.py:make_case", 2, script_args=("--steps", "1"))


# --- the pieces, in this process (a process group of one) -----------------------------------------


@pytest.fixture
def world_of_one():
    torch.distributed.init_process_group("gloo", store=torch.distributed.HashStore(), rank=0, world_size=1)
    try:
        yield
    finally:
        torch.distributed.destroy_process_group()


def _fixture_case(name: str):
    """`make_case(0, 1)` of a fixture, built in this process."""
    import importlib.util
    import warnings

    sys.path.insert(0, str(REPO_ROOT / FIXTURES))
    try:
        spec = importlib.util.spec_from_file_location(f"verify_distributed_{name}", REPO_ROOT / FIXTURES / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # FSDP1 switches to NO_SHARD in a world of one
            return module.make_case(0, 1)
    finally:
        sys.path.pop(0)


def test_structure_names_the_nesting_of_checkpoint_wrappers_and_units(world_of_one):
    from ckptlint.runtime_check._fsdp_structure import clean_name, model_class_name, sharding_structure

    structure = sharding_structure(_fixture_case("fsdp1_wrap_then_checkpoint")["model"])
    assert [(n.pattern, n.count, n.first) for n in structure.nesting] == [
        ("FSDP(ResidualMLP)", 1, "(model)"),
        ("FSDP(CheckpointWrapper(Block))", 4, "blocks.0"),
    ]
    assert structure.units == 5 and structure.versions == ("FSDP1",) and structure.wrappers_outside_fsdp1_units == ()
    before = _fixture_case("fsdp1_checkpoint_then_wrap")["model"]
    structure = sharding_structure(before)
    assert [(n.pattern, n.count) for n in structure.nesting] == [("FSDP(ResidualMLP)", 1), ("CheckpointWrapper(FSDP(Block))", 4)]
    assert structure.wrappers_outside_fsdp1_units == ("blocks.0", "blocks.1", "blocks.2", "blocks.3")
    assert structure.parameter_bytes == structure.full_parameter_bytes  # one rank holds everything
    assert (structure.model, structure.device, structure.dtype) == ("ResidualMLP", "cpu", "float32")
    assert model_class_name(before) == "ResidualMLP"
    structure = sharding_structure(_fixture_case("fsdp2_checkpoint_then_shard")["model"])
    assert [(n.pattern, n.count) for n in structure.nesting] == [
        ("fully_shard(ResidualMLP)", 1),
        ("fully_shard(CheckpointWrapper(Block))", 4),
    ]
    assert structure.versions == ("FSDP2",)
    assert clean_name("_fsdp_wrapped_module.blocks.0._checkpoint_wrapped_module._fsdp_wrapped_module.up.weight") == "blocks.0.up.weight"


@pytest.mark.filterwarnings("ignore:`torch.distributed.all_gather_into_tensor` is deprecated")
def test_collective_counter_counts_by_phase_once_per_call_and_restores(world_of_one):
    from ckptlint.runtime_check._collectives import BACKWARD, FORWARD, CollectiveCounter

    distributed = torch.distributed
    originals = (distributed.all_gather_single, distributed.all_gather, distributed.reduce_scatter_single)
    counter = CollectiveCounter()
    with counter:
        counter.phase = FORWARD
        distributed.all_gather_into_tensor(torch.empty(2), torch.ones(2))  # forwards to all_gather_single: counted once
        distributed.all_gather([torch.empty(2)], torch.ones(2))
        counter.phase = BACKWARD
        distributed.all_reduce(torch.ones(2))
        counter.phase = None
        distributed.all_gather([torch.empty(2)], torch.ones(2))  # outside the step: not counted
    assert counter.tally().to_dict() == {
        "all_gather": {"forward": 2, "backward": 0},
        "reduce_scatter": {"forward": 0, "backward": 0},
        "all_reduce": {"forward": 0, "backward": 1},
    }
    assert (distributed.all_gather_single, distributed.all_gather, distributed.reduce_scatter_single) == originals


def test_batch_norm_rules_out_the_single_process_reference():
    from ckptlint.runtime_check._distributed_step import batch_coupled_modules

    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.BatchNorm1d(4), torch.nn.SyncBatchNorm(4)).train()
    assert batch_coupled_modules(model) == ["1"]
    assert batch_coupled_modules(model.eval()) == []


def test_stack_dumps_name_the_users_line_and_the_collective(monkeypatch):
    from ckptlint.runtime_check._distributed import stack_location

    monkeypatch.chdir(REPO_ROOT)
    torch_file = str(Path(torch.__file__).parent / "distributed" / "distributed_c10d.py")
    dump = (
        "Thread 0x00007f0000000001 (most recent call first):\n"
        '  File "/usr/lib/python3.11/threading.py", line 327 in wait\n\n'
        "Current thread 0x00007f0000000000 (most recent call first):\n"
        f'  File "{torch_file}", line 4250 in all_gather\n'
        f'  File "{REPO_ROOT / FIXTURES / "_blocks.py"}", line 22 in forward\n'
        f'  File "{Path(torch.__file__).parent / "nn" / "modules" / "module.py"}", line 1789 in _call_impl\n'
    )
    assert stack_location(dump) == f"{FIXTURES}/_blocks.py:22 in forward, inside torch.distributed.all_gather"
    assert stack_location(f'Current thread 0x1 (most recent call first):\n  File "{torch_file}", line 1 in barrier\n') == (
        "inside torch.distributed.barrier"
    )


def _run_files(directory: Path, phases: dict[int, list[str]], *, crowded: bool = False):
    """A run directory as two ranks leave it, without running them."""
    from ckptlint.runtime_check._collectives import CollectiveTally
    from ckptlint.runtime_check._journal import RankJournal, RunFiles
    from ckptlint.runtime_check._rank_records import BaselineRecord, RegionSites

    directory.mkdir()
    journals = {}
    for rank, entered in phases.items():
        journal = journals[rank] = RankJournal(directory, rank)
        journal.started()
        for phase in entered:
            journal.enter(phase)
            if phase == "baseline gather":
                sites = RegionSites(4, 4, (), (("(model)", 4),) if crowded else ())
                tally = CollectiveTally.of({("all_gather", "forward"): 1, ("reduce_scatter", "backward"): 1})
                journal.record("baseline", BaselineRecord(1.5, "loss_fn", tally, sites))
    return RunFiles(directory, len(phases)), journals


def _classify(files, *, timed_out: bool):
    from ckptlint.runtime_check._distributed import Launch, _Context, _report

    launch = Launch(returncode=None if timed_out else 1, timed_out=timed_out, log="", stacks={})
    return _report(_Context(files, launch, "case.py:make_case", "gloo", 20.0, 1, time.perf_counter()))


STEP = ["launched", "process group", "make_case", "structure", "warm-up", "baseline forward", "baseline backward", "baseline gather"]


def test_a_hang_before_the_training_step_is_exit_2_inside_it_a_result(tmp_path):
    files, _ = _run_files(tmp_path / "setup", {0: STEP[:3], 1: STEP[:2]})
    with pytest.raises(VerifyError, match="before every rank had reached the training step.*rank 1 in 'process group'"):
        _classify(files, timed_out=True)

    files, _ = _run_files(tmp_path / "baseline", {0: STEP[:5], 1: STEP[:6]})
    report = _classify(files, timed_out=True)
    assert report.exit_code == 1 and report.distributed.outcome == "timed out"
    assert [(f.code, f.subject) for f in report.errors] == [(None, "rank 0")]
    assert "the step without checkpointing did not finish within --timeout 20 s" in report.errors[0].message
    assert "checkpointing is not what hangs" in report.errors[0].message

    stalled = STEP + ["checkpointed forward"]
    files, _ = _run_files(tmp_path / "checkpointed", {0: stalled, 1: stalled}, crowded=True)
    report = _classify(files, timed_out=True)
    assert [(f.code, f.subject) for f in report.errors] == [("CKPT002", "rank 0")]
    assert "the checkpointed step did not finish" in report.errors[0].message
    assert [(c.kind, c.phase, c.baseline) for c in report.distributed.collectives if c.baseline] == [
        ("all_gather", "forward", 1),
        ("reduce_scatter", "backward", 1),
    ]


def test_an_exception_is_exit_2_without_checkpointing_and_a_result_with_it(tmp_path):
    files, journals = _run_files(tmp_path / "baseline", {0: STEP[:6], 1: STEP[:6]})
    journals[1].failed(RuntimeError("mat2 must be a matrix"), verify_error=False, location="model.py:3 in forward")
    with pytest.raises(VerifyError, match=r"rank 1 failed in phase 'baseline forward'.*RuntimeError: mat2 must be a matrix at model.py:3"):
        _classify(files, timed_out=False)

    crashing = STEP + ["checkpointed backward"]
    files, journals = _run_files(tmp_path / "checkpointed", {0: crashing, 1: crashing})
    journals[0].failed(RuntimeError("Connection closed by peer"), verify_error=False, location=None)
    journals[1].failed(RuntimeError("mat2 must be a matrix"), verify_error=False, location="model.py:3 in forward")
    report = _classify(files, timed_out=False)
    assert report.distributed.outcome == "crashed"
    assert report.errors[0].subject == "rank 1"  # the cause, not the peer that lost it
    assert "rank 1 crashed in phase 'checkpointed backward'" in report.errors[0].message
    assert [f.subject for f in report.warnings] == ["rank 0"]


def test_nproc_times_as_many_steps_as_repeat_says():
    report = verify_distributed(
        f"{REPO_ROOT / FIXTURES / 'fsdp2_checkpoint_then_shard'}.py:make_case", 2, backend="gloo", timeout=180, repeat=3, measure_peak=False
    )
    assert report.time.repeats == 3  # one pair per timed step, the slowest rank's
    assert len(report.time.ratios) == 3
    assert report.to_dict()["time"]["repeats"] == 3
