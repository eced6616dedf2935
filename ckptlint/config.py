"""Configuration: finding the project root and config file, validating keys and values,
and resolving rule selection and target versions into `Settings`.

Sources: `[tool.ckptlint]` in pyproject.toml, `ckptlint.toml`, `.ckptlint.toml`,
`.ckptlint.yaml`; command-line options override them. Any unknown key or bad value is a
`ConfigError` naming the file, the key and what is allowed (exit code 2).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ckptlint.declarations import DeclaredDependencies, read_declarations
from ckptlint.project_root import ROOT_MARKERS, find_project_root, is_project_root
from ckptlint.rule_codes import ENGINE_CODES, all_codes
from ckptlint.types import Diagnostic, Severity
from ckptlint.versions import (
    TRACKED_PACKAGES,
    TargetVersion,
    TargetVersions,
    Version,
    VersionSource,
    normalize_name,
)

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

# Within one directory, the first of these that exists (pyproject.toml only with a
# [tool.ckptlint] table) is the configuration.
CONFIG_FILES = (".ckptlint.toml", "ckptlint.toml", ".ckptlint.yaml", "pyproject.toml")

DEFAULT_EXCLUDE = (
    ".bzr", ".direnv", ".eggs", ".git", ".git-rewrite", ".hg", ".ipynb_checkpoints", ".mypy_cache",
    ".nox", ".pants.d", ".pyenv", ".pytest_cache", ".pytype", ".ruff_cache", ".svn", ".tox",
    ".venv", ".vscode", "__pypackages__", "_build", "buck-out", "build", "dist", "node_modules",
    "site-packages", "venv", ".ckptlint_cache",
)
FSDP_MODES = ("auto", "yes", "no")
# Files linted when a directory is walked: Python sources, Jupyter notebooks, and the training recipes and
# launch scripts the FSDP / Hugging Face rules also read (those without a trigger word are
# never parsed).
DEFAULT_INCLUDE = ("*.py", "*.pyi", "*.ipynb", "*.yaml", "*.yml", "*.json", "*.sh", "*.bash", "*.slurm", "*.sbatch")


class ConfigError(Exception):
    """A configuration problem the user must fix; the CLI exits 2 with this message."""


@dataclass(frozen=True)
class Settings:
    project_root: Path
    config_file: Path | None
    enabled_codes: frozenset[str]
    exclude: tuple[str, ...]
    extend_exclude: tuple[str, ...]
    per_file_ignores: tuple[tuple[str, tuple[str, ...]], ...]
    target_versions: TargetVersions
    stateful_modules: tuple[str, ...] = ()
    checkpoint_functions: tuple[str, ...] = ()
    fsdp: str = "auto"
    cache_dir: Path | None = None
    respect_gitignore: bool = True
    include: tuple[str, ...] = DEFAULT_INCLUDE
    # Where each resolved setting came from, for `--show-settings`.
    origins: Mapping[str, str] = field(default_factory=dict)
    # The root `per-file-ignores` patterns are relative to: the run's project root, also for
    # files of a nested project.
    config_root: Path | None = None
    # Warnings about the project's own files that leave the run intact (a setup.py that
    # does not parse, declarations of one package that admit no common version).
    notices: tuple[str, ...] = ()
    # `severity = {CKPT001 = "error"}`: codes or prefixes with the severity their findings
    # are reported with (the most specific prefix wins), over the rules' own.
    severities: tuple[tuple[str, Severity], ...] = ()
    # `fail-on`: the least severity that makes a run exit 1 (info: every finding does).
    fail_on: Severity = Severity.INFO

    def severity_of(self, diagnostic: Diagnostic) -> Severity:
        """The severity `diagnostic` is reported with: the configured one for its code, else
        its own."""
        best, chosen = -1, diagnostic.severity
        for prefix, severity in self.severities:
            specificity = _specificity(diagnostic.code, (prefix,))
            if specificity > best:
                best, chosen = specificity, severity
        return chosen

    def with_severities(self, diagnostics: Iterable[Diagnostic]) -> list[Diagnostic]:
        """`diagnostics` with the configured severities (`severity_of`)."""
        if not self.severities:
            return list(diagnostics)
        return [replace(d, severity=self.severity_of(d)) for d in diagnostics]

    @property
    def cache_directory(self) -> Path:
        """Where the cache lives: `cache-dir` (resolved: `default_cache_dir`), else `.ckptlint_cache/` at
        the project root."""
        return self.cache_dir or self.project_root / ".ckptlint_cache"

    def for_project(self, root: Path) -> Settings:
        """The settings for a nested project (a directory below the run's root holding its
        own pyproject.toml, setup.py, setup.cfg or .git): the same configuration, with the
        versions that project declares (explicit target versions still win)."""
        if root == self.project_root:
            return self
        declared = read_declarations(root)
        versions = self.target_versions.with_declared(declared.versions, declared.ranges)
        return replace(
            self,
            project_root=root,
            target_versions=versions,
            config_root=self.config_root or self.project_root,
            notices=_declaration_notices(root, declared, versions.explicit_packages()),
        )

    @classmethod
    def default(
        cls,
        project_root: Path,
        *,
        target_versions: Mapping[str, str] | None = None,
        select: Sequence[str] = ("ALL",),
        use_installed: bool = False,
    ) -> Settings:
        """Defaults without reading any file: for the API, the rule cases and tests."""
        versions = {
            package: TargetVersion(Version.parse(version), VersionSource.CONFIG, "explicit")
            for package, version in (target_versions or {}).items()
        }
        return cls(
            project_root=project_root,
            config_file=None,
            enabled_codes=enabled_codes(validate_codes(select, "select"), (), ()),
            exclude=DEFAULT_EXCLUDE,
            extend_exclude=(),
            per_file_ignores=(),
            target_versions=TargetVersions(versions, use_installed=use_installed),
        )

    def ignored_codes_for_path(self, path: Path) -> tuple[str, ...]:
        from ckptlint.discovery import relative_to_root

        return self.ignored_codes_for(relative_to_root(path.absolute(), self.config_root or self.project_root))

    def ignored_codes_for(self, relative_path: str) -> tuple[str, ...]:
        from ckptlint.discovery import matches_any

        codes: list[str] = []
        for pattern, prefixes in self.per_file_ignores:
            if matches_any(relative_path, (pattern,)):
                codes.extend(prefixes)
        return tuple(codes)


@dataclass(frozen=True)
class Overrides:
    """Command-line options that take part in configuration."""

    config_file: Path | None = None
    select: tuple[str, ...] | None = None
    ignore: tuple[str, ...] = ()
    extend_select: tuple[str, ...] = ()
    target_versions: tuple[str, ...] = ()
    cache_dir: Path | None = None
    exclude: tuple[str, ...] | None = None
    extend_exclude: tuple[str, ...] = ()
    # `--per-file-ignores` replaces the configured table, `--extend-per-file-ignores` adds to it.
    per_file_ignores: tuple[tuple[str, tuple[str, ...]], ...] | None = None
    extend_per_file_ignores: tuple[tuple[str, tuple[str, ...]], ...] = ()
    # `--config "select = ['CKPT0']"`: TOML `KEY = VALUE` pairs over the config file's (Ruff's).
    inline: tuple[str, ...] = ()
    fail_on: Severity | None = None  # `--fail-on`


@dataclass(frozen=True)
class _InlineSource:
    """Where an inline `--config` setting comes from, for messages (`str`) and relative
    paths (`parent`: the working directory), as a config file's path serves both."""

    text: str

    def __str__(self) -> str:
        return f"--config {self.text!r}"

    @property
    def parent(self) -> Path:
        return Path.cwd()


