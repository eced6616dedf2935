"""The project index: every file's facts (cached by content, loaded lazily) and the
questions rules ask across files: where FSDP is used, which classes get wrapped for
checkpointing, what a class holds and does, what calling a project function does to the
objects passed to it, transitively."""

from __future__ import annotations

from collections.abc import Container, Iterable, Mapping
from typing import TYPE_CHECKING
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path

from ckptlint.model.registries import registered_classes
from ckptlint.model.summary import UNKNOWN, FunctionSummary
from ckptlint.model.facts import (
    ClassFacts,
    EventKind,
    ForwardingFact,
    ForwardingKind,
    FileFacts,
    FsdpKind,
    FsdpUse,
    HF_KINDS,
    FunctionFacts,
    Impl,
    MethodFacts,
    OptionDefault,
    ParameterEffect,
    WrappedClass,
    text_digest,
)
from ckptlint.model.names import is_test_path, module_name
from ckptlint.model.values import ClassRef, FunctionRef
from ckptlint.model.library import (
    CHECKPOINT_IMPL_NO_REENTRANT,
    CHECKPOINT_IMPL_REENTRANT,
    CHECKPOINT_WRAPPER,
    INTERPRETED_FUNCTIONS,
    LIBRARY_PREFIXES,
    TORCH_CHECKPOINT_FUNCTIONS,
    TRAINING_ARGUMENTS_CLASSES,
)

if TYPE_CHECKING:  # the evaluator and the extraction are imported where used: a warm run needs neither
    from ckptlint.model.denotation import Denotation
    from ckptlint.model.callers import CallSites
    from ckptlint.model.fates import HandedModel, ModelFate, ReturnedModel

def _parameter_events(function: FunctionFacts) -> tuple:
    """The events of a function that concern its parameters (and names bound from them)."""
    names = set(function.parameters)
    events = []
    for event in function.events:
        if event.kind is EventKind.ALIAS and event.source in names:
            names.add(event.target)
        if event.target in names and event.kind not in HF_KINDS:
            events.append(event)
    return (function.name, function.parameters, tuple(events))


def _model_events(function: FunctionFacts) -> tuple:
    """What a function does to Hugging Face models, as `model_fate` and `returned_model`
    observe it from other files: the events in order, without their lines (a finding names
    the function, so code added around them changes nothing other files see)."""
    if not any(event.kind in HF_KINDS for event in function.events):
        return ()
    return (
        function.name,
        function.parameters,
        tuple(
            (e.kind, e.target, e.api, e.source, e.callee, e.parameter)
            for e in function.events
            if e.kind in HF_KINDS or e.kind in (EventKind.ALIAS, EventKind.CALL)
        ),
    )

def exported_digest(facts: FileFacts) -> str:
    """The part of a file's facts other files can observe (see `ProjectIndex.fingerprint`)."""
    import hashlib

    exported = (
        facts.fsdp,
        facts.wrapped_classes,
        facts.fsdp_argument_calls,
        tuple(replace(c, line=0) for c in facts.classes),
        tuple(_parameter_events(f) for f in facts.functions if f.parameters),
        tuple(_model_events(f) for f in facts.functions),
        facts.names,
        facts.options,
        facts.registrars,
        facts.registrations,
        tuple(replace(f, line=0, checkpoint_line=0) for f in facts.forwarding),
        tuple(_observable_summary(s, dict(facts.names)) for s in facts.summaries),
    )
    return hashlib.blake2b(repr(exported).encode(), digest_size=12).hexdigest()


def _observable_summary(summary: FunctionSummary, names: dict[str, str]) -> tuple:
    """A summary as other files can observe it through the model: lines replaced by their
    order (only the order of bindings and calls means anything to the model, so code added
    in between leaves it equal), and what a library function returns (a tensor, to the model
    nothing) left out, so that adding `use_reentrant=False` to a `checkpoint(...)` call
    changes nothing other files see."""
    lines = sorted({b.line for b in summary.bindings} | {b.end for b in summary.bindings if b.end}
                   | {line for _, line in summary.calls} | {line for _, line in summary.passes})
    rank = {line: position for position, line in enumerate(lines)}

    def observable(expr):
        if not isinstance(expr, tuple) or not expr:
            return expr
        if expr[0] == "call" and _library_function(expr[1], names):
            return UNKNOWN
        return tuple(observable(part) if isinstance(part, tuple) else part for part in expr)

    return (
        summary.name,
        summary.parameters,
        tuple((b.pattern, b.how, observable(b.value), rank[b.line], rank.get(b.end, 0), b.conditions)
              for b in summary.bindings if observable(b.value) != UNKNOWN),
        tuple((observable(value), conditions) for value, conditions in summary.returns if observable(value) != UNKNOWN),
        tuple((callee, rank[line]) for callee, line in summary.calls),
        summary.self_name,
        summary.nested,
        tuple((observable(call), rank[line]) for call, line in summary.passes),
    )


