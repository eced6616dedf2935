"""Declared dependencies: the versions of tracked packages (torch, transformers, ...) that
a project's own files declare, read statically (setup.py is parsed, never run).

Where they are read, and which declaration wins when several name one package (the first
in this order that gives a lower bound; DESIGN.md, "Target versions"):

0. lock files at the root: `uv.lock`, `poetry.lock`, `pdm.lock` (each `[[package]]`'s
   `name` and `version`) and Rye's `requirements.lock`. A lock pins what actually runs, so
   its pin refines a looser range below (`transformers>=4.40` with 4.51.3 locked targets
   4.51.3); a declaration the pin contradicts gets the usual warning and the pin stays
   the target. (pip-compile's `requirements*.txt`, with `==` pins, are requirement files.)
1. package metadata: `[project] dependencies` of pyproject.toml (with the files
   `[tool.setuptools.dynamic] dependencies` names), Poetry's `[tool.poetry.dependencies]`,
   `install_requires` of setup.cfg (`file:` included) and of setup.py (literal lists, or
   names bound to them at module level);
2. requirement files at the root: `requirements.txt`, the other `requirements*.txt`, then
   `requirements/*.txt`, each with the files it includes (`-r`, `-c`) read in place, then
   conda environment files (`environment.yml`, `conda.yaml`, `environment-cuda.yaml`...:
   their `dependencies`, `pytorch=1.11.0` as conda writes it, and their `pip:` section);
3. extras and groups: `[project] optional-dependencies`, Poetry groups, `[dependency-groups]`,
   setup.cfg `[options.extras_require]`, setup.py `extras_require`;
4. requirement and environment files further down (`docker/requirements-gpu.txt`,
   `requirements/pytorch/base.txt`), at most two directories deep, never inside a nested
   project (a directory with its own pyproject.toml, setup.py, setup.cfg or .git);
5. install scripts: shell scripts at the root or one directory down whose name says they
   set up the environment (`install.sh`, `scripts/setup_env.sh`, `prepare_deps.sh`), their
   `pip install` (`pip3`, `python -m pip`, `uv pip`) and `conda install` (`mamba`) commands,
   with the requirement files they name (`-r`); a project that pins only there (HALOs:
   `pip install transformers==4.51.3` in `install.sh`) still targets what it runs on.

Within one group, files that serve docs, tests, linting or CI come after the others (and
their declarations are never said to conflict: a docs build often pins an old torch). The
winner's lower bound is the target (see `ckptlint.versions`); the losing declarations are
kept on the target (`also_declared`) for `--show-settings`. A file that cannot be read or
parsed, a version that cannot be read, and declarations that admit no common version give a
warning naming the file (and line); the rest is still read.
"""

from __future__ import annotations

import ast
import configparser
import enum
import os
import re
import sys
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - the `tomli` dependency of Python 3.10
    import tomli as tomllib

from ckptlint.environment_files import (
    ENVIRONMENT_FILE,
    EntryKind,
    EnvironmentFileError,
    conda_range,
    environment_entries,
)
from ckptlint.install_scripts import install_commands, install_scripts
from ckptlint.project_root import is_project_root
from ckptlint.setup_py import setup_call_arguments
from ckptlint.versions import (
    TRACKED_PACKAGES,
    DeclaredRange,
    TargetVersion,
    VersionRange,
    VersionSource,
    admitted_range,
    normalize_name,
    parse_requirement_range,
)


class Standing(enum.IntEnum):
    """Which kind of declaration wins: the lowest."""

    LOCK_FILES = 0
    PACKAGE_METADATA = 1
    ROOT_REQUIREMENTS = 2
    EXTRAS = 3
    NESTED_REQUIREMENTS = 4
    INSTALL_SCRIPTS = 5


# Lock files read at the project root, in this order: TOML ones with `[[package]]` tables
# (`name`, `version`), and Rye's pip-compile style `requirements.lock`.
TOML_LOCK_FILES = ("uv.lock", "poetry.lock", "pdm.lock")
LOCK_FILES = (*TOML_LOCK_FILES, "requirements.lock")
MAX_LOCK_FILE_BYTES = 32 << 20  # a uv.lock of a CUDA project lists every wheel: megabytes


