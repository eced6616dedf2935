"""The language server's `initializationOptions`: the command line's configuration options,
validated as the command line validates them, layered over the project's config files.

Accepted keys (kebab-case, snake_case or camelCase):

    select, ignore, extend-select   lists of rule codes or prefixes, as --select etc.
    target-versions                 {"torch": "2.4"} or ["torch=2.4"], as --target-version
                                    (`target-version` is accepted too)
    config                          a config file to use instead of the project's, as --config
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ckptlint.config import ConfigError, Overrides, parse_target_version_option, validate_codes

OPTION_KEYS = ("select", "ignore", "extend-select", "target-versions", "config")
_ALIASES = {"target-version": "target-versions"}
WHERE = "initializationOptions"


def _normalized(key: str) -> str:
    kebab = re.sub(r"(?<=[a-z0-9])([A-Z])", r"-\1", str(key)).replace("_", "-").lower()
    return _ALIASES.get(kebab, kebab)


def _codes(key: str, value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        value = value.split(",")
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{WHERE}: `{key}` must be a list of rule codes, got {value!r}")
    return validate_codes(value, f"{WHERE}: `{key}`")


def _target_versions(key: str, value: Any) -> tuple[str, ...]:
    if isinstance(value, Mapping):
        options = tuple(f"{package}={version}" for package, version in value.items())
    elif isinstance(value, list) and all(isinstance(v, str) for v in value):
        options = tuple(value)
    elif isinstance(value, str):
        options = (value,)
    else:
        raise ConfigError(f"{WHERE}: `{key}` must be a table such as {{\"torch\": \"2.4\"}}, got {value!r}")
    for option in options:
        try:
            parse_target_version_option(option)
        except ConfigError as error:
            raise ConfigError(f"{WHERE}: `{key}`: {str(error).removeprefix('--target-version: ')}") from None
    return options


def overrides_from_options(options: Any, workspace_root: Path | None) -> Overrides:
    """The overrides `initializationOptions` ask for; a `ConfigError` naming the key and
    what is allowed for anything else. A relative `config` path is from the workspace root."""
    if options is None:
        return Overrides()
    if not isinstance(options, Mapping):
        raise ConfigError(f"{WHERE} must be an object with the keys {', '.join(OPTION_KEYS)}, got {options!r}")
    found: dict[str, Any] = {}
    for key, value in options.items():
        name = _normalized(key)
        if name not in OPTION_KEYS:
            raise ConfigError(f"{WHERE}: unknown key `{key}`; allowed keys: {', '.join(OPTION_KEYS)}")
        if name in ("select", "ignore", "extend-select"):
            found[name] = _codes(key, value)
        elif name == "target-versions":
            found[name] = _target_versions(key, value)
        elif name == "config":
            if not isinstance(value, str) or not value:
                raise ConfigError(f"{WHERE}: `{key}` must be the path of a config file, got {value!r}")
            path = Path(value).expanduser()
            found[name] = path if path.is_absolute() or workspace_root is None else workspace_root / path
    return Overrides(
        config_file=found.get("config"),
        select=found.get("select"),
        ignore=found.get("ignore", ()),
        extend_select=found.get("extend-select", ()),
        target_versions=found.get("target-versions", ()),
    )
