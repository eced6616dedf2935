"""One rank of `ckptlint verify --nproc N`, started by torch's elastic launcher:

    python -m torch.distributed.run --standalone --nproc-per-node N \\
        -m ckptlint.runtime_check._rank RUN_DIR

It reads `RUN_DIR/request.json`, initialises the process group from torchrun's environment
(RANK, WORLD_SIZE, MASTER_ADDR/PORT), builds the model with the target's
`make_case(rank, world_size)` (or runs the script up to its first training step), replays
the step (`_distributed_step`) and writes what it found to RUN_DIR (`_journal`). Rank 0 then
runs the single-process reference, `make_case(0, 1)` in a process group of one, once the
others are done: a hang or crash there cannot hide what the ranks found (its outcome is on
disk already). Whatever happens, the rank leaves through `os._exit` after destroying
the process group: a C++ thread of the gloo backend still alive at interpreter shutdown can
abort the process ("terminate called without an active exception"), which torchrun would
report as this rank's failure.
"""

from __future__ import annotations

import contextlib
import dataclasses
import faulthandler
import importlib
import inspect
import json
import os
import signal
import sys
import threading
import warnings
from datetime import timedelta
from pathlib import Path
from typing import Any, Callable, Iterator

import torch
import torch.distributed as dist

from ckptlint.runtime_check._collectives import CollectiveCounter
from ckptlint.runtime_check._distributed_step import ReferenceStep, ReferenceUnfit, reference_step, replay, with_reference
from ckptlint.runtime_check._fsdp_structure import model_class_name, sharding_structure
from ckptlint.runtime_check._journal import REQUEST, RankJournal, first_paragraph, user_location
from ckptlint.runtime_check._step import StepInputs
from ckptlint.runtime_check._targets import _field, _import_file, _importable_from, _run_until_training_step, _where
from ckptlint.runtime_check._types import VerifyError

# Seconds a rank outlives the run's timeout before it ends itself: the parent stops every
# rank at the timeout, this only matters when the parent itself was killed.
ORPHAN_GRACE_S = 30.0
_RANK_VARIABLES = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK", "ROLE_RANK", "ROLE_WORLD_SIZE")


def main(argv: list[str]) -> None:
    directory = Path(argv[0])
    request = json.loads((directory / REQUEST).read_text(encoding="utf-8"))
    rank, world_size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    journal = RankJournal(directory, rank)
    journal.started()
    stack = open(journal.path("stack"), "w", encoding="utf-8")  # noqa: SIM115 (held until os._exit)
    # Where the rank was when it was stopped: torchrun and the parent stop ranks with SIGTERM.
    faulthandler.register(signal.SIGTERM, file=stack, all_threads=True, chain=True)
    _exit_after(float(request["timeout"]) + ORPHAN_GRACE_S)
    status = 0
    try:
        _run(request, rank, world_size, journal)
        journal.enter("finished")
    except BaseException as error:  # noqa: BLE001 (KeyboardInterrupt and SystemExit are reported too)
        journal.failed(error, verify_error=isinstance(error, VerifyError), location=user_location(error))
        status = 1
    finally:
        if dist.is_available() and dist.is_initialized():
            with contextlib.suppress(Exception):
                dist.destroy_process_group()
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        os._exit(status)


def _exit_after(seconds: float) -> None:
    timer = threading.Timer(seconds, os._exit, args=(124,))
    timer.daemon = True
    timer.start()


def _run(request: dict[str, Any], rank: int, world_size: int, journal: RankJournal) -> None:
    backend = request["backend"]
    timeout = timedelta(seconds=float(request["timeout"]))
    if backend == "nccl":
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", rank)))
    # checkpoint() imports torch._dynamo on its first call (about 2 s): before the ranks
    # synchronise, so that no rank waits in the warm-up step for another's import.
    importlib.import_module("torch._dynamo")

    path, attribute, label = Path(request["path"]), request["attribute"], request["label"]
    notes = [f"{world_size} rank(s) launched by torch.distributed.run; gradients gathered from the shards"]
    factory: Any = None
    with _importable_from(path.parent):
        if attribute is not None:
            module = _import_file(path)
            if not hasattr(module, attribute):
                raise VerifyError(f"{path} defines no `{attribute}`")
            factory = getattr(module, attribute)
            journal.enter("process group")
            dist.init_process_group(backend, timeout=timeout)
            journal.enter("make_case")
            model, inputs, loss_fn = _build_case(factory, rank, world_size, label, attribute)
            inputs = StepInputs.from_inputs(inputs)
        else:
            journal.enter("script")
            model, inputs = _capture_script_step(path, tuple(request["script_args"]), label)
            loss_fn = None
            notes.append(f"script mode: captured the first training-mode forward of {model_class_name(model)} on each rank")
            notes.append("script mode: no single-process reference (it needs make_case(rank, world_size))")
        journal.enter("structure")
        journal.record("backend", str(dist.get_backend()))
        journal.record("structure", sharding_structure(model))
        counter = CollectiveCounter()
        with counter:
            outcome, gathered = replay(
                model,
                inputs,
                loss_fn,
                journal=journal,
                counter=counter,
                rank=rank,
                rtol=request["rtol"],
                atol=request["atol"],
                repeat=int(request["repeat"]),
                measure_peak=bool(request["measure_peak"]),
                notes=tuple(notes),
            )
        journal.record("outcome", outcome)
        if gathered is None or factory is None:
            return
        del model, inputs, loss_fn
        dist.destroy_process_group()
        journal.enter("reference")
        reference, note = _single_process_reference(factory, label, attribute, backend, timeout)
        if reference is not None:
            outcome = with_reference(outcome, gathered, reference, request["rtol"], request["atol"])
        journal.record("outcome", dataclasses.replace(outcome, notes=(*outcome.notes, note)))


