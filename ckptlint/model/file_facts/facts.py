"""The facts one file contributes to the project model: how it uses FSDP, its classes and
what their methods do, what each function does to the objects it names, the classes it gets
wrapped for checkpointing. Plain frozen values, written to the cache as JSON."""

from __future__ import annotations

import enum
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property

from ckptlint.model.form.summary import FunctionSummary

class FsdpKind(str, enum.Enum):
    FSDP1 = "FullyShardedDataParallel"
    FSDP2 = "fully_shard"
    HF_TRAINER = "TrainingArguments(fsdp=...)"
    ACCELERATE = "accelerate FullyShardedDataParallelPlugin"
    LIGHTNING = "Lightning FSDPStrategy"
    # `accelerate launch --config_file fsdp.yaml train.py` (or `--use_fsdp`) in a launch script.
    ACCELERATE_LAUNCH = "accelerate launch"


class EventKind(str, enum.Enum):
    CHECKPOINT = "checkpointing applied"  # apply_activation_checkpointing / checkpoint_wrapper
    FSDP1 = "FullyShardedDataParallel"
    FSDP2 = "fully_shard"
    HF_GC = "gradient_checkpointing_enable"
    ALIAS = "bound from"  # target = <source>, or a pass-through wrapper of it
    CALL = "passed to"  # a call of a project function with the target as an argument
    # `model = apply_ac(nn.Sequential(...))`: the target is what a call of a project function
    # returns, and the module built in its argument (`parameter`) the same one when the
    # function returns that parameter (`ckptlint.analysis.fsdp.wrap_steps`).
    BUILT_FOR_CALL = "built for a call of"
    RUNS_CHECKPOINTED = "run under checkpoint"  # the target is the function torch's checkpoint runs
    # What happens to a Hugging Face model (`ckptlint.model.file_facts.hf_events`): followed across
    # functions and files by `ProjectIndex.model_fate` / `returned_model`.
    LOADED = "loaded"  # api: the model class (absolute); source: "quantized" (4/8 bit), "remote" (Hub code), both
    RESULT = "bound from the result of"  # callee: the project function; parameter: tuple index or -1
    RETURNED = "returned"  # parameter: tuple index or -1
    FORWARD = "run"  # called: `model(**batch)`, `model.forward(...)`
    BACKWARD = "backward"  # the function calls `.backward(` (or is a Lightning `training_step`)
    TRAINER = "handed to a trainer"  # api: the trainer class (absolute, or as written)
    USE_CACHE_OFF = "use_cache turned off"  # or set to a value not known to be True
    INPUT_GRADS = "input grads enabled"
    PEFT = "wrapped by get_peft_model"
    KBIT = "prepare_model_for_kbit_training"
    # `def freeze_bn(model): for m in model.modules(): if isinstance(m, BN): m.eval()`: the
    # target parameter's BatchNorms are put in eval mode (`ckptlint.model.file_facts.norm_freezing`).
    FREEZES_BATCHNORM = "BatchNorm put in eval mode"
    # `def set_bn_eval(m): if isinstance(m, _BatchNorm): m.eval()`: the target parameter is
    # put in eval mode when it is a BatchNorm; `model.apply(set_bn_eval)` freezes the model's.
    FREEZES_BATCHNORM_APPLIED = "BatchNorm put in eval mode by Module.apply"
    # A function outside classes draws random numbers (`F.dropout(p, p=0.1)`, `torch.rand`):
    # api is the description (`method_behaviour.random_call`); a region running it is random.
    DRAWS_RANDOM = "draws random numbers"
    # The target module's parameters stop / may start requiring grad (`model.embed.requires_grad_(False)`,
    # a loop over its `parameters()`; `ckptlint.model.file_facts.freezing`): api WEIGHT for its
    # weight alone, source CONDITIONAL for a freezing that does not always run.
    FREEZES_PARAMETERS = "parameters frozen"
    UNFREEZES_PARAMETERS = "parameters made trainable"


