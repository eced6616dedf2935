"""`ckptlint verify TARGET --nproc N`: the step verified on N ranks under torchrun.

The parent launches torch's own elastic launcher on this machine, loopback only:

    python -m torch.distributed.run --standalone --nproc-per-node N --max-restarts 0 \\
        -m ckptlint.runtime_check._rank RUN_DIR

in a session of its own, and waits at most `timeout` seconds for the whole run. Each rank
(`_rank`) replays the step and reports through files in RUN_DIR (`_journal`); the parent
merges them into one `Report`. When a rank crashes, torchrun stops the others; when the
timeout passes, the parent stops every rank itself (SIGTERM to each rank's own session,
which torchrun gives every worker, then SIGKILL to what is left, then the launcher), so no
process outlives the call, and the report says which phase each rank had reached and where
it was.

Exit codes follow the single-process verifier. Nothing could be verified (exit 2, a
`VerifyError`): the launch failed, the target is missing or broken, a rank raised before the
checkpointed step (the step fails with checkpointing switched off), or the timeout passed
before every rank had reached the training step. A finding (exit 1, a failing report): the
checkpointed step crashed on a rank, the training step hung past the timeout (the report says
whether with checkpointing on or off), or it finished and differs (gradients, buffers, plain
attributes, RNG, collectives). The single-process reference only warns: a sharded step may
differ from one process by design.
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import torch

from ckptlint.runtime_check._hazards import CHECKPOINT_BEFORE_FSDP_WRAP, REENTRANT_UNDER_FSDP
from ckptlint.runtime_check._collectives import BACKWARD, KINDS, PHASES, CollectiveTally
from ckptlint.runtime_check._journal import (
    CHECKPOINTED_PHASES,
    REQUEST,
    RankError,
    RunFiles,
    describe_frames,
    in_checkpointed_step,
    in_training_step,
    phase_index,
)
from ckptlint.runtime_check._ranking import rank_findings
from ckptlint.runtime_check._rank_records import BaselineRecord, RankOutcome, RegionSites, ShardingStructure, mean
from ckptlint.runtime_check._targets import DEFAULT_TIMEOUT_S, Target
from ckptlint.runtime_check._types import (
    ERROR,
    FAIL,
    PASS,
    WARNING,
    BufferComparison,
    Finding,
    GradientComparison,
    LossComparison,
    MemoryFigure,
    MemoryReport,
    Recomputation,
    RngComparison,
    Timing,
    Tolerance,
    VerifyError,
)
from ckptlint.runtime_check._distributed_types import CollectiveComparison, DistributedReport, RankStatus, ReferenceComparison
from ckptlint.runtime_check._report import Report

BACKENDS = ("gloo", "nccl")
_JOB_VARIABLES = frozenset(
    {"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK", "ROLE_RANK", "MASTER_ADDR", "MASTER_PORT"}
)
LAUNCHER = "torch.distributed.run"
# After SIGTERM, how long a rank or the launcher gets to write its last words and leave.
STOP_GRACE_S = 3.0
# Errors a rank raises because another rank went away: consequences, not causes.
_PEER_GONE = re.compile(r"connection (closed|reset)|broken pipe|peer|socket|timed out|timeout", re.IGNORECASE)


def verify_distributed(
    target: str,
    nproc: int,
    *,
    backend: str = "gloo",
    timeout: float = DEFAULT_TIMEOUT_S,
    script_args: tuple[str, ...] = (),
    rtol: float | None = None,
    atol: float | None = None,
    repeat: int = 2,
    measure_peak: bool = True,
) -> Report:
    """Verify TARGET (`file.py:make_case` or a script) on `nproc` ranks of this machine.

    `make_case(rank, world_size)` builds the model as the user's training does (FSDP1
    `FullyShardedDataParallel` or FSDP2 `fully_shard` included), after the verifier has
    initialised the process group, and returns `model`, `inputs` (this rank's slice of a
    fixed global batch) and optionally `loss_fn`; `make_case(0, 1)` then gives the whole
    batch on one process, the reference. `timeout`: seconds for the whole run, launch
    included. Returns a `Report` with `.distributed` set; raises `VerifyError` when nothing
    could be verified.
    """
    started = time.perf_counter()
    if nproc < 1:
        raise VerifyError(f"--nproc must be at least 1, not {nproc}")
    if backend not in BACKENDS:
        raise VerifyError(f"unknown backend {backend!r}: use one of {', '.join(BACKENDS)}")
    if timeout <= 0:
        raise VerifyError("the timeout must be positive")
    if repeat < 1:
        raise VerifyError("repeat must be at least 1")
    if backend == "nccl":
        found = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if found < nproc:
            raise VerifyError(f"backend nccl needs one GPU per rank: --nproc {nproc}, but this machine has {found} GPU(s)")
    parsed = Target.parse(target)
    if not parsed.path.is_file():
        raise VerifyError(f"target not found: {parsed.path}")
    if parsed.attribute is not None and script_args:
        raise VerifyError(f"script arguments ({' '.join(script_args)}) apply only to script mode, not to {target}")

    directory = Path(tempfile.mkdtemp(prefix="ckptlint-verify-"))
    try:
        request = {
            "path": str(parsed.path.resolve()),
            "attribute": parsed.attribute,
            "label": target,
            "script_args": list(script_args),
            "backend": backend,
            "timeout": timeout,
            "rtol": rtol,
            "atol": atol,
            "repeat": repeat,
            "measure_peak": measure_peak,
        }
        (directory / REQUEST).write_text(json.dumps(request), encoding="utf-8")
        files = RunFiles(directory, nproc)
        launch = _launch(directory, files, nproc, timeout)
        return _report(_Context(files, launch, target, backend, timeout, repeat, started))
    finally:
        shutil.rmtree(directory, ignore_errors=True)


# --- launching and stopping ---------------------------------------------------------------------


@dataclass(frozen=True)
class Launch:
    returncode: int | None
    timed_out: bool
    log: str  # the launcher's and the ranks' output
    stacks: dict[int, str]  # rank -> faulthandler's dump, for ranks stopped by a signal
    notes: tuple[str, ...] = ()


def _launch(directory: Path, files: RunFiles, nproc: int, timeout: float) -> Launch:
    command = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nnodes",
        "1",
        "--nproc-per-node",
        str(nproc),
        "--max-restarts",
        "0",
        "--log-dir",
        str(directory / "elastic"),
        "-m",
        "ckptlint.runtime_check._rank",
        str(directory),
    ]
    # Run from inside a distributed job (a torchrun'd test, say), the job's own rendezvous
    # variables must not leak into this one's.
    environment = {k: v for k, v in os.environ.items() if k not in _JOB_VARIABLES and not k.startswith("TORCHELASTIC_")}
    environment.setdefault("OMP_NUM_THREADS", "1")  # N ranks share the cores; torchrun's own default, said quietly
    environment["PYTHONUNBUFFERED"] = "1"
    environment["PYTHONFAULTHANDLER"] = "1"
    log_path = directory / "launcher.log"
    timed_out = False
    with open(log_path, "wb") as log:
        launcher = subprocess.Popen(
            command, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=environment, start_new_session=True
        )
        try:
            launcher.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
        finally:
            # Also on KeyboardInterrupt: nothing of the run outlives this call.
            survivors = _stop_everything(launcher, files, nproc)
    stacks = {rank: text for rank in range(nproc) if (text := files.stack(rank))}
    notes = tuple(f"rank {rank} (pid {pid}) did not stop, even on SIGKILL" for rank, pid in survivors)
    return Launch(launcher.returncode, timed_out, _tail(log_path), stacks, notes)


def _tail(path: Path, size: int = 1 << 16) -> str:
    """The end of the launcher's log (the ranks' prints can be long; torchrun's verdict is last)."""
    with open(path, "rb") as stream:
        stream.seek(0, os.SEEK_END)
        stream.seek(max(0, stream.tell() - size))
        return stream.read().decode("utf-8", errors="replace")