def _library_function(callee: tuple, names: dict[str, str]) -> bool:
    """A call of a library function the model does not interpret (its result is nothing to it)."""
    absolute = _dotted_absolute(callee, names)
    if absolute is None:
        return False
    short = absolute.rsplit(".", 1)[-1]
    return absolute.startswith(LIBRARY_PREFIXES) and not short[:1].isupper() and absolute not in INTERPRETED_FUNCTIONS


WRAPS_KIND, FSDP_KIND, CHECKPOINTING_KIND, OPTIONS_KIND = "wraps", "fsdp", "checkpointing", "options"
REGISTRY_KIND = "registries"
FORWARDING_KIND, DECORATED_KIND = "forwarding", "decorated"
NORM_FREEZING_KIND = "norm_freezing"
CHECKPOINT_IMPORT_KIND = "checkpoint_imports"  # files importing torch's checkpoint functions
REEXPORT_KIND = "reexports"  # package `__init__` files importing names from other modules


class _EverythingBut:
    """Every file but some (what a script's FSDP use reaches: not the other scripts)."""

    def __init__(self, excluded: frozenset[str] = frozenset()) -> None:
        self.excluded = excluded

    def __contains__(self, item) -> bool:
        return item not in self.excluded


_EVERY_FILE = _EverythingBut()


def _dotted_absolute(expr, names: dict[str, str]) -> str | None:
    """`torch.utils.checkpoint.checkpoint`, `cp.checkpoint`, `checkpoint` (a summary
    expression) as the absolute name its imports give it."""
    parts: list[str] = []
    while expr[0] == "attr":
        parts.append(expr[2])
        expr = expr[1]
    if expr[0] != "name" or expr[1] not in names:
        return None
    return ".".join([names[expr[1]], *reversed(parts)])


def _checkpointing_functions(facts: FileFacts) -> list[FunctionFacts]:
    """The file's functions that run one of their parameters under torch's checkpoint."""
    return [
        f
        for f in facts.functions
        if any(e.kind is EventKind.RUNS_CHECKPOINTED and e.target in f.parameters for e in f.events)
    ]


def cross_file_kinds(facts: FileFacts, relative_path: str = "") -> list[str]:
    """The kinds of facts that project-wide queries collect from every file holding them."""
    kinds = []
    if facts.wrapped_classes:
        kinds.append(WRAPS_KIND)
    if facts.fsdp or facts.fsdp_argument_calls:
        kinds.append(FSDP_KIND)
    if _checkpointing_functions(facts):
        kinds.append(CHECKPOINTING_KIND)
    if facts.options:
        kinds.append(OPTIONS_KIND)
    if facts.registrars or facts.registrations:
        kinds.append(REGISTRY_KIND)
    if any(c.batchnorm_frozen_under is not None for c in facts.classes) or any(
        e.kind is EventKind.FREEZES_BATCHNORM for f in facts.functions for e in f.events
    ):
        kinds.append(NORM_FREEZING_KIND)
    if any(absolute in TORCH_CHECKPOINT_FUNCTIONS for _, absolute in facts.names):
        kinds.append(CHECKPOINT_IMPORT_KIND)
    if relative_path.endswith("__init__.py") and any(
        absolute != f"{facts.module}.{local}" for local, absolute in facts.names
    ):
        kinds.append(REEXPORT_KIND)
    if any(f.kind is not ForwardingKind.DECORATED for f in facts.forwarding):
        kinds.append(FORWARDING_KIND)
    if any(f.kind is ForwardingKind.DECORATED for f in facts.forwarding):
        kinds.append(DECORATED_KIND)
    return kinds


def fingerprint_of(exported: Iterable[tuple[str, str]]) -> str:
    """The project's fingerprint from each file's `exported_digest`."""
    import hashlib

    digest = hashlib.blake2b(digest_size=12)
    for path, piece in sorted(exported):
        digest.update(f"{path}\0{piece}\0".encode())
    return digest.hexdigest()


