"""The project index: every file's facts (`ckptlint.model.project.project_facts`), the call graph,
the project-wide queries (where FSDP is used and which files a use reaches, torch's
checkpoint under the project's names, functions whose keywords reach it) and the evaluator
with what it answers across files (what an expression denotes, what a project function
does to the objects passed to it, where a Hugging Face model goes). What rules ask, as
`self.context.project`."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING

from ckptlint.model.project.alias_queries import CHECKPOINT_IMPORT_KIND, REEXPORT_KIND, AliasQueries, returns_checkpoint
from ckptlint.model.file_facts.facts import EventKind, FileFacts, ForwardingKind, Impl, ParameterEffect, text_digest
from ckptlint.model.project.deepspeed_queries import (
    DEEPSPEED_CONSUMER_KIND, DEEPSPEED_WIRING_KIND, DeepSpeedQueries, hands_on_deepspeed_configs,
)
from ckptlint.model.project.forwarding_queries import DECORATED_KIND, FORWARDING_KIND, ForwardingQueries
from ckptlint.model.project.ddp_queries import DDP_KIND, DdpQueries
from ckptlint.model.project.fsdp_queries import FSDP_KIND, LAUNCH_KIND, FsdpQueries
from ckptlint.model.library.torch import (
    CHECKPOINT_IMPL_NO_REENTRANT, CHECKPOINT_IMPL_REENTRANT, CHECKPOINT_WRAPPER, TORCH_CHECKPOINT_FUNCTIONS,
)
from ckptlint.model.project.norm_freezing_queries import NORM_FREEZING_KIND, freezes_batchnorm
from ckptlint.model.project.freezing_queries import FREEZING_KIND, FreezingQueries, freezes_parameters
from ckptlint.model.project.project_facts import (
    CHECKPOINTING_KIND,
    HF_CHECKPOINTING_KIND,
    OPTIONS_KIND,
    RECOMPUTE_KIND,
    REGISTRY_KIND,
    WRAPS_KIND,
    OverlaidFacts,
    ProjectFacts,
    checkpointing_functions,
)
from ckptlint.model.form.values import ClassRef, FunctionRef
from ckptlint.model.project.reads import changed_keys, contributions, derived_tables, tracked_cached_property

if TYPE_CHECKING:  # the evaluator and the extraction are imported where used: a warm run needs neither
    from ckptlint.model.syntax.parsed_text import ParsedText
    from ckptlint.model.project.call_sites import CallSites
    from ckptlint.model.evaluation.denotation import Denotation
    from ckptlint.model.evaluation.fates import HandedModel, ModelFate, ReturnedModel


def cross_file_kinds(facts: FileFacts, relative_path: str = "") -> list[str]:
    """The kinds of facts that project-wide queries collect from every file holding them."""
    kinds = []
    if facts.wrapped_classes:
        kinds.append(WRAPS_KIND)
    if facts.fsdp or facts.fsdp_argument_calls:
        kinds.append(FSDP_KIND)
    if checkpointing_functions(facts):
        kinds.append(CHECKPOINTING_KIND)
    if facts.options:
        kinds.append(OPTIONS_KIND)
    if facts.registrars or facts.registrations:
        kinds.append(REGISTRY_KIND)
    if freezes_batchnorm(facts):
        kinds.append(NORM_FREEZING_KIND)
    if any(absolute in TORCH_CHECKPOINT_FUNCTIONS for _, absolute in facts.names) or returns_checkpoint(facts):
        kinds.append(CHECKPOINT_IMPORT_KIND)
    if relative_path.endswith("__init__.py") and any(
        absolute != f"{facts.module}.{local}" for local, absolute in facts.names
    ):
        kinds.append(REEXPORT_KIND)
    if any(call.reads or call.callable for c in facts.classes for m in c.methods for call in m.checkpoints):
        kinds.append(RECOMPUTE_KIND)
    if any(f.kind is not ForwardingKind.DECORATED for f in facts.forwarding):
        kinds.append(FORWARDING_KIND)
    if any(f.kind is ForwardingKind.DECORATED for f in facts.forwarding):
        kinds.append(DECORATED_KIND)
    if any(e.kind is EventKind.HF_GC for f in facts.functions for e in f.events):
        kinds.append(HF_CHECKPOINTING_KIND)
    if facts.launches or facts.parallel_launches or facts.checkpointing_launches:
        kinds.append(LAUNCH_KIND)
    if facts.ddp:
        kinds.append(DDP_KIND)
    if freezes_parameters(facts):
        kinds.append(FREEZING_KIND)
    if facts.deepspeed_wiring:
        kinds.append(DEEPSPEED_WIRING_KIND)
    if hands_on_deepspeed_configs(facts):
        kinds.append(DEEPSPEED_CONSUMER_KIND)
    return kinds


@dataclass
class ProjectIndex(ProjectFacts, AliasQueries, ForwardingQueries, FsdpQueries, DdpQueries, DeepSpeedQueries, FreezingQueries):
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
                elif event.wrapper_local:
                    impl, impl_from = self.local_wrapper_at(facts.name, event.wrapper_local, event.line, site)
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

    def local_wrapper_at(self, function: str, local: str, line: int, site: tuple[str, int] | None) -> tuple[Impl, str]:
        """The implementation of the checkpoint wrapper bound to `function`'s local `local`
        where it is used on `line` (`wrapper = partial(checkpoint_wrapper, checkpoint_impl=impl)`
        with `impl = REENTRANT if reentrant else NO_REENTRANT`), with what the call `site`
        passes (the function looked at on its own without one), and how that was decided."""
        values = self.denotation.evaluate_in_call(function, ("name", local), line, site)
        impl = _wrapper_impl(values)
        if impl is Impl.UNKNOWN:
            return impl, ""
        where = f"as called at {self.path_of(site[0])}:{site[1]}" if site is not None else "by default"
        return impl, f"`{local}` in `{function.rsplit('.', 1)[-1]}`, {where}"

    def returns_parameter(self, function: str, parameter: str | int) -> bool:
        """Whether a project function returns (on every path it returns something) one of its
        parameters, by name or position: `def apply_ac(model): ...; return model`."""
        summary = self.denotation.summary(function)
        if summary is None or not summary.returns:
            return False
        names = [p.name for p in summary.parameters if p.kind not in ("*", "**")]
        if summary.self_name is not None and names and names[0] == summary.self_name:
            names = names[1:]
        name = names[parameter] if isinstance(parameter, int) and parameter < len(names) else parameter
        return all(returned == ("name", name) for returned, _ in summary.returns)

    def model_fate(self, function: str, name: str, after: int) -> ModelFate:
        """Where the Hugging Face model `name` of project function `function` goes from line
        `after` on (`ckptlint.model.evaluation.fates`)."""
        from ckptlint.model.evaluation.fates import model_fate

        return model_fate(self.denotation, function, name, after)

    def returned_model(self, function: str, position: int = -1, arguments: tuple | None = None) -> ReturnedModel | None:
        """The Hugging Face model a project function returns, as its code says, when called
        with `arguments` (`Event.arguments`: what is known of them decides its branches)."""
        from ckptlint.model.evaluation.fates import returned_model

        return returned_model(self.denotation, function, position, arguments)

    def handed_model(self, function: str, parameter: str | int, arguments: tuple | None = None) -> HandedModel:
        """What project function `function` does to a Hugging Face model passed to it as
        `parameter`, called with `arguments` (`ckptlint.model.evaluation.fates`)."""
        from ckptlint.model.evaluation.fates import handed_model

        return handed_model(self.denotation, function, parameter, arguments)

    def passed_models(self, function: str, parameter: str) -> list:
        """The Hugging Face models the project passes to `function` for `parameter`, with
        the calls that pass them (`ckptlint.model.evaluation.fates`)."""
        from ckptlint.model.evaluation.fates import passed_models

        return passed_models(self.denotation, function, parameter)

    @cached_property
    def call_sites(self) -> CallSites:
        """Where the project calls a function (`ckptlint.model.project.call_sites`): one table of which
        file names what, shared by the evaluator and the model-fate queries."""
        from ckptlint.model.project.call_sites import CallSites

        return CallSites(self)

    @cached_property
    def denotation(self) -> Denotation:
        """What expressions of the project's code denote (`ckptlint.model.evaluation.denotation`)."""
        from ckptlint.model.evaluation.denotation import Denotation

        return Denotation(self, self.call_sites)

    @cached_property
    def fingerprint(self) -> str:
        return self.known_fingerprint or self.computed_fingerprint()

    def computed_fingerprint(self) -> str:
        """What other files can observe of the project: FSDP use, wrapped classes, classes
        and their bases (not their lines), and what functions do to their parameters. A
        result cached for one file stays valid while this is unchanged, so editing an
        ordinary model file does not invalidate every other file's result."""
        from ckptlint.model.file_facts.fingerprints import exported_digest, fingerprint_of

        return fingerprint_of((path, exported_digest(self.files[path])) for path in self.files)

    def with_file(self, relative_path: str, text: str, parsed: ParsedText | None = None) -> ProjectIndex:
        """The index with one file's facts taken from `text` (the version being linted, which
        a rule has found worth analysing: no trigger-word prefilter). `parsed`: the text's
        tree, shared with the rules' model."""
        from ckptlint.model.file_facts.extraction import extract_facts, worth_indexing

        if self.digests.get(relative_path) == text_digest(text) and worth_indexing(text, relative_path):
            return self  # indexed from this very text, without the prefilter skipping it
        facts = extract_facts(text, relative_path, prefilter=False, parsed=parsed)
        if self.files.get(relative_path) == facts:
            return self
        return ProjectIndex(
            self.root, OverlaidFacts(self._raw_files, relative_path, facts), self.digests,
            files_with=with_kinds(self.files_with, relative_path, facts),
            read_log=self.read_log, overlay_of=(self, relative_path),
        )

    @cached_property
    def _overlay_changes(self) -> frozenset[str]:
        """For an overlay (`with_file`): the keys (`ckptlint.model.project.reads`) whose answer
        differs from the base's, by the overlaid file's contributions to them."""
        from ckptlint.model.file_facts.fingerprints import exported_digest

        base, path = self.overlay_of

        def contributed(facts: FileFacts | None) -> dict[str, str] | None:
            if facts is None:
                return None
            return contributions(path, facts, exported_digest(facts), cross_file_kinds(facts, path))

        return frozenset(changed_keys(contributed(base._raw_files.get(path)), contributed(self._raw_files[path])))

    def inherited_table(self, table: tracked_cached_property) -> tuple[object, frozenset[str]] | None:
        """For an overlay (`with_file`), a derived table as the base has it (computed there
        once for every overlay made from it: the editor's index, with one buffer after
        another laid over it), when the overlaid file's edit changes none of the keys it was
        computed from and no table it read (`q:<table>`, computed for the overlay first):
        the value and keys the overlay would compute (Salsa's reuse of a query whose inputs
        are unchanged). None: the overlay computes its own."""
        if self.overlay_of is None:
            return None
        base = self.overlay_of[0]
        found = table.computed(base)
        if not self._overlay_changes.isdisjoint(found[1]):
            return None
        tables = derived_tables(type(self))
        for key in found[1]:
            if key.startswith("q:") and key[2:] in tables:
                read = tables[key[2:]]
                read.__get__(self)
                if self.__dict__.get(read.slot) is not base.__dict__.get(read.slot):
                    return None  # computed afresh here: its answer may differ
        return found

    def indexed_facts(self, relative_path: str, text: str) -> FileFacts:
        """The facts an index of `text` holds for the file (its trigger-word prefilter
        applied), read from this index once `with_file(relative_path, text)` made it."""
        from ckptlint.model.file_facts.extraction import worth_indexing
        from ckptlint.model.syntax.names import module_name

        if not worth_indexing(text, relative_path):
            return FileFacts(module_name(relative_path))
        return self.files[relative_path]


def with_kinds(
    files_with: Mapping[str, frozenset[str]] | None, relative_path: str, facts: FileFacts
) -> dict[str, frozenset[str]] | None:
    """`ProjectIndex.files_with` once the file's facts are `facts`: listed under the kinds
    they hold, and under no other."""
    if files_with is None:
        return None
    kinds = set(cross_file_kinds(facts, relative_path))
    updated = dict(files_with)
    for kind, paths in files_with.items():
        if kind not in kinds and relative_path in paths:
            updated[kind] = paths - {relative_path}
    for kind in kinds:
        paths = updated.get(kind, frozenset())
        if relative_path not in paths:
            updated[kind] = paths | {relative_path}
    return updated


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