def _build_case(factory: Any, rank: int, world_size: int, label: str, attribute: str) -> tuple[Any, Any, Any]:
    """`make_case(rank, world_size)`, or `make_case()` for a factory that reads
    torch.distributed itself."""
    call = f"{attribute}(rank={rank}, world_size={world_size})"
    try:
        if not callable(factory):
            case = factory
        elif _takes_rank_and_world_size(factory):
            case = factory(rank, world_size)
        else:
            call = f"{attribute}()"
            case = factory()
    except Exception as error:
        hint = ""
        if "default process group twice" in str(error):
            hint = "; the verifier initialises the process group before it calls make_case: do not call init_process_group there"
        raise VerifyError(f"{label}: {call} raised {type(error).__name__}: {first_paragraph(error)}{_where(error)}{hint}") from error
    model, inputs, loss_fn = _field(case, "model"), _field(case, "inputs"), _field(case, "loss_fn")
    if model is None or inputs is None:
        missing = " and ".join(name for name, value in (("model", model), ("inputs", inputs)) if value is None)
        raise VerifyError(f"{label}: {call} must return a mapping or object with `model` and `inputs` (no {missing})")
    if loss_fn is not None and not callable(loss_fn):
        raise VerifyError(f"{label}: `loss_fn` must be callable")
    return model, inputs, loss_fn


def _takes_rank_and_world_size(factory: Callable[..., Any]) -> bool:
    try:
        signature = inspect.signature(factory)
    except (TypeError, ValueError):
        return True
    try:
        signature.bind(0, 1)
    except TypeError:
        return False
    return True


def _single_process_reference(
    factory: Any, label: str, attribute: str, backend: str, timeout: timedelta
) -> tuple[ReferenceStep | None, str]:
    """The same model on the global batch in one process: `make_case(0, 1)` in a process
    group of one (its own in-memory store), checkpointing off, once the distributed run is
    over; that group is destroyed again. Returns the step (or None) and a note saying which."""
    saved = {name: os.environ.get(name) for name in _RANK_VARIABLES}
    os.environ.update(RANK="0", WORLD_SIZE="1", LOCAL_RANK="0", LOCAL_WORLD_SIZE="1")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # FSDP1 announces NO_SHARD for a world of one
            dist.init_process_group(backend, store=dist.HashStore(), rank=0, world_size=1, timeout=timeout)
            try:
                model, inputs, loss_fn = _build_case(factory, 0, 1, label, attribute)
                step = reference_step(model, inputs, loss_fn)
                del model, inputs, loss_fn
            finally:
                dist.destroy_process_group()
    except (VerifyError, ReferenceUnfit) as error:
        return None, f"no single-process reference: {error}"
    except Exception as error:
        return None, (
            f"no single-process reference: {attribute}(0, 1) on one process failed with {type(error).__name__}: "
            f"{first_paragraph(error)}"
        )
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
    if step.draws_random_numbers:
        return None, (
            "no single-process reference: the step draws random numbers (dropout, ...), and one process cannot "
            "draw the masks the ranks draw for their slices of the batch"
        )
    return step, f"single-process reference: {attribute}(0, 1), the global batch on one process (loss {step.loss:.8g})"


@contextlib.contextmanager
def _process_group_kept() -> Iterator[None]:
    """The script unwinds when its step is captured; its `finally: destroy_process_group()`
    must not take the process group the replay needs."""
    original = dist.destroy_process_group

    def keep(group: Any = None) -> None:
        if group is not None and group is not dist.GroupMember.WORLD:
            original(group)

    dist.destroy_process_group = keep  # type: ignore[assignment]
    try:
        yield
    finally:
        dist.destroy_process_group = original  # type: ignore[assignment]


def _capture_script_step(path: Path, args: tuple[str, ...], label: str) -> tuple[torch.nn.Module, StepInputs]:
    saved_argv = list(sys.argv)
    sys.argv = [str(path), *args]
    try:
        with _process_group_kept():
            captured = _run_until_training_step(path.resolve(), label, None)
    finally:
        sys.argv = saved_argv
    if not dist.is_initialized():
        raise VerifyError(
            f"{label} did not initialise torch.distributed (init_process_group) before its first training step: "
            "--nproc verifies FSDP training, which needs a process group"
        )
    inputs = StepInputs(tuple(captured.args), dict(captured.kwargs))
    captured.__traceback__ = None
    return captured.module, inputs


if __name__ == "__main__":
    main(sys.argv[1:])