def _stop_everything(launcher: subprocess.Popen, files: RunFiles, nproc: int) -> list[tuple[int, int]]:
    """Each rank runs in a session of its own (torchrun's doing), so stopping the launcher's
    session does not reach it: stop the ranks by their own sessions first. Returns the
    (rank, pid) of any rank still alive at the end."""
    by_rank = {rank: pid for rank in range(nproc) if (pid := files.pid(rank)) is not None and _is_rank_of(pid, files)}
    ranks = list(by_rank.values())
    for pid in ranks:
        _signal_session(pid, signal.SIGTERM)
    if launcher.poll() is None:
        _signal_session(launcher.pid, signal.SIGTERM)
    deadline = time.monotonic() + STOP_GRACE_S
    while time.monotonic() < deadline and (launcher.poll() is None or any(_alive(pid) for pid in ranks)):
        time.sleep(0.05)
    for pid in ranks:
        if _alive(pid):
            _signal_session(pid, signal.SIGKILL)
    if launcher.poll() is None:
        _signal_session(launcher.pid, signal.SIGKILL)
    launcher.wait()
    deadline = time.monotonic() + STOP_GRACE_S
    while time.monotonic() < deadline and any(_alive(pid) for pid in ranks):
        time.sleep(0.05)
    return [(rank, pid) for rank, pid in by_rank.items() if _alive(pid)]


