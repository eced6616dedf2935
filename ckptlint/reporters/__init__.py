"""Reporters: each turns a sorted sequence of diagnostics into one output format.

`render(diagnostics, *, not_shown="", context=ReportContext())`: `context` carries what some
formats need beyond the diagnostics, given by the CLI (reporters read no files)."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ckptlint.types import Diagnostic

FORMATS = ("text", "concise", "full", "json", "json-lines", "sarif", "github", "gitlab", "rdjson", "junit")


def _no_source(diagnostic: Diagnostic) -> str | None:
    return None


@dataclass(frozen=True)
class ReportContext:
    # The directory GitHub annotation and GitLab Code Quality paths are relative to: the
    # repository's root (git's), else the project root.
    repository_root: Path | None = None
    # The text a diagnostic's rows are in (its notebook cell's), as reported: `full` shows
    # the line, `rdjson` counts its columns in UTF-8 bytes. None when unknown.
    source: Callable[[Diagnostic], str | None] = field(default=_no_source)
    unsafe_fixes: bool = False


def repository_path(path: str, root: str | Path | None) -> str:
    """`path` relative to the repository root, '/'-separated (GitHub and GitLab place
    findings by it); standard input (`-`) as it is."""
    if path == "-" or root is None:
        return path.replace(os.sep, "/")
    return os.path.relpath(os.path.abspath(path), root).replace(os.sep, "/")
