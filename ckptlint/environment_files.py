"""Conda environment files (`conda env create -f environment.yml`): research code often
pins its versions only there. Read as YAML: the entries of `dependencies` in conda's
spelling, and the lines of their `pip:` list; `ckptlint.declarations` records them."""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass

from ckptlint.versions import VersionRange, admitted_range, normalize_name

# The names an environment file goes by (`environment.yml`, `environment-cuda.yaml`, `conda.yaml`).
ENVIRONMENT_FILE = re.compile(r"^(?:environment|conda|env)(?:[-_.][\w.-]*)?\.ya?ml$", re.IGNORECASE)
# Conda's names of the tracked packages that differ from their names on PyPI.
CONDA_NAMES = {"pytorch": "torch", "pytorch-cpu": "torch", "pytorch-gpu": "torch"}
_CONDA_SPEC = re.compile(r"^\s*(?:[\w.-]+::)?(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)\s*(?P<spec>[^#]*)")


class EntryKind(enum.Enum):
    CONDA = "conda"  # `pytorch=1.11.0`, `pytorch::pytorch>=2.0`
    PIP = "pip"  # a requirement line of the `pip:` list (`-r file` among them)


@dataclass(frozen=True)
class Entry:
    kind: EntryKind
    text: str
    line: int


class EnvironmentFileError(ValueError):
    """The file is not YAML (the message is the parser's first line)."""


def environment_entries(text: str) -> list[Entry]:
    """The dependencies an environment file lists, with their lines; none for a YAML file
    without a `dependencies` list (a configuration that happens to be named so)."""
    import yaml

    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as error:
        raise EnvironmentFileError(str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__) from None
    dependencies = _mapping_value(root, "dependencies")
    if not isinstance(dependencies, yaml.SequenceNode):
        return []
    entries: list[Entry] = []
    for item in dependencies.value:
        if isinstance(item, yaml.ScalarNode) and isinstance(item.value, str):
            entries.append(Entry(EntryKind.CONDA, item.value, item.start_mark.line + 1))
            continue
        pip = _mapping_value(item, "pip")
        for line in pip.value if isinstance(pip, yaml.SequenceNode) else ():
            if isinstance(line, yaml.ScalarNode) and isinstance(line.value, str):
                entries.append(Entry(EntryKind.PIP, line.value, line.start_mark.line + 1))
    return entries


def _mapping_value(node, key: str):
    """The value node under `key` of a YAML mapping node, else None."""
    import yaml

    if not isinstance(node, yaml.MappingNode):
        return None
    return next((value for name, value in node.value if isinstance(name, yaml.ScalarNode) and name.value == key), None)


def conda_range(spec: str) -> tuple[VersionRange, str] | None:
    """The package a conda match specification names and the range it admits, with the
    constraint as written: `pytorch=1.11.0` is 1.11.0.* (conda's `=` matches the versions
    that start so), as is `pytorch 1.11.0`; `==1.11.0` is that version; `>=`, `<` and the
    rest as in a requirement; a build string after the version (`=1.11.0=py3.9_0`) is
    left out. None for an entry that names no package."""
    match = _CONDA_SPEC.match(spec)
    if match is None:
        return None
    name = match.group("name").lower()
    package = CONDA_NAMES.get(name, normalize_name(name))
    constraint = match.group("spec").strip()
    if constraint.startswith("=") and not constraint.startswith("=="):
        constraint = constraint[1:]
    if constraint[:1].isdigit():  # `=1.11.0`, `1.11.0 py3.9_0`, `1.12.*`: the versions starting so
        version = re.split(r"[\s=]", constraint, maxsplit=1)[0]
        specifier = f"=={version}" if version.endswith(".*") else f"=={version}.*"
    else:
        specifier = constraint.split("|", 1)[0]
    return admitted_range(package, specifier), constraint