def _is_rank_of(pid: int, files: RunFiles) -> bool:
    """The pid still names one of this run's ranks (and not a process that reused it)."""
    try:
        command = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return _alive(pid)  # no /proc: trust the pid file, written moments ago
    return str(files.directory).encode() in command


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie (exited, not yet reaped by torchrun) is gone for our purposes
        status = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        return status != "Z"
    except (OSError, IndexError):
        return True


def _signal_session(pid: int, signum: int) -> None:
    try:
        os.killpg(pid, signum)
    except (ProcessLookupError, PermissionError):
        try:
            os.kill(pid, signum)
        except (ProcessLookupError, PermissionError):
            pass


# --- merging what the ranks wrote ---------------------------------------------------------------


@dataclass(frozen=True)
class _Context:
    files: RunFiles
    launch: Launch
    target: str
    backend: str
    timeout: float
    repeat: int
    started: float


def _report(context: _Context) -> Report:
    """One report from what the ranks wrote, or a VerifyError when nothing was verified."""
    files, launch = context.files, context.launch
    world = files.world_size
    outcomes: dict[int, RankOutcome] = {r: o for r in range(world) if (o := files.record(r, "outcome")) is not None}
    errors: dict[int, RankError] = {r: e for r in range(world) if (e := files.error(r)) is not None}
    phases = {r: files.last_phase(r) for r in range(world)}

    said = sorted((e.at, r) for r, e in errors.items() if e.verify_error)
    if said:  # a rank found nothing to verify: rank 0's word first, else the earliest
        rank = 0 if 0 in errors and errors[0].verify_error else said[0][1]
        raise VerifyError(errors[rank].message if world == 1 else f"rank {rank}: {errors[rank].message}")
    # Rank 0 writes its outcome before it runs the reference: a reference that hangs or dies
    # costs the comparison with one process, not the report.
    if len(outcomes) == world and (not launch.timed_out or all(phases[r] in ("reference", "finished") for r in range(world))):
        return _completed(context, outcomes, phases)
    crashed = [r for r in errors if not errors[r].verify_error]
    genuine = [r for r in crashed if not _PEER_GONE.search(errors[r].message)]
    # Ranks that ended by themselves without a report (a signal: SIGSEGV, SIGABRT, the OOM killer).
    vanished = [r for r in range(world) if r not in outcomes and r not in errors and r not in launch.stacks and phases[r]]
    # At the timeout, errors about a peer gone (a collective that gave up) follow the hang.
    if (crashed or vanished) and (not launch.timed_out or genuine):
        primary = _primary(errors, crashed) if genuine or not vanished else vanished[0]
        phase = errors[primary].phase if primary in errors else phases[primary] or "launched"
        if not in_checkpointed_step(phase):
            statuses = _rank_statuses(context, phases, errors, set(), "stopped")
            raise VerifyError(
                f"rank {primary} failed in phase '{phase}' before the step without checkpointing had finished, "
                f"so nothing was verified: {statuses[primary].error or 'it ended without a report'}"
                f"{at(statuses[primary].location)}"
            )
        return _failed(context, "crashed", primary, errors, phases)
    if launch.timed_out:
        stuck = min((phase_index(p or "launched"), r) for r, p in phases.items())[1]
        if not in_training_step(phases[stuck] or "launched"):
            raise VerifyError(
                f"{context.target} timed out after {context.timeout:g} s (--timeout) before every rank had reached "
                f"the training step, so nothing was verified: {_whereabouts(context, phases, errors)}. Every rank "
                "was stopped"
            )
        return _failed(context, "timed out", stuck, errors, phases)
    lost = [r for r in range(world) if r not in outcomes]
    if any(in_checkpointed_step(phases[r] or "launched") for r in lost):
        return _failed(context, "crashed", lost[0], errors, phases)
    raise VerifyError(
        f"the distributed run ended (launcher exit status {launch.returncode}) without a result from rank(s) "
        f"{', '.join(map(str, lost))}: {_whereabouts(context, phases, errors)}"
        + _log_tail(launch.log)
    )