# The kinds that say what happens to a Hugging Face model (see `hf_events`).
HF_KINDS = frozenset(
    {
        EventKind.LOADED, EventKind.RESULT, EventKind.RETURNED, EventKind.FORWARD, EventKind.BACKWARD,
        EventKind.TRAINER, EventKind.USE_CACHE_OFF, EventKind.INPUT_GRADS, EventKind.PEFT, EventKind.KBIT,
    }
)


class Impl(str, enum.Enum):
    REENTRANT = "reentrant"
    NON_REENTRANT = "non-reentrant"
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class FsdpUse:
    kind: FsdpKind
    path: str  # relative to the project root
    line: int
    # ACCELERATE_LAUNCH: the project file the launch runs (its reach is the use's), and the
    # accelerate config file that turns FSDP on ("" for the launcher's own `--use_fsdp`).
    launched: str = ""
    config: str = ""
    # ACCELERATE_LAUNCH: the FSDP version its config or options ask for (1 or 2).
    version: int = 0

    @property
    def is_fsdp2(self) -> bool:
        """`fully_shard`, or a launch whose accelerate config says `fsdp_version: 2`."""
        return self.kind is FsdpKind.FSDP2 or (self.kind is FsdpKind.ACCELERATE_LAUNCH and self.version == 2)


class DdpKind(str, enum.Enum):
    """Where a model gets torch DDP with unused-parameter detection (`find_unused_parameters=True`)."""

    TORCH = "DistributedDataParallel(find_unused_parameters=True)"
    LIGHTNING = "Lightning DDP with find_unused_parameters"
    ACCELERATE = "DistributedDataParallelKwargs(find_unused_parameters=True)"
    HF_TRAINER = "TrainingArguments(ddp_find_unused_parameters=True)"


@dataclass(frozen=True)
class DdpUse:
    """DDP with `find_unused_parameters=True` (CKPT006), as written; and torch's
    `DistributedDataParallel` without it (`find_unused=False`), under which a module that a
    reentrant checkpoint runs twice in one forward fails too."""

    kind: DdpKind
    path: str  # relative to the project root
    line: int
    # `static_graph=True` (or `_set_static_graph()` in the same file): reentrant checkpointing works.
    static_graph: bool = False
    # TORCH: the function holding the call (absolute; `pkg.mod.<module>` at top level) and
    # the name of the module it wraps ("" when not a plain name).
    function: str = ""
    target: str = ""
    # How the setting is written, for a message (`strategy="ddp_find_unused_parameters_true"`).
    how: str = ""
    # TORCH: the class of the module built in the call (`DDP(Net().to(rank), ...)`), absolute.
    built: str = ""
    find_unused: bool = True  # `find_unused_parameters=True` (the others: TORCH only)


@dataclass(frozen=True)
class Event:
    """One thing a function does to an object it names (`target`, a dotted name such as
    `model` or `self.model`), in source order."""

    kind: EventKind
    target: str
    line: int
    column: int  # 0-based, of the call
    api: str = ""  # what was called, as written
    impl: Impl = Impl.UNKNOWN  # CHECKPOINT: the implementation
    auto_wrap: bool = False  # FSDP1: an auto-wrap policy is given
    direct: bool = True  # CHECKPOINT: the model itself (apply_activation_checkpointing), not a layer
    source: str = ""  # ALIAS: the name it is bound from
    callee: str = ""  # CALL: absolute name of the project function
    parameter: str | int = 0  # CALL: the callee's parameter (name, or position) receiving the target
    # CHECKPOINT: the function's parameter that is the wrapper (`checkpoint_wrapper_fn=wrapper`):
    # the implementation is what each call passes for it (`impl` is then UNKNOWN).
    wrapper_parameter: str = ""
    # CHECKPOINT: a local name holding the wrapper, bound to something the facts cannot tell
    # (`wrapper = partial(checkpoint_wrapper, checkpoint_impl=impl)`): the project model
    # evaluates it, with what each call of the function passes (`impl` is then UNKNOWN).
    wrapper_local: str = ""
    # What the function's parameters must be for it to happen: the truth each `if` (or
    # conditional expression) around it needs of a parameter (`if quantized:` gives
    # `(("quantized", True),)`).
    guard: tuple[tuple[str, bool], ...] = ()
    # CALL / RESULT: the truth of each argument the call passes, by position or keyword (None:
    # not a literal; `("*", None)`: `*args` / `**kwargs`); None where it was not recorded.
    arguments: tuple[tuple[str | int, bool | None], ...] | None = None