# Words in a requirement file's name or directory that say it serves tooling, not the code.
TOOLING_WORDS = frozenset(
    {"ci", "dev", "doc", "docs", "lint", "readthedocs", "rtd", "style", "test", "testing", "tests"}
)
# Directories never searched for requirement files (beside hidden ones).
SKIPPED_DIRECTORIES = frozenset(
    {"__pycache__", "__pypackages__", "_build", "buck-out", "build", "dist", "node_modules", "site-packages", "venv"}
)
NESTED_DEPTH = 2  # directories below the root searched for requirement files
MAX_REQUIREMENT_FILE_BYTES = 1 << 20
MAX_INCLUDE_DEPTH = 8

_INCLUDE = re.compile(r"^(?:-r|--requirement|-c|--constraint)(?:\s*=\s*|\s+|(?=\S))(?P<path>\S+)")
_NAME = re.compile(r"^\s*[A-Za-z0-9][A-Za-z0-9._-]*\s*(?:\[[^\]]*\])?")


@dataclass(frozen=True)
class Declaration:
    """One requirement of a tracked package, where it was written and what it admits."""

    admitted: VersionRange
    requirement: str  # as written
    where: str  # the file, with the table or extra and the include chain: `pyproject.toml [hf]`
    line: int | None
    standing: Standing
    conditional: bool  # behind an environment marker: one of several alternatives

    @property
    def origin(self) -> str:
        return f"{self.where}: {self.requirement}"

    @property
    def location(self) -> str:
        return f"{_file_of(self.where)}:{self.line}" if self.line else _file_of(self.where)


@dataclass(frozen=True)
class DeclarationWarning:
    message: str  # begins with the file it is about, relative to the project root
    package: str | None = None  # a conflict about one package; None: a file's problem


@dataclass(frozen=True)
class DeclaredDependencies:
    versions: Mapping[str, TargetVersion]
    warnings: tuple[DeclarationWarning, ...]
    # Packages declared only with an upper bound (`transformers<4.46.0`): no target version,
    # but an installed version outside the range is not what the project runs on.
    ranges: Mapping[str, DeclaredRange] = field(default_factory=dict)


def declared_versions(project_root: Path, pyproject: Mapping | None | str = "read") -> dict[str, TargetVersion]:
    """The target versions the project's declarations give (see `read_declarations`)."""
    return dict(read_declarations(project_root, pyproject).versions)


def read_declarations(project_root: Path, pyproject: Mapping | None | str = "read") -> DeclaredDependencies:
    """Every declaration of a tracked package under `project_root`, resolved to one target
    version per package. `pyproject` is the parsed pyproject.toml when the caller has it
    (None: there is none); by default the file is read here."""
    reader = _DeclarationReader(project_root.resolve())
    reader.read_all(pyproject)
    return _resolve(reader.declarations, reader.warnings)


# --- resolution ------------------------------------------------------------------------


def _resolve(declarations: list[Declaration], warnings: list[DeclarationWarning]) -> DeclaredDependencies:
    """One target per package: the first declaration (in the order of the module docstring)
    with a lower bound that the unconditional declarations before it do not exclude. Two of
    the project's own top-level declarations (not nested requirement files, which often
    belong to separate examples) that admit no common version give a warning."""
    ordered = sorted(enumerate(declarations), key=lambda item: (item[1].standing, item[0]))
    by_package: dict[str, list[Declaration]] = {}
    for _, declaration in ordered:
        by_package.setdefault(declaration.admitted.package, []).append(declaration)
    versions: dict[str, TargetVersion] = {}
    ranges: dict[str, DeclaredRange] = {}
    conflicts: list[DeclarationWarning] = []
    for package in TRACKED_PACKAGES:
        found = by_package.get(package, [])
        winner = None
        for index, candidate in enumerate(found):
            if candidate.admitted.min is not None and not _excluded_by(candidate, found[:index]):
                winner = candidate
                break
        if winner is not None:
            others = tuple(d.origin for d in found if d is not winner and _constrains(d))
            versions[package] = TargetVersion(
                winner.admitted.min, VersionSource.DECLARED, winner.origin, winner.admitted, others
            )
        else:
            bounded = next(
                (d for d in found if not d.conditional and d.admitted.max is not None and not _serves_tooling(d.where)),
                None,
            )
            if bounded is not None:
                ranges[package] = DeclaredRange(bounded.admitted, bounded.origin)
        for index, declaration in enumerate(found):
            if (
                declaration is winner
                or declaration.conditional
                or declaration.standing > Standing.EXTRAS
                or _serves_tooling(declaration.where)
            ):
                continue
            excluding = _excluded_by(declaration, [winner] if winner and not winner.conditional else found[:index])
            if excluding is not None:
                outcome = (
                    f"the target {package} is {winner.admitted.min}, from {winner.where}"
                    if winner is not None
                    else f"no declared {package} version is used"
                )
                conflicts.append(
                    DeclarationWarning(
                        f"{declaration.location}: `{declaration.requirement}` admits no version that "
                        f"{excluding.location} (`{excluding.requirement}`) admits; {outcome} (set "
                        "`target-versions` to choose)",
                        package,
                    )
                )
    return DeclaredDependencies(versions, tuple(warnings) + tuple(conflicts), ranges)