def parse_inline_settings(texts: Sequence[str]) -> _FileSettings:
    """The settings of `--config "KEY = VALUE"` options, validated as a config file's; a
    later one wins over an earlier one for the same key."""
    merged = _FileSettings()
    for text in texts:
        try:
            table = tomllib.loads(text)
        except tomllib.TOMLDecodeError as error:
            raise ConfigError(
                f"--config {text!r}: neither a file nor a TOML `KEY = VALUE` pair ({error}); "
                "e.g. --config \"select = ['CKPT0']\""
            ) from None
        merged = _overlaid(merged, parse_config_table(_InlineSource(text), table))  # type: ignore[arg-type]
    return merged


def _overlaid(base: _FileSettings, top: _FileSettings) -> _FileSettings:
    """`base` with every key `top` sets taken from `top` (rule selection included: inline
    settings are the layer after the file's)."""
    changes = {}
    for key in top.keys:
        attribute = key.replace("-", "_")
        changes[attribute] = getattr(top, attribute)
    return replace(base, **changes, keys=base.keys | top.keys)


def find_config_file(start: Path, project_root: Path) -> Path | None:
    """The nearest config file from `start` up to the project root (inclusive)."""
    directory = start.resolve()
    if not directory.is_dir():
        directory = directory.parent
    for candidate in (directory, *directory.parents):
        for name in CONFIG_FILES:
            path = candidate / name
            if path.is_file() and (name != "pyproject.toml" or _has_tool_table(path)):
                return path
        if candidate == project_root:
            break
    return None