# `HF_GC`'s `source` when the call leaves `gradient_checkpointing_kwargs` to transformers'
# default (reentrant before 5.0).
DEFAULT_KWARGS = "default kwargs"


@dataclass(frozen=True)
class FunctionFacts:
    name: str  # absolute: `pkg.train.main`, `pkg.model.Model.forward`, `pkg.train.<module>`
    parameters: tuple[str, ...]
    events: tuple[Event, ...]


@dataclass(frozen=True)
class MethodFacts:
    """What one method does that a checkpointed region cares about."""

    name: str
    random: tuple[str, ...] = ()  # random operations it calls, described (`F.dropout(p=0.1)`)
    attributes: tuple[str, ...] = ()  # `self.<attr>` it reads
    methods: tuple[str, ...] = ()  # `self.<method>(...)` it calls (`super().<method>` for a base's)
    evaluated: tuple[str, ...] = ()  # `self.<attr>.eval()` / `.train(False)`: put in eval mode
    # Writes to state that outlives the call, outside guards that rule training out, described.
    mutations: tuple[str, ...] = ()
    # The `torch.utils.checkpoint` calls in its own body (not in functions nested in it).
    checkpoints: tuple[CheckpointCall, ...] = ()
    # Random operations whose probability is a `self` attribute (`F.dropout(x, p=self.drop)`):
    # (description as in `random`, attribute). Random unless the instance holds only zero.
    random_attributes: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class CheckpointCall:
    """A `checkpoint(...)` call inside a method: a region nested in whatever runs it."""

    line: int
    reentrant: bool | None  # `use_reentrant` left out counts as True; None: not known here
    flags: tuple[str, ...] = ()  # the `self.<flag>` attributes its enclosing `if` tests need
    # Its value is what the method returns (`return checkpoint(...)`): nothing of the method
    # runs after it (what decides whether a region around it recomputes it once).
    returned: bool = False
    # The callable it runs, as written (`self.block`, `self._attend`, `_inner_forward`), ""
    # for a lambda or anything else; and the names the region gets or captures: positional
    # arguments that are names, names and `self.<attr>` a lambda reads (what a caller must
    # leave alone until backward: `ckptlint.model.recompute_reads`).
    callable: str = ""
    reads: tuple[str, ...] = ()


@dataclass(frozen=True)
class ClassFacts:
    name: str  # absolute
    line: int
    bases: tuple[str, ...]  # absolute where resolvable, else as written
    methods: tuple[MethodFacts, ...] = ()
    # Its code sets how checkpointing runs (`gradient_checkpointing_kwargs`, `use_reentrant`,
    # `enable_input_require_grads`): a project `Trainer` subclass that does is not transformers'.
    configures_checkpointing: bool = False
    # Its `train()` puts every BatchNorm below it in eval mode under these `self` flags
    # (`("norm_eval",)`; `()`: always); None: it does not (`ckptlint.model.file_facts.norm_freezing`).
    batchnorm_frozen_under: tuple[str, ...] | None = None
    # Decorated `@dataclass` (`dataclasses.dataclass`, also called with options): what a
    # `forward` returning an instance of it returns is no tensor or tuple (CKPT035).
    dataclass: bool = False


@dataclass(frozen=True)
class WrappedClass:
    """A class whose instances get wrapped for activation checkpointing (through
    `check_fn=lambda m: isinstance(m, Block)`, a wrap policy, `checkpoint_wrapper(Block(...))`,
    Lightning's `activation_checkpointing_policy`, accelerate's class-name list)."""

    name: str  # absolute, or the bare class name when only that is written (a string)
    line: int
    api: str
    impl: Impl = Impl.NON_REENTRANT