def _primary(errors: dict[int, RankError], ranks: list[int]) -> int:
    """The rank whose error caused the others: the earliest that is not about a peer gone."""
    causes = [r for r in ranks if not _PEER_GONE.search(errors[r].message)] or ranks
    return min(causes, key=lambda r: (errors[r].at, r))


def _exit_status(log: str, pid: int | None) -> str | None:
    """What torchrun said of a rank that ended on its own without a report (a signal, say)."""
    if pid is None:
        return None
    found = re.search(rf"exitcode\s*:\s*(-?\d+)[^\n]*?pid\s*:\s*{pid}\b", log)
    if found is None:
        return None
    code = int(found.group(1))
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit status {code}"


def _log_tail(log: str, lines: int = 15) -> str:
    tail = [line for line in log.strip().splitlines() if line.strip()][-lines:]
    return ("\nlauncher output (last lines):\n  " + "\n  ".join(tail)) if tail else ""


def stack_location(dump: str | None) -> str | None:
    """From a faulthandler dump: the innermost frame of the user's code in the main thread,
    plus the torch.distributed call it was inside, if any."""
    if not dump:
        return None
    blocks = re.split(r"\n(?=(?:Current thread|Thread) 0x)", dump.strip())
    current = next((b for b in blocks if b.startswith("Current thread")), blocks[0] if blocks else "")
    frames = re.findall(r'File "([^"]+)", line (\d+) in (\S+)', current)
    return describe_frames([(name, int(line), function) for name, line, function in frames])


def at(location: str | None) -> str:
    """` at file.py:12 in forward`, ` inside torch.distributed.all_gather`, or nothing."""
    if not location:
        return ""
    return f" {location}" if location.startswith("inside ") else f" at {location}"


def _rank_statuses(
    context: _Context,
    phases: dict[int, str | None],
    errors: dict[int, RankError],
    finished: set[int],
    state_of_unfinished: str,
) -> tuple[RankStatus, ...]:
    statuses = []
    for rank in range(context.files.world_size):
        structure: ShardingStructure | None = context.files.record(rank, "structure")
        size = structure.parameter_bytes if structure is not None else None
        phase = phases.get(rank) or "not started"
        pid = context.files.pid(rank)
        if rank in finished:
            statuses.append(RankStatus(rank, "finished", phase, parameter_bytes=size, pid=pid))
        elif rank in errors:
            error = errors[rank]
            statuses.append(
                RankStatus(rank, "crashed", error.phase, f"{error.type}: {error.message}", error.location, size, pid)
            )
        elif rank in context.launch.stacks:  # it dumped its stack when it was told to stop
            where = stack_location(context.launch.stacks[rank])
            statuses.append(RankStatus(rank, state_of_unfinished, phase, None, where, size, pid))
        else:
            statuses.append(RankStatus(rank, "lost", phase, _exit_status(context.launch.log, pid), None, size, pid))
    return tuple(statuses)


def _whereabouts(context: _Context, phases: dict[int, str | None], errors: dict[int, RankError]) -> str:
    parts = []
    for status in _rank_statuses(context, phases, errors, set(), "stopped"):
        text = f"rank {status.rank} in '{status.phase}'"
        if status.error:
            text += f" ({status.error})"
        parts.append(text + at(status.location))
    return "; ".join(parts)


def _collectives(
    baseline: CollectiveTally, checkpointed: CollectiveTally | dict | None, complete: bool
) -> tuple[CollectiveComparison, ...]:
    """Every kind and phase; `checkpointed` may be a tally's `to_dict()`, as the journal keeps it."""
    if isinstance(checkpointed, dict):
        checkpointed = CollectiveTally.of({(k, p): n for k, by_phase in checkpointed.items() for p, n in by_phase.items()})
    rows = []
    for kind in KINDS:
        for phase in PHASES:
            before = baseline.get(kind, phase)
            after = checkpointed.get(kind, phase) if checkpointed is not None else None
            rows.append(CollectiveComparison(kind, phase, before, after, complete))
    return tuple(rows)


