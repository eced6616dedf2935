"""What other files can observe of one file's facts, as a digest, and the project's
fingerprint made of them: a file's edit that changes none of it leaves every other file's
cached result valid (`ckptlint.model.index.ProjectIndex.fingerprint`)."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import replace

from ckptlint.model.file_facts.facts import HF_KINDS, EventKind, FileFacts, FunctionFacts
from ckptlint.model.library.combined import INTERPRETED_FUNCTIONS, LIBRARY_PREFIXES
from ckptlint.model.form.summary import UNKNOWN, FunctionSummary, dotted_absolute


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
    if not any(event.kind in HF_KINDS or event.kind is EventKind.HF_GC for event in function.events):
        return ()
    return (
        function.name,
        function.parameters,
        tuple(
            (e.kind, e.target, e.api, e.source, e.callee, e.parameter, e.guard, e.arguments)
            for e in function.events
            if e.kind in HF_KINDS or e.kind in (EventKind.ALIAS, EventKind.CALL, EventKind.HF_GC)
        ),
    )


_FREEZING = (EventKind.FREEZES_PARAMETERS, EventKind.UNFREEZES_PARAMETERS)


def _freezing_events(function: FunctionFacts) -> tuple:
    """What a function does to modules' `requires_grad`, as CKPT007 observes it from the
    module's file: without lines (a finding citing one reads the function's `fn:`)."""
    events = tuple((e.kind, e.target, e.api, e.source) for e in function.events if e.kind in _FREEZING)
    return (function.name, events) if events else ()


def exported_digest(facts: FileFacts) -> str:
    """The part of a file's facts other files can observe (see `ProjectIndex.fingerprint`)."""
    observable = _Observable(dict(facts.names))
    exported = (
        facts.fsdp,
        facts.wrapped_classes,
        facts.fsdp_argument_calls,
        tuple(replace(c, line=0) for c in facts.classes),
        tuple(_parameter_events(f) for f in facts.functions if f.parameters),
        tuple(_model_events(f) for f in facts.functions),
        tuple(_freezing_events(f) for f in facts.functions),
        facts.names,
        facts.star_imports,
        facts.options,
        facts.registrars,
        facts.registrations,
        tuple(replace(f, line=0, checkpoint_line=0) for f in facts.forwarding),
        facts.launches,
        facts.accelerate_fsdp,
        facts.ddp,
        facts.parallel_launches,
        facts.checkpointing_launches,
        facts.deepspeed_wiring,
        tuple(_observable_summary(s, observable) for s in facts.summaries),
    )
    return hashlib.blake2b(repr(exported).encode(), digest_size=12).hexdigest()


def _observable_summary(summary: FunctionSummary, observable: _Observable) -> tuple:
    """A summary as other files can observe it through the model: lines replaced by their
    order (only the order of bindings and calls means anything to the model, so code added
    in between leaves it equal), and what a library function returns (a tensor, to the model
    nothing) left out, so that adding `use_reentrant=False` to a `checkpoint(...)` call
    changes nothing other files see."""
    lines = sorted({b.line for b in summary.bindings} | {b.end for b in summary.bindings if b.end}
                   | {line for _, line in summary.calls} | {line for _, line in summary.passes})
    rank = {line: position for position, line in enumerate(lines)}
    bindings = []
    for b in summary.bindings:
        value = observable(b.value)
        if value != UNKNOWN:
            bindings.append((b.pattern, b.how, value, rank[b.line], rank.get(b.end, 0), b.conditions))
    returns = []
    for returned, conditions in summary.returns:
        value = observable(returned)
        if value != UNKNOWN:
            returns.append((value, conditions))
    return (
        summary.name,
        summary.parameters,
        tuple(bindings),
        tuple(returns),
        tuple((callee, rank[line]) for callee, line in summary.calls),
        summary.self_name,
        summary.nested,
        tuple((observable(call), rank[line]) for call, line in summary.passes),
    )


class _Observable:
    """Expressions of one file with the library calls in them made unknown. Whether a
    callee is a library function is decided once per callee; an expression without one is
    itself (nothing rebuilt)."""

    def __init__(self, names: dict[str, str]) -> None:
        self._names = names
        self._library: dict[tuple, bool] = {}

    def __call__(self, expr):
        if not isinstance(expr, tuple) or not expr:
            return expr
        if expr[0] == "call":
            callee = expr[1]
            library = self._library.get(callee)
            if library is None:
                library = self._library[callee] = _library_function(callee, self._names)
            if library:
                return UNKNOWN
        parts = [self(part) if isinstance(part, tuple) else part for part in expr]
        if all(new is old for new, old in zip(parts, expr)):
            return expr
        return tuple(parts)


def _library_function(callee: tuple, names: dict[str, str]) -> bool:
    """A call of a library function the model does not interpret (its result is nothing to it)."""
    absolute = dotted_absolute(callee, names)
    if absolute is None:
        return False
    short = absolute.rsplit(".", 1)[-1]
    return absolute.startswith(LIBRARY_PREFIXES) and not short[:1].isupper() and absolute not in INTERPRETED_FUNCTIONS


def fingerprint_of(exported: Iterable[tuple[str, str]]) -> str:
    """The project's fingerprint from each file's `exported_digest`."""
    digest = hashlib.blake2b(digest_size=12)
    for path, piece in sorted(exported):
        digest.update(f"{path}\0{piece}\0".encode())
    return digest.hexdigest()