@dataclass(frozen=True)
class AccelerateLaunch:
    """`accelerate launch [--config_file <config>] [--use_fsdp] <entry> ...` in a launch
    script (`ckptlint.model.file_facts.launch_scripts`): what it runs and with which FSDP, as written."""

    entry: str  # the script's path, or the module after `-m`
    module: bool
    config: str  # the `--config_file` as written ("" for none)
    line: int
    # The FSDP version the launcher's own options turn on (`--use_fsdp`, `--fsdp_version 2`,
    # `ACCELERATE_USE_FSDP=true`): 1 or 2, 0 when they leave it to the config file.
    fsdp_version: int = 0


@dataclass(frozen=True)
class OptionDefault:
    """The default of a configuration option that decides reentrancy (`use_reentrant`):
    a dataclass field (`use_reentrant: bool = True`, `field(default=True)`) or an argparse
    argument (`add_argument("--use_reentrant", type=bool, default=True)`, `store_true`), or a
    key of a YAML configuration (`model: {use_reentrant: true}`)."""

    name: str  # the attribute a parsed config has: `use_reentrant`
    value: bool
    line: int
    how: str  # `TrainArgs.use_reentrant`, `--use-reentrant`


class ForwardingKind(str, enum.Enum):
    HELPER = "helper"  # hands its own `**kwargs` to torch's checkpoint without `use_reentrant`
    DECORATOR = "decorator"  # returns such a helper around the function it is given
    DECORATED = "decorated"  # decorated by a project decorator (`via`), maybe one of those
    # Hands what it is given on to torch's `checkpoint_wrapper` (the module first, its own
    # `*args` and `**kwargs`), naming no `checkpoint_impl` itself: xtuner's own `checkpoint_wrapper`.
    WRAPPER = "wrapper"


@dataclass(frozen=True)
class ForwardingFact:
    """A function whose keyword arguments may reach torch's checkpoint
    (`ckptlint.model.file_facts.forwarding`)."""

    name: str  # absolute
    kind: ForwardingKind
    line: int  # of the `def`
    accepted: tuple[str, ...] = ()  # keywords the helper (the decorator's wrapper) binds itself
    checkpoint_line: int = 0  # of the checkpoint call
    via: str = ""  # DECORATED: the decorator, absolute