def _structure_fields(context: _Context) -> tuple[ShardingStructure | None, tuple[int | None, ...]]:
    structures = [context.files.record(rank, "structure") for rank in range(context.files.world_size)]
    first = next((s for s in structures if s is not None), None)
    return first, tuple(s.parameter_bytes if s is not None else None for s in structures)


def _distributed(
    context: _Context,
    outcome: str,
    collectives: tuple[CollectiveComparison, ...],
    ranks: tuple[RankStatus, ...],
    reference: ReferenceComparison | None,
) -> DistributedReport:
    structure, per_rank = _structure_fields(context)
    backends = [b for rank in range(context.files.world_size) if (b := context.files.record(rank, "backend"))]
    return DistributedReport(
        world_size=context.files.world_size,
        backend=backends[0] if backends else context.backend,
        launcher=LAUNCHER,
        outcome=outcome,
        timeout_s=context.timeout,
        fsdp=structure.versions if structure else (),
        units=structure.units if structure else 0,
        nesting=structure.nesting if structure else (),
        parameter_bytes_per_rank=per_rank,
        full_parameter_bytes=structure.full_parameter_bytes if structure else 0,
        collectives=collectives,
        ranks=ranks,
        reference=reference,
    )


def unit_label(name: str) -> str:
    return "the root unit" if name == "(model)" else f"'{name}'"


def _nesting_text(structure: ShardingStructure | None) -> str:
    if structure is None or not structure.nesting:
        return ""
    return ", ".join(f"{n.pattern} x{n.count}" for n in structure.nesting)


def _collective_findings(
    collectives: tuple[CollectiveComparison, ...], structure: ShardingStructure | None, sites: RegionSites
) -> list[Finding]:
    findings = []
    for row in collectives:
        if row.extra is None or row.extra <= 0:
            continue
        kind = row.kind.replace("_", "-") + "s"
        counts = f"{row.checkpointed} with checkpointing, {row.baseline} without, per rank"
        outside = structure.wrappers_outside_fsdp1_units if structure else ()
        if row.kind == "all_gather" and row.phase == BACKWARD and outside and sites.reentrant_around_fsdp1_units:
            findings.append(
                Finding(
                    ERROR,
                    CHECKPOINT_BEFORE_FSDP_WRAP,
                    "collectives",
                    f"checkpointing adds {row.extra} {kind} to backward ({counts}): the checkpoint wrappers sit outside "
                    f"the FSDP1 units ({_nesting_text(structure)}; first at '{outside[0]}'), so each reentrant "
                    "recomputation runs the unit's forward again inside backward and all-gathers its parameters a "
                    "second time. Apply activation checkpointing after the FSDP wrap, giving FSDP(CheckpointWrapper(...)), "
                    "or use CheckpointImpl.NO_REENTRANT",
                )
            )
        elif row.kind == "all_gather" and row.phase == BACKWARD and sites.reentrant_around_fsdp1_units:
            units = sites.reentrant_around_fsdp1_units
            findings.append(
                Finding(
                    ERROR,
                    REENTRANT_UNDER_FSDP,
                    "collectives",
                    f"checkpointing adds {row.extra} {kind} to backward ({counts}): {len(units)} reentrant checkpoint "
                    f"call(s) run whole FSDP1 units (first: {unit_label(units[0])}), so each recomputation runs the unit's "
                    "forward, and its all-gather, again inside backward. Pass use_reentrant=False",
                )
            )
        else:
            findings.append(
                Finding(
                    ERROR,
                    REENTRANT_UNDER_FSDP if sites.reentrant else None,
                    "collectives",
                    f"checkpointing adds {row.extra} {kind} to the {row.phase} ({counts}): the recomputation in "
                    "backward repeats communication the step already did"
                    + (" (reentrant checkpointing under FSDP; use_reentrant=False avoids it)" if sites.reentrant else ""),
                )
            )
    return findings


def _merged_local_findings(outcomes: dict[int, RankOutcome]) -> list[Finding]:
    """A finding every rank made the same way is reported once, without a rank."""
    seen: dict[tuple, list[Finding]] = {}
    for rank in sorted(outcomes):
        for finding in outcomes[rank].findings:
            seen.setdefault((finding.severity, finding.code, finding.subject, finding.message), []).append(finding)
    merged = []
    for group in seen.values():
        if len(group) == len(outcomes) and len(outcomes) > 1:
            merged.append(replace(group[0], rank=None))
        else:
            merged.extend(group)
    return merged