def _excluded_by(candidate: Declaration, earlier: list[Declaration]) -> Declaration | None:
    """The first unconditional declaration of `earlier` that admits none of the versions
    `candidate` admits."""
    return next(
        (d for d in earlier if not d.conditional and not d.admitted.overlaps(candidate.admitted)),
        None,
    )


def _constrains(declaration: Declaration) -> bool:
    return declaration.admitted.min is not None or declaration.admitted.max is not None


# --- reading ---------------------------------------------------------------------------


class _DeclarationReader:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.declarations: list[Declaration] = []
        self.warnings: list[DeclarationWarning] = []
        self._read_files: set[Path] = set()

    def read_all(self, pyproject: Mapping | None | str) -> None:
        for name in TOML_LOCK_FILES:
            if (self.root / name).is_file():
                self.read_toml_lock_file(self.root / name)
        if (self.root / "requirements.lock").is_file():
            self.read_requirement_file(self.root / "requirements.lock", Standing.LOCK_FILES)
        if pyproject == "read":
            pyproject = self._load_pyproject()
        if isinstance(pyproject, Mapping):
            self._read_pyproject(pyproject)
        self._read_setup_cfg()
        self._read_setup_py()
        root_files, nested_files = _requirement_files(self.root)
        for files, standing in ((root_files, Standing.ROOT_REQUIREMENTS), (nested_files, Standing.NESTED_REQUIREMENTS)):
            for path in files:
                if ENVIRONMENT_FILE.match(path.name):
                    self.read_environment_file(path, standing)
                else:
                    self.read_requirement_file(path, standing)
        for path in install_scripts(self.root, SKIPPED_DIRECTORIES):
            self.read_install_script(path)

    def read_install_script(self, path: Path) -> None:
        """The `pip install` / `conda install` commands of a shell script (`install.sh`)."""
        where = self.relative(path)
        try:
            if path.stat().st_size > MAX_REQUIREMENT_FILE_BYTES:
                return
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError as error:
            self.warn(f"{where}: cannot be read ({_first_line(error)})")
            return
        for install in install_commands(text):
            for requirement in install.requirements:
                self.record(requirement, where, Standing.INSTALL_SCRIPTS, install.line, conda=install.conda)
            for name in install.requirement_files:
                target = (path.parent / name) if not os.path.isabs(name) else Path(name)
                for candidate in (target, self.root / name):
                    if candidate.is_file():
                        self.read_requirement_file(candidate.resolve(), Standing.INSTALL_SCRIPTS, f"{where}:{install.line}")
                        break

    def warn(self, message: str, package: str | None = None) -> None:
        self.warnings.append(DeclarationWarning(message, package))

    def relative(self, path: Path) -> str:
        return Path(os.path.relpath(path, self.root)).as_posix()

    def record(
        self,
        requirement: str,
        where: str,
        standing: Standing,
        line: int | None = None,
        *,
        poetry: tuple[str, str] | None = None,
        conda: bool = False,
        conditional: bool = False,
    ) -> None:
        """One requirement string (PEP 508), a Poetry (package, constraint), or a conda
        match specification (`pytorch=1.11.0`, `pytorch::pytorch>=2.0`)."""
        requirement = requirement.strip()
        if poetry is not None:
            admitted, constraint = poetry_range(*poetry), poetry[1]
        elif conda:
            found = conda_range(requirement)
            if found is None:
                return
            admitted, constraint = found
        else:
            admitted = parse_requirement_range(requirement)
            if admitted is None:
                return
            constraint = _NAME.sub("", requirement.split(";", 1)[0], count=1)
        if admitted.package not in TRACKED_PACKAGES:
            return
        if admitted.min is None and admitted.max is None and re.search(r"\d", _without_exclusions(constraint)):
            location = f"{_file_of(where)}:{line}" if line else where
            self.warn(f"{location}: cannot read a version from `{requirement}`; it is not used")
            return
        conditional = conditional or ";" in requirement.split("#", 1)[0]
        self.declarations.append(Declaration(admitted, requirement, where, line, standing, conditional))

    # requirement files

    def read_requirement_file(
        self, path: Path, standing: Standing, included_from: str | None = None, depth: int = 0
    ) -> None:
        resolved = path.resolve()
        if resolved in self._read_files:
            return
        self._read_files.add(resolved)
        label = self.relative(resolved)
        where = f"{included_from} -> {label}" if included_from else label
        try:
            if resolved.stat().st_size > MAX_REQUIREMENT_FILE_BYTES:
                self.warn(f"{label}: larger than {MAX_REQUIREMENT_FILE_BYTES} bytes; not read")
                return
            text = resolved.read_text(encoding="utf-8", errors="replace")
        except OSError as error:
            self.warn(f"{label}: cannot read: {error.strerror or error}")
            return
        for number, line in _logical_lines(text):
            include = _INCLUDE.match(line)
            if include is None:
                self.record(line, where, standing, number)
                continue
            target = resolved.parent / include.group("path")
            if not target.is_file():
                self.warn(f"{label}:{number}: `{line.strip()}` names no file; it is not read")
            elif depth < MAX_INCLUDE_DEPTH:
                self.read_requirement_file(target, standing, where, depth + 1)

    # lock files

    def read_toml_lock_file(self, path: Path) -> None:
        """uv.lock, poetry.lock, pdm.lock: each `[[package]]` table pins `name` to `version`.
        A package locked at several versions (uv's forks by marker) is conditional."""
        label = self.relative(path)
        try:
            if path.stat().st_size > MAX_LOCK_FILE_BYTES:
                self.warn(f"{label}: larger than {MAX_LOCK_FILE_BYTES} bytes; not read")
                return
        except OSError as error:
            self.warn(f"{label}: cannot read: {error.strerror or error}; its versions are not read")
            return
        document = self._toml_document(path, label, "its versions are not read")
        if document is None:
            return
        text, data = document
        packages = data.get("package")
        lines = _package_name_lines(text)
        locked: list[tuple[str, str, int | None]] = []
        for index, package in enumerate(packages if isinstance(packages, list) else []):
            package = _table(package)
            name, version = package.get("name"), package.get("version")
            if isinstance(name, str) and isinstance(version, str) and normalize_name(name) in TRACKED_PACKAGES:
                locked.append((name, version, lines[index] if index < len(lines) else None))
        versions_locked = Counter(normalize_name(name) for name, _, _ in locked)
        for name, version, line in locked:
            self.record(
                f"{name}=={version}", label, Standing.LOCK_FILES, line, conditional=versions_locked[normalize_name(name)] > 1
            )

    def _toml_document(self, path: Path, label: str, lost: str) -> tuple[str, Mapping] | None:
        """A TOML file's text and its table; None, with a warning ending in `lost`, when it
        cannot be read or parsed."""
        try:
            text = path.read_text(encoding="utf-8")
            return text, tomllib.loads(text)
        except OSError as error:
            self.warn(f"{label}: cannot read: {error.strerror or error}; {lost}")
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as error:
            self.warn(f"{label}: invalid TOML ({error}); {lost}")
        return None

    # conda environment files

    def read_environment_file(self, path: Path, standing: Standing) -> None:
        """A conda environment file (`ckptlint.environment_files`): each entry of its
        `dependencies` in conda's spelling, each line of its `pip:` list as a requirement
        line, and the files those include (`-r file`) read in place."""
        label = self.relative(path)
        try:
            if path.stat().st_size > MAX_REQUIREMENT_FILE_BYTES:
                self.warn(f"{label}: larger than {MAX_REQUIREMENT_FILE_BYTES} bytes; not read")
                return
            entries = environment_entries(path.read_text(encoding="utf-8", errors="replace"))
        except OSError as error:
            self.warn(f"{label}: cannot read: {error.strerror or error}")
            return
        except EnvironmentFileError as error:
            self.warn(f"{label}: invalid YAML ({error}); its dependencies are not read")
            return
        for entry in entries:
            if entry.kind is EntryKind.CONDA:
                self.record(entry.text, label, standing, entry.line, conda=True)
                continue
            include = _INCLUDE.match(entry.text.strip())
            if include is None:
                self.record(entry.text, f"{label} [pip]", standing, entry.line)
                continue
            target = path.parent / include.group("path").removeprefix("file:")
            if target.is_file():
                self.read_requirement_file(target, standing, f"{label} [pip]")
            else:
                self.warn(f"{label}:{entry.line}: `{entry.text.strip()}` names no file; it is not read")

    # pyproject.toml

    def _load_pyproject(self) -> Mapping | None:
        path = self.root / "pyproject.toml"
        if not path.is_file():
            return None
        document = self._toml_document(path, "pyproject.toml", "its dependencies are not read")
        return document[1] if document is not None else None

    def _read_pyproject(self, pyproject: Mapping) -> None:
        project = _table(pyproject.get("project"))
        for requirement in _strings(project.get("dependencies")):
            self.record(requirement, "pyproject.toml", Standing.PACKAGE_METADATA)
        dynamic = _table(_table(_table(pyproject.get("tool")).get("setuptools")).get("dynamic"))
        for name in _file_list(_table(dynamic.get("dependencies")).get("file")):
            self._read_named_file(name, "pyproject.toml [tool.setuptools.dynamic]", Standing.PACKAGE_METADATA)
        poetry = _table(_table(pyproject.get("tool")).get("poetry"))
        self._read_poetry_table(poetry.get("dependencies"), "pyproject.toml [tool.poetry.dependencies]", Standing.PACKAGE_METADATA)

        optional = _table(project.get("optional-dependencies"))
        for extra in sorted(optional, key=str):
            for requirement in _strings(optional[extra]):
                self.record(requirement, f"pyproject.toml [{extra}]", Standing.EXTRAS)
        dynamic_extras = _table(dynamic.get("optional-dependencies"))
        for extra in sorted(dynamic_extras, key=str):
            for name in _file_list(_table(dynamic_extras[extra]).get("file")):
                self._read_named_file(name, f"pyproject.toml [{extra}]", Standing.EXTRAS)
        self._read_poetry_table(poetry.get("dev-dependencies"), "pyproject.toml [tool.poetry.dev-dependencies]", Standing.EXTRAS)
        groups = _table(poetry.get("group"))
        for group in sorted(groups, key=str):
            self._read_poetry_table(
                _table(groups[group]).get("dependencies"), f"pyproject.toml [tool.poetry.group.{group}]", Standing.EXTRAS
            )
        dependency_groups = _table(pyproject.get("dependency-groups"))
        for group in sorted(dependency_groups, key=str):
            for requirement in _strings(dependency_groups[group]):
                self.record(requirement, f"pyproject.toml [dependency-groups] {group}", Standing.EXTRAS)

    def _read_poetry_table(self, table: Any, where: str, standing: Standing) -> None:
        for name, value in _table(table).items():
            package = normalize_name(str(name))
            if package not in TRACKED_PACKAGES:
                continue
            for constraint, conditional in _poetry_constraints(value):
                written = f'{name} = "{constraint}"' + (" ; (with markers)" if conditional else "")
                self.record(written, where, standing, poetry=(package, constraint))

    def _read_named_file(self, name: str, where: str, standing: Standing) -> None:
        path = self.root / name.strip()
        if path.is_file():
            self.read_requirement_file(path, standing, where)
        else:
            self.warn(f"{where}: names the file {name.strip()!r}, which does not exist; it is not read")

    # setup.cfg and setup.py

    def _read_setup_cfg(self) -> None:
        path = self.root / "setup.cfg"
        if not path.is_file():
            return
        parser = configparser.ConfigParser(interpolation=None, strict=False)
        try:
            parser.read_string(path.read_text(encoding="utf-8", errors="replace"), source="setup.cfg")
        except OSError as error:
            self.warn(f"setup.cfg: cannot read: {error.strerror or error}; its dependencies are not read")
            return
        except configparser.Error as error:
            self.warn(f"setup.cfg: invalid ({_first_line(error)}); its dependencies are not read")
            return
        if parser.has_option("options", "install_requires"):
            self._read_cfg_value(parser.get("options", "install_requires"), "setup.cfg", Standing.PACKAGE_METADATA)
        if parser.has_section("options.extras_require"):
            for extra, value in sorted(parser.items("options.extras_require")):
                self._read_cfg_value(value, f"setup.cfg [{extra}]", Standing.EXTRAS)

    def _read_cfg_value(self, value: str, where: str, standing: Standing) -> None:
        if value.strip().startswith("file:"):
            for name in value.strip()[len("file:") :].split(","):
                self._read_named_file(name, where, standing)
            return
        for requirement in value.splitlines():
            self.record(requirement, where, standing)

    def _read_setup_py(self) -> None:
        path = self.root / "setup.py"
        if not path.is_file():
            return
        try:
            tree = ast.parse(path.read_bytes(), filename="setup.py")
        except OSError as error:
            self.warn(f"setup.py: cannot read: {error.strerror or error}; its dependencies are not read")
            return
        except (SyntaxError, ValueError) as error:
            where = f"setup.py:{error.lineno}" if getattr(error, "lineno", None) else "setup.py"
            self.warn(f"{where}: cannot be parsed ({getattr(error, 'msg', error)}); its dependencies are not read")
            return
        for install_requires, extras_require in setup_call_arguments(tree):
            for requirement, line in install_requires:
                self.record(requirement, "setup.py", Standing.PACKAGE_METADATA, line)
            for extra, requirement, line in extras_require:
                self.record(requirement, f"setup.py [{extra}]", Standing.EXTRAS, line)