@dataclass(frozen=True)
class FileFacts:
    module: str
    fsdp: tuple[FsdpUse, ...] = ()
    classes: tuple[ClassFacts, ...] = ()
    functions: tuple[FunctionFacts, ...] = ()
    wrapped_classes: tuple[WrappedClass, ...] = ()
    # `TrainingArguments`-like calls with an FSDP `fsdp=` value, by callee, for subclasses
    # defined in the project (resolved once every file's classes are known).
    fsdp_argument_calls: tuple[tuple[str, int], ...] = ()
    # What the file's own names stand for: imports, and its top-level definitions and
    # assignments (local name -> absolute name).
    names: tuple[tuple[str, str], ...] = ()
    # The modules the file imports every public name of (`from ._blocks import *`).
    star_imports: tuple[str, ...] = ()
    options: tuple[OptionDefault, ...] = ()
    # Registries (`ckptlint.model.file_facts.registries`): functions that store the class they decorate
    # in a dict (function, registry), and the file's class decorators (decorator, key, class).
    registrars: tuple[tuple[str, str], ...] = ()
    registrations: tuple[tuple[str, str, str], ...] = ()
    forwarding: tuple[ForwardingFact, ...] = ()
    # A launch script's `accelerate launch` commands; an accelerate config file's FSDP version
    # (`distributed_type: FSDP`: 1 or 2; 0 for any other file).
    launches: tuple[AccelerateLaunch, ...] = ()
    accelerate_fsdp: int = 0
    # DDP set up with `find_unused_parameters=True` (`DdpUse`).
    ddp: tuple[DdpUse, ...] = ()
    # A launch script's commands that start a Python script on several processes without
    # DeepSpeed or FSDP (`torchrun --nproc_per_node 8 train.py`, `accelerate launch --multi_gpu`):
    # (the script as written, the line) (`ckptlint.model.file_facts.launch_scripts`).
    parallel_launches: tuple[tuple[str, int], ...] = ()
    # A launch script's commands that run a Python script with `--gradient_checkpointing True`
    # (or a bare `--gradient_checkpointing`): (the script as written, the flag's line).
    checkpointing_launches: tuple[tuple[str, int], ...] = ()
    # What makes a DeepSpeed config's `activation_checkpointing` section live here
    # (`ckptlint.model.file_facts.deepspeed_wiring`): DeepSpeed checkpointing names the file
    # refers to, configuring packages it imports.
    deepspeed_wiring: tuple[str, ...] = ()
    # What each function binds, builds and returns (`ckptlint.model.file_facts.code`), as JSON: decoded
    # (`summaries`) only for the files the model evaluates, not for every file loaded.
    summaries_json: str = "[]"

    @cached_property
    def summaries(self) -> tuple[FunctionSummary, ...]:
        return tuple(FunctionSummary.from_json(item) for item in json.loads(self.summaries_json))

    @classmethod
    def with_summaries(cls, summaries: Sequence[FunctionSummary], **fields) -> FileFacts:
        """Facts built from summaries in hand (the extraction): encoded for the cache, and
        kept decoded."""
        facts = cls(**fields, summaries_json=json.dumps([s.to_json() for s in summaries], separators=(",", ":")))
        facts.__dict__["summaries"] = tuple(summaries)
        return facts

    def named(self, kind: str, name: str):
        """The first of the file's `functions` or `classes` (`kind`) called `name`: looked up
        in a table built on the first question (the project's queries ask it for every
        call of every function they follow)."""
        tables = self.__dict__.get("_by_name")
        if tables is None:
            tables = self.__dict__["_by_name"] = {}
        table = tables.get(kind)
        if table is None:
            table = tables[kind] = {}
            for definition in getattr(self, kind):
                table.setdefault(definition.name, definition)
        return table.get(name)

    def __getstate__(self) -> dict:
        # Sent between processes encoded: the decoded summaries are rebuilt where needed,
        # the tables of `named` too.
        return {key: value for key, value in self.__dict__.items() if key not in ("summaries", "_by_name")}

    def to_json(self) -> dict:
        # Written out by hand: `dataclasses.asdict` deep-copies every value (4.5 s of a cold
        # run over torch + transformers).
        return {
            "module": self.module,
            "fsdp": [[u.kind.value, u.path, u.line] for u in self.fsdp],
            "classes": [
                [c.name, c.line, list(c.bases),
                 [[m.name, list(m.random), list(m.attributes), list(m.methods), list(m.evaluated), list(m.mutations),
                   [[c.line, c.reentrant, list(c.flags), c.returned, c.callable, list(c.reads)] for c in m.checkpoints],
                   [list(pair) for pair in m.random_attributes]]
                  for m in c.methods], c.configures_checkpointing,
                 list(c.batchnorm_frozen_under) if c.batchnorm_frozen_under is not None else None, c.dataclass]
                for c in self.classes
            ],
            "functions": [
                [f.name, list(f.parameters), [_event_json(e) for e in f.events]] for f in self.functions
            ],
            "wrapped_classes": [[w.name, w.line, w.api, w.impl.value] for w in self.wrapped_classes],
            "fsdp_argument_calls": [list(call) for call in self.fsdp_argument_calls],
            "names": [list(pair) for pair in self.names],
            "star_imports": list(self.star_imports),
            "options": [[o.name, o.value, o.line, o.how] for o in self.options],
            "registrars": [list(r) for r in self.registrars],
            "registrations": [list(r) for r in self.registrations],
            "forwarding": [[f.name, f.kind.value, f.line, list(f.accepted), f.checkpoint_line, f.via] for f in self.forwarding],
            "launches": [[l.entry, l.module, l.config, l.line, l.fsdp_version] for l in self.launches],
            "accelerate_fsdp": self.accelerate_fsdp,
            "parallel_launches": [list(launch) for launch in self.parallel_launches],
            "checkpointing_launches": [list(launch) for launch in self.checkpointing_launches],
            "ddp": [[u.kind.value, u.path, u.line, u.static_graph, u.function, u.target, u.how, u.built, u.find_unused] for u in self.ddp],
            "deepspeed_wiring": list(self.deepspeed_wiring),
            "summaries": self.summaries_json,
        }

    @classmethod
    def from_json(cls, data: Mapping) -> FileFacts:
        return cls(
            module=data["module"],
            fsdp=tuple(FsdpUse(FsdpKind(kind), path, line) for kind, path, line in data["fsdp"]),
            classes=tuple(
                ClassFacts(
                    name,
                    line,
                    tuple(bases),
                    tuple(
                        MethodFacts(m[0], tuple(m[1]), tuple(m[2]), tuple(m[3]), tuple(m[4]), tuple(m[5]),
                                    tuple(CheckpointCall(c[0], c[1], tuple(c[2]), c[3], c[4], tuple(c[5])) for c in m[6]),
                                    tuple(tuple(pair) for pair in m[7]))
                        for m in methods
                    ),
                    configures,
                    tuple(frozen) if frozen is not None else None,
                    is_dataclass,
                )
                for name, line, bases, methods, configures, frozen, is_dataclass in data["classes"]
            ),
            functions=tuple(
                FunctionFacts(name, tuple(parameters), tuple(_event_from_json(e) for e in events))
                for name, parameters, events in data["functions"]
            ),
            wrapped_classes=tuple(
                WrappedClass(name, line, api, Impl(impl)) for name, line, api, impl in data["wrapped_classes"]
            ),
            fsdp_argument_calls=tuple((name, line) for name, line in data["fsdp_argument_calls"]),
            names=tuple((local, absolute) for local, absolute in data["names"]),
            star_imports=tuple(data.get("star_imports", ())),
            options=tuple(OptionDefault(*option) for option in data.get("options", ())),
            registrars=tuple((function, registry) for function, registry in data.get("registrars", ())),
            registrations=tuple((decorator, key, cls) for decorator, key, cls in data.get("registrations", ())),
            forwarding=tuple(
                ForwardingFact(name, ForwardingKind(kind), line, tuple(accepted), checkpoint_line, via)
                for name, kind, line, accepted, checkpoint_line, via in data.get("forwarding", ())
            ),
            launches=tuple(AccelerateLaunch(*launch) for launch in data.get("launches", ())),
            accelerate_fsdp=data.get("accelerate_fsdp", 0),
            ddp=tuple(DdpUse(DdpKind(kind), *rest) for kind, *rest in data.get("ddp", ())),
            parallel_launches=tuple((entry, line) for entry, line in data.get("parallel_launches", ())),
            checkpointing_launches=tuple((entry, line) for entry, line in data.get("checkpointing_launches", ())),
            deepspeed_wiring=tuple(data.get("deepspeed_wiring", ())),
            summaries_json=data["summaries"] if isinstance(data["summaries"], str) else "[]",
        )