def _has_tool_table(pyproject: Path) -> bool:
    try:
        data = _read_toml(pyproject)
    except ConfigError:
        try:
            return b"[tool.ckptlint" in pyproject.read_bytes()  # let the real load report it
        except OSError:
            return True  # unreadable: the real load says so
    return isinstance(data.get("tool"), dict) and "ckptlint" in data["tool"]


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as error:
        raise ConfigError(f"{path}: cannot read: {error.strerror or error}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as error:
        raise ConfigError(f"{path}: invalid TOML: {error}") from None


def load_config_table(path: Path) -> dict[str, Any]:
    """The ckptlint table of a config file, keys as written."""
    if path.suffix in (".yaml", ".yml"):
        import yaml

        try:
            data = yaml.safe_load(path.read_text(encoding="utf-8"))
        except OSError as error:
            raise ConfigError(f"{path}: cannot read: {error.strerror or error}") from None
        except UnicodeDecodeError as error:
            raise ConfigError(f"{path}: invalid YAML: not UTF-8 ({error.reason})") from None
        except yaml.YAMLError as error:
            raise ConfigError(f"{path}: invalid YAML: {_describe_yaml_error(error)}") from None
        if data is None:
            return {}
        if not isinstance(data, dict):
            raise ConfigError(
                f"{path}: expected a mapping of settings at the top level (keys: {', '.join(_KEYS)}), "
                f"got {type(data).__name__} {data!r:.60}"
            )
        return data
    data = _read_toml(path)
    if path.name == "pyproject.toml":
        table = data.get("tool", {}).get("ckptlint", {})
        if not isinstance(table, dict):
            raise ConfigError(f"{path}: [tool.ckptlint] must be a table of settings (keys: {', '.join(_KEYS)})")
        return table
    return data


def _describe_yaml_error(error: Exception) -> str:
    mark = getattr(error, "problem_mark", None)
    problem = getattr(error, "problem", None)
    if mark is None or problem is None:
        return str(error).splitlines()[0]
    return f"{problem} (line {mark.line + 1}, column {mark.column + 1})"


# --- validation ------------------------------------------------------------------------


def _string_list(path: Path, key: str, value: Any) -> tuple[str, ...]:
    """A list of strings. A bare string is refused as Ruff refuses it: `exclude = "m.py"`
    reads like one pattern but is a different type from every other list of the table."""
    if isinstance(value, str):
        raise ConfigError(f"{path}: `{key}` must be a list of strings, got the string {value!r} (write [{value!r}])")
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{path}: `{key}` must be a list of strings, got {value!r}")
    return tuple(value)


def validate_codes(codes: Iterable[str], where: str) -> tuple[str, ...]:
    """Codes or prefixes (`CKPT0`, `CKPT001`, `ALL`); anything that selects nothing is an error."""
    known = all_codes()
    result = []
    for raw in codes:
        code = raw.strip().upper()
        if not code:
            continue
        if code != "ALL" and not any(k.startswith(code) for k in known):
            raise ConfigError(
                f"{where}: unknown rule code or prefix {raw!r}; known codes: {', '.join(known)} "
                "(prefixes such as CKPT0 and ALL also work)"
            )
        result.append(code)
    return tuple(result)


_KEYS = (
    "select", "ignore", "extend-select", "exclude", "extend-exclude", "per-file-ignores",
    "target-versions", "stateful-modules", "checkpoint-functions", "fsdp", "cache-dir",
    "respect-gitignore", "include", "extend-include", "severity", "fail-on",
)


@dataclass
class _FileSettings:
    select: tuple[str, ...] | None = None
    ignore: tuple[str, ...] = ()
    extend_select: tuple[str, ...] = ()
    exclude: tuple[str, ...] | None = None
    extend_exclude: tuple[str, ...] = ()
    per_file_ignores: tuple[tuple[str, tuple[str, ...]], ...] = ()
    target_versions: dict[str, Version] = field(default_factory=dict)
    stateful_modules: tuple[str, ...] = ()
    checkpoint_functions: tuple[str, ...] = ()
    fsdp: str = "auto"
    cache_dir: Path | None = None
    respect_gitignore: bool = True
    include: tuple[str, ...] | None = None
    extend_include: tuple[str, ...] = ()
    severity: tuple[tuple[str, Severity], ...] = ()
    fail_on: Severity = Severity.INFO
    keys: frozenset[str] = frozenset()  # the keys the file sets, normalized (`extend-select`)


def parse_config_table(path: Path, table: Mapping[str, Any]) -> _FileSettings:
    settings = _FileSettings()
    for key, value in table.items():
        normalized = str(key).replace("_", "-")
        if normalized not in _KEYS:
            raise ConfigError(
                f"{path}: unknown key `{key}`; allowed keys: {', '.join(_KEYS)}"
            )
        where = f"{path}: `{key}`"
        if normalized in ("select", "ignore", "extend-select"):
            codes = validate_codes(_string_list(path, key, value), where)
            setattr(settings, normalized.replace("-", "_"), codes)
        elif normalized in (
            "exclude", "extend-exclude", "stateful-modules", "checkpoint-functions", "include", "extend-include"
        ):
            setattr(settings, normalized.replace("-", "_"), _string_list(path, key, value))
            if normalized == "include" and not settings.include:
                raise ConfigError(
                    f"{where} is empty: no file would be linted; remove it for the default "
                    f"({', '.join(DEFAULT_INCLUDE)}) or name the files to lint"
                )
        elif normalized == "per-file-ignores":
            if not isinstance(value, dict):
                raise ConfigError(f"{where} must be a table of glob pattern -> list of codes")
            settings.per_file_ignores = tuple(
                (pattern, validate_codes(_string_list(path, f"{key}.{pattern}", codes), f"{where} [{pattern}]"))
                for pattern, codes in sorted(value.items())
            )
        elif normalized == "target-versions":
            settings.target_versions = _parse_target_versions(path, key, value)
        elif normalized == "fsdp":
            if value is True:
                value = "yes"
            elif value is False:
                value = "no"
            if value not in FSDP_MODES:
                raise ConfigError(f"{where} must be one of {', '.join(FSDP_MODES)}, got {value!r}")
            settings.fsdp = value
        elif normalized == "cache-dir":
            if not isinstance(value, str) or not value:
                raise ConfigError(f"{where} must be a path string, got {value!r}")
            settings.cache_dir = (path.parent / os.path.expanduser(value)).resolve()
        elif normalized == "severity":
            settings.severity = _parse_severities(path, key, value)
        elif normalized == "fail-on":
            settings.fail_on = parse_severity(value, where)
        elif normalized == "respect-gitignore":
            if not isinstance(value, bool):
                raise ConfigError(f"{where} must be true or false, got {value!r}")
            settings.respect_gitignore = value
    settings.keys = frozenset(str(key).replace("_", "-") for key in table)
    return settings


def parse_severity(value: Any, where: str) -> Severity:
    try:
        return Severity(str(value).lower()) if isinstance(value, str) else Severity(value)
    except ValueError:
        raise ConfigError(
            f"{where} must be one of {', '.join(s.value for s in Severity)}, got {value!r}"
        ) from None


def _parse_severities(path: Path, key: str, value: Any) -> tuple[tuple[str, Severity], ...]:
    where = f"{path}: `{key}`"
    if not isinstance(value, dict):
        raise ConfigError(f'{where} must be a table of rule code or prefix -> severity, e.g. {{CKPT001 = "error"}}')
    return tuple(
        (validate_codes([code], f"{where} [{code}]")[0], parse_severity(level, f"{where} [{code}]"))
        for code, level in sorted(value.items())
    )


def _parse_target_versions(path: Path, key: str, value: Any) -> dict[str, Version]:
    if not isinstance(value, dict):
        raise ConfigError(
            f"{path}: `{key}` must be a table such as {{torch = \"2.4\", transformers = \"4.46\"}}"
        )
    result = {}
    for package, version in value.items():
        if normalize_name(str(package)) not in TRACKED_PACKAGES:
            raise ConfigError(
                f"{path}: `{key}.{package}`: unknown package; allowed: {', '.join(TRACKED_PACKAGES)}"
            )
        if isinstance(version, float):
            # TOML reads `torch = 2.10` as the float 2.1: refuse rather than guess.
            raise ConfigError(
                f"{path}: `{key}.{package}` must be a quoted version such as \"2.4\"; a bare number "
                f"loses trailing zeros (2.10 reads as 2.1), got {version!r}"
            )
        try:
            if isinstance(version, bool) or not isinstance(version, (str, int)):
                raise ValueError(version)
            result[normalize_name(str(package))] = Version.parse(str(version))
        except ValueError:
            raise ConfigError(
                f"{path}: `{key}.{package}` must be a version such as \"2.4\", got {version!r}"
            ) from None
    return result


def parse_target_version_option(text: str) -> tuple[str, Version]:
    package, sep, version = text.partition("=")
    if not sep or not package.strip():
        raise ConfigError(f"--target-version: expected PACKAGE=VERSION (e.g. torch=2.4), got {text!r}")
    package = normalize_name(package.strip())
    if package not in TRACKED_PACKAGES:
        raise ConfigError(
            f"--target-version: unknown package {text.partition('=')[0].strip()!r}; allowed: {', '.join(TRACKED_PACKAGES)}"
        )
    try:
        return package, Version.parse(version)
    except ValueError:
        raise ConfigError(f"--target-version: {version!r} is not a version (e.g. torch=2.4)") from None


# --- resolution ------------------------------------------------------------------------


@dataclass(frozen=True)
class RuleSelection:
    """One layer of rule selection: the defaults, the config file, the command line."""

    select: tuple[str, ...] | None = None
    extend_select: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()


def enabled_codes(
    select: Sequence[str], extend_select: Sequence[str], ignore: Sequence[str]
) -> frozenset[str]:
    """The codes one selection enables (see `resolve_selection`)."""
    return resolve_selection([RuleSelection(tuple(select), tuple(extend_select), tuple(ignore))])


def _specificity(code: str, prefixes: Iterable[str]) -> int:
    """How specifically the prefixes name `code`: ALL 0, else the matching prefix's length;
    -1 when none matches."""
    return max((0 if p == "ALL" else len(p) for p in prefixes if p == "ALL" or code.startswith(p)), default=-1)


def resolve_selection(layers: Sequence[RuleSelection]) -> frozenset[str]:
    """Ruff's semantics. Within a layer the most specific matching prefix decides, and on a
    tie ignore wins. A layer with `select` starts afresh (so `--select CKPT001` on the
    command line re-enables a code the config file ignores); a layer without one edits the
    result so far. Engine codes (CKPT9xx) come with every `select` unless ignored; an opt-in
    code (CKPT100) only with a selector naming more of it than `CKPT`."""
    enabled: set[str] = set()
    carried_ignores: tuple[str, ...] = ()
    for layer in layers:
        chosen = (layer.select or ()) + layer.extend_select
        ignores = layer.ignore + carried_ignores
        carried_ignores = ()
        updates: dict[str, bool] = {}
        for code in all_codes():
            engine = ENGINE_CODES.get(code)
            if engine is not None and engine.opt_in:
                # Only a selector naming more of it than `CKPT` (not `ALL`) turns it on.
                selected = _specificity(code, [p for p in chosen if p not in ("ALL", "CKPT")])
            else:
                selected = _specificity(code, chosen)
            if layer.select is not None and engine is not None and not engine.opt_in:
                selected = max(selected, 0)
            ignored = _specificity(code, ignores)
            if selected > ignored:
                updates[code] = True
            elif ignored >= 0:
                updates[code] = False
        if layer.select is not None:
            enabled = {code for code, on in updates.items() if on}
            if not layer.select and not layer.extend_select and layer.ignore:
                carried_ignores = layer.ignore  # `select = []` with ignores: they carry over
        else:
            enabled |= {code for code, on in updates.items() if on}
            enabled -= {code for code, on in updates.items() if not on}
    return frozenset(enabled)


def resolve_settings(start: Path, overrides: Overrides = Overrides()) -> Settings:
    project_root = find_project_root(start)
    origins: dict[str, str] = {"project root": _root_origin(project_root)}
    if overrides.config_file is not None:
        config_file = overrides.config_file.resolve()
        if not config_file.is_file():
            raise ConfigError(f"--config: {overrides.config_file}: no such file")
    else:
        config_file = find_config_file(start, project_root)
    file_settings = (
        parse_config_table(config_file, load_config_table(config_file)) if config_file else _FileSettings()
    )
    inline = parse_inline_settings(overrides.inline)
    origins["config file"] = str(config_file) if config_file else "none found (defaults)"

    origins.update(_setting_origins(config_file, file_settings, overrides))
    enabled = resolve_selection(
        [
            RuleSelection(select=("ALL",)),
            RuleSelection(file_settings.select, file_settings.extend_select, file_settings.ignore),
            RuleSelection(inline.select, inline.extend_select, inline.ignore),
            RuleSelection(overrides.select, overrides.extend_select, overrides.ignore),
        ]
    )
    if inline.keys:
        file_settings = _overlaid(file_settings, inline)
        if inline.keys & {"select", "ignore", "extend-select"} and overrides.select is None:
            before, flags, _ = origins["select"].partition(", then command line")
            origins["select"] = before + ", then command line (--config)" + flags
        for key in inline.keys - {"select", "ignore", "extend-select"}:
            shown = "include" if key == "extend-include" else key
            if shown in origins and origins[shown] != "command line":
                origins[shown] = "command line (--config)"

    explicit: dict[str, TargetVersion] = {}
    for package, version in file_settings.target_versions.items():
        where = "--config" if "target-versions" in inline.keys else str(config_file)
        explicit[package] = TargetVersion(version, VersionSource.CONFIG, where)
    for option in overrides.target_versions:
        package, version = parse_target_version_option(option)
        explicit[package] = TargetVersion(version, VersionSource.CLI, f"--target-version {option}")
    declared = read_declarations(project_root)
    versions = TargetVersions({**declared.versions, **explicit}, ranges=declared.ranges)

    cache_dir = overrides.cache_dir or file_settings.cache_dir or default_cache_dir(project_root)
    if cache_dir == project_root or cache_dir in project_root.parents:
        # The cache would then hold the project: `ckptlint clean` would delete it.
        where = "--cache-dir" if overrides.cache_dir else f"{config_file}: `cache-dir`"
        raise ConfigError(
            f"{where}: {cache_dir} is the project root or a directory above it; "
            "use a directory of its own, such as .ckptlint_cache"
        )
    return Settings(
        project_root=project_root,
        config_file=config_file,
        enabled_codes=enabled,
        exclude=overrides.exclude if overrides.exclude is not None
        else file_settings.exclude if file_settings.exclude is not None
        else DEFAULT_EXCLUDE,
        extend_exclude=file_settings.extend_exclude + overrides.extend_exclude,
        per_file_ignores=(
            overrides.per_file_ignores if overrides.per_file_ignores is not None else file_settings.per_file_ignores
        )
        + overrides.extend_per_file_ignores,
        target_versions=versions,
        stateful_modules=file_settings.stateful_modules,
        checkpoint_functions=file_settings.checkpoint_functions,
        fsdp=file_settings.fsdp,
        cache_dir=cache_dir,
        respect_gitignore=file_settings.respect_gitignore,
        include=(file_settings.include if file_settings.include is not None else DEFAULT_INCLUDE)
        + file_settings.extend_include,
        origins=origins,
        notices=_declaration_notices(project_root, declared, frozenset(explicit)),
        severities=file_settings.severity,
        fail_on=overrides.fail_on or file_settings.fail_on,
    )


def default_cache_dir(project_root: Path) -> Path:
    """`.ckptlint_cache/` at the project root; outside any project (no marker above the
    linted path), in the directory the run started in: one cache for every run from there,
    not one in each directory linted."""
    if is_project_root(project_root):
        return project_root / ".ckptlint_cache"
    return Path.cwd().resolve() / ".ckptlint_cache"


def _setting_origins(config_file: Path | None, file_settings: _FileSettings, overrides: Overrides) -> dict[str, str]:
    """Where each setting shown by `--show-settings` comes from: the command line, the
    config file, or the default."""

    def origin(keys: Iterable[str], command_line: bool = False) -> str:
        from_file = config_file is not None and any(key in file_settings.keys for key in keys)
        sources = [str(config_file)] * from_file + ["command line"] * command_line
        return ", then ".join(sources) or "default"

    if overrides.select is not None:
        select = "command line"
    else:
        select = str(config_file) if file_settings.select is not None else "default (ALL)"
        edits = [str(config_file)] * (file_settings.select is None and bool(file_settings.keys & {"ignore", "extend-select"}))
        edits += ["command line"] * bool(overrides.ignore or overrides.extend_select)
        select = ", then ".join([select, *edits])
    return {
        "select": select,
        "exclude": "command line" if overrides.exclude is not None else origin(["exclude"]),
        "extend-exclude": origin(["extend-exclude"], bool(overrides.extend_exclude)),
        "include": origin(["include", "extend-include"]),
        "per-file-ignores": origin(["per-file-ignores"]),
        "stateful-modules": origin(["stateful-modules"]),
        "checkpoint-functions": origin(["checkpoint-functions"]),
        "fsdp": origin(["fsdp"]),
        "respect-gitignore": origin(["respect-gitignore"]),
        "cache-dir": "command line" if overrides.cache_dir is not None else origin(["cache-dir"]),
        "severity": origin(["severity"]),
        "fail-on": origin(["fail-on"], overrides.fail_on is not None),
    }


def _declaration_notices(root: Path, declared: DeclaredDependencies, explicit: frozenset[str]) -> tuple[str, ...]:
    """The declarations' warnings, their files shown from the working directory; a conflict
    about a package whose version is set explicitly no longer matters."""
    try:
        prefix = os.path.relpath(root)
    except ValueError:  # another drive on Windows
        prefix = str(root)
    return tuple(
        warning.message if prefix == "." else f"{prefix}{os.sep}{warning.message}"
        for warning in declared.warnings
        if warning.package not in explicit
    )


def _root_origin(root: Path) -> str:
    markers = [m for m in ROOT_MARKERS if (root / m).exists()]
    return f"{root} (holds {', '.join(markers)})" if markers else f"{root} (no marker found; the start directory)"