def _without_exclusions(constraint: str) -> str:
    """A constraint without its `!=` clauses: an exclusion alone (`transformers!=5.1.0`)
    admits every version the ranges know of, so it is no version that was lost."""
    return re.sub(r"!=\s*[^\s,;]+", "", constraint)


def _logical_lines(text: str) -> Iterator[tuple[int, str]]:
    """Lines of a requirement file with backslash continuations joined, comments removed,
    each with the number of its first physical line."""
    pending: list[str] = []
    start = 0
    for number, line in enumerate(text.splitlines(), start=1):
        if not pending:
            start = number
        if line.rstrip().endswith("\\"):
            pending.append(line.rstrip()[:-1].strip())
            continue
        joined = " ".join([*pending, line.strip()])
        pending = []
        stripped = re.sub(r"(^|\s)#.*", "", joined).strip()
        if stripped:
            yield start, stripped
    if pending:
        yield start, " ".join(pending).strip()


def _requirement_files(root: Path) -> tuple[list[Path], list[Path]]:
    """Requirement files at the root (requirements.txt, requirements*.txt, requirements/*.txt)
    and further down, each group in reading order."""

    at_root: list[Path] = []
    nested: list[Path] = []

    def walk(directory: Path, depth: int, in_requirements_dir: bool) -> None:
        try:
            entries = sorted(os.scandir(directory), key=lambda e: e.name)
        except OSError:
            return
        for entry in entries:
            name = entry.name
            try:
                is_dir = entry.is_dir()
            except OSError:
                continue
            if is_dir:
                if name.startswith(".") or name in SKIPPED_DIRECTORIES or depth >= NESTED_DEPTH:
                    continue
                child = Path(entry.path)
                if is_project_root(child):
                    continue  # a nested project declares its own versions
                walk(child, depth + 1, in_requirements_dir or name.lower().startswith("requirements"))
            elif (name.endswith(".txt") and (in_requirements_dir or name.lower().startswith("requirements"))) or (
                ENVIRONMENT_FILE.match(name)
            ):
                path = Path(entry.path)
                top_level = depth == 0 or (depth == 1 and in_requirements_dir and directory.parent == root)
                (at_root if top_level else nested).append(path)

    walk(root, 0, False)

    def order(path: Path) -> tuple:
        relative = path.relative_to(root).as_posix()
        stem = relative.rsplit(".", 1)[0]
        # Requirement files before environment files, of the same directory depth.
        return (relative != "requirements.txt", relative.count("/"), _serves_tooling(stem), bool(ENVIRONMENT_FILE.match(path.name)), relative)

    return sorted(at_root, key=order), sorted(nested, key=order)