def _completed(context: _Context, outcomes: dict[int, RankOutcome], phases: dict[int, str | None]) -> Report:
    root = outcomes[0]
    structure, _ = _structure_fields(context)
    findings: list[Finding] = list(root.gradient_findings)
    findings.extend(_merged_local_findings(outcomes))
    collectives = _collectives(root.baseline.collectives, root.checkpointed_collectives, True)
    findings.extend(_collective_findings(collectives, structure, root.baseline.sites))
    notes = list(root.notes) + list(context.launch.notes)
    if phases.get(0) == "reference":
        how = f"stopped at the timeout ({context.timeout:g} s)" if context.launch.timed_out else "rank 0 ended while running it"
        notes.append(f"no single-process reference: make_case(0, 1) did not finish ({how})")
    counted = (root.baseline.collectives, root.checkpointed_collectives)
    differing = sorted(r for r, o in outcomes.items() if (o.baseline.collectives, o.checkpointed_collectives) != counted)
    if differing:
        notes.append(f"rank(s) {', '.join(map(str, differing))} counted other collectives than rank 0 (shown)")
    sites = root.baseline.sites
    if any(m.kind == "missing_checkpointed" for m in (root.gradients.mismatched if root.gradients else ())) and sites.reentrant:
        findings.append(
            Finding(
                ERROR,
                REENTRANT_UNDER_FSDP,
                "reentrant checkpointing",
                f"{sites.reentrant} reentrant checkpoint call(s) under FSDP, and parameters lose their gradients with "
                "checkpointing: switch to use_reentrant=False (CheckpointImpl.NO_REENTRANT), which gives every "
                "parameter its gradient whatever the region's inputs",
            )
        )
    for unit, count in sites.crowded_units:
        findings.append(
            Finding(
                WARNING,
                REENTRANT_UNDER_FSDP,
                unit,
                f"{count} reentrant checkpoint regions run inside one FSDP1 unit ({unit_label(unit)}): this step survived, but "
                "torch 2.13 crashes backward in this layout when the first region's backward reshards the unit "
                "before the others recompute; use use_reentrant=False or one FSDP unit per region",
            )
        )

    reference = None
    sharded_loss = mean([o.baseline.loss for o in outcomes.values()])
    if root.reference_baseline is not None and root.reference_tolerance is not None and root.reference_loss is not None:
        reference = ReferenceComparison(
            source="make_case(0, 1) on one process: the same model, the global batch, checkpointing off",
            tolerance=root.reference_tolerance,
            loss=root.reference_loss,
            sharded_loss=sharded_loss,
            baseline=root.reference_baseline,
            checkpointed=root.reference_checkpointed,
        )
        findings.extend(_reference_findings(reference))

    ordered = rank_findings(sorted(findings, key=lambda f: (f.severity != ERROR, f.code is None, f.code or "", f.subject, f.rank or 0)))
    losses = [o.loss for o in outcomes.values()]
    loss = LossComparison(
        root.loss.source,
        mean([l.baseline for l in losses]),
        mean([l.checkpointed for l in losses if l.checkpointed is not None]),
        max((l.abs_diff or 0.0) for l in losses),
        all(l.matches for l in losses),
    )
    buffer_mismatches = _first_by(lambda m: m.name, [m for o in _by_rank(outcomes) for m in o.buffers.mismatched])
    attribute_changes = _first_by(lambda a: (a.module, a.attribute), [a for o in _by_rank(outcomes) for a in o.attributes])
    rng_mismatched = tuple(sorted({g for o in outcomes.values() for g in o.rng.mismatched}))
    statuses = _rank_statuses(context, phases, {}, set(outcomes), "stopped")
    report = Report(
        verdict=FAIL if any(f.severity == ERROR for f in ordered) else PASS,
        target=context.target,
        model=root.model,
        device=root.device,
        dtype=root.dtype,
        tolerance=root.tolerance or Tolerance(0.0, 0.0, "exact"),
        loss=loss,
        gradients=root.gradients or GradientComparison(0, 0.0, 0.0, ()),
        buffers=BufferComparison(root.buffers.compared, tuple(buffer_mismatches)),
        attributes=tuple(attribute_changes),
        rng=RngComparison(root.rng.generators, rng_mismatched),
        memory=root.memory,
        # One sample: the slowest rank's fastest step of each kind (the ranks wait for each other).
        time=_slowest_rank_per_step(list(outcomes.values())),
        recomputation=root.recomputation,
        findings=tuple(ordered),
        notes=tuple(notes),
        duration_s=time.perf_counter() - context.started,
        distributed=_distributed(context, "completed", collectives, statuses, reference),
    )
    return report


