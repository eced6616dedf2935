"""Extracting one file's facts with CPython's `ast` (an order of magnitude faster than libcst,
and enough for what is recorded here), only from files holding one of the trigger words.

Per file (`FileFacts`): how torch FSDP is used, the classes and their bases, the classes
that get wrapped by `checkpoint_wrapper` / `apply_activation_checkpointing`, and for every
function (module-level code counts as one) the ordered events that matter for
checkpointing and sharding a model object: checkpointing applied to it, FSDP wrapping it, HF
gradient checkpointing enabled on it, names bound from it, and calls that pass it to another
function of the project.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Mapping, Sequence
from dataclasses import replace

from ckptlint.model.syntax.parsed_text import ParsedText
from ckptlint.model.syntax.ast_walk import walk, walk_own_code
from ckptlint.model.syntax.call_syntax import (
    bound_names, default_checkpointing_kwargs, definitions, dotted, is_none, is_truthy_literal, iterated_root,
    keyword_argument, listed_strings, turns_fsdp_on,
)
from ckptlint.model.file_facts.code import summarize
from ckptlint.model.file_facts.deepspeed_wiring import deepspeed_wiring
from ckptlint.model.file_facts.forwarding import forwarding_facts
from ckptlint.model.file_facts.freezing import parameter_freezing
from ckptlint.model.file_facts.hf_events import (
    HF_WORDS, HfEvents, UnchangedParameters, call_arguments, chosen_callables, kept_parameters, parameter_guards,
    passed_result, prepared_in_order, super_callee,
)
from ckptlint.model.file_facts.options import argparse_options, dataclass_options, environment_options
from ckptlint.model.file_facts.method_behaviour import checked_attributes, methods_of, random_call
from ckptlint.model.file_facts.unrestored_draws import unrestored_call
from ckptlint.model.file_facts.norm_freezing import batchnorm_frozen_under, converted_parameter, frozen_parameter, frozen_when_applied
from ckptlint.model.form.summary import MODULE_LEVEL, FunctionSummary
from ckptlint.model.file_facts.wrapper_facts import WrapperFacts
from ckptlint.model.file_facts.facts import (
    DEFAULT_KWARGS,
    ClassFacts,
    Event,
    EventKind,
    FileFacts,
    DdpKind,
    DdpUse,
    FsdpKind,
    FsdpUse,
    FunctionFacts,
    Impl,
    OptionDefault,
    WrappedClass,
)
from ckptlint.model.library.accelerate import ACCELERATE_DDP_KWARGS, ACCELERATE_FSDP_PLUGIN
from ckptlint.model.library.combined import (
    LIBRARY_CHECKPOINTING_HELPERS, LIBRARY_PREFIXES, SAME_MODEL_FUNCTIONS, SAME_MODEL_METHODS, TRAINING_ARGUMENTS_CLASSES,
)
from ckptlint.model.library.lightning import (
    LIGHTNING_DDP_STRATEGY, LIGHTNING_ENTRY_POINTS, LIGHTNING_FIND_UNUSED_SUFFIX, LIGHTNING_FSDP_STRATEGY, LIGHTNING_PACKAGES,
)
from ckptlint.model.library.transformers import TRAINER_DDP_FIND_UNUSED, TRAINER_DDP_STATIC_GRAPH
from ckptlint.model.library.torch import (
    APPLY_ACTIVATION_CHECKPOINTING, CHECKPOINT_WRAPPER, COMPOSABLE_CHECKPOINT, DDP, DDP_FIND_UNUSED, DDP_SET_STATIC_GRAPH,
    DDP_STATIC_GRAPH, FSDP1, FSDP2, TORCH_CHECKPOINT_FUNCTIONS,
)
from ckptlint.model.syntax.names import absolute_import, canonical_name, module_name
from ckptlint.model.file_facts.registries import registrars, registrations

# A file without any of these can neither use FSDP nor checkpointing nor build a module that
# matters to a rule: it is not parsed. (`Norm`, `Dropout`, `Sequential`: a norm table or a
# stage builder may name no `Module`; `ckpt`, `train`: a script that only calls the
# project's `wrap_blocks(Net())` and trains is where that helper's generic parameter is
# resolved. `train` adds 288 of 4,966 files of torch + transformers; `backward`,
# `from_pretrained`: a script that trains a model a helper of another module loads;
# `REENTRANT`: a settings module holding only `USE_REENTRANT = False`.)
INDEX_TRIGGERS = (
    "FullyShardedDataParallel", "fully_shard", "FSDP", "fsdp", "checkpoint", "ckpt", "train", "TrainingArguments",
    "Config", "Module", "Norm", "Dropout", "Sequential", "backward", "from_pretrained", "reentrant", "REENTRANT",
    "find_unused",
    "deepspeed",
)
# A module in the middle of a model's way (`setup()` returning `load_model()`'s model) or a
# registry (`register_backbone`) names only these: read when it is small or has no torch of
# its own (a library's large files are neither: 258 more files of torch + transformers, 1.4 s
# of extraction instead of 5.3 s for every such file).
PASSING_WORDS = ("model", "register")
_SMALL_FILE = 8_000
_RANDOM_WORDS = ("dropout", "rand", "normal", "bernoulli", "poisson", "multinomial", "gumbel", "drop_path",
                 "scaled_dot_product_attention")
_MODEL_CONSTRUCTED = re.compile(r"[a-z0-9](Model|For[A-Z]\w*)\(")


# The node classes the walks of `_Extractor.run` and `_function` act on (`ast.parse` makes no
# subclasses of them): the other nodes are passed over with one set lookup.
_FILE_LEVEL_KINDS = frozenset({ast.Import, ast.ImportFrom, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Call, ast.Assign})
_EVENT_KINDS = frozenset({
    ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.For, ast.AsyncFor, ast.comprehension, ast.Call, ast.Assign,
    ast.AnnAssign, ast.Return,
})


def worth_indexing(text: str, relative_path: str) -> bool:
    """Whether a file's facts can matter to a rule (a package's `__init__` always: it may
    re-export a helper from a submodule)."""
    if relative_path.endswith("__init__.py") or any(word in text for word in INDEX_TRIGGERS):
        return True
    return any(word in text for word in PASSING_WORDS) and ("torch" not in text or len(text) < _SMALL_FILE)


CLASS_BODY = "<class>"  # the summary of a class body (`ckptlint.model.evaluation.modules`)
# Words of a class that sets how checkpointing runs (`ClassFacts.configures_checkpointing`).
CHECKPOINTING_SETTINGS = ("gradient_checkpointing_kwargs", "use_reentrant", "enable_input_require_grads")


def extract_facts(text: str, relative_path: str, *, prefilter: bool = True, parsed: ParsedText | None = None) -> FileFacts:
    """The facts of one file; a file without trigger words (unless `prefilter` is off), or
    that does not parse, has none. `parsed`: the text's tree, when another reader shares it."""
    module = module_name(relative_path)
    if prefilter and not worth_indexing(text, relative_path):
        return FileFacts(module)
    try:
        tree = parsed.tree() if parsed is not None else ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return FileFacts(module)
    try:
        return _Extractor(module, relative_path, text).run(tree)
    except RecursionError:
        return FileFacts(module)


