"""Linting a recipe file (YAML / JSON) or a launch script: from text to diagnostics.

A YAML or JSON file is checked on its own. A launch script is checked per training command,
with the recipe files the command names (an accelerate config, the program's YAML / JSON
arguments, an `fsdp_config` file) and its flags combined in the order the programs read
them; a finding that rests on one recipe file alone is that file's, and is reported there,
not again at the script.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from ckptlint.discovery import display_path
from ckptlint.model.library.deepspeed import ACTIVATION_CHECKPOINTING_SECTION
from ckptlint.model.library.fsdp_settings import is_accelerate_config
from ckptlint.model.syntax.launch_commands import Launch, Option, hf_bool, option_value, read_launch
from ckptlint.model.syntax.recipe_documents import Recipe, RecipeSyntaxError, Setting, Span, parse_recipe
from ckptlint.model.syntax.shell_scripts import Word, parse_script
from ckptlint.recipes import MAX_RECIPE_BYTES, may_hold_findings
from ckptlint.recipes.checks import RecipeFinding, check_setup
from ckptlint.recipes.deepspeed_configs import unused_sections
from ckptlint.recipes.entry_points import EntryPoint, read_entry_point
from ckptlint.recipes.setups import Flavor, setup_of
from ckptlint.source import LineIndex, UndecodableSource, content_digest, decode_source, read_source_bytes
from ckptlint.suppression import suppresses
from ckptlint.types import Diagnostic, Edit, Fix, Location, Severity
from ckptlint.versions import TargetVersions

if TYPE_CHECKING:
    from ckptlint.model.index import ProjectIndex

_ACCELERATE_ENVIRONMENT = {
    "ACCELERATE_USE_FSDP": ("distributed_type",),
    "FSDP_ACTIVATION_CHECKPOINTING": ("fsdp_config", "fsdp_activation_checkpointing"),
    "FSDP_SHARDING_STRATEGY": ("fsdp_config", "fsdp_sharding_strategy"),
    "FSDP_RESHARD_AFTER_FORWARD": ("fsdp_config", "fsdp_reshard_after_forward"),
    "FSDP_VERSION": ("fsdp_config", "fsdp_version"),
}
# `{{ .Values.x }}` / `{% if %}`: a Helm chart or Jinja template, not YAML until rendered.
_TEMPLATE = re.compile(r"\{\{|\{%")


@dataclass(frozen=True)
class RecipeLint:
    diagnostics: tuple[Diagnostic, ...]
    # The other files the findings rest on (a launch script's configs and entry point), by
    # absolute path: their content digest, or None for a path looked for and not found.
    inputs: tuple[tuple[str, str | None], ...] = ()


def lint_recipe(
    text: str,
    path: Path,
    display: str,
    kind: str,
    versions: TargetVersions,
    enabled: frozenset[str],
    *,
    project_root: Path,
    project: ProjectIndex | None = None,
) -> RecipeLint:
    """The findings of a recipe or launch script; raises `RecipeSyntaxError` for invalid
    YAML / JSON (the engine reports it as CKPT900). `project` answers what the project's
    Python code does (CKPT008: whether it applies DeepSpeed's checkpointing settings)."""
    if not may_hold_findings(text, shell=kind == "shell"):
        return RecipeLint(())
    if kind == "shell":
        reader = _Files(path.parent, project_root)
        commands = parse_script(text)
        findings = [
            (finding, anchor)
            for command in commands
            if (launch := read_launch(command)) is not None
            for finding, anchor in _check_launch(launch, display, versions, enabled, reader)
        ]
        # A command continued over lines cannot carry a comment before its last line: a
        # `# noqa` there covers the whole command.
        last_rows = {word.span: command.words[-1].span.end.row for command in commands for word in command.words}
        diagnostics = _diagnostics(text, display, findings, fixes=False, last_rows=last_rows)
        return RecipeLint(diagnostics, tuple(sorted(reader.inputs.items())))
    if kind == "yaml" and _TEMPLATE.search(text):
        return RecipeLint(())  # a Helm / Jinja template: YAML only once rendered
    findings = []
    # Asked of the project only for a document that holds a section.
    deepspeed_unused = (
        "CKPT008" in enabled and project is not None and ACTIVATION_CHECKPOINTING_SECTION in text
        and project.deepspeed_section_unused
    )
    for document in parse_recipe(text, display, is_json=kind == "json"):
        finding = check_setup(setup_of(document.settings, {}, versions), versions, enabled, display)
        if finding is not None:
            findings.append((finding, finding.settings[0].key_span))
        if deepspeed_unused:
            findings.extend((unused, unused.settings[0].key_span) for unused in unused_sections(document.settings))
    return RecipeLint(_diagnostics(text, display, findings, fixes=True, is_json=kind == "json"))


# --- launch scripts --------------------------------------------------------------------


class _Files:
    """Recipe files and entry points a script names, read once, found relative to the
    script's directory, then the project root, then the working directory."""

    def __init__(self, script_directory: Path, project_root: Path) -> None:
        self.bases = (script_directory, project_root, Path.cwd())
        self._recipes: dict[Path, Recipe | None] = {}
        self._entry_points: dict[Path, EntryPoint | None] = {}
        # Every path looked at: its content digest, or None when no file was there (one
        # created later would change the findings).
        self.inputs: dict[str, str | None] = {}

    def find(self, name: str) -> Path | None:
        candidate = Path(os.path.expanduser(name))
        for base in (Path("/"),) if candidate.is_absolute() else self.bases:
            path = base / candidate
            if path.is_file():
                return path
            self.inputs.setdefault(os.path.abspath(path), None)
        return None

    def _read(self, path: Path) -> str | None:
        """A named file's text; None when it cannot be read or decoded, or is data."""
        try:
            data = read_source_bytes(path)
        except OSError:
            return None
        self.inputs[os.path.abspath(path)] = content_digest(data)
        try:
            return decode_source(data).text if len(data) <= MAX_RECIPE_BYTES else None
        except UndecodableSource:
            return None

    def recipe(self, name: str) -> Recipe | None:
        path = self.find(name)
        if path is None:
            return None
        if path not in self._recipes:
            self._recipes[path] = None
            text = self._read(path)
            if text is not None:
                try:
                    documents = parse_recipe(text, display_path(path), is_json=path.suffix.lower() == ".json")
                except RecipeSyntaxError:
                    documents = []  # reported when that file is linted itself
                self._recipes[path] = documents[0] if documents else None
        return self._recipes[path]

    def entry_point(self, name: str) -> EntryPoint | None:
        path = self.find(name)
        if path is None:
            return None
        if path not in self._entry_points:
            text = self._read(path)
            self._entry_points[path] = read_entry_point(text) if text is not None else None
        return self._entry_points[path]


def _flag_setting(option: Option, script: str, key: tuple[str, ...] | None = None) -> Setting | None:
    text = option_value(option)
    if text is None:
        return None
    value: object = text
    if option.name in ("gradient_checkpointing_kwargs", "fsdp_config") and text.lstrip().startswith("{"):
        try:
            value = json.loads(text)
        except ValueError:
            return None
    value_word = option.value or option.flag
    return Setting(key or (option.name,), value, script, option.flag.span, value_word.span)


def _prefixed(recipe: Recipe | None, prefix: tuple[str, ...]) -> dict[tuple[str, ...], Setting]:
    if recipe is None:
        return {}
    return {prefix + key: setting for key, setting in recipe.settings.items()}


def _check_launch(
    launch: Launch, script: str, versions: TargetVersions, enabled: frozenset[str], files: _Files
) -> Iterable[tuple[RecipeFinding, Span]]:
    # Where each file entered the command: a finding from other files is reported there.
    origins: dict[str, Span] = {}

    def load(word: Word | None) -> Recipe | None:
        if word is None or word.value is None:
            return None
        recipe = files.recipe(word.value)
        if recipe is not None:
            origins.setdefault(recipe.path, word.span)
        return recipe

    launch_config: dict[tuple[str, ...], Setting] = {}
    # accelerate reads its FSDP options from the environment too (`accelerate launch` sets
    # these from its config file; a script may set them itself).
    for name, word in launch.command.assignments:
        key = _ACCELERATE_ENVIRONMENT.get(name)
        if key is not None and word.value is not None:
            value = "FSDP" if key == ("distributed_type",) and hf_bool(word.value) else word.value
            if key != ("distributed_type",) or value == "FSDP":
                launch_config[key] = Setting(key, value, script, word.span, word.span)
    if launch.launcher == "accelerate":
        config_option = launch.launcher_option("config_file")
        launch_config.update(_prefixed(load(config_option.value if config_option else None), ()))
        for option in launch.launcher_options:
            if option.name == "use_fsdp" and hf_bool(option_value(option)) is not False:
                value_span = (option.value or option.flag).span
                launch_config[("distributed_type",)] = Setting(
                    ("distributed_type",), "FSDP", script, option.flag.span, value_span
                )
            elif option.name.startswith("fsdp_"):
                setting = _flag_setting(option, script, ("fsdp_config", option.name))
                if setting is not None:
                    launch_config[setting.key] = setting

    flavor = {"llamafactory": Flavor.LLAMA_FACTORY, "axolotl": Flavor.AXOLOTL, "trl": Flavor.TRL}.get(launch.launcher)
    entry = None
    if launch.entry is not None and launch.entry.value is not None and launch.launcher != "trl":
        if launch.entry_is_module:
            if launch.entry.value.startswith("axolotl"):
                flavor = Flavor.AXOLOTL
            elif launch.entry.value.startswith("llamafactory"):
                flavor = Flavor.LLAMA_FACTORY
            elif launch.entry.value.split(".")[0] == "trl":
                flavor = Flavor.TRL
        else:
            entry = files.entry_point(launch.entry.value)
            if entry is not None and entry.flavor is not None:
                flavor = entry.flavor

    arguments: dict[tuple[str, ...], Setting] = {}
    for word in launch.recipe_files:
        recipe = load(word)
        if recipe is not None and not is_accelerate_config(recipe.settings):
            arguments.update(recipe.settings)
    for option in launch.options:
        if option.name == "fsdp_config" and option.value is not None and option.value.value is not None:
            if not option.value.value.lstrip().startswith("{"):
                arguments.update(_prefixed(load(option.value), ("fsdp_config",)))
                continue
        setting = _flag_setting(option, script)
        if setting is None:
            continue
        arguments[setting.key] = setting
        if isinstance(setting.value, dict):
            for key, value in setting.value.items():
                nested = (option.name, str(key))
                arguments[nested] = Setting(nested, value, script, setting.key_span, setting.value_span)
    for override in launch.overrides:  # LLaMA-Factory's `key=value`
        key_text, _, value = (override.flag.value or "").partition("=")
        key = tuple(key_text.split("."))
        arguments[key] = Setting(key, value, script, override.flag.span, override.flag.span)

    reentrant_field = entry.reentrant_field if entry is not None else None
    command = None
    if launch.launcher == "trl" and launch.entry is not None:
        command = launch.entry.value
    elif flavor is Flavor.TRL and launch.entry_is_module:
        # `-m trl.cli sft ...`: the first word after the module.
        words = launch.command.words
        after = [w.value for w in words[words.index(launch.entry) + 1 :] if w.value and not w.value.startswith("-")]
        command = after[0] if after else None
    setup = setup_of(
        arguments, launch_config, versions, flavor=flavor, reentrant_field=reentrant_field, command=command
    )
    if launch.launcher == "deepspeed" or (launch.launcher == "accelerate" and launch.launcher_option("use_deepspeed")):
        setup = replace(setup, ddp_find_unused=None)  # DeepSpeed's engine, not torch DDP
    finding = check_setup(setup, versions, enabled, script)
    if finding is None:
        return
    paths = {setting.path for setting in finding.settings}
    on_by_default = setup.checkpointing is not None and setup.checkpointing.setting is None
    if len(paths) == 1 and script not in paths and not on_by_default:
        return  # the finding is that recipe's own, reported in it
    anchor = finding.settings[0]
    if on_by_default and launch.recipe_files:
        yield finding, launch.recipe_files[0].span  # the recipe that leaves it on
    elif anchor.path == script:
        yield finding, anchor.key_span
    else:
        yield finding, origins.get(anchor.path, launch.command.words[0].span)


# --- diagnostics and fixes -------------------------------------------------------------


def _diagnostics(
    text: str,
    display: str,
    findings: list[tuple[RecipeFinding, Span]],
    *,
    fixes: bool,
    is_json: bool = False,
    last_rows: dict[Span, int] | None = None,
) -> tuple[Diagnostic, ...]:
    from ckptlint.rule_codes import rule_summary

    index = LineIndex(text)
    diagnostics = []
    seen = set()
    for finding, span in findings:
        if (finding.code, span) in seen:
            continue
        seen.add((finding.code, span))
        rows = {span.start.row, (last_rows or {}).get(span, span.start.row)}
        if any(suppresses(index.line(row), finding.code) for row in rows):
            continue
        fix = _fix(text, index, finding, is_json) if fixes else None
        rule = rule_summary(finding.code)
        diagnostics.append(
            Diagnostic(
                finding.code, finding.message, display, span.start, span.end, fix, span.start.row,
                rule.url() if rule is not None else None,
                severity=rule.severity if rule is not None else Severity.ERROR,
            )
        )
    return tuple(sorted(diagnostics, key=lambda d: d.sort_key))


_BOOLEAN_TEXT = re.compile(r"^(?:true|True|TRUE|yes|Yes|YES|on|On|ON|1)$")


def _fix(text: str, index: LineIndex, finding: RecipeFinding, is_json: bool) -> Fix | None:
    """Edits that touch only the value (or add one line), verified against the text."""
    from ckptlint.rule_codes import rule_summary

    rule = rule_summary(finding.code)
    applicability = rule.fix if rule is not None else None
    if applicability is None:
        return None
    if finding.replace_value is not None:
        setting, new = finding.replace_value
        start, end = index.offset(setting.value_span.start), index.offset(setting.value_span.end)
        if not _BOOLEAN_TEXT.match(text[start:end]):
            return None
        edit = Edit(setting.value_span.start, setting.value_span.end, new)
        return Fix(applicability, finding.fix_message or rule.name, (edit,))
    if finding.insert_after is not None and not is_json:
        setting, line = finding.insert_after
        row = setting.key_span.start.row
        current = index.line(row)
        indent = current[: setting.key_span.start.column - 1]
        if indent.strip() or setting.value_span.end.row != row:
            return None  # not a block mapping key with its value on its own line
        body = current.rstrip("\r\n")
        ending = current[len(body) :]
        if ending:
            location = Location(row + 1, 1)
            content = f"{indent}{line}{ending}"
        else:  # the last line, without a line break
            location = Location(row, len(body) + 1)
            content = f"\n{indent}{line}"
        edit = Edit(location, location, content)
        return Fix(applicability, finding.fix_message or rule.name, (edit,))
    return None