def _by_rank(outcomes: dict[int, RankOutcome]) -> list[RankOutcome]:
    return [outcomes[r] for r in sorted(outcomes)]


def _first_by(key: Any, items: list[Any]) -> list[Any]:
    seen, kept = set(), []
    for item in items:
        if key(item) not in seen:
            seen.add(key(item))
            kept.append(item)
    return kept


def _reference_findings(reference: ReferenceComparison) -> list[Finding]:
    """Warnings: the verdict is about checkpointing, and a sharded step can differ from one
    process by design (batch-coupled layers, a loss that sums instead of averaging)."""
    findings = []
    tolerance = reference.tolerance
    mismatched = reference.baseline.mismatched
    if mismatched:
        first = mismatched[0]
        detail = (
            f"max abs diff {reference.baseline.max_abs_diff:.3g}" if first.kind == "value" else f"{first.name}: {first.kind}"
        )
        findings.append(
            Finding(
                WARNING,
                None,
                "reference",
                f"without checkpointing, the sharded step's gradients differ from one process running the same model on "
                f"the global batch: {len(mismatched)} of {reference.baseline.compared} (first: `{first.name}`, {detail}; "
                f"rtol {tolerance.rtol:g}, atol {tolerance.atol:g}). Checkpointing is not the cause: check that "
                "make_case(rank, world_size) gives each rank an equal slice of one global batch, and that the loss is "
                "a mean over the batch",
            )
        )
    scale = max(abs(reference.loss), 1.0)
    if abs(reference.loss - reference.sharded_loss) > tolerance.atol + tolerance.rtol * scale and not mismatched:
        findings.append(
            Finding(
                WARNING,
                None,
                "reference",
                f"the ranks' mean loss without checkpointing ({reference.sharded_loss:.8g}) differs from one process on "
                f"the global batch ({reference.loss:.8g})",
            )
        )
    return findings


