"""Where a Hugging Face model goes after a line of the project, and what a project function
returns: the cross-file half of the CKPT020 / CKPT021 analysis.

`ckptlint.model.script_models` follows a model through one file. When it leaves the file (it
is returned by a helper that other modules call, or handed to a project function of another
module) these queries follow it through the `hf_events` of the functions it reaches:
callees it is passed to, callers it is returned to, and the other methods of a class that
keeps it in `self.<attr>`. Whatever the model reaches that the index cannot see into (a
function of a library it does not know, a function not indexed) makes the fate `unknown`,
and the rules stay silent about it; a project function with no facts at all does nothing to
it. `handed_model` says what one project function does to a model passed to it, for the
interpreter to go on with the model in the caller.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from typing import TYPE_CHECKING

from ckptlint.model.file_facts.facts import Event, EventKind, FunctionFacts
from ckptlint.model.file_facts.hf_events import PASSED_RESULT, RETURNED_VALUE, SUPER_CALL
from ckptlint.model.evaluation.call_targets import Callee, called_functions, class_methods, method_order, super_method

if TYPE_CHECKING:
    from ckptlint.model.evaluation.denotation import Denotation
    from ckptlint.model.project.project_facts import ProjectFacts
    from ckptlint.model.form.summary import FunctionSummary

_MAX_FUNCTIONS = 64  # functions visited by one query
_MAX_CANDIDATES = 16  # classes or functions a call may run, each followed (`_Walk._call`)

Arguments = tuple[tuple[str | int, bool | str | None], ...]  # `Event.arguments`
Known = tuple[tuple[str, bool], ...]  # parameters' truth, as `Event.guard` needs it


@dataclass(frozen=True, order=True)
class Site:
    path: str
    line: int
    function: str  # absolute

    def __str__(self) -> str:
        # Named by function, not line: other files' cached results stay valid while code
        # moves around it (see `ckptlint.model.index._model_events`).
        return f"`{self.function.rsplit('.', 1)[-1]}` in {self.path}"


@dataclass(frozen=True)
class ModelFate:
    """What happens to a model from a point of the project on, in every function it reaches."""

    trained: tuple[Site, ...] = ()  # the `.backward(` of a function that runs it (or a training_step)
    trainers: tuple[tuple[Site, str], ...] = ()  # handed to a trainer (its class)
    cache_off: tuple[Site, ...] = ()
    input_grads: tuple[Site, ...] = ()
    unknown: tuple[Site, ...] = ()  # handed to code not visible to the index
    peft: tuple[Site, ...] = ()  # wrapped by `get_peft_model`
    checkpointing: tuple[Site, ...] = ()  # `gradient_checkpointing_enable()` called on it

    @property
    def trained_by_hand(self) -> bool:
        return bool(self.trained) and not self.trainers


@dataclass(frozen=True)
class HandedModel:
    """What a project function does to a model passed to it, across the functions it
    reaches: where it trains it, turns its cache off, wraps it (`fate`), whether it keeps it
    (`self.<attr>`) and whether it returns it as its value."""

    fate: ModelFate
    returned: bool = False
    kept: bool = False

    @property
    def leaves(self) -> bool:
        """Whether the model's story goes on out of the caller's sight: trained or
        checkpointed there, kept, or handed to code the index cannot see."""
        fate = self.fate
        return bool(fate.trained or fate.trainers or fate.unknown or fate.checkpointing or self.kept)


@dataclass(frozen=True)
class ReturnedModel:
    """The model a project function returns, as far as its own code and its callees say."""

    model_class: str  # absolute (`transformers.AutoModelForCausalLM`)
    quantized: bool
    site: Site  # where it is loaded
    cache_off: bool
    input_grads: bool
    peft: bool
    checkpointing: bool  # gradient checkpointing enabled on it before it is returned
    remote_code: bool = False  # loaded with `trust_remote_code=True`


@dataclass
class _Walk:
    denotation: Denotation
    seen: set = field(default_factory=set)
    # Whether each followed (function, names, ...) runs the model, once known: a function
    # reached again (a sibling method through another) answers as it did.
    runs: dict = field(default_factory=dict)
    trained: list = field(default_factory=list)
    trainers: list = field(default_factory=list)
    cache_off: list = field(default_factory=list)
    input_grads: list = field(default_factory=list)
    unknown: list = field(default_factory=list)
    peft: list = field(default_factory=list)
    checkpointing: list = field(default_factory=list)

    @property
    def index(self) -> ProjectFacts:
        return self.denotation.index

    def fate(self) -> ModelFate:
        return ModelFate(*(tuple(sorted(set(items))) for items in
                           (self.trained, self.trainers, self.cache_off, self.input_grads, self.unknown, self.peft,
                            self.checkpointing)))

    def follow(
        self,
        function: FunctionFacts,
        names: set[str],
        after: int,
        *,
        callers: bool = True,
        training: bool = True,
        known: Known = (),
        instance: str | None = None,
    ) -> bool:
        """Follow the model named `names` in `function` from line `after` on; whether the
        function (or a callee given the model) runs it. Before `after`, only what prepares
        it counts (a helper given it earlier may have turned the cache off); with
        `training` off, where it is trained is not recorded (that helper ran before).
        `known`: the truth of parameters the call decides; what their branches not taken
        do does not happen. `instance`: the class of the object a method runs on, when
        known (a constructor's): its methods are those `self.<method>` finds."""
        key = (function.name, frozenset(names), after, training, known, instance)
        if key in self.seen or len(self.seen) >= _MAX_FUNCTIONS:
            return self.runs.get(key, False)
        self.seen.add(key)
        path = self.index.path_of(function.name) or "?"
        names = _aliases(function, names)
        runs = False
        backward: list[int] = []
        for event in function.events:
            if ruled_out(event, known):
                continue
            here = Site(path, event.line, function.name)
            if event.kind is EventKind.BACKWARD:
                backward.append(event.line)
            if event.target not in names:
                continue
            if event.kind is EventKind.USE_CACHE_OFF:
                self.cache_off.append(here)
            elif event.kind in (EventKind.INPUT_GRADS, EventKind.KBIT):
                self.input_grads.append(here)
            elif event.kind is EventKind.PEFT:
                self.peft.append(here)
            if event.line < after:
                if event.kind is EventKind.CALL:
                    self._call(event, here, training=False, caller=known, instance=instance)
                continue
            if event.kind is EventKind.FORWARD:
                runs = True
            elif event.kind is EventKind.HF_GC:
                self.checkpointing.append(here)
            elif event.kind is EventKind.TRAINER and training:
                self.trainers.append((here, event.api))
            elif event.kind is EventKind.CALL:
                runs |= self._call(event, here, training=training, caller=known, instance=instance)
            elif event.kind is EventKind.RETURNED and callers:
                self._callers(function, event.parameter)
        self.runs[key] = runs
        if runs and backward and training:
            self.trained.append(Site(path, backward[0] or function_line(function), function.name))
        if any(name.startswith("self.") for name in names):
            self._siblings(function, {name for name in names if name.startswith("self.")}, instance)
        if callers and names & set(function.parameters):
            # A model passed in lives on in each caller after the call.
            for caller, event in calls_of(self.denotation, function.name):
                if event.kind is EventKind.CALL and _parameter(function, event.parameter) in names:
                    self.follow(caller, {event.target}, event.line)
        return runs

    def _call(self, event: Event, here: Site, *, training: bool, caller: Known = (), instance: str | None = None) -> bool:
        """The model passed to a project function: followed into it (unknown where the
        index cannot see it). Where the call runs one of several (a class picked at run
        time), each is followed on its own: the model is trained (and runs) only where every
        one of them trains it; what any of them does besides (turns its cache off, hands it
        on out of sight) may happen."""
        if SUPER_CALL in event.callee:
            candidates = super_method(self.index, event.callee, instance)
            if candidates == ():
                return False  # `object.__init__`: takes nothing
        else:
            candidates = called_functions(self.denotation, event.callee)
        if candidates is None or len(candidates) > _MAX_CANDIDATES:
            self.unknown.append(here)
            return False
        if len(candidates) > 1:
            # Not one that cannot take the argument: the call would raise `TypeError` there.
            candidates = tuple(c for c in candidates if _accepts(self.index.function_summary(c.function), event.parameter))
        if not candidates:
            self.unknown.append(here)
            return False
        if len(candidates) == 1:
            return self._follow_call(candidates[0], event, here, training, caller)
        walks = [_Walk(self.denotation) for _ in candidates]
        runs = [walk._follow_call(callee, event, here, training, caller) for walk, callee in zip(walks, candidates)]
        every_trains = all(walk.trained for walk in walks)
        for walk in walks:
            for mine, theirs in ((self.trainers, walk.trainers), (self.cache_off, walk.cache_off),
                                 (self.input_grads, walk.input_grads), (self.unknown, walk.unknown),
                                 (self.peft, walk.peft), (self.checkpointing, walk.checkpointing)):
                mine.extend(theirs)
            if every_trains:
                self.trained.extend(walk.trained)
        return all(runs)

    def _follow_call(self, callee: Callee, event: Event, here: Site, training: bool, caller: Known) -> bool:
        facts = self.index.function(callee.function)
        if facts is None:
            summary = self.index.function_summary(callee.function)
            if summary is None or not _takes(summary, event.parameter):
                self.unknown.append(here)
            return False  # a project function with no facts does nothing to a model
        parameter = _parameter(facts, event.parameter)
        known = known_parameters(self.index, facts.name, event.arguments, caller)
        return parameter is not None and self.follow(
            facts, {parameter}, 0, callers=False, training=training, known=known, instance=callee.instance
        )

    def _siblings(self, function: FunctionFacts, names: set[str], instance: str | None = None) -> None:
        """`self.model = model` in one method, trained in another of the object's class (or
        one it inherits): the loop itself, or one that runs backward on what a method running
        the model computes (`loss = self.compute_loss(batch)` then `loss.backward()`, where
        `compute_loss` runs `self.model(**batch)`). The object's class is `instance` where
        known (a subclass built with its base's constructor), else the method's own."""
        owner = function.name.rsplit(".", 1)[0]
        if self.index.class_named(owner) is None:
            return
        order = method_order(self.index, instance) if instance is not None else []
        own = function.name.rsplit(".", 1)[1]
        methods = [
            method for method in class_methods(self.index, order if owner in order else method_order(self.index, owner))
            if method.name.rsplit(".", 1)[1] != own
        ]
        running = {
            method.name.rsplit(".", 1)[1] for method in methods
            if self.follow(method, names, 0, callers=False, instance=instance)
        }
        if not running:
            return
        for method in methods:
            backward = [event.line for event in method.events if event.kind is EventKind.BACKWARD]
            summary = self.index.function_summary(method.name) if backward else None
            if summary is not None and any(
                callee[:2] == ("attr", ("name", summary.self_name)) and callee[2] in running for callee, _ in summary.calls
            ):
                self.trained.append(Site(self.index.path_of(method.name) or "?", backward[0], method.name))

    def _callers(self, function: FunctionFacts, index: int) -> None:
        """The model returned to each caller: followed there from the call on."""
        for caller, event in calls_of(self.denotation, function.name):
            if event.kind is EventKind.RESULT and event.parameter == index:
                self.follow(caller, {event.target}, event.line)


def function_line(function: FunctionFacts) -> int:
    return min((e.line for e in function.events if e.line), default=0)


def model_fate(denotation: Denotation, function: str, name: str, after: int) -> ModelFate:
    """What happens to the model `name` holds in project function `function` from line
    `after` on, across the project."""
    index = denotation.index
    facts = index.function(function)
    walk = _Walk(denotation)
    if facts is None:
        return ModelFate(unknown=(Site(index.path_of(function) or "?", after, function),))
    walk.follow(facts, {name}, after)
    return walk.fate()


def handed_model(
    denotation: Denotation,
    function: str,
    parameter: str | int,
    arguments: Arguments | None = None,
    _seen: frozenset[str] = frozenset(),
) -> HandedModel:
    """What project function `function` does to a Hugging Face model passed to it as
    `parameter` (a position or a keyword), from its events and those of the functions it
    passes the model to, called with `arguments` (`Event.arguments`; None: not known). A
    function of the project with no facts does nothing to it; one the index cannot see (a
    library's, not indexed) or a parameter it cannot name (`**kwargs`) is `unknown`."""
    index = denotation.index
    here = Site(index.path_of(function) or "?", 0, function)
    candidates = called_functions(denotation, function)
    if candidates is None or len(candidates) > _MAX_CANDIDATES:
        return HandedModel(ModelFate(unknown=(here,)))
    if len(candidates) > 1:
        return _merged([handed_model(denotation, c.function, parameter, arguments, _seen) for c in candidates])
    (callee,) = candidates
    function = callee.function
    facts = index.function(function)
    if facts is None:
        summary = index.function_summary(function)
        return HandedModel(ModelFate() if summary is not None and _takes(summary, parameter) else ModelFate(unknown=(here,)))
    name = _parameter(facts, parameter)
    if name is None or facts.name in _seen:
        return HandedModel(ModelFate(unknown=(here,)))
    walk = _Walk(denotation)
    known = known_parameters(index, facts.name, arguments)
    walk.follow(facts, {name}, 0, callers=False, known=known, instance=callee.instance)
    if len(walk.seen) >= _MAX_FUNCTIONS:
        return HandedModel(ModelFate(unknown=(here,)))  # not followed to the end
    names = _aliases(facts, {name})
    passed = {(e.line, e.callee): e.parameter for e in facts.events if e.kind is EventKind.CALL and e.target in names}
    returned = False
    for event in facts.events:
        if ruled_out(event, known):
            continue
        if event.kind is EventKind.RESULT and (event.target in names or event.target == RETURNED_VALUE):
            # `model = helper(model)` / `return helper(model)`: still the model only where
            # the helper hands it back.
            position = passed.get((event.line, event.callee))
            back = (
                position is not None
                and event.parameter == -1
                and handed_model(denotation, event.callee, position, resolved(event.arguments, known), _seen | {facts.name}).returned
            )
            if event.target == RETURNED_VALUE:
                returned |= back
            elif not back:
                return HandedModel(walk.fate(), returned=False, kept=_kept(names))
        elif event.kind is EventKind.RETURNED and event.parameter == -1 and event.target in names:
            returned = True
    return HandedModel(walk.fate(), returned=returned, kept=_kept(names))


def _merged(handed: list[HandedModel]) -> HandedModel:
    """What one of several functions does to the model, not known which: everything any of
    them does (`unknown` where one cannot be followed, so the rules stay silent there); handed
    back only where each hands it back."""
    fates = [h.fate for h in handed]
    merged = ModelFate(*(tuple(sorted({item for fate in fates for item in getattr(fate, f.name)})) for f in fields(ModelFate)))
    return HandedModel(merged, returned=all(h.returned for h in handed), kept=any(h.kept for h in handed))


def _accepts(summary: FunctionSummary | None, parameter: str | int) -> bool:
    """Whether a function may be called with that argument (one with no summary may)."""
    return summary is None or any(p.kind in ("*", "**") for p in summary.parameters) or _takes(summary, parameter)


def _takes(summary: FunctionSummary, parameter: str | int) -> bool:
    """Whether a function with no facts gets the argument as a parameter of its own (not
    in `*args` / `**kwargs`, which it may hand on without an event saying so)."""
    if any(p.kind in ("*", "**") for p in summary.parameters):
        return False
    names = [p.name for p in summary.parameters if p.name != summary.self_name]
    positional = [p.name for p in summary.parameters if p.kind == "positional" and p.name != summary.self_name]
    return parameter < len(positional) if isinstance(parameter, int) else parameter in names


def _kept(names: set[str]) -> bool:
    """The model stored on an object (`self.model = model`): used later, out of the caller's sight."""
    return any(name.startswith("self.") for name in names)


def returned_model(
    denotation: Denotation,
    function: str,
    position: int = -1,
    arguments: Arguments | None = None,
    _seen: frozenset[str] = frozenset(),
) -> ReturnedModel | None:
    """The Hugging Face model project function `function` returns (at tuple `position`, -1
    for the whole value), when its code loads it or gets it from another such function;
    called with `arguments` (`Event.arguments`; None: not known)."""
    index = denotation.index
    facts = index.function(function)
    if facts is None or function in _seen:
        return None
    known = known_parameters(index, facts.name, arguments)
    events = [e for e in facts.events if not ruled_out(e, known)]
    returned = [e for e in events if e.kind is EventKind.RETURNED and e.parameter == position]
    if len(returned) != 1:
        return None
    names = _aliases(facts, {returned[0].target})
    path = index.path_of(function) or "?"
    passed = {(e.line, e.callee): e.parameter for e in events if e.kind is EventKind.CALL and e.target in names}
    found: ReturnedModel | None = None
    for event in events:
        if event.target not in names or event.line > returned[0].line:
            continue
        if event.kind is EventKind.LOADED:
            found = _loaded(event, path, function)
        elif event.kind is EventKind.RESULT:
            position = passed.get((event.line, event.callee))
            if found is not None and position is not None and event.parameter == -1:
                # `model = add_lora(model)`: the same model where the helper hands it back
                # (what it does to it counts at its `CALL`).
                if handed_model(denotation, event.callee, position, resolved(event.arguments, known), _seen | {function}).returned:
                    continue
            callee = index.function(event.callee)
            found = returned_model(denotation, callee.name, event.parameter, resolved(event.arguments, known), _seen | {function}) if callee else None
        elif found is None:
            continue
        elif event.kind is EventKind.USE_CACHE_OFF:
            found = replace(found, cache_off=True)
        elif event.kind in (EventKind.INPUT_GRADS, EventKind.KBIT):
            found = replace(found, input_grads=True)
        elif event.kind is EventKind.PEFT:
            found = replace(found, peft=True)
        elif event.kind is EventKind.HF_GC:
            found = replace(found, checkpointing=True)
        elif event.kind is EventKind.CALL:
            handed = handed_model(denotation, event.callee, event.parameter, resolved(event.arguments, known), _seen | {function})
            if handed.leaves:
                return None  # trained, kept or out of sight before it is returned
            fate = handed.fate
            found = replace(found, cache_off=found.cache_off or bool(fate.cache_off),
                            input_grads=found.input_grads or bool(fate.input_grads), peft=found.peft or bool(fate.peft))
    return found


def known_parameters(index: ProjectFacts, function: str, arguments: Arguments | None, caller: Known = ()) -> Known:
    """The truth of `function`'s parameters when called with `arguments`: a literal passed
    (or a parameter of the caller that `caller` knows the truth of), or the literal default
    of a parameter the call leaves. Nothing where the call is not known or passes `*args` /
    `**kwargs`."""
    if arguments is None or any(key == "*" for key, _ in arguments):
        return ()
    facts = index.function(function)
    if facts is not None and not any(
        event.guard or any(isinstance(value, str) for _, value in event.arguments or ()) for event in facts.events
    ):
        return ()  # nothing of it depends on its parameters' truth: its summary need not be read
    summary = index.function_summary(function)
    if summary is None:
        return ()
    parameters = [p for p in summary.parameters if p.name != summary.self_name]
    positional = [p.name for p in parameters if p.kind == "positional"]
    passed: dict[str, bool | None] = {}
    for key, truth in arguments:
        name = positional[key] if isinstance(key, int) and key < len(positional) else key
        if isinstance(name, str):
            passed[name] = dict(caller).get(truth) if isinstance(truth, str) else truth
    known = []
    for parameter in parameters:
        if parameter.name in passed:
            truth = passed[parameter.name]
        elif parameter.kind in ("positional", "keyword") and parameter.default is not None and parameter.default[0] == "const":
            truth = bool(parameter.default[1])
        else:
            truth = None
        if truth is not None:
            known.append((parameter.name, truth))
    return tuple(known)


def resolved(arguments: Arguments | None, known: Known) -> Arguments | None:
    """`arguments` with the caller's parameters they hand on replaced by their known truth."""
    if arguments is None:
        return None
    truths = dict(known)
    return tuple((key, truths.get(value) if isinstance(value, str) else value) for key, value in arguments)


def ruled_out(event: Event, known: Known) -> bool:
    """Whether `event` sits in a branch the known parameters do not take."""
    truths = dict(known)
    return any(name in truths and truths[name] != truth for name, truth in event.guard)


def calls_of(denotation: Denotation, function: str) -> list[tuple[FunctionFacts, Event]]:
    """The project's calls of `function` that bind its result (`RESULT`) or pass it a name
    (`CALL`), with the function they are in."""
    index = denotation.index
    facts = index.facts_of(function)
    if facts is None:
        return []
    found = []
    for path in denotation.call_sites.candidates(function, facts.module):
        for caller in index.files[path].functions:
            for event in caller.events:
                if event.kind in (EventKind.RESULT, EventKind.CALL) and _same_function(index, event.callee, function):
                    found.append((caller, event))
    return found


def passed_models(denotation: Denotation, function: str, parameter: str) -> list[tuple[ReturnedModel, Site]]:
    """The Hugging Face models the project's callers pass to `function` for `parameter`
    (`enable_gc(model)` after `model = AutoModelForCausalLM.from_pretrained(...)`), each with
    the call that passes it."""
    index = denotation.index
    facts = index.function(function)
    if facts is None:
        return []
    found = []
    for caller, event in calls_of(denotation, function):
        if event.kind is not EventKind.CALL or _parameter(facts, event.parameter) != parameter:
            continue
        origin = _origin(denotation, caller, event.target, event.line)
        if origin is not None:
            found.append((origin, Site(index.path_of(caller.name) or "?", event.line, caller.name)))
    return found


def _origin(denotation: Denotation, function: FunctionFacts, name: str, line: int) -> ReturnedModel | None:
    """Where the model `name` holds at `line` of `function` comes from: loaded there, or
    returned by a project function."""
    index = denotation.index
    names = _aliases(function, {name})
    passed_result = name.startswith(PASSED_RESULT)  # bound by the inner call itself, on any line
    found = None
    for event in function.events:
        if event.target not in names or (event.line > line and not passed_result):
            continue
        if event.line == line and event.kind is EventKind.RESULT and not passed_result:
            continue  # `model = enable(model)`: bound from the call after it is passed
        if event.kind is EventKind.LOADED:
            found = _loaded(event, index.path_of(function.name) or "?", function.name)
        elif event.kind is EventKind.RESULT:
            callee = index.function(event.callee)
            found = returned_model(denotation, callee.name, event.parameter, event.arguments) if callee is not None else None
    return found


def _same_function(index: ProjectFacts, callee: str, function: str) -> bool:
    if callee == function:
        return True
    resolved = index.function(callee)
    return resolved is not None and resolved.name == function


def _aliases(function: FunctionFacts, names: set[str]) -> set[str]:
    """`names` and every name bound from the same model in `function`, either way
    (`peft_model = get_peft_model(model, cfg)`: both are one model's layers)."""
    names = set(names)
    links = [(e.target, e.source) for e in function.events if e.kind is EventKind.ALIAS]
    changed = True
    while changed:
        changed = False
        for target, source in links:
            if (target in names) != (source in names):
                names.update((target, source))
                changed = True
    return names


def _parameter(function: FunctionFacts, parameter: str | int) -> str | None:
    if isinstance(parameter, int):
        return function.parameters[parameter] if parameter < len(function.parameters) else None
    return parameter if parameter in function.parameters else None


def _loaded(event: Event, path: str, function: str) -> ReturnedModel:
    """The model a `LOADED` event loads, before anything is done to it."""
    flags = event.source.split()
    return ReturnedModel(event.api, "quantized" in flags, Site(path, event.line, function),
                         cache_off=False, input_grads=False, peft=False, checkpointing=False, remote_code="remote" in flags)