class LazyFacts(Mapping):
    """Facts by relative path, each built on first use by `load` (from the cache, or
    extracted again): a run whose files are all unchanged never builds them."""

    def __init__(self, keys: Iterable[str], built: Mapping[str, FileFacts], load) -> None:
        self._built = dict(built)
        self._keys = sorted(set(keys) | set(self._built))
        self._known = frozenset(self._keys)
        self._load = load

    def __getitem__(self, key: str) -> FileFacts:
        found = self._built.get(key)
        if found is None:
            if key not in self._known:
                raise KeyError(key)
            found = self._built[key] = self._load(key)
        return found

    def __iter__(self):
        return iter(self._keys)

    def __len__(self) -> int:
        return len(self._keys)

    def __contains__(self, key: object) -> bool:
        return key in self._known

    def __reduce__(self):
        # Sent to worker processes as plain facts (the loader is a closure).
        return (dict, (dict(self.items()),))


@dataclass
class ProjectIndex:
    root: Path
    files: Mapping[str, FileFacts] = field(default_factory=dict)  # relative path -> facts
    # relative path -> content digest of the text the facts were extracted from
    digests: dict[str, str] = field(default_factory=dict)
    # The fingerprint, when known without the facts (cached for exactly these digests).
    known_fingerprint: str | None = None
    # The files whose facts hold each kind of cross-file fact (`cross_file_kinds`), when
    # known without the facts: project-wide queries then load only those files.
    files_with: Mapping[str, frozenset[str]] | None = None
    # Files whose extraction raised (a bug of ours): they have no facts; the run says so.
    extraction_errors: tuple[str, ...] = ()

    def _files_of_kind(self, kind: str) -> Iterable[tuple[str, FileFacts]]:
        if self.files_with is None:
            return self.files.items()
        return ((path, self.files[path]) for path in sorted(self.files_with.get(kind, ())) if path in self.files)

    # queries -----------------------------------------------------------------------------

    @cached_property
    def fsdp_uses(self) -> tuple[FsdpUse, ...]:
        using = list(self._files_of_kind(FSDP_KIND))
        uses = [use for _, facts in using for use in facts.fsdp]
        for path, facts in using:
            for callee, line in facts.fsdp_argument_calls:
                # `training_arguments_classes` scans every class: only asked when needed.
                if self._resolve_name(callee, self.training_arguments_classes):
                    uses.append(FsdpUse(FsdpKind.HF_TRAINER, path, line))
        return tuple(sorted(uses, key=lambda u: (u.path, u.line, u.kind.value)))

    def option_defaults(self, name: str) -> tuple[tuple[str, OptionDefault], ...]:
        """Where the project declares a configuration option `name` (`use_reentrant`) with
        a default: (path, declaration) for every dataclass field and argparse argument."""
        return tuple(
            (path, option) for path, facts in self._files_of_kind(OPTIONS_KIND) for option in facts.options
            if option.name == name
        )

    @cached_property
    def registries(self) -> dict[str, dict[str, tuple[str, ...]]]:
        """registry (absolute name of the dict or registry object) -> key -> the classes the
        project registers under it (`ckptlint.model.registries`)."""
        holding = [facts for _, facts in self._files_of_kind(REGISTRY_KIND)]
        return registered_classes(
            {function: registry for facts in holding for function, registry in facts.registrars},
            [registration for facts in holding for registration in facts.registrations],
        )

    @cached_property
    def batchnorm_freezers(self) -> tuple[ClassFacts, ...]:
        """The classes whose `train()` puts every BatchNorm below them in eval mode
        (`ckptlint.model.norm_freezing`)."""
        return tuple(
            c for _, facts in self._files_of_kind(NORM_FREEZING_KIND) for c in facts.classes
            if c.batchnorm_frozen_under is not None
        )

    @cached_property
    def checkpoint_aliases(self) -> dict[str, str]:
        """Project names that are torch's `checkpoint` / `checkpoint_sequential` under another
        module's name -> the torch function: a module importing it for the package
        (`utils/ckpt.py: from torch.utils.checkpoint import checkpoint`, then `from
        .utils.ckpt import checkpoint`), re-exports of those, and module-level aliases
        (`checkpoint_fn = torch.utils.checkpoint.checkpoint`). A name the module also
        defines or assigns otherwise is none."""
        from ckptlint.model.extraction import MODULE_LEVEL

        found: dict[str, str] = {}
        importing = list(self._files_of_kind(CHECKPOINT_IMPORT_KIND))
        for _, facts in importing:
            names = dict(facts.names)
            top = next((s for s in facts.summaries if s.name == f"{facts.module}.{MODULE_LEVEL}"), None)
            assigned: dict[str, list] = {}
            for binding in top.bindings if top is not None else ():
                if binding.pattern[0] == "name":
                    assigned.setdefault(binding.pattern[1], []).append(binding.value)
            defined = set(top.nested) if top is not None else set()
            for local, absolute in facts.names:
                if absolute in TORCH_CHECKPOINT_FUNCTIONS and local not in defined and local not in assigned:
                    found[f"{facts.module}.{local}"] = absolute
            for local, values in assigned.items():
                targets = {_dotted_absolute(value, names) for value in values}
                if len(targets) == 1 and (target := targets.pop()) in TORCH_CHECKPOINT_FUNCTIONS and local not in defined:
                    found[f"{facts.module}.{local}"] = target
        # Re-exports (`from .ckpt import checkpoint_fn` in a package `__init__`), two levels.
        for _ in range(2):
            for _, facts in self._files_of_kind(REEXPORT_KIND) if found else ():
                for local, absolute in facts.names:
                    if absolute in found:
                        found.setdefault(f"{facts.module}.{local}", found[absolute])
        return found

    def imports_checkpoint_alias(self, relative_path: str) -> bool:
        """Whether the file imports torch's checkpoint under a name another module of the
        project gives it (`from .utils import checkpoint`), by its facts in the index."""
        facts = self.files.get(relative_path)
        if facts is None:
            return False
        imported = [a for local, a in facts.names if a != f"{facts.module}.{local}" and not a.startswith("torch.")]
        return bool(imported) and any(a in self.checkpoint_aliases for a in imported)

    @cached_property
    def batchnorm_freezing_functions(self) -> tuple[tuple[str, str], ...]:
        """(function, parameter): functions that put every BatchNorm below their parameter in
        eval mode (`freeze_bn(model)`; `ckptlint.model.norm_freezing.frozen_parameter`)."""
        return tuple(
            (f.name, e.target) for _, facts in self._files_of_kind(NORM_FREEZING_KIND) for f in facts.functions
            for e in f.events if e.kind is EventKind.FREEZES_BATCHNORM
        )

    def fsdp_uses_reaching(self, relative_path: str) -> tuple[FsdpUse, ...]:
        """The FSDP uses that can apply to the code of one file: a test sees its own (a test
        sharding a model is no sign the other tests do, nor is the package's FSDP code), the
        package and its scripts see theirs, not the tests' (a test that shards is no sign the
        package trains sharded)."""
        if is_test_path(relative_path):
            return tuple(use for use in self.fsdp_uses if use.path == relative_path)
        return tuple(
            use for use in self.fsdp_uses
            if not is_test_path(use.path) and relative_path in self._reached_by_script(use.path)
        )

    def _reached_by_script(self, path: str):
        """The files a training script's FSDP use can apply to: a top-level script no other
        top-level file imports (`train_fsdp.py` beside `sft.py`) applies to itself, what it
        imports and the modules (whose models it may be handed), not to the project's other
        top-level training scripts (they train with `backward()` or a trainer), which run on
        their own; any other file's use applies everywhere (a package's sharding helper is
        called from anywhere)."""
        cached = self._reach_cache.get(path)
        if cached is not None:
            return cached
        facts = self.files.get(path)
        module = facts.module if facts is not None else ""
        if facts is None or "." in module or path.endswith("__init__.py") or self._imported_by_a_script(module):
            self._reach_cache[path] = _EVERY_FILE
            return _EVERY_FILE
        reached, pending = {path}, [path]
        while pending:
            current = self.files.get(pending.pop())
            for _, absolute in current.names if current is not None else ():
                target = self.path_of(f"{absolute}.x") or self.path_of(absolute)
                if target is not None and target not in reached:
                    reached.add(target)
                    pending.append(target)
        other_scripts = {
            other for name, other in self.module_paths.items()
            if "." not in name and other not in reached and not other.endswith("__init__.py")
            and self._trains(other) and not self._imported_by_a_script(name)
        }
        self._reach_cache[path] = _EverythingBut(frozenset(other_scripts))
        return self._reach_cache[path]

    @cached_property
    def _reach_cache(self) -> dict:
        return {}

    def _trains(self, path: str) -> bool:
        """A training script: a function of it runs `backward()` or hands a model to a trainer."""
        facts = self.files.get(path)
        return facts is not None and any(
            e.kind in (EventKind.BACKWARD, EventKind.TRAINER) for f in facts.functions for e in f.events
        )

    def _imported_by_a_script(self, module: str) -> bool:
        """Whether another top-level file of the project imports `module`."""
        for name, path in self.module_paths.items():
            if "." in name or name == module:
                continue
            facts = self.files.get(path)
            if facts is not None and any(a == module or a.startswith(f"{module}.") for _, a in facts.names):
                return True
        return False

    @cached_property
    def classes(self) -> dict[str, ClassFacts]:
        return {c.name: c for facts in self.files.values() for c in facts.classes}

    @cached_property
    def functions(self) -> dict[str, FunctionFacts]:
        return {f.name: f for facts in self.files.values() for f in facts.functions}

    def path_of(self, name: str) -> str | None:
        """The relative path of the file an absolute name is defined in."""
        parts = name.split(".")
        for end in range(len(parts) - 1, 0, -1):
            path = self.module_paths.get(".".join(parts[:end]))
            if path is not None:
                return path
        return None

    @cached_property
    def _suffixes(self) -> dict[str, list[str]]:
        """Every dotted suffix (of two or more parts) of every function and class name: a
        script's `from helpers import f` names `scripts.helpers.f` as `helpers.f`, and a
        src-layout package is imported without its `src.`."""
        table: dict[str, list[str]] = {}
        for name in (*self.functions, *self.classes):
            parts = name.split(".")
            for start in range(1, len(parts) - 1):
                table.setdefault(".".join(parts[start:]), []).append(name)
        return table

    def _resolve_name(self, name: str, names: Container[str]) -> str | None:
        if name in names:
            return name
        candidates = [c for c in self._suffixes.get(name, ()) if c in names]
        return candidates[0] if len(candidates) == 1 else None

    def function(self, name: str) -> FunctionFacts | None:
        return self._definition(name, "functions")

    def class_named(self, name: str) -> ClassFacts | None:
        return self._definition(name, "classes")

    # functions whose keywords reach torch's checkpoint (`ckptlint.model.forwarding`) -----

    @cached_property
    def forwarding(self) -> dict[str, ForwardingFact]:
        """Helpers and decorators by name, and the functions decorated by a project decorator
        when one of the decorators is such (timm's thousand `@register_model` functions are
        not loaded when none is)."""
        found = {
            f.name: f for _, facts in self._files_of_kind(FORWARDING_KIND) for f in facts.forwarding
            if f.kind is not ForwardingKind.DECORATED
        }
        if any(f.kind is ForwardingKind.DECORATOR for f in found.values()):
            found.update(
                (f.name, f) for _, facts in self._files_of_kind(DECORATED_KIND) for f in facts.forwarding
                if f.kind is ForwardingKind.DECORATED
            )
        return found

    def forwarding_target(self, name: str) -> tuple[ForwardingFact, ForwardingFact | None] | None:
        """Calling project function `name` hands its `**kwargs` to torch's checkpoint without
        `use_reentrant`: the helper (or the decorator whose wrapper does), and the decorated
        function when `name` is one."""
        if not self.forwarding:
            return None
        fact = self._definition(name, "forwarding")
        if fact is not None and fact.kind is ForwardingKind.HELPER:
            return fact, None
        if fact is not None and fact.kind is ForwardingKind.DECORATED:
            decorator = self._definition(fact.via, "forwarding")
            if decorator is not None and decorator.kind is ForwardingKind.DECORATOR:
                return decorator, fact
        return None

    @cached_property
    def forwarding_words(self) -> frozenset[str]:
        """The names (last component) under which the project's code calls a function whose
        keywords reach torch's checkpoint: a file naming none of them calls none."""
        return frozenset(
            name.rsplit(".", 1)[-1] for name in self.forwarding if self.forwarding_target(name) is not None
        )

    def mentions_forwarding(self, text: str) -> bool:
        """Whether `text` may call one of them (a cheap test on the text, before any parse)."""
        return any(f"{word}(" in text for word in self.forwarding_words)

    def calls_forwarding(self, relative_path: str) -> bool:
        """Whether the file (its facts in the index) names, by import or definition, a
        function whose keywords reach torch's checkpoint, or defines a class inheriting one
        as a method."""
        facts = self.files.get(relative_path)
        if facts is None or not self.forwarding:
            return False
        if any(self.forwarding_target(absolute) is not None for _, absolute in facts.names):
            return True
        return any(
            self.forwarding_target(f"{ancestor}.{word}") is not None
            for cls in facts.classes for ancestor in self.ancestors(cls.name) for word in self.forwarding_words
        )

    def function_summary(self, name: str) -> FunctionSummary | None:
        """The summary of project function `name`, also of one with no facts (`def
        count_parameters(model): ...` does nothing the facts record to what it is given):
        found in its module's file, through a package `__init__`'s re-export, or without
        leading package parts (a `src.` its imports write)."""
        parts = name.split(".")
        for start in range(len(parts) - 1):
            found = self._summary_named(".".join(parts[start:]))
            if found is not None:
                return found
        return None

    def _summary_named(self, name: str, _hops: int = 0) -> FunctionSummary | None:
        facts = self.facts_of(name)
        if facts is None:
            return None
        found = next((summary for summary in facts.summaries if summary.name == name), None)
        if found is not None:
            return found
        rest = name[len(facts.module) + 1 :] if name.startswith(f"{facts.module}.") else ""
        head = rest.split(".", 1)[0]
        imported = dict(facts.names).get(head) if head else None
        if imported is None or imported == f"{facts.module}.{head}" or _hops >= 4:
            return None
        return self._summary_named(imported + rest[len(head) :], _hops + 1)

    def _definition(self, name: str, kind: str, _hops: int = 0):
        """The function or class (`kind`) a name refers to: found in its module's file, or
        where that module imports it from (a package's `__init__` re-exporting it), else, for
        a name that may be the project's written differently, among every file's."""
        facts = self.facts_of(name)
        found = next((d for d in getattr(facts, kind) if d.name == name), None) if facts is not None else None
        if found is None and facts is not None and _hops < 4:
            rest = name[len(facts.module) + 1 :] if name.startswith(f"{facts.module}.") else ""
            head = rest.split(".", 1)[0]
            imported = dict(facts.names).get(head) if head else None
            if imported is not None and imported != f"{facts.module}.{head}":
                found = self._definition(imported + rest[len(head):], kind, _hops + 1)
        if found is not None or not self._may_name_the_project(name):
            return found
        everything = getattr(self, kind)
        resolved = self._resolve_name(name, everything)
        return everything.get(resolved) if resolved else None

    def _may_name_the_project(self, name: str) -> bool:
        """Whether a name its module does not resolve may still be the project's, written
        differently (`helpers.f` for `scripts/helpers.py`, a `src/` layout): it starts with
        a component of a project module's name. `torch.nn.BatchNorm2d` in a project that is
        not torch does not, and is never looked up in every file's facts."""
        return name.split(".", 1)[0] in self._module_components

    @cached_property
    def _module_components(self) -> frozenset[str]:
        return frozenset(part for module in self.module_paths for part in module.split("."))

    def facts_of(self, name: str) -> FileFacts | None:
        """The facts of the file an absolute name is defined in (`pkg.mod.Class.method` ->
        `pkg/mod.py`), found by its module without loading any other file."""
        path = self.path_of(name)
        return self.files.get(path) if path is not None else None

    @cached_property
    def module_paths(self) -> dict[str, str]:
        """Module name -> relative path, for every file of the project."""
        return {module_name(path): path for path in self.files}

    def ancestors(self, name: str) -> list[str]:
        """The class and its bases defined in the project (and external bases by name)."""
        found: list[str] = []
        pending = [name]
        while pending and len(found) < 64:
            current = pending.pop()
            facts = self.class_named(current)
            resolved = facts.name if facts else current
            if resolved in found:
                continue
            found.append(resolved)
            if facts is not None:
                pending.extend(facts.bases)
        return found

    @cached_property
    def training_arguments_classes(self) -> frozenset[str]:
        """transformers' and TRL's argument classes, and the project's subclasses of them."""
        known = set(TRAINING_ARGUMENTS_CLASSES)
        changed = True
        while changed:
            changed = False
            for cls in self.classes.values():
                if cls.name not in known and any(b in known or self._resolve_name(b, known) for b in cls.bases):
                    known.add(cls.name)
                    changed = True
        return frozenset(known)

    def is_training_arguments(self, name: str) -> bool:
        known = self.training_arguments_classes
        if name in known:
            return True
        facts = self.class_named(name)
        return facts is not None and facts.name in known

    @cached_property
    def wrapped_classes(self) -> tuple[tuple[str, WrappedClass], ...]:
        """(relative path, entry) for every class wrapped for activation checkpointing."""
        return tuple(
            sorted(((path, w) for path, facts in self._files_of_kind(WRAPS_KIND) for w in facts.wrapped_classes),
                   key=lambda item: (item[0], item[1].line))
        )

    def wrapping_of(self, class_name: str) -> tuple[str, WrappedClass] | None:
        """Where instances of `class_name` (or of one of its bases) get checkpoint-wrapped."""
        if not self.wrapped_classes:
            return None
        lineage = self.ancestors(class_name)
        simple = {name.rsplit(".", 1)[-1] for name in lineage}
        for path, wrapped in self.wrapped_classes:
            resolved = self._resolve_name(wrapped.name, self.classes) or wrapped.name
            if resolved in lineage or ("." not in wrapped.name and wrapped.name in simple):
                return path, wrapped
        return None

    def class_method(self, name: str, method: str) -> MethodFacts | None:
        for ancestor in self.ancestors(name):
            facts = self.class_named(ancestor)
            for candidate in facts.methods if facts is not None else ():
                if candidate.name == method:
                    return candidate
        return None

    @cached_property
    def checkpoint_wrappers(self) -> tuple[str, ...]:
        """The project's functions that run one of their parameters under torch's checkpoint."""
        return tuple(
            sorted(f.name for _, facts in self._files_of_kind(CHECKPOINTING_KIND) for f in _checkpointing_functions(facts))
        )

    def checkpointed_parameter(self, name: str) -> int | None:
        """For a project function that hands one of its parameters to torch's checkpoint as
        the function to run (timm's `checkpoint_seq`, fairseq's `checkpoint_wrapper`-style
        helpers): that parameter's position."""
        facts = self.function(name)
        if facts is None:
            return None
        for event in facts.events:
            if event.kind is EventKind.RUNS_CHECKPOINTED and event.target in facts.parameters:
                return facts.parameters.index(event.target)
        return None

    def parameter_effects(
        self, name: str, parameter: str | int, site: tuple[str, int] | None = None, _seen: frozenset[str] = frozenset()
    ) -> list[ParameterEffect]:
        """What calling project function `name` does to the object passed as `parameter`
        (a position or a keyword), following calls to other project functions. `site`, the
        calling function and the line of the call, decides what depends on the call's other
        arguments (the checkpoint wrapper a `wrapper` parameter is given)."""
        facts = self.function(name)
        if facts is None or facts.name in _seen or len(_seen) > 16:
            return []
        if isinstance(parameter, int):
            if parameter >= len(facts.parameters):
                return []
            parameter = facts.parameters[parameter]
        elif parameter not in facts.parameters:
            return []
        path = self.path_of(facts.name)
        effects: list[ParameterEffect] = []
        names = {parameter}
        for event in facts.events:
            if event.kind is EventKind.ALIAS:
                if event.source in names:
                    names.add(event.target)
                elif event.target in names:
                    names.discard(event.target)
                continue
            if event.target not in names:
                continue
            if event.kind is EventKind.CALL:
                effects.extend(
                    self.parameter_effects(event.callee, event.parameter, (facts.name, event.line), _seen | {facts.name})
                )
            elif event.kind in (EventKind.CHECKPOINT, EventKind.FSDP1, EventKind.FSDP2, EventKind.HF_GC):
                impl, impl_from = event.impl, ""
                if event.wrapper_parameter:
                    impl, impl_from = self._wrapper_at(facts.name, event.wrapper_parameter, site)
                effects.append(ParameterEffect(event.kind, impl, event.auto_wrap, path, event.line, facts.name, impl_from))
        return effects

    def _wrapper_at(self, function: str, parameter: str, site: tuple[str, int] | None) -> tuple[Impl, str]:
        """The implementation of the checkpoint wrapper that `function`'s `parameter` is
        given at the call `site` (its default where the call passes none), and how that was
        decided, for a message."""
        if site is None:
            return Impl.UNKNOWN, ""
        caller, line = site
        values, passed = self.denotation.passed_at_call(function, parameter, caller, line)
        impl = _wrapper_impl(values)
        if passed:
            return impl, f"the `{parameter}` passed at {self.path_of(caller)}:{line}"
        return impl, f"the default of `{function.rsplit('.', 1)[-1]}`'s `{parameter}`"

    def model_fate(self, function: str, name: str, after: int) -> ModelFate:
        """Where the Hugging Face model `name` of project function `function` goes from line
        `after` on (`ckptlint.model.fates`)."""
        from ckptlint.model.fates import model_fate

        return model_fate(self, function, name, after)

    def returned_model(self, function: str, position: int = -1) -> ReturnedModel | None:
        """The Hugging Face model a project function returns, as its code says."""
        from ckptlint.model.fates import returned_model

        return returned_model(self, function, position)

    def handed_model(self, function: str, parameter: str | int) -> HandedModel:
        """What project function `function` does to a Hugging Face model passed to it as
        `parameter` (`ckptlint.model.fates`)."""
        from ckptlint.model.fates import handed_model

        return handed_model(self, function, parameter)

    def passed_models(self, function: str, parameter: str) -> list:
        """The Hugging Face models the project passes to `function` for `parameter`, with
        the calls that pass them (`ckptlint.model.fates`)."""
        from ckptlint.model.fates import passed_models

        return passed_models(self, function, parameter)

    @cached_property
    def call_sites(self) -> CallSites:
        """Where the project calls a function (`ckptlint.model.callers`): one table of which
        file names what, shared by the evaluator and the model-fate queries."""
        from ckptlint.model.callers import CallSites

        return CallSites(self)

    @cached_property
    def denotation(self) -> Denotation:
        """What expressions of the project's code denote (`ckptlint.model.denotation`)."""
        from ckptlint.model.denotation import Denotation

        return Denotation(self)

    @cached_property
    def fingerprint(self) -> str:
        return self.known_fingerprint or self.computed_fingerprint()

    def computed_fingerprint(self) -> str:
        """What other files can observe of the project: FSDP use, wrapped classes, classes
        and their bases (not their lines), and what functions do to their parameters. A
        result cached for one file stays valid while this is unchanged, so editing an
        ordinary model file does not invalidate every other file's result."""
        return fingerprint_of((path, exported_digest(self.files[path])) for path in self.files)

    def with_file(self, relative_path: str, text: str) -> ProjectIndex:
        """The index with one file's facts taken from `text` (the version being linted, which
        a rule has found worth analysing: no trigger-word prefilter)."""
        from ckptlint.model.extraction import extract_facts, worth_indexing

        if self.digests.get(relative_path) == text_digest(text) and worth_indexing(text, relative_path):
            return self  # indexed from this very text, without the prefilter skipping it
        facts = extract_facts(text, relative_path, prefilter=False)
        if self.files.get(relative_path) == facts:
            return self
        files_with = None
        if self.files_with is not None:
            files_with = dict(self.files_with)
            for kind in cross_file_kinds(facts, relative_path):
                files_with[kind] = files_with.get(kind, frozenset()) | {relative_path}
        return ProjectIndex(self.root, _Overlay(self.files, relative_path, facts), self.digests, files_with=files_with)


