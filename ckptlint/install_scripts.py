"""Install scripts, read for the versions they install (`ckptlint.declarations`, the last
source): shell scripts at a project's root or one directory down whose name says they set up
the environment (`install.sh`, `scripts/setup_env.sh`), and their `pip install` (`pip3`,
`python -m pip`, `uv pip`) and `conda install` (`mamba`, `micromamba`) commands, read with the
launch scripts' shell reader (`ckptlint.model.syntax.shell_scripts`).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from ckptlint.project_root import is_project_root
from ckptlint.model.syntax.file_kinds import SHELL_SUFFIXES

# A shell script whose name has one of these words sets up the environment.
_INSTALL_SCRIPT_WORDS = ("install", "setup", "env", "deps", "prepare", "requirements")
# Installer options that take a value (the value is no requirement).
_PIP_VALUE_OPTIONS = frozenset({
    "-r", "--requirement", "-c", "--constraint", "-e", "--editable", "-i", "--index-url", "--extra-index-url",
    "-f", "--find-links", "-t", "--target", "--prefix", "--root", "--platform", "--python-version",
    "--implementation", "--abi", "--only-binary", "--no-binary", "--trusted-host", "--src", "--upgrade-strategy",
    "--progress-bar", "--python", "--config-settings", "-C", "--index-strategy",
})  # fmt: skip
_CONDA_VALUE_OPTIONS = frozenset({"-c", "--channel", "-n", "--name", "-p", "--prefix", "--file"})
_PIP = re.compile(r"pip[23]?(\.\d+)?")
_PYTHON = re.compile(r"python[23]?(\.\d+)?")


@dataclass(frozen=True)
class InstallCommand:
    line: int
    requirements: tuple[str, ...]  # as written: `transformers==4.51.3`, `pytorch=2.4.0` (conda)
    conda: bool  # conda's match specifications, not PEP 508
    requirement_files: tuple[str, ...]  # named with `-r`


def install_scripts(root: Path, skipped: frozenset[str]) -> list[Path]:
    """The install scripts at the root, then those one directory down (outside hidden,
    `skipped` and nested-project directories)."""

    found = _named_for_set_up(root)
    for entry in _entries(root):
        if entry.name.startswith(".") or entry.name in skipped or not _is_directory(entry):
            continue
        if not is_project_root(Path(entry.path)):
            found.extend(_named_for_set_up(Path(entry.path)))
    return found


def install_commands(text: str) -> Iterator[InstallCommand]:
    """The install commands of a shell script, in order."""
    from ckptlint.model.syntax.shell_scripts import command_words, parse_script

    for command in parse_script(text):
        installed = _installed(command_words(command))
        if installed is not None:
            yield InstallCommand(command.line, *installed)


def _named_for_set_up(directory: Path) -> list[Path]:
    return [
        Path(entry.path) for entry in _entries(directory)
        if entry.name.lower().endswith(SHELL_SUFFIXES)
        and any(word in entry.name.lower() for word in _INSTALL_SCRIPT_WORDS) and not _is_directory(entry)
    ]


def _entries(directory: Path) -> list[os.DirEntry]:
    try:
        return sorted(os.scandir(directory), key=lambda e: e.name)
    except OSError:
        return []


def _is_directory(entry: os.DirEntry) -> bool:
    try:
        return entry.is_dir()
    except OSError:
        return False


def _installed(words: Sequence) -> tuple[tuple[str, ...], bool, tuple[str, ...]] | None:
    """What an install command installs: (requirement words, whether conda writes them, the
    requirement files it names with `-r`); None for any other command. Options' values,
    paths, URLs and VCS requirements are no requirements."""
    values = [word.value for word in words]
    if not values or values[0] is None:
        return None
    program = values[0].rsplit("/", 1)[-1]
    if _PIP.fullmatch(program) and values[1:2] == ["install"]:
        rest, conda = values[2:], False
    elif _PYTHON.fullmatch(program) and values[1:4] == ["-m", "pip", "install"]:
        rest, conda = values[4:], False
    elif program == "uv" and values[1:3] == ["pip", "install"]:
        rest, conda = values[3:], False
    elif program in ("conda", "mamba", "micromamba") and values[1:2] == ["install"]:
        rest, conda = values[2:], True
    else:
        return None
    takes_value = _CONDA_VALUE_OPTIONS if conda else _PIP_VALUE_OPTIONS
    requirements: list[str] = []
    files: list[str] = []
    skip_next = False
    for index, value in enumerate(rest):
        if skip_next or value is None:
            skip_next = False
            continue
        if value.startswith("-"):
            name = value.split("=", 1)[0]
            if name in ("-r", "--requirement") and "=" not in value and index + 1 < len(rest) and rest[index + 1]:
                files.append(rest[index + 1])
            skip_next = name in takes_value and "=" not in value
            continue
        if "/" in value or value.startswith((".", "git+")) or "://" in value:
            continue
        requirements.append(value)
    return tuple(requirements), conda, tuple(files)
