"""A persistent cache of lint results, keyed by file content and everything else that can
change a result: ckptlint's version, the enabled rules, per-file ignores and the target
versions. A stale entry is never used; a corrupt or unreadable cache is ignored and rebuilt.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from dataclasses import asdict
from pathlib import Path

from ckptlint import __version__
from ckptlint.config import Settings
from ckptlint.types import Applicability, Diagnostic, Edit, Fix, Location

CACHE_README = "This directory is ckptlint's cache; it is safe to delete (`ckptlint clean`).\n"


def settings_fingerprint(settings: Settings) -> str:
    parts = [
        __version__,
        ",".join(sorted(settings.enabled_codes)),
        repr(settings.per_file_ignores),
        settings.target_versions.fingerprint(),
        repr(settings.stateful_modules),
        repr(settings.checkpoint_functions),
        settings.fsdp,
    ]
    return hashlib.sha256("\x00".join(parts).encode()).hexdigest()[:16]


def content_digest(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=16).hexdigest()


class ResultCache:
    def __init__(self, settings: Settings) -> None:
        directory = settings.cache_dir or settings.project_root / ".ckptlint_cache"
        self.directory = directory
        self.path = directory / f"{__version__}" / f"{settings_fingerprint(settings)}.json"
        self._entries: dict[str, dict] = {}
        self._dirty = False
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
            if isinstance(data, dict) and isinstance(data.get("files"), dict):
                self._entries = data["files"]
        except (OSError, ValueError):
            self._entries = {}

    def get(self, key: str, digest: str) -> tuple[Diagnostic, ...] | None:
        entry = self._entries.get(key)
        if not isinstance(entry, dict) or entry.get("digest") != digest:
            return None
        try:
            return tuple(_diagnostic_from_json(item) for item in entry["diagnostics"])
        except (KeyError, TypeError, ValueError):
            return None

    def put(self, key: str, digest: str, diagnostics: tuple[Diagnostic, ...]) -> None:
        self._entries[key] = {"digest": digest, "diagnostics": [asdict(d) for d in diagnostics]}
        self._dirty = True

    def save(self) -> None:
        """Write atomically; concurrent runs each write a whole file and the last one wins."""
        if not self._dirty:
            return
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            readme = self.directory / "README"
            if not readme.exists():
                readme.write_text(CACHE_README)
                (self.directory / ".gitignore").write_text("*\n")
            descriptor, temporary = tempfile.mkstemp(dir=self.path.parent, suffix=".tmp")
            with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
                json.dump({"version": __version__, "files": self._entries}, handle)
            os.replace(temporary, self.path)
        except OSError:
            pass  # a read-only checkout still lints; it just is not cached


def _diagnostic_from_json(item: dict) -> Diagnostic:
    fix = item.get("fix")
    return Diagnostic(
        code=item["code"],
        message=item["message"],
        path=item["path"],
        location=Location(**item["location"]),
        end_location=Location(**item["end_location"]),
        fix=None
        if fix is None
        else Fix(
            applicability=Applicability(fix["applicability"]),
            message=fix["message"],
            edits=tuple(
                Edit(Location(**e["location"]), Location(**e["end_location"]), e["content"]) for e in fix["edits"]
            ),
        ),
        noqa_row=item.get("noqa_row"),
        url=item.get("url"),
    )