class _Overlay(Mapping):
    """The facts of a project with one file's replaced, without loading the others."""

    def __init__(self, files: Mapping[str, FileFacts], key: str, facts: FileFacts) -> None:
        self._files, self._key, self._facts = files, key, facts

    def __getitem__(self, key: str) -> FileFacts:
        return self._facts if key == self._key else self._files[key]

    def __iter__(self):
        yield from self._files
        if self._key not in self._files:
            yield self._key

    def __len__(self) -> int:
        return len(self._files) + (self._key not in self._files)

    def __contains__(self, key: object) -> bool:
        return key == self._key or key in self._files

    def __reduce__(self):
        return (dict, (dict(self.items()),))


def _wrapper_impl(values: Iterable) -> Impl:
    """The implementation the wrapper functions `values` select: `checkpoint_wrapper`
    (non-reentrant by default) or a `partial` of it binding `checkpoint_impl`; UNKNOWN
    unless every value is one of those and they agree."""
    impls = set()
    for value in values:
        if not isinstance(value, FunctionRef) or value.name not in CHECKPOINT_WRAPPER or value.positional:
            return Impl.UNKNOWN
        chosen = dict(value.bound).get("checkpoint_impl")
        if chosen is None:
            impls.add(Impl.NON_REENTRANT)
            continue
        names = {v.name if isinstance(v, ClassRef) else None for v in chosen}
        impls.add(
            Impl.REENTRANT if names == {CHECKPOINT_IMPL_REENTRANT}
            else Impl.NON_REENTRANT if names == {CHECKPOINT_IMPL_NO_REENTRANT}
            else Impl.UNKNOWN
        )
    return impls.pop() if len(impls) == 1 else Impl.UNKNOWN