_EVENT_FIELDS = (
    "kind", "target", "line", "column", "api", "impl", "auto_wrap", "direct", "source", "callee", "parameter",
    "wrapper_parameter", "wrapper_local", "guard", "arguments",
)


def _event_json(event: Event) -> list:
    return [getattr(event, name) for name in _EVENT_FIELDS]


def _event_from_json(values: list) -> Event:
    fields = dict(zip(_EVENT_FIELDS, values))
    pairs = {name: tuple(tuple(pair) for pair in fields[name]) for name in ("guard", "arguments") if fields.get(name) is not None}
    return Event(**{**fields, **pairs, "kind": EventKind(fields["kind"]), "impl": Impl(fields["impl"])})


def text_digest(text: str) -> str:
    """The digest of the text as UTF-8: for a UTF-8 file, its content digest
    (`ckptlint.cache.content_digest` of its bytes), as the index records it."""
    import hashlib

    return hashlib.blake2b(text.encode("utf-8", errors="surrogatepass"), digest_size=16).hexdigest()


@dataclass(frozen=True)
class ParameterEffect:
    """What calling a project function does to the object passed as one of its parameters."""

    kind: EventKind  # CHECKPOINT, FSDP1, FSDP2 or HF_GC
    impl: Impl
    auto_wrap: bool
    path: str
    line: int
    function: str
    # CHECKPOINT: how the implementation was decided when a parameter of a project function
    # chose the wrapper (`the `wrapper` passed at train.py:15`), for a message.
    impl_from: str = ""
