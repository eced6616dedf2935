"""Library versions the linted project targets, and the version ranges rules declare.

Resolution order (DESIGN.md, "Target versions"): the CLI `--target-version` and the config
`target-versions`; the project's declared dependencies (lower bound of the range, read by
`ckptlint.declarations`); installed distribution metadata (read with importlib.metadata,
never by importing the library); unknown.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

# The libraries whose versions change what a rule should say (open-clip-torch: the `forward`
# of its residual attention block, `model/library/third_party_signatures.py`).
TRACKED_PACKAGES = ("torch", "transformers", "peft", "accelerate", "trl", "open-clip-torch")

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

    def within(self, other: VersionRange) -> bool:
        """Whether every version of this range is in `other`."""
        return (other.min is None or (self.min is not None and self.min >= other.min)) and (
            other.max is None or (self.max is not None and self.max <= other.max)
        )

    def overlaps(self, other: VersionRange) -> bool:
        return (self.max is None or other.min is None or other.min < self.max) and (
            other.max is None or self.min is None or self.min < other.max
        )

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
    # A declared dependency: the whole range it admits (`version` is its lower bound).
    admitted: VersionRange | None = None
    # A declared dependency: the other declarations of the package, which lost to this one.
    also_declared: tuple[str, ...] = ()

    def describe(self) -> str:
        return f"{self.version} ({self.source.value}: {self.origin})"

    def could_be(self, version_range: VersionRange) -> bool:
        """Whether the project may run a version in `version_range`: for a declared range,
        whether the two overlap; otherwise whether the one version falls in it."""
        if self.admitted is None:
            return version_range.contains(self.version)
        return self.admitted.overlaps(version_range)


@dataclass(frozen=True)
class DeclaredRange:
    """A declaration with no lower bound (`transformers<4.46.0`): no version to target, but
    what the project runs on is in it, so an installed version outside it is not that."""

    admitted: VersionRange
    origin: str  # the file and requirement

    def describe(self) -> str:
        return f"unknown, below {self.admitted.max} (declared dependency: {self.origin})"


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
        ranges: Mapping[str, DeclaredRange] | None = None,
    ) -> None:
        self._resolved = dict(resolved)
        self._use_installed = use_installed
        self._looked_up: set[str] = set(self._resolved)
        # Declared ranges without a lower bound, for the packages no version is targeted for.
        self._ranges = {name: r for name, r in (ranges or {}).items() if name not in self._resolved}

    def get(self, package: str) -> TargetVersion | None:
        if package not in self._looked_up:
            self._looked_up.add(package)
            if self._use_installed:
                installed = installed_version(package)
                declared = self._ranges.get(package)
                if installed is not None and (declared is None or declared.admitted.contains(installed.version)):
                    self._resolved[package] = installed
        return self._resolved.get(package)

    def declared_range(self, package: str) -> DeclaredRange | None:
        """The declared range without a lower bound, when no version is targeted."""
        return self._ranges.get(package) if self.get(package) is None else None

    def with_declared(
        self, declared: Mapping[str, TargetVersion], ranges: Mapping[str, DeclaredRange] | None = None
    ) -> TargetVersions:
        """These versions for another project: its declared versions replace this one's,
        explicit ones (command line, configuration) stay."""
        explicit = {name: self._resolved[name] for name in self.explicit_packages()}
        return TargetVersions({**declared, **explicit}, use_installed=self._use_installed, ranges=ranges)

    def explicit_packages(self) -> frozenset[str]:
        """The packages whose version the command line or the configuration sets."""
        return frozenset(
            name for name, target in self._resolved.items() if target.source in (VersionSource.CLI, VersionSource.CONFIG)
        )

    def applies(self, ranges: Iterable[VersionRange]) -> Applies:
        """Whether the targeted versions fall in every range (unknown packages: UNKNOWN,
        unless a declared range without a lower bound lies wholly inside or outside it)."""
        verdict = Applies.YES
        for version_range in ranges:
            target = self.get(version_range.package)
            if target is not None:
                if not version_range.contains(target.version):
                    return Applies.NO
                continue
            declared = self._ranges.get(version_range.package)
            if declared is not None and not declared.admitted.overlaps(version_range):
                return Applies.NO
            if declared is None or not declared.admitted.within(version_range):
                verdict = Applies.UNKNOWN
        return verdict

    def could_be(self, version_range: VersionRange) -> bool:
        """Whether the project may run a version in `version_range` ("could this be
        transformers 5?"): True when the package's version is unknown (and no declared
        range rules it out)."""
        target = self.get(version_range.package)
        if target is not None:
            return target.could_be(version_range)
        declared = self._ranges.get(version_range.package)
        return declared is None or declared.admitted.overlaps(version_range)

    def fingerprint(self) -> str:
        return ";".join(
            f"{name}={self.get(name).version}" if self.get(name)
            else f"{name}<{self._ranges[name].admitted.max}" if name in self._ranges else f"{name}=?"
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
# What a declared requirement means for the target (DESIGN.md, "Target versions"): the
# target is the lower bound of the range it admits, the oldest version the project must
# still run on (so hazards of old versions hold, and fixes must work there). The whole
# range is kept beside it (`TargetVersion.admitted`), so a rule can still ask whether the
# project could run a newer version (`TargetVersions.could_be`). Reading the files that
# declare requirements lives in `ckptlint.declarations`.

_REQUIREMENT = re.compile(
    r"""^\s*(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[[^\]]*\])?\s*(?P<spec>[^;#]*)""", re.X
)
_SPECIFIER = re.compile(r"(===|==|~=|>=|<=|!=|>|<)\s*([^\s,]+)")


def normalize_name(name: str) -> str:
    """PEP 503 normalization: `Torch`, `py_torch` and `py.torch` name one distribution."""
    return re.sub(r"[-_.]+", "-", name).lower()


def lower_bound(specifier: str) -> Version | None:
    """The lowest version a PEP 440 specifier admits, as far as a rule needs to know it."""
    return admitted_range("", specifier).min


def admitted_range(package: str, specifier: str) -> VersionRange:
    """The versions a PEP 440 specifier admits, as one range `min <= v < max` (`!=` is
    ignored; `>2.0` counts from 2.0). `==4.53.*` and `~=4.53.0` admit 4.53 up to 4.54,
    `~=4.53` up to 5, `<=4.53` and `==4.53` up to just after 4.53."""
    low: Version | None = None
    high: Version | None = None
    for operator, text in _SPECIFIER.findall(specifier):
        if operator == "!=":
            continue
        try:
            version = Version.parse(text.rstrip(".*"))
        except ValueError:
            continue
        if operator in ("==", "===", "~=", ">=", ">") and (low is None or version > low):
            low = version
        above = _upper_bound(operator, text, version)
        if above is not None and (high is None or above < high):
            high = above
    return VersionRange(package, low, high)


def _upper_bound(operator: str, text: str, version: Version) -> Version | None:
    if operator == "<":
        return version
    if operator == "~=" or (operator == "==" and text.endswith(".*")):
        # The release segments as written (~=4.53.0 keeps its zero): the last one is free,
        # the one before it is bumped.
        match = _VERSION.match(text)
        written = [int(part) for part in match.group(1).split(".")] if match else []
        kept = written[:-1] if operator == "~=" else written
        if not kept:
            return None
        return Version(tuple(kept[:-1]) + (kept[-1] + 1,))
    if operator in ("<=", "==", "==="):
        return Version(version.parts + (0, 1))  # just after: admits the version itself
    return None


def parse_requirement(line: str) -> tuple[str, Version | None] | None:
    parsed = parse_requirement_range(line)
    return None if parsed is None else (parsed.package, parsed.min)


def parse_requirement_range(line: str) -> VersionRange | None:
    """The distribution a requirement line names and the range it admits; None for a line
    that names none (a comment, an option, a URL)."""
    line = line.split("#", 1)[0].strip()
    if not line or line.startswith("-") or "://" in line:
        return None
    match = _REQUIREMENT.match(line)
    if not match:
        return None
    return admitted_range(normalize_name(match.group("name")), match.group("spec"))
