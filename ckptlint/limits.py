"""What one file's analysis may cost, so that no file can stall or exhaust a run.

    CKPTLINT_FILE_SIZE_LIMIT    MiB of source analysed at most (default 1): a larger file
                                is never parsed, by the index or the rules
    CKPTLINT_FILE_TIME_LIMIT    seconds one file's analysis may take (default 120)
    CKPTLINT_FILE_MEMORY_LIMIT  MiB of memory one file's analysis may use (default 1024)

The time and memory limits are enforced by killing the worker process that holds the file
(`ckptlint.worker_pool`), so they hold for native code too. A file stopped at a limit is
reported as CKPT900 with the reason; the run goes on over the others.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from ckptlint.worker_pool import Limits

# The largest Python file with a checkpoint call in torch 2.13 and transformers 5.17 is 451
# KiB (a test suite); larger ones are generated tables. CPython's parser alone needs about
# 165 bytes of memory per byte of such code, libcst about 1,000.
DEFAULT_FILE_BYTES = 1 << 20
DEFAULT_SECONDS = 120.0
DEFAULT_MEMORY_BYTES = 1 << 30
# Measured peak memory of the whole analysis per node of CPython's syntax tree: 3.7-5.0 KiB
# on transformers' models, trainer and modeling_utils and on generated checkpoint calls.
ANALYSIS_BYTES_PER_NODE = 5 << 10
# libcst's parser is quadratic in the length of left-nested chains (`a + b + ...`,
# `a.b.c...`, `f(x)(y)...`): 1,000 links parse in 0.15-0.75 s, 20,000 not in 27 minutes.
# Hand-written code stays below 40 levels of syntax nesting.
MAX_SYNTAX_DEPTH = 1000

ENVIRONMENT = {
    "CKPTLINT_FILE_SIZE_LIMIT": "MiB",
    "CKPTLINT_FILE_TIME_LIMIT": "seconds",
    "CKPTLINT_FILE_MEMORY_LIMIT": "MiB",
}

# How many times the size limit a notebook file may be (`AnalysisLimits.bytes_for`).
NOTEBOOK_SIZE_FACTOR = 16


class LimitError(ValueError):
    """An environment variable that sets a limit holds no positive number."""


@dataclass(frozen=True)
class AnalysisLimits:
    file_bytes: int = DEFAULT_FILE_BYTES
    seconds: float = DEFAULT_SECONDS
    memory_bytes: int = DEFAULT_MEMORY_BYTES

    @classmethod
    def from_environment(cls, environment: Mapping[str, str] = os.environ) -> AnalysisLimits:
        def read(name: str, default: float) -> float:
            text = environment.get(name, "").strip()
            if not text:
                return default
            try:
                value = float(text)
            except ValueError:
                value = -1.0
            if not value > 0 or value == float("inf"):
                raise LimitError(f"{name} must be a positive number of {ENVIRONMENT[name]}, got {text!r}")
            return value

        return cls(
            file_bytes=int(read("CKPTLINT_FILE_SIZE_LIMIT", DEFAULT_FILE_BYTES / (1 << 20)) * (1 << 20)),
            seconds=read("CKPTLINT_FILE_TIME_LIMIT", DEFAULT_SECONDS),
            memory_bytes=int(read("CKPTLINT_FILE_MEMORY_LIMIT", DEFAULT_MEMORY_BYTES / (1 << 20)) * (1 << 20)),
        )

    @property
    def for_workers(self) -> Limits:
        return Limits(self.seconds, self.memory_bytes)

    def fingerprint(self) -> str:
        """Results that stopped at a limit are valid only under the same limits."""
        return f"{self.file_bytes}:{self.seconds:g}:{self.memory_bytes}"

    def bytes_for(self, path: str | os.PathLike) -> int:
        """The size limit of a file: a notebook's bytes are mostly its outputs (images in
        base64), so the file may be `NOTEBOOK_SIZE_FACTOR` times larger; its code is held to
        the limit once read (`ckptlint.engine`)."""
        return self.file_bytes * NOTEBOOK_SIZE_FACTOR if os.fspath(path).lower().endswith(".ipynb") else self.file_bytes

    def describe_size(self, size: int, limit: int | None = None) -> str:
        return (
            f"too large to analyse: {_mib(size)} is more than the {_mib(limit or self.file_bytes)} ckptlint analyses "
            "(generated code? exclude it, or raise CKPTLINT_FILE_SIZE_LIMIT)"
        )

    def describe_time(self) -> str:
        return f"analysis stopped after {self.seconds:g} s (the per-file time limit, CKPTLINT_FILE_TIME_LIMIT)"

    def describe_memory(self) -> str:
        return (
            f"too large to analyse: the analysis needed more than {_mib(self.memory_bytes)} of memory "
            "(the per-file memory limit, CKPTLINT_FILE_MEMORY_LIMIT)"
        )

    def describe_nodes(self, nodes: int) -> str:
        return (
            f"too large to analyse: {nodes:,} syntax nodes would need about "
            f"{_mib(nodes * ANALYSIS_BYTES_PER_NODE)} of memory, more than the per-file memory limit of "
            f"{_mib(self.memory_bytes)} (CKPTLINT_FILE_MEMORY_LIMIT)"
        )

    def exceeds_memory(self, nodes: int) -> bool:
        return nodes * ANALYSIS_BYTES_PER_NODE > self.memory_bytes


def describe_depth(depth: int) -> str:
    return (
        f"too deeply nested to analyse: an expression {depth:,} levels deep (a generated chain of operators, "
        f"attributes or calls?); ckptlint analyses up to {MAX_SYNTAX_DEPTH:,} levels"
    )


def _mib(size: float) -> str:
    """A size as people read it: `117 KiB`, `3.8 MiB`, `19 MiB`."""
    if size < 1 << 20:
        return f"{size / 1024:.0f} KiB"
    mib = size / (1 << 20)
    return f"{mib:.0f} MiB" if mib >= 10 or mib == int(mib) else f"{mib:.1f} MiB"