class _Extractor(WrapperFacts):
    def __init__(self, module: str, relative_path: str, text: str = "") -> None:
        self.lines = text.splitlines()
        self.text = text
        # Only such files can hold a random call (`method_behaviour.random_call`).
        self._may_draw = any(word in text for word in _RANDOM_WORDS)
        self._may_freeze = "requires_grad" in text  # `ckptlint.model.file_facts.freezing`
        # A converter puts `Frozen...Norm` copies in place while walking `children()`.
        self._may_convert_norms = "Frozen" in text and "children" in text
        self.module = module
        self.path = relative_path
        self.is_package = relative_path.endswith("__init__.py")
        self.imports: dict[str, str] = {}
        self.star_imports: list[str] = []  # `from ._blocks import *`
        self.top_level: set[str] = set()
        self.fsdp: list[FsdpUse] = []
        self.classes: list[ClassFacts] = []
        self.functions: list[FunctionFacts] = []
        self.wrapped: list[WrappedClass] = []
        self.fsdp_argument_calls: list[tuple[str, int]] = []
        self.ddp: list[DdpUse] = []
        # `ddp_model._set_static_graph()` anywhere in the file: its DDP wraps are static.
        self._static_graph_called = f"{DDP_SET_STATIC_GRAPH}(" in text
        # Predicates (`def is_block(m): return isinstance(m, Block)`) and assigned lambdas,
        # by name, for `check_fn=`.
        self.predicates: dict[str, ast.AST] = {}
        # The file's module-level functions, by name: what a class's methods call there.
        self._module_functions: dict[str, ast.FunctionDef] = {}
        self._parameters: list[tuple[str, ...]] = []
        self._bodies: list[Sequence[ast.stmt]] = []  # the body of each function being walked
        self._chosen_locals: dict[str, frozenset[str]] = {}  # `chosen_callables` of each scope, once asked
        # Per function being walked: its parameters it never rebinds, where Hugging Face
        # events are collected (`hf_events.unchanged_parameters`).
        self._unchanged_parameters: list[UnchangedParameters | frozenset[str]] = []
        self._local_defs: list[dict[str, ast.AST]] = []  # functions defined in each enclosing body, by name
        # Names bound to a call anywhere in the file (`wrapper = partial(checkpoint_wrapper, ...)`).
        self.assigned_calls: dict[str, ast.Call] = {}
        # What functions do to Hugging Face models: only in files that can say anything of it.
        # (A file without torch modules that names a model may pass one on: `setup()`
        # returning `load_model()`'s model; modeling files need the words themselves.)
        # A transformers model built from its class (`LlamaForCausalLM(cfg)`) needs none of them.
        self.hf_models = (
            any(word in text for word in HF_WORDS)
            or ("model" in text and "Module" not in text)
            or ("transformers" in text and _MODEL_CONSTRUCTED.search(text) is not None)
        )
        self.module_classes: set[str] = set()  # classes of this file that are torch modules
        # Other classes: the `self.<attr>` their constructor stores a parameter in (`HfEvents.kept`).
        self._kept_by_class: dict[str, frozenset[str]] = {}
        # Configuration options that decide reentrancy (`ckptlint.model.file_facts.options`).
        self.names_reentrancy = "reentrant" in text
        self.options: list[OptionDefault] = []
        self.tree: ast.AST | None = None
        self.registrations: list[tuple[str, str, str]] = []
        self.module_assigned: frozenset[str] = frozenset()
        self.text_for_registries = text if "register" in text else ""
        # Helpers splat `**kwargs`; decorated functions are written with `@`.
        self.may_forward = "**" in text or "@" in text
        self._checked_attributes: frozenset[str] | None = None

    def run(self, tree: ast.Module) -> FileFacts:
        self.tree = tree
        for node in walk(tree):
            if type(node) not in _FILE_LEVEL_KINDS:
                continue  # most nodes: one set lookup instead of the chain below
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.asname:
                        self.imports[alias.asname] = canonical_name(alias.name)
                    else:
                        head = alias.name.split(".")[0]
                        self.imports[head] = head
            elif isinstance(node, ast.ImportFrom):
                base = absolute_import(self.module, self.is_package, "." * node.level + (node.module or ""))
                for alias in node.names:
                    if alias.name != "*":
                        self.imports[alias.asname or alias.name] = f"{base}.{alias.name}" if base else alias.name
                    elif base and base not in self.star_imports:
                        self.star_imports.append(base)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                self.predicates.setdefault(node.name, node)
            elif isinstance(node, ast.ClassDef) and self.names_reentrancy:
                self.options.extend(dataclass_options(node))
            elif isinstance(node, ast.Call) and self.names_reentrancy:
                self.options.extend(argparse_options(node))
            elif isinstance(node, ast.Assign) and isinstance(node.value, (ast.Lambda, ast.Call, ast.Compare)):
                if self.names_reentrancy and isinstance(node.value, (ast.Call, ast.Compare)):
                    self.options.extend(environment_options(node))
                for target in node.targets if not isinstance(node.value, ast.Compare) else ():
                    if isinstance(target, ast.Name):
                        table = self.predicates if isinstance(node.value, ast.Lambda) else self.assigned_calls
                        table.setdefault(target.id, node.value)
        assigned: set[str] = set()
        for statement in tree.body:
            if isinstance(statement, ast.FunctionDef):
                self._module_functions[statement.name] = statement
            if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                self.top_level.add(statement.name)
            elif isinstance(statement, (ast.Assign, ast.AnnAssign)):
                targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
                assigned.update(t.id for t in targets if isinstance(t, ast.Name))
        self.module_assigned = frozenset(assigned)
        self._function(f"{self.module}.{MODULE_LEVEL}", (), tree.body, enclosing_class=None)
        names = {**{name: f"{self.module}.{name}" for name in assigned | self.top_level}, **self.imports}
        return FileFacts.with_summaries(
            self._summaries(tree),
            module=self.module,
            fsdp=tuple(self.fsdp),
            classes=tuple(self.classes),
            functions=tuple(self.functions),
            wrapped_classes=tuple(self.wrapped),
            fsdp_argument_calls=tuple(self.fsdp_argument_calls),
            ddp=tuple(self.ddp),
            names=tuple(sorted(names.items())),
            star_imports=tuple(self.star_imports),
            options=tuple(self.options),
            registrars=tuple(registrars(tree, self.resolve, self.module)) if "[" in self.text_for_registries else (),
            registrations=tuple(self.registrations),
            forwarding=forwarding_facts(tree, self.module, self.resolve) if self.may_forward else (),
            deepspeed_wiring=deepspeed_wiring(tree, self.text, self.imports, self.resolve),
        )

    def _summaries(self, tree: ast.Module) -> list[FunctionSummary]:
        """A summary of every function, method and nested function, and of the module's
        top-level code, named as the events name them."""
        found: list[FunctionSummary] = []
        self._summarize(tree, f"{self.module}.{MODULE_LEVEL}", None, False, found)
        return found

    def _summarize(self, node, name: str, self_name: str | None, in_class: bool, found: list[FunctionSummary]) -> None:
        """`_summaries` of one definition and those inside it (a method, not a closure
        calling itself: that would be a reference cycle keeping the tree alive)."""
        if not isinstance(node, ast.Module):
            own_self = self_name
            if in_class and not _is_static(node):
                arguments = [*node.args.posonlyargs, *node.args.args]
                own_self = arguments[0].arg if arguments else None
            summary = summarize(node, name, self.resolve, self_name=own_self)
            self_name = own_self
        else:
            summary = summarize(node, name, self.resolve)
        if summary is not None:
            found.append(summary)
        prefix = name.removesuffix(f".{MODULE_LEVEL}")
        for child in definitions(node.body):
            if isinstance(child, ast.ClassDef):
                # Its class attributes (`arch_settings = {18: (BasicBlock, ...)}`).
                body = summarize(child, f"{prefix}.{child.name}.{CLASS_BODY}", self.resolve)
                if body is not None and body.bindings:
                    found.append(replace(body, returns=(), calls=(), passes=()))
                for member in definitions(child.body):
                    if isinstance(member, (ast.FunctionDef, ast.AsyncFunctionDef)):
                        self._summarize(member, f"{prefix}.{child.name}.{member.name}", None, True, found)
            else:
                self._summarize(child, f"{prefix}.{child.name}", self_name, False, found)

    def _resolve_global(self, expr: ast.AST) -> str | None:
        """`resolve`, also for the file's module-level variables (`MODELS.register_module`
        where `MODELS = Registry("models")` is assigned in this file)."""
        written = dotted(expr)
        if written is not None and written.partition(".")[0] in self.module_assigned:
            return f"{self.module}.{written}"
        return self.resolve(expr)

    def _checked(self) -> frozenset[str]:
        """The file's checked-then-set attributes (`checked_attributes`), walked for once and
        only when a class's methods are summarised."""
        if self._checked_attributes is None:
            self._checked_attributes = checked_attributes(self.tree)
        return self._checked_attributes

    # names ------------------------------------------------------------------------------

    def resolve(self, expr: ast.AST, enclosing_class: str | None = None) -> str | None:
        """The absolute name an expression refers to, when it is an imported or top-level
        name (or an attribute of one); `self.method` resolves to the enclosing class's."""
        written = dotted(expr)
        if written is None:
            return None
        head, _, rest = written.partition(".")
        if head == "self" and enclosing_class is not None and rest and "." not in rest:
            return f"{enclosing_class}.{rest}"
        if head in self.imports:
            return canonical_name(f"{self.imports[head]}.{rest}") if rest else self.imports[head]
        if head in self.top_level:
            return f"{self.module}.{written}"
        return None

    def _chosen_callable(self, name: str, scope: str) -> str | None:
        """`TrainerClass` in `TrainerClass(accelerator, policy)`, when the function (or the
        module) binds it to a class or function it picks (`chosen_callables`), named by the
        scope binding it (`launch.main.TrainerClass`, `launch.TrainerClass`)."""
        if scope != self.module:
            local = self._chosen_locals.get(scope)
            if local is None:
                local = self._chosen_locals[scope] = chosen_callables(self._bodies[-1])
            if name in local:
                return f"{scope}.{name}"
        module = self._chosen_locals.get(self.module)
        if module is None:
            module = self._chosen_locals[self.module] = chosen_callables(self.tree.body)
        return f"{self.module}.{name}" if name in module else None

    # walking ----------------------------------------------------------------------------

    def _function(
        self, name: str, parameters: tuple[str, ...], body: Sequence[ast.stmt], enclosing_class: str | None
    ) -> None:
        events: list[Event] = []
        loop_sources: dict[str, str] = {}  # loop variable -> the dotted name iterated over
        self._parameters.append(parameters)
        self._local_defs.append({n.name: n for n in body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))})
        self._bodies.append(body)
        prefix = name.removesuffix(f".{MODULE_LEVEL}")
        in_class_body = name == enclosing_class
        # A module's methods run its layers; only its constructor can load a model
        # (`self.model = AutoModelForCausalLM.from_pretrained(...)` in a policy wrapper).
        in_module = enclosing_class in self.module_classes and not name.endswith(".__init__")
        kept = self._kept_by_class.get(enclosing_class, frozenset()) if enclosing_class is not None and not in_class_body else frozenset()
        hf = HfEvents(lambda expr: self.resolve(expr, enclosing_class), parameters, name, kept) if self.hf_models and not in_module else None
        unchanged = UnchangedParameters(list(body), parameters) if hf is not None and parameters else frozenset()
        self._unchanged_parameters.append(unchanged)
        if hf is not None:
            hf.unchanged = unchanged
        for node in walk_own_code(body):
            if type(node) not in _EVENT_KINDS:
                continue  # nothing below (nor `HfEvents.statement`) reads other nodes
            if hf is not None:
                hf.statement(node)
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                params = tuple(a.arg for a in (*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs))
                if in_class_body and params and params[0] in ("self", "cls"):
                    params = params[1:]
                # A function nested in a method shares its `self`.
                self._function(f"{prefix}.{node.name}", params, node.body, enclosing_class)
            elif isinstance(node, ast.ClassDef):
                qualified = f"{prefix}.{node.name}"
                bases = tuple(self.resolve(b) or dotted(b) or "?" for b in node.bases)
                if node.decorator_list:
                    self.registrations.extend(registrations(node, self._resolve_global, qualified))
                text = "\n".join(self.lines[node.lineno - 1 : node.end_lineno or node.lineno])
                configures = any(word in text for word in CHECKPOINTING_SETTINGS)
                self.classes.append(ClassFacts(
                    qualified, node.lineno, bases, methods_of(
                        node, self.lines, self.resolve, self._checked, self._module_functions, self.module_assigned,
                    ), configures,
                    batchnorm_frozen_under(node, self.resolve),
                    any(self.resolve(d.func if isinstance(d, ast.Call) else d) == "dataclasses.dataclass" for d in node.decorator_list),
                ))
                if any(_is_module_class(base) for base in bases):
                    self.module_classes.add(qualified)
                else:
                    self._kept_by_class[qualified] = kept_parameters(node, bases)
                self._function(qualified, (), node.body, enclosing_class=qualified)
            elif isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension)):
                source = iterated_root(node.iter)
                if source is not None:
                    for target in bound_names(node.target):
                        loop_sources[target] = source
            elif isinstance(node, ast.Call):
                self._call(node, events, loop_sources, enclosing_class, prefix)
                if enclosing_class is None and self._may_draw and (
                    (drawn := unrestored_call(node, self.resolve, frozenset(self._parameters[-1]))) or (drawn := random_call(node, self.resolve))
                ):
                    events.append(Event(EventKind.DRAWS_RANDOM, "", node.lineno, node.col_offset, api=drawn))
            elif isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
                self._assignment(node, events, enclosing_class)
        self._parameters.pop()
        self._bodies.pop()
        self._local_defs.pop()
        self._unchanged_parameters.pop()
        if hf is not None:
            events.extend(hf.finish(events, method=enclosing_class is not None and not in_class_body))
        resolve_here = lambda expr: self.resolve(expr, enclosing_class)  # noqa: E731
        frozen = (
            frozen_parameter(body, parameters, resolve_here)
            or (converted_parameter(body, parameters, resolve_here, enclosing_class and enclosing_class.rsplit(".", 1)[-1])
                if self._may_convert_norms else None)
        ) if parameters else None
        if frozen is not None:
            events.append(Event(EventKind.FREEZES_BATCHNORM, frozen, body[0].lineno, 0))
        elif enclosing_class is None and (applied := frozen_when_applied(body, parameters, self.resolve)) is not None:
            events.append(Event(EventKind.FREEZES_BATCHNORM_APPLIED, applied, body[0].lineno, 0))
        if self._may_freeze and not in_class_body:
            in_method = enclosing_class is not None
            events.extend(parameter_freezing(
                body, freezes=not in_method or name.endswith(".__init__"), in_method=in_method,
            ))
        if hf is not None and parameters and events:
            guards = parameter_guards(list(body), parameters, unchanged)
            events = [replace(e, guard=guards[(e.line, e.column)]) if (e.line, e.column) in guards else e for e in events]
        events.sort(key=lambda e: (e.line, e.column))
        if events:
            self.functions.append(FunctionFacts(name, parameters, tuple(events)))

    def _assignment(self, node: ast.Assign | ast.AnnAssign, events: list[Event], enclosing_class: str | None) -> None:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        self._built_and_passed(node, targets, events, enclosing_class)
        for name, source in prepared_in_order(targets, node.value):
            events.append(Event(EventKind.ALIAS, name, node.lineno, node.col_offset, source=source))
        source = self._model_source(node.value, enclosing_class)
        if source is None:
            return
        for target in targets:
            name = dotted(target)
            if name is not None and name != source:
                events.append(Event(EventKind.ALIAS, name, node.lineno, node.col_offset, source=source))

    def _built_and_passed(self, node, targets: list[ast.AST], events: list[Event], enclosing_class: str | None) -> None:
        """`model = apply_ac(nn.Sequential(Block(), Block()))`: a module built in the call of a
        project function and known afterwards only as what the function returns. The call
        is one on `model`, which counts where the function returns that parameter."""
        value = node.value
        if len(targets) != 1 or not isinstance(value, ast.Call) or not value.args or not isinstance(value.args[0], ast.Call):
            return
        name = dotted(targets[0])
        callee = self.resolve(value.func, enclosing_class)
        if name is None or callee is None or callee.startswith(LIBRARY_PREFIXES):
            return
        events.append(Event(EventKind.BUILT_FOR_CALL, name, value.lineno, value.col_offset, callee=callee, parameter=0))

    def _model_source(self, value: ast.AST, enclosing_class: str | None) -> str | None:
        """The name a value is the same model as: `m`, `m.to(d)`, `FSDP(m, ...)`,
        `accelerator.prepare(m)`, `torch.compile(m)`, `get_peft_model(m, cfg)`."""
        if isinstance(value, (ast.Name, ast.Attribute)):
            return dotted(value)
        if not isinstance(value, ast.Call) or not value.args:
            return None
        first = value.args[0]
        if isinstance(value.func, ast.Attribute) and value.func.attr in SAME_MODEL_METHODS:
            return dotted(value.func.value)
        callee = self.resolve(value.func, enclosing_class)
        if callee in FSDP1 | FSDP2 | SAME_MODEL_FUNCTIONS or (
            isinstance(value.func, ast.Attribute) and value.func.attr == "prepare" and len(value.args) == 1
        ):
            return dotted(first)
        return None

    def _ddp_use(self, call: ast.Call, callee: str, first: ast.AST | None, scope: str) -> None:
        """DDP set up with `find_unused_parameters=True` (`library.torch.DDP`'s evidence): torch's
        wrapper, Lightning's strategy (as an object or a registered name), accelerate's DDP
        kwargs handler, the Trainer's arguments (not under DeepSpeed or FSDP, where it builds no
        DDP); and torch's wrapper without it."""
        line = call.lineno
        if callee in DDP:
            find_unused = _is_true(keyword_argument(call, DDP_FIND_UNUSED))
            function = f"{scope}.{MODULE_LEVEL}" if scope == self.module else scope
            static = _is_true(keyword_argument(call, DDP_STATIC_GRAPH)) or self._static_graph_called
            target = (dotted(first) or "") if first is not None else ""
            built = self._built_class(first, scope) if first is not None and not target else ""
            how = "`DistributedDataParallel(..., find_unused_parameters=True)`" if find_unused else "`DistributedDataParallel(...)`"
            self.ddp.append(DdpUse(DdpKind.TORCH, self.path, line, static, function, target, how, built, find_unused))
        elif callee in LIGHTNING_DDP_STRATEGY or callee in ACCELERATE_DDP_KWARGS:
            if _is_true(keyword_argument(call, DDP_FIND_UNUSED)):
                kind = DdpKind.LIGHTNING if callee in LIGHTNING_DDP_STRATEGY else DdpKind.ACCELERATE
                static = _is_true(keyword_argument(call, DDP_STATIC_GRAPH))
                self.ddp.append(DdpUse(kind, self.path, line, static, how=f"`{callee.rsplit('.', 1)[-1]}(find_unused_parameters=True)`"))
        elif callee in LIGHTNING_ENTRY_POINTS:
            strategy = keyword_argument(call, "strategy")
            # `"ddp_find_unused_parameters_true" if num_gpus > 1 else "auto"`: the multi-process runs.
            for value in (strategy.body, strategy.orelse) if isinstance(strategy, ast.IfExp) else (strategy,):
                if isinstance(value, ast.Constant) and isinstance(value.value, str) and value.value.endswith(LIGHTNING_FIND_UNUSED_SUFFIX):
                    self.ddp.append(DdpUse(DdpKind.LIGHTNING, self.path, line, how=f'`strategy="{value.value}"`'))
                    break
        elif callee in TRAINING_ARGUMENTS_CLASSES:
            deepspeed = keyword_argument(call, "deepspeed")
            inert = (deepspeed is not None and not is_none(deepspeed)) or turns_fsdp_on(call)
            if _is_true(keyword_argument(call, TRAINER_DDP_FIND_UNUSED)) and not inert:
                static = _is_true(keyword_argument(call, TRAINER_DDP_STATIC_GRAPH))
                self.ddp.append(DdpUse(DdpKind.HF_TRAINER, self.path, line, static, how="`ddp_find_unused_parameters=True`"))

    def _built_class(self, value: ast.AST, scope: str) -> str:
        """The project class constructed in `Net(...)`, `Net(...).to(rank)`, `Net(...).cuda()`."""
        while isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and value.func.attr in SAME_MODEL_METHODS:
            value = value.func.value
        if not isinstance(value, ast.Call):
            return ""
        cls = self.resolve(value.func, None)
        return cls if cls is not None and not cls.startswith(LIBRARY_PREFIXES) else ""

    def _call(
        self, call: ast.Call, events: list[Event], loop_sources: Mapping[str, str], enclosing_class: str | None, scope: str
    ) -> None:
        callee = self.resolve(call.func, enclosing_class)
        line, column = call.lineno, call.col_offset
        first = call.args[0] if call.args else keyword_argument(call, "module") or keyword_argument(call, "model")
        if callee in FSDP1:
            self.fsdp.append(FsdpUse(FsdpKind.FSDP1, self.path, line))
            policy = keyword_argument(call, "auto_wrap_policy")
            auto_wrap = policy is not None and not is_none(policy)
            target = dotted(first) if first is not None else None
            if target is not None:
                events.append(Event(EventKind.FSDP1, target, line, column, api=dotted(call.func) or "", auto_wrap=auto_wrap))
        elif callee in FSDP2:
            self.fsdp.append(FsdpUse(FsdpKind.FSDP2, self.path, line))
            target = dotted(first) if first is not None else None
            if target is not None:
                events.append(Event(EventKind.FSDP2, target, line, column, api=dotted(call.func) or ""))
        elif callee in ACCELERATE_FSDP_PLUGIN:
            self.fsdp.append(FsdpUse(FsdpKind.ACCELERATE, self.path, line))
            if is_truthy_literal(keyword_argument(call, "activation_checkpointing")):
                names = keyword_argument(call, "transformer_cls_names_to_wrap")
                for text in listed_strings(names):
                    self.wrapped.append(WrappedClass(text, line, "FullyShardedDataParallelPlugin"))
        elif callee in LIGHTNING_FSDP_STRATEGY:
            self.fsdp.append(FsdpUse(FsdpKind.LIGHTNING, self.path, line))
            for keyword in ("activation_checkpointing_policy", "activation_checkpointing"):
                for cls in self._classes_in(keyword_argument(call, keyword), enclosing_class):
                    self.wrapped.append(WrappedClass(cls, line, "FSDPStrategy"))
        elif callee in LIGHTNING_ENTRY_POINTS or (callee or "").startswith(tuple(p + "." for p in LIGHTNING_PACKAGES)):
            strategy = keyword_argument(call, "strategy")
            if isinstance(strategy, ast.Constant) and isinstance(strategy.value, str) and strategy.value.startswith("fsdp"):
                self.fsdp.append(FsdpUse(FsdpKind.LIGHTNING, self.path, line))
        elif callee in APPLY_ACTIVATION_CHECKPOINTING:
            wrapper_fn = keyword_argument(call, "checkpoint_wrapper_fn")
            # `def apply_ac(model, wrapper=reentrant_wrapper)`: each call decides (the index).
            wrapper_parameter = (
                wrapper_fn.id if isinstance(wrapper_fn, ast.Name) and wrapper_fn.id in self._parameters[-1] else ""
            )
            impl = Impl.UNKNOWN if wrapper_parameter else self._wrapper_impl(wrapper_fn, enclosing_class)
            # `wrapper = partial(checkpoint_wrapper, checkpoint_impl=impl)`: the model evaluates it.
            wrapper_local = wrapper_fn.id if isinstance(wrapper_fn, ast.Name) and not wrapper_parameter and impl is Impl.UNKNOWN else ""
            target = dotted(first) if first is not None else None
            if target is not None:
                events.append(
                    Event(EventKind.CHECKPOINT, target, line, column, api=dotted(call.func) or "", impl=impl,
                          wrapper_parameter=wrapper_parameter, wrapper_local=wrapper_local)
                )
            for cls in self._check_fn_classes(call, enclosing_class):
                self.wrapped.append(WrappedClass(cls, line, "apply_activation_checkpointing", impl))
        elif callee in CHECKPOINT_WRAPPER or callee in COMPOSABLE_CHECKPOINT:
            impl = Impl.NON_REENTRANT if callee in COMPOSABLE_CHECKPOINT else self._impl_of(call, enclosing_class)
            if first is not None:
                root = iterated_root(first)
                root = loop_sources.get(root, root) if root is not None else None
                if root is not None:
                    events.append(
                        Event(EventKind.CHECKPOINT, root, line, column, api=dotted(call.func) or "", impl=impl,
                              direct=dotted(first) == root)
                    )
                if isinstance(first, ast.Call):
                    cls = self.resolve(first.func, enclosing_class)
                    if cls is not None:
                        self.wrapped.append(WrappedClass(cls, line, "checkpoint_wrapper", impl))
        elif callee in TORCH_CHECKPOINT_FUNCTIONS or callee in LIBRARY_CHECKPOINTING_HELPERS:
            # A project's own checkpoint wrapper: it runs one of its parameters checkpointed
            # (through torch's checkpoint, or a library's helper that hands its first
            # argument on to it, timm's `checkpoint_seq`):
            # `checkpoint(fn, x)`, `for f in functions: checkpoint(f, x)`, or timm's
            # `checkpoint(run_function(start, end, functions), x)` through a nested factory.
            parameters = self._parameters[-1]
            target = dotted(first) if first is not None else None
            if isinstance(first, ast.Name) and target not in parameters and loop_sources.get(target) in parameters:
                target = loop_sources[target]
            elif isinstance(first, ast.Call) and isinstance(first.func, ast.Name) and first.func.id in self._local_defs[-1]:
                passed = [arg.id for arg in first.args if isinstance(arg, ast.Name) and arg.id in parameters]
                if not passed:  # the factory closes over it: `def run(start, end): ... functions[j](_x)`
                    factory = self._local_defs[-1][first.func.id]
                    own = {a.arg for a in ast.walk(factory.args) if isinstance(a, ast.arg)}
                    passed = sorted({
                        n.id for n in ast.walk(factory) if isinstance(n, ast.Name) and n.id in parameters and n.id not in own
                    })
                target = passed[0] if len(passed) == 1 else None
            if target is not None and target in parameters:
                events.append(Event(EventKind.RUNS_CHECKPOINTED, target, line, column, api=callee))
        elif isinstance(call.func, ast.Attribute) and call.func.attr == "gradient_checkpointing_enable":
            target = dotted(call.func.value)
            if target is not None:
                events.append(Event(EventKind.HF_GC, target, line, column, api="gradient_checkpointing_enable",
                                    source=DEFAULT_KWARGS if default_checkpointing_kwargs(call) else ""))
        if callee in _DDP_CALLEES and call.keywords:
            self._ddp_use(call, callee, first, scope)
        if turns_fsdp_on(call):
            if callee is not None:
                if callee in TRAINING_ARGUMENTS_CLASSES:
                    self.fsdp.append(FsdpUse(FsdpKind.HF_TRAINER, self.path, line))
                else:
                    self.fsdp_argument_calls.append((callee, line))
        # A project function receiving a model: what it does to it is resolved later. Also
        # one a variable holds (`TrainerClass(accelerator, policy)`), named by the scope that
        # binds it: what it holds is the model's (`ckptlint.model.evaluation.fates.called_functions`).
        if callee is None and isinstance(call.func, ast.Name) and call.func.id not in self._parameters[-1]:
            callee = self._chosen_callable(call.func.id, scope)
        elif callee is None:
            callee = super_callee(call, enclosing_class)
        if callee is not None and not callee.startswith(LIBRARY_PREFIXES):
            resolve = lambda expr: self.resolve(expr, enclosing_class)  # noqa: E731
            for position, arg in enumerate(call.args):
                target = (dotted(arg) or passed_result(arg, resolve)) if not isinstance(arg, ast.Starred) else None
                if target is not None:
                    events.append(Event(EventKind.CALL, target, line, column, callee=callee, parameter=position,
                                        arguments=call_arguments(call, self._unchanged_parameters[-1])))
            for keyword in call.keywords:
                target = (dotted(keyword.value) or passed_result(keyword.value, resolve)) if keyword.arg else None
                if target is not None:
                    events.append(Event(EventKind.CALL, target, line, column, callee=callee, parameter=keyword.arg,
                                        arguments=call_arguments(call, self._unchanged_parameters[-1])))


# The calls that may set up DDP with `find_unused_parameters=True` (`_Extractor._ddp_use`).
_DDP_CALLEES = DDP | LIGHTNING_DDP_STRATEGY | ACCELERATE_DDP_KWARGS | LIGHTNING_ENTRY_POINTS | TRAINING_ARGUMENTS_CLASSES


def _is_true(expr: ast.AST | None) -> bool:
    return isinstance(expr, ast.Constant) and expr.value is True


def _is_module_class(base: str) -> bool:
    """`torch.nn.Module`, `nn.Module`, transformers' `PreTrainedModel` / `LlamaPreTrainedModel`."""
    return base.endswith((".Module", "PreTrainedModel")) or base == "Module"


def _is_static(function: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    return any(isinstance(d, ast.Name) and d.id in ("staticmethod", "classmethod") for d in function.decorator_list)