def _failed(context: _Context, outcome: str, primary: int, errors: dict[int, RankError], phases: dict[int, str | None]) -> Report:
    """A report for a training step that crashed on a rank ("crashed": in the checkpointed
    step) or hung past the timeout ("timed out": in either step); `primary` is the rank that
    failed, or the one furthest behind."""
    files = context.files
    world = files.world_size
    baselines: dict[int, BaselineRecord] = {r: b for r in range(world) if (b := files.record(r, "baseline")) is not None}
    root = baselines.get(0) or baselines.get(primary) or next(iter(baselines.values()), None)
    structure, _ = _structure_fields(context)
    sites = root.sites if root is not None else RegionSites(0, 0, (), ())
    statuses = _rank_statuses(context, phases, errors, set(), "timed out" if outcome == "timed out" else "stopped")
    status = statuses[primary]
    error = errors.get(primary)
    # The checkpointed step's collectives up to the failure, as the failing rank counted them.
    partial = error.collectives if error is not None and error.collectives is not None else None
    if partial is None:
        marks = files.marks(primary)
        partial = next((m.collectives for m in reversed(marks) if m.phase in CHECKPOINTED_PHASES and m.collectives), None)
    collectives = _collectives(root.collectives, partial, False) if root is not None else ()
    code, why = _failure_rule(sites, structure)
    if outcome == "timed out":
        checkpointed = in_checkpointed_step(status.phase)
        step = "the checkpointed step" if checkpointed else "the step without checkpointing"
        message = (
            f"{step} did not finish within --timeout {context.timeout:g} s: rank {primary} was stopped in phase "
            f"'{status.phase}'{at(status.location)}"
            + "".join(f"; rank {s.rank} in '{s.phase}'{at(s.location)}" for s in statuses if s.rank != primary)
        )
        if not checkpointed:
            code, why = None, "The step hangs with checkpointing switched off: checkpointing is not what hangs"
    elif error is not None:
        message = (
            f"rank {primary} crashed in phase '{error.phase}' while the same step without checkpointing runs: "
            f"{error.type}: {error.message}" + (f" (at {error.location})" if error.location else "")
        )
        same = [r for r, e in errors.items() if r != primary and (e.type, e.message) == (error.type, error.message)]
        if same:
            message += f"; rank(s) {', '.join(map(str, same))} raised the same"
    else:
        how = f" ({status.error})" if status.error else ", without a report"
        message = f"rank {primary} ended in phase '{status.phase}'{how} while the same step without checkpointing runs"
    if why:
        message += f". {why}"
    findings = [Finding(ERROR, code, f"rank {primary}", message, primary)]
    for rank, other in sorted(errors.items()):
        if rank == primary or other.verify_error:
            continue
        if error is not None and (other.type, other.message) == (error.type, error.message):
            continue
        findings.append(
            Finding(WARNING, None, f"rank {rank}", f"rank {rank} then failed in phase '{other.phase}': {other.type}: {other.message}", rank)
        )
    teardown = (
        f"every rank was stopped at the timeout ({context.timeout:g} s)"
        if outcome == "timed out"
        else "the ranks that raised destroyed their process group and left, torchrun stopped the others"
    )
    return Report(
        verdict=FAIL,
        target=context.target,
        model=structure.model if structure is not None else "?",
        device=structure.device if structure is not None else "?",
        dtype=structure.dtype if structure is not None else "?",
        tolerance=Tolerance(0.0, 0.0, f"not compared: the step {outcome}"),
        loss=LossComparison(
            root.loss_source if root is not None else "not measured",
            mean([b.loss for b in baselines.values()]) if baselines else math.nan,
            None,
            None,
            False,
        ),
        gradients=GradientComparison(0, 0.0, 0.0, ()),
        buffers=BufferComparison(0, ()),
        attributes=(),
        rng=RngComparison((), ()),
        memory=MemoryReport(MemoryFigure("saved_tensor_bytes", 0, 0), None),
        time=Timing((), ()),
        recomputation=Recomputation(sites.calls, sites.reentrant, 0, 0, 0),
        findings=tuple(findings),
        notes=(f"{world} rank(s) launched by {LAUNCHER}; {teardown}", *context.launch.notes),
        duration_s=time.perf_counter() - context.started,
        distributed=_distributed(context, outcome, collectives, statuses, None),
    )


def _failure_rule(sites: RegionSites, structure: ShardingStructure | None) -> tuple[str | None, str]:
    """The static rule a crash or hang of the checkpointed step corresponds to, and why."""
    if sites.crowded_units:
        unit, count = sites.crowded_units[0]
        return REENTRANT_UNDER_FSDP, (
            f"{count} reentrant checkpoint regions run inside one FSDP1 unit ({unit_label(unit)}): the first region's backward "
            "reshards the unit's parameters before the next region recomputes, which then runs on freed shards "
            "(torch 2.13 crashes backward this way). Pass use_reentrant=False, or give each region an FSDP unit of "
            "its own"
        )
    if structure is not None and structure.wrappers_outside_fsdp1_units and sites.reentrant:
        return CHECKPOINT_BEFORE_FSDP_WRAP, (
            f"reentrant checkpoint wrappers sit outside FSDP1 units ({_nesting_text(structure)}): apply activation "
            "checkpointing after the FSDP wrap, or use CheckpointImpl.NO_REENTRANT"
        )
    if sites.reentrant:
        return REENTRANT_UNDER_FSDP, (
            f"the step makes {sites.reentrant} reentrant checkpoint call(s) under FSDP, whose recomputation runs FSDP's "
            "forward hooks again inside backward: pass use_reentrant=False"
        )
    return None, ""


def _slowest_rank_per_step(outcomes: list[RankOutcome]) -> Timing:
    """A step of N ranks takes as long as its slowest rank: each of the `--repeat` timed
    pairs is the slowest rank's time for that pair (so `resolved` rests on every pair)."""
    pairs = min(len(o.baseline_samples) for o in outcomes)
    return Timing(
        tuple(max(o.baseline_samples[i] for o in outcomes) for i in range(pairs)),
        tuple(max(o.checkpointed_samples[i] for o in outcomes) for i in range(pairs)),
    )
