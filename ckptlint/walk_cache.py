"""The last walk of each kind (the run's paths, a project's index), remembered with what it
depended on: the stat of every directory listed and path named, and of every .gitignore
looked for. When none of them changed, the walk would find the same files, so a warm run
of a 5,000-file tree stats 700 directories instead of listing and matching 5,000 entries
(git's untracked cache works the same way). A directory modified within the last two
seconds is not trusted (another change in the same timestamp tick would go unseen): such a
walk is not remembered.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Sequence
from pathlib import Path

from ckptlint import __version__
from ckptlint.cache import save_cache_file
from ckptlint.project_root import ROOT_DECIDING_NAMES
from ckptlint.discovery import RACY_WINDOW_NS, Discovered, discover, stat_key


# What a remembered walk holds: 2 keeps `__init__.py` in the listings (`marks_project_root`).
_FORMAT = 2


def discover_remembered(
    paths: Sequence[Path], *, cache_directory: Path | None, purpose: str, **options
) -> Discovered:
    """`discover(paths, **options)`, from the last walk of this `purpose` when nothing it
    depended on changed. Without a cache directory, a plain walk."""
    if cache_directory is None:
        return discover(paths, **options)
    started = time.time_ns()
    arguments = json.dumps([_FORMAT, os.getcwd(), list(paths), options], default=os.fspath, sort_keys=True)
    name = hashlib.blake2b(f"{options.get('project_root')}\0{purpose}".encode(), digest_size=8).hexdigest()
    path = cache_directory / __version__ / f"walk-{name}.json"
    remembered = _load(path, arguments)
    if remembered is not None:
        return remembered
    found = discover(paths, **options)
    trusted = all(key is None or key[0] < started - RACY_WINDOW_NS for key in found.depends_on.values())
    if trusted and not found.problems:
        save_cache_file(
            cache_directory,
            path,
            {
                "arguments": arguments,
                "paths": found.paths,
                "absolute": found.absolute,
                # Only what project roots are told by (see `ckptlint.indexing`).
                "markers": {d: sorted(n for n in names if n in ROOT_DECIDING_NAMES) for d, names in found.listings.items()},
                "depends_on": found.depends_on,
            },
        )
    return found


def _load(path: Path, arguments: str) -> Discovered | None:
    try:
        data = json.loads(path.read_bytes())
        if data["arguments"] != arguments:
            return None
        for checked, key in data["depends_on"].items():
            try:
                if stat_key(os.stat(checked)) != key:
                    return None
            except OSError:
                if key is not None:
                    return None
        paths, absolute = tuple(data["paths"]), tuple(data["absolute"])
        if len(paths) != len(absolute) or not all(isinstance(p, str) for p in (*paths, *absolute)):
            return None
        listings = {d: frozenset(names) for d, names in data["markers"].items()}
        return Discovered(paths, (), absolute, listings, data["depends_on"])
    except (OSError, KeyError, TypeError, ValueError, AttributeError, RecursionError):
        return None

