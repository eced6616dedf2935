"""The files through which the ranks of a distributed verification report to the parent.

One private directory per run. The parent writes `request.json`; each rank writes, as it
goes, `rankR.pid`, one JSON line per phase it enters (`rankR.phases`, with the collectives
counted so far), what it learned at milestones (`rankR.<name>.pickle`: the sharding
structure, the baseline step, the backend), and at the end either `rankR.outcome.pickle` or
`rankR.error.json`. `rankR.stack` receives faulthandler's dump of its threads when it is
stopped (SIGTERM, from the parent at the timeout or from torchrun after another rank failed).
Files, not the process group, because a rank that crashed or hangs cannot take part in a
collective, and the parent needs to know how far each rank got precisely then.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import os
import pickle
import sysconfig
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REQUEST = "request.json"

# The phases of one rank, in order. An exception before the checkpointed step means nothing
# could be verified (exit 2), as without --nproc; from the checkpointed step on, it is a
# finding (exit 1). A hang is a finding once the ranks are in the training step (warm-up on).
SETUP_PHASES = ("launched", "process group", "make_case", "script", "structure")
BASELINE_PHASES = ("warm-up", "baseline forward", "baseline backward", "baseline gather")
CHECKPOINTED_PHASES = ("checkpointed forward", "checkpointed backward", "checkpointed gather", "timing")
FINAL_PHASES = ("report", "reference", "finished")  # rank 0 runs the reference once the others are done
PHASES = SETUP_PHASES + BASELINE_PHASES + CHECKPOINTED_PHASES + FINAL_PHASES


def phase_index(phase: str) -> int:
    return PHASES.index(phase) if phase in PHASES else -1


def in_checkpointed_step(phase: str) -> bool:
    return phase_index(phase) >= phase_index(CHECKPOINTED_PHASES[0])


def in_training_step(phase: str) -> bool:
    return phase_index(phase) >= phase_index(BASELINE_PHASES[0])


@dataclass(frozen=True)
class PhaseMark:
    phase: str
    at: float  # time.time()
    collectives: dict[str, dict[str, int]] | None


@dataclass(frozen=True)
class RankError:
    """An exception a rank raised. `verify_error`: a VerifyError, nothing to verify (exit 2)."""

    phase: str
    at: float
    type: str
    message: str
    location: str | None
    verify_error: bool
    collectives: dict[str, dict[str, int]] | None


class RankJournal:
    """What one rank writes; every write is complete on disk before the rank moves on."""

    def __init__(self, directory: Path, rank: int) -> None:
        self.directory = directory
        self.rank = rank
        self.phase = "launched"
        self.counter: Any = None  # the live CollectiveCounter, for the collectives so far

    def path(self, suffix: str) -> Path:
        return self.directory / f"rank{self.rank}.{suffix}"

    def started(self) -> None:
        _write_atomic(self.path("pid"), str(os.getpid()).encode())
        self.enter("launched")

    def enter(self, phase: str) -> None:
        self.phase = phase
        collectives = self.counter.tally().to_dict() if self.counter is not None else None
        line = json.dumps({"phase": phase, "at": time.time(), "collectives": collectives})
        with open(self.path("phases"), "a", encoding="utf-8") as stream:
            stream.write(line + "\n")
            stream.flush()
            os.fsync(stream.fileno())

    def record(self, name: str, value: Any) -> None:
        _write_atomic(self.path(f"{name}.pickle"), pickle.dumps(value))

    def failed(self, error: BaseException, *, verify_error: bool, location: str | None) -> None:
        collectives = self.counter.tally().to_dict() if self.counter is not None else None
        payload = {
            "phase": self.phase,
            "at": time.time(),
            "type": type(error).__name__,
            "message": str(error) if verify_error else concise(first_paragraph(error)),
            "location": location,
            "verify_error": verify_error,
            "collectives": collectives,
        }
        _write_atomic(self.path("error.json"), json.dumps(payload).encode())


def first_paragraph(error: BaseException) -> str:
    """torch's errors append pages of tips after a blank line; the first paragraph says it."""
    return str(error).strip().split("\n\n", 1)[0].replace("\n", " ")


def concise(message: str, limit: int = 240) -> str:
    """A long first paragraph (torch appends its tips without a blank line too): its first sentence."""
    if len(message) <= limit:
        return message
    end = message.find(". ")
    return message[: end + 1] if 0 < end < limit else message[: limit - 3] + "..."