def _package_name_lines(text: str) -> list[int]:
    """The line of each `[[package]]` table's `name` key, in order (for warnings)."""
    lines: list[int] = []
    in_package = False
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if stripped.startswith("["):
            in_package = stripped.replace(" ", "") == "[[package]]"
            if in_package:
                lines.append(number)  # the header, until a `name` line is seen
        elif in_package and re.match(r"name\s*=", stripped):
            lines[-1] = number
            in_package = False
    return lines


# --- Poetry ------------------------------------------------------------------------------


def _poetry_constraints(value: Any) -> Iterator[tuple[str, bool]]:
    """A Poetry dependency's version constraints: a string, a table with `version`, or a
    list of tables (one per marker)."""
    if isinstance(value, str):
        yield value, False
    elif isinstance(value, Mapping) and isinstance(value.get("version"), str):
        yield value["version"], "markers" in value or "python" in value or "platform" in value
    elif isinstance(value, list):
        for item in value:
            if isinstance(item, Mapping) and isinstance(item.get("version"), str):
                yield item["version"], True


def poetry_range(package: str, constraint: str) -> VersionRange:
    """The versions a Poetry constraint admits: `^2.1` is >=2.1,<3, `^0.4` >=0.4,<0.5,
    `~2.1` >=2.1,<2.2, a bare `2.1` is ==2.1, `*` anything; alternatives (`||`) are joined."""
    alternatives = [_poetry_alternative(package, text) for text in constraint.split("||")]
    lows = [r.min for r in alternatives]
    highs = [r.max for r in alternatives]
    return VersionRange(
        package,
        None if None in lows else min(lows),
        None if None in highs else max(highs),
    )


