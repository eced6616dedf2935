"""Library versions the linted project targets, and the version ranges rules declare.

Resolution order (DESIGN.md, "Target versions"): the CLI `--target-version` and the config
`target-versions`; the project's declared dependencies (lower bound of the range); installed
distribution metadata (read with importlib.metadata, never by importing the library); unknown.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

# The libraries whose versions change what a rule should say.
TRACKED_PACKAGES = ("torch", "transformers", "peft", "accelerate", "trl")

_VERSION = re.compile(r"^\s*v?(\d+(?:\.\d+)*)")


@dataclass(frozen=True, order=True)
class Version:
    parts: tuple[int, ...]

    @classmethod
    def parse(cls, text: str) -> Version:
        match = _VERSION.match(text)
        if not match:
            raise ValueError(f"not a version: {text!r} (expected e.g. 2.4 or 4.46.1)")
        parts = tuple(int(p) for p in match.group(1).split("."))
        while len(parts) > 1 and parts[-1] == 0:
            parts = parts[:-1]
        return cls(parts)

    def __str__(self) -> str:
        return ".".join(str(p) for p in (self.parts if len(self.parts) > 1 else self.parts + (0,)))


@dataclass(frozen=True)
class VersionRange:
    """Versions `min <= v < max` of one package; either bound may be open."""

    package: str
    min: Version | None = None
    max: Version | None = None

    @classmethod
    def of(cls, package: str, min: str | None = None, max: str | None = None) -> VersionRange:
        return cls(
            package,
            Version.parse(min) if min else None,
            Version.parse(max) if max else None,
        )

    def contains(self, version: Version) -> bool:
        return (self.min is None or version >= self.min) and (self.max is None or version < self.max)

    def __str__(self) -> str:
        bounds = []
        if self.min is not None:
            bounds.append(f">={self.min}")
        if self.max is not None:
            bounds.append(f"<{self.max}")
        return self.package + (",".join(bounds) if bounds else " (all versions)")


class VersionSource(str, enum.Enum):
    CLI = "command line"
    CONFIG = "configuration"
    DECLARED = "declared dependency"
    INSTALLED = "installed distribution"


@dataclass(frozen=True)
class TargetVersion:
    version: Version
    source: VersionSource
    origin: str  # where exactly: the option, the file and requirement, the distribution

    def describe(self) -> str:
        return f"{self.version} ({self.source.value}: {self.origin})"


class Applies(enum.Enum):
    YES = "yes"
    NO = "no"
    UNKNOWN = "unknown"


class TargetVersions:
    """The versions a project targets. Installed metadata is consulted lazily, at most once
    per package, only when no explicit or declared version exists."""

    def __init__(
        self,
        resolved: Mapping[str, TargetVersion],
        *,
        use_installed: bool = True,
    ) -> None:
        self._resolved = dict(resolved)
        self._use_installed = use_installed
        self._looked_up: set[str] = set(self._resolved)

    def get(self, package: str) -> TargetVersion | None:
        if package not in self._looked_up:
            self._looked_up.add(package)
            if self._use_installed:
                installed = installed_version(package)
                if installed is not None:
                    self._resolved[package] = installed
        return self._resolved.get(package)

    def with_declared(self, declared: Mapping[str, TargetVersion]) -> TargetVersions:
        """These versions for another project: its declared versions replace this one's,
        explicit ones (command line, configuration) stay."""
        explicit = {
            name: target
            for name, target in self._resolved.items()
            if target.source in (VersionSource.CLI, VersionSource.CONFIG)
        }
        return TargetVersions({**declared, **explicit}, use_installed=self._use_installed)

    def applies(self, ranges: Iterable[VersionRange]) -> Applies:
        """Whether the targeted versions fall in every range (unknown packages: UNKNOWN)."""
        verdict = Applies.YES
        for version_range in ranges:
            target = self.get(version_range.package)
            if target is None:
                verdict = Applies.UNKNOWN
            elif not version_range.contains(target.version):
                return Applies.NO
        return verdict

    def fingerprint(self) -> str:
        return ";".join(
            f"{name}={self.get(name).version}" if self.get(name) else f"{name}=?"
            for name in TRACKED_PACKAGES
        )

    def all(self) -> dict[str, TargetVersion | None]:
        return {name: self.get(name) for name in TRACKED_PACKAGES}


def installed_version(package: str) -> TargetVersion | None:
    from importlib import metadata

    try:
        text = metadata.version(package)
    except metadata.PackageNotFoundError:
        return None
    try:
        return TargetVersion(Version.parse(text), VersionSource.INSTALLED, f"{package} {text}")
    except ValueError:
        return None


# --- declared dependencies -------------------------------------------------------------

_REQUIREMENT = re.compile(
    r"""^\s*(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[[^\]]*\])?\s*(?P<spec>[^;#]*)""", re.X
)
_SPECIFIER = re.compile(r"(===|==|~=|>=|<=|!=|>|<)\s*([^\s,]+)")


def normalize_name(name: str) -> str:
    """PEP 503 normalization: `Torch`, `py_torch` and `py.torch` name one distribution."""
    return re.sub(r"[-_.]+", "-", name).lower()


def lower_bound(specifier: str) -> Version | None:
    """The lowest version a PEP 440 specifier admits, as far as a rule needs to know it."""
    best: Version | None = None
    for operator, text in _SPECIFIER.findall(specifier):
        if operator in ("==", "===", "~=", ">=", ">"):
            try:
                version = Version.parse(text.rstrip(".*"))
            except ValueError:
                continue
            if best is None or version > best:
                best = version
    return best


def parse_requirement(line: str) -> tuple[str, Version | None] | None:
    line = line.split("#", 1)[0].strip()
    if not line or line.startswith("-") or "://" in line:
        return None
    match = _REQUIREMENT.match(line)
    if not match:
        return None
    return normalize_name(match.group("name")), lower_bound(match.group("spec"))


def declared_versions(project_root: Path, pyproject: Mapping | None) -> dict[str, TargetVersion]:
    """Lower bounds of tracked packages declared in pyproject.toml and requirements*.txt."""
    found: dict[str, TargetVersion] = {}

    def record(requirement: str, origin: str) -> None:
        parsed = parse_requirement(requirement)
        if parsed is None:
            return
        name, version = parsed
        if name in TRACKED_PACKAGES and version is not None and name not in found:
            found[name] = TargetVersion(version, VersionSource.DECLARED, origin)

    def requirements(value) -> list[str]:
        # pyproject.toml is not ours to validate: anything but a list of strings is skipped.
        return [r for r in value if isinstance(r, str)] if isinstance(value, list) else []

    project = (pyproject or {}).get("project", {})
    if isinstance(project, dict):
        for requirement in requirements(project.get("dependencies")):
            record(requirement, f"pyproject.toml: {requirement.strip()}")
        optional = project.get("optional-dependencies")
        if isinstance(optional, dict):
            for extra in sorted(optional, key=str):
                for requirement in requirements(optional[extra]):
                    record(requirement, f"pyproject.toml [{extra}]: {requirement.strip()}")
    for path in sorted(project_root.glob("requirements*.txt")):
        try:
            lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
        except OSError:
            continue
        for line in lines:
            record(line, f"{path.name}: {line.strip()}")
    return found