@functools.lru_cache(maxsize=1)
def _library_roots() -> tuple[str, ...]:
    """Directories of code that is not the user's: the standard library, installed
    packages (torch), ckptlint itself (an editable install lives outside site-packages)."""
    paths = sysconfig.get_paths()
    roots = {paths[key] for key in ("stdlib", "platstdlib", "purelib", "platlib") if key in paths}
    roots.add(str(Path(__file__).resolve().parent))
    for package in ("ckptlint", "torch"):
        spec = importlib.util.find_spec(package)
        if spec is not None and spec.origin:
            roots.add(os.path.dirname(spec.origin))
    return tuple(sorted(os.path.realpath(root) + os.sep for root in roots))


def is_library_file(filename: str) -> bool:
    if filename.startswith("<"):
        return True
    return os.path.realpath(filename).startswith(_library_roots())


def describe_frames(frames: list[tuple[str, int, str]]) -> str | None:
    """Where a rank was, from its (file, line, function) frames, innermost first: the
    innermost frame of the user's code, `file.py:LINE in function`, and the torch.distributed
    call it was inside (`inside torch.distributed.all_gather`), when either is there."""
    user = next((f for f in frames if not is_library_file(f[0])), None)
    collective = next((f for f in frames if f"{os.sep}distributed{os.sep}distributed_c10d.py" in f[0]), None)
    parts = []
    if user is not None:
        parts.append(f"{_short_path(user[0])}:{user[1]} in {user[2]}")
    if collective is not None:
        parts.append(f"inside torch.distributed.{collective[2]}")
    if not parts and frames:
        parts.append(f"{_short_path(frames[0][0])}:{frames[0][1]} in {frames[0][2]}")
    return ", ".join(parts) or None


def user_location(error: BaseException) -> str | None:
    frames = traceback.extract_tb(error.__traceback__)
    return describe_frames([(f.filename, f.lineno or 0, f.name) for f in reversed(frames)])


def _short_path(filename: str) -> str:
    try:
        relative = os.path.relpath(filename)
    except ValueError:
        return filename
    return filename if relative.startswith(".." + os.sep + "..") else relative


def _write_atomic(path: Path, data: bytes) -> None:
    temporary = path.with_name(path.name + ".tmp")
    with open(temporary, "wb") as stream:
        stream.write(data)
        stream.flush()
        os.fsync(stream.fileno())
    os.replace(temporary, path)


# --- the parent's side ------------------------------------------------------------------------


class RunFiles:
    """Reads what the ranks of one run wrote."""

    def __init__(self, directory: Path, world_size: int) -> None:
        self.directory = directory
        self.world_size = world_size

    def path(self, rank: int, suffix: str) -> Path:
        return self.directory / f"rank{rank}.{suffix}"

    def pid(self, rank: int) -> int | None:
        try:
            return int(self.path(rank, "pid").read_text())
        except (OSError, ValueError):
            return None

    def marks(self, rank: int) -> list[PhaseMark]:
        try:
            lines = self.path(rank, "phases").read_text(encoding="utf-8").splitlines()
        except OSError:
            return []
        marks = []
        for line in lines:
            try:
                entry = json.loads(line)
            except ValueError:  # a line cut short by a kill
                continue
            marks.append(PhaseMark(entry["phase"], entry["at"], entry.get("collectives")))
        return marks

    def last_phase(self, rank: int) -> str | None:
        marks = self.marks(rank)
        return marks[-1].phase if marks else None

    def error(self, rank: int) -> RankError | None:
        try:
            entry = json.loads(self.path(rank, "error.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        return RankError(
            phase=entry["phase"],
            at=entry["at"],
            type=entry["type"],
            message=entry["message"],
            location=entry.get("location"),
            verify_error=bool(entry.get("verify_error")),
            collectives=entry.get("collectives"),
        )

    def record(self, rank: int, name: str) -> Any:
        """A milestone record written by the rank (our own pickles, in our own directory)."""
        try:
            return pickle.loads(self.path(rank, f"{name}.pickle").read_bytes())
        except (OSError, EOFError, pickle.UnpicklingError):
            return None

    def stack(self, rank: int) -> str | None:
        try:
            return self.path(rank, "stack").read_text(encoding="utf-8", errors="replace")
        except OSError:
            return None