def _poetry_alternative(package: str, text: str) -> VersionRange:
    specifiers = []
    for item in re.split(r"\s*,\s*|\s+(?=[<>=!~^])", text.strip()):
        item = item.replace(" ", "")
        if item in ("", "*"):
            continue
        if item[0] in "^~" and not item.startswith("~="):
            parts = [int(p) for p in re.findall(r"\d+", item.split("+", 1)[0])[:3]]
            if not parts:
                specifiers.append(item)  # not a version: admitted_range skips it
                continue
            if item[0] == "^":
                bump = next((i for i, p in enumerate(parts) if p), len(parts) - 1)
            else:
                bump = min(1, len(parts) - 1)
            upper = parts[:bump] + [parts[bump] + 1]
            specifiers += [f">={'.'.join(map(str, parts))}", f"<{'.'.join(map(str, upper))}"]
        elif item[0].isdigit():
            specifiers.append(f"=={item}")
        else:
            specifiers.append(item)
    return admitted_range(package, ",".join(specifiers))


# --- small readers -----------------------------------------------------------------------


def _table(value: Any) -> Mapping:
    return value if isinstance(value, Mapping) else {}


def _strings(value: Any) -> list[str]:
    # pyproject.toml is not ours to validate: anything but a list of strings is skipped.
    return [item for item in value if isinstance(item, str)] if isinstance(value, list) else []


def _file_list(value: Any) -> list[str]:
    return [value] if isinstance(value, str) else _strings(value)


def _serves_tooling(where: str) -> bool:
    """Whether a file or extra serves docs, tests, linting or CI (`requirements/docs.txt`,
    `pyproject.toml [test]`): read after the others, and never said to conflict."""
    return bool(set(re.split(r"[^a-z0-9]+", where.lower())) & TOOLING_WORDS)


def _file_of(where: str) -> str:
    """The file a declaration's `where` names: the last of an include chain, without the
    table or extra."""
    return where.split(" -> ")[-1].split(" [", 1)[0]


def _first_line(error: Exception) -> str:
    return str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
