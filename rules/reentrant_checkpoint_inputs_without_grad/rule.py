from __future__ import annotations

from ckptlint.lazy_libcst import cst

from ckptlint.analysis.checkpoint_sites import CheckpointSite, SiteKind
from ckptlint.analysis.fsdp import absolute_names
from ckptlint.analysis.reentrancy import in_old_torch_branch
from ckptlint.analysis.region_paths import shown
from ckptlint.analysis.regions import RegionRule
from ckptlint.analysis.transforms import use_reentrant_false
from ckptlint.model.library.torch import (
    EMBEDDING_FROM_PRETRAINED, EMBEDDING_MODULES, NO_GRAD_CONTEXTS, Reentrancy,
)
from ckptlint.model.form.values import Instance
from ckptlint.model.project.freezing_queries import Freezing, OutsideFreezing
from ckptlint.types import Applicability, Severity
from ckptlint.versions import Applies, VersionRange

from .origins import InputOrigins, Producers
from .outermost import outermost_model
from .trainable import ALL, PRETRAINED_EMBEDDING, WEIGHT_ONLY, TrainableParameters, frozen_attributes, without_unfrozen

# `use_reentrant` exists from torch 1.11: the fix needs it.
_USE_REENTRANT = (VersionRange.of("torch", min="1.11"),)


class ReentrantCheckpointInputsWithoutGrad(RegionRule):
    """A reentrant checkpoint none of whose tensor inputs requires grad, around trainable parameters.

    ## What it does
    Finds calls of `torch.utils.checkpoint.checkpoint` and `checkpoint_sequential` that run
    the reentrant implementation (`use_reentrant=True`, left out, or a project flag that is
    True wherever the project sets it) when every tensor they are given provably does not
    require grad, and the region they recompute (resolved as CKPT033 resolves regions) runs
    a parameterised module its class does not freeze:
    - the model's raw input: a parameter of the `forward` of the outermost model, passed
      straight in (`checkpoint(self.stem_and_block, pixel_values)`,
      `checkpoint_sequential(self.features, 3, images)` whose first segment holds the stem),
      also through a method of the model that only `forward` calls, with that input
      (`x = self._checkpointed_forward(x)`).
      Outermost means that the project builds the class only outside classes (a script, a
      `main()`, a builder function called there), never holds it as a value and never
      derives from it; a block that a parent module builds gets activations, and so does
      a model the project calls on another model's output (`denoiser(context)` with
      `context = text_encoder(ids)[0]`, in the function that builds it or one it is
      handed to);
    - the output of an embedding the class freezes itself (`self.embed.requires_grad_(False)`,
      `p.requires_grad = False` over `self.embed.parameters()`, `weight.requires_grad =
      False`, `nn.Embedding.from_pretrained(w)`, which freezes by default), or of another
      module it freezes when that module is given such an input;
    - the same, frozen from outside the class: a training script that builds the model and
      freezes part of it (`model = Net(); model.embed.requires_grad_(False)`, a loop over
      `model.patch_embed.parameters()`, a helper it calls with the model), or a wrapper's
      constructor freezing a module of the model it holds (`self.encoder.tok_embed`); the
      project model resolves which class's instance each statement freezes, across files, and
      the message names the line. What that script freezes besides counts for the regions
      (`model.blocks.requires_grad_(False)` too: nothing in them trains, no finding);
    - a value computed under `with torch.no_grad():` / `torch.inference_mode()`, or
      `.detach()`ed;
    - the output of another such reentrant region (the cut cascades: each checkpointed block
      after a frozen embedding is reported).
    Shape and dtype methods (`.to()`, `.view()`, `.permute()`...), indexing and arithmetic
    with constants keep the origin; anything else (a trainable layer, `x + self.pos_embed`)
    counts as requiring grad.

    Not reported: a stem run before the region (its output requires grad); an input made to
    require grad (any `requires_grad` in the function: `x.requires_grad_()`, `if
    x.requires_grad:` guards); the non-reentrant implementation (`use_reentrant=False`,
    `checkpoint_wrapper`'s default); a region with no trainable parameter (frozen by its
    class, or a function of tensors alone); a block whose `forward` a parent module calls;
    a project function named `checkpoint`; Hugging Face gradient checkpointing on a frozen
    or PEFT model (CKPT021's); freezing by a subclass of another file, or by a method the
    class offers and a script calls (`model.lock_image_tower()`), by a parameterised freezer
    (`p.requires_grad = requires_grad`), by OpenMMLab's `frozen_stages`; freezing from outside
    that does not always run (under an `if`, in a loop over epochs), that filters parameters
    by name, or that anything may undo: the same function making the module (or a module the
    project model cannot name) trainable again, a function that freezes nothing of the class
    making it trainable (a trainer's `unfreeze` after some epochs), a method of the class
    itself.

    ## Why is this bad?
    The reentrant implementation is an `autograd.Function` whose forward runs the region
    under `torch.no_grad()`. Its outputs join the autograd graph only when one of its tensor
    inputs requires grad; the parameters the region reads are not inputs. When none does,
    the region's output does not require grad and backward never reaches the region: its
    parameters get no gradient, silently (torch only prints one unattributed
    `UserWarning: None of the inputs have requires_grad=True. Gradients will be None` per
    process). Every later reentrant region fed from it is cut the same way. When nothing
    after the regions trains, backward fails with `RuntimeError: element 0 of tensors does
    not require grad and does not have a grad_fn`.

    ## Example
    ```python
    class Net(nn.Module):
        def forward(self, pixel_values):
            h = checkpoint(self.stem_and_block, pixel_values, use_reentrant=True)
            return self.head(h)
    ```

    ## Use instead
    ```python
            h = checkpoint(self.stem_and_block, pixel_values, use_reentrant=False)
    ```
    or run the stem outside the region, or `pixel_values.requires_grad_()` first.

    ## Fix safety
    The fix sets `use_reentrant=False`. It is **safe**: today the region does not train, and
    the non-reentrant implementation records the parameters' gradients whatever the inputs.
    No fix when the flag comes from a partial, a positional argument or a project setting,
    nor when the project also supports torch older than 1.11 (no `use_reentrant`).

    ## Evidence
    torch 2.13.0+cpu, a script of our own (not kept in the repository); "grads" = trainable
    parameters with a non-zero `.grad` after one backward:
    - `checkpoint(self.stem_and_block, pixel_values, use_reentrant=True)` (two convs) then a
      trainable head: grads 2/6 (the head only), with `UserWarning: None of the inputs have
      requires_grad=True. Gradients will be None` attributed to `torch/utils/checkpoint.py:238`;
      the same with `use_reentrant` left out; `use_reentrant=False`: 6/6;
      `pixel_values.requires_grad_()` first: 6/6;
    - the same region with nothing trainable after it: `RuntimeError: element 0 of tensors
      does not require grad and does not have a grad_fn`;
    - an embedding frozen with `requires_grad_(False)` (or `p.requires_grad = False` over its
      parameters) feeding three checkpointed `Linear` blocks and a head: grads 2/8, none of
      the three blocks (the cascade), one warning per process; non-reentrant: 8/8;
    - the embedding run under `torch.no_grad()`, or `.detach()`ed: the same, 2/9 (embedding
      and blocks without); non-reentrant: 8/9 (the embedding only);
    - `checkpoint_sequential(self.features, 3, images, use_reentrant=True)` over six layers
      (two convs in the first two segments): grads 2/6, the last segment's conv only;
      non-reentrant: 6/6;
    - a region whose parameters are all frozen: the warning, every trainable parameter gets
      its gradient.
    - frozen from outside (same torch): `TinyLM` of the case whose script calls
      `model.embed.requires_grad_(False)`, blocks checkpointed with `use_reentrant` left out:
      grads 2/20 (the head), non-reentrant 20/20; the ViT of `fixtures/projects/script_freezing`
      with `p.requires_grad = False` over `model.patch_embed.parameters()` in `finetune.py`:
      4/28 (the final norm and head), non-reentrant 28/28; the contrastive wrapper whose
      constructor freezes `self.encoder.tok_embed` and whose loss comes from the checkpointed
      layers alone: `RuntimeError: element 0 of tensors does not require grad and does not
      have a grad_fn` at the first backward, non-reentrant 72/72.
    The reported cases of this rule and the `fixtures/projects/frozen_inputs` models, run as
    written and after the fix (same torch): the classifier's stem 2/6 -> 6/6, the frozen
    embedding's blocks 2/20 -> 20/20, `checkpoint_sequential` 4/8 -> 8/8, the neck after
    `no_grad` 2/8 -> 6/8 (the backbone under `no_grad` stays frozen), the detached projector
    `RuntimeError` -> 2/4, `from_pretrained` + a parameters loop `RuntimeError` -> 24/24,
    `ConvBackbone` (eight layers, four segments) 6/24, the `from_pretrained` `TextEncoder`
    2/20, the `DualEncoder`'s text projection without gradient; the negatives' models get
    every gradient (a stem run first 10/10, `requires_grad_()` 4/4, a trainable layer's
    output 51/51, the patch-embedding backbone 28/28).
    torch 2.13 `torch/utils/checkpoint.py`: `CheckpointFunction.forward` calls
    `check_backward_validity(args)` (the warning, `stacklevel=2`) and runs
    `with torch.no_grad(): outputs = run_function(*args)`. Threads: pytorch/pytorch#42812,
    facebookresearch/fairseq#3583, mlfoundations/open_clip#573.
    """

    code = "CKPT007"
    severity = Severity.ERROR
    name = "reentrant-checkpoint-inputs-without-grad"
    message = "a reentrant checkpoint none of whose inputs requires grad: the parameters inside get no gradient"
    fix = Applicability.SAFE
    supersedes = ("CKPT001",)

    def __init__(self, context) -> None:
        super().__init__(context)
        self._definitions: list[cst.CSTNode] = []
        self._enclosing: dict[cst.Call, tuple[cst.ClassDef | None, cst.FunctionDef | None]] = {}
        self._origins: dict[cst.FunctionDef, InputOrigins] = {}
        self._outermost: dict[str, str | None] = {}
        self._frozen: dict[cst.ClassDef, dict[str, tuple[str, int]]] = {}
        self._classdefs: dict[str, cst.ClassDef] = {}  # the file's top-level classes
        self._outside_freezing: dict[cst.ClassDef, OutsideFreezing | None] = {}
        self._cited_freezings: dict[str, Freezing] = {}  # by where (`train.py:12`), as reasons cite them

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        super().visit_ClassDef(node)
        if not self._definitions:
            self._classdefs[f"{self._module}.{node.name.value}"] = node
        self._definitions.append(node)

    def leave_ClassDef(self, original_node: cst.ClassDef) -> None:
        super().leave_ClassDef(original_node)
        self._definitions.pop()

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        super().visit_FunctionDef(node)
        self._definitions.append(node)

    def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
        super().leave_FunctionDef(original_node)
        self._definitions.pop()

    def visit_Call(self, node: cst.Call) -> None:
        super().visit_Call(node)
        function = self._definitions[-1] if self._definitions and isinstance(self._definitions[-1], cst.FunctionDef) else None
        classdef = next((d for d in reversed(self._definitions) if isinstance(d, cst.ClassDef)), None)
        self._enclosing[node] = (classdef, function)

    # --- the check -----------------------------------------------------------------------------

    def visit_checkpoint_site(self, site: CheckpointSite) -> None:
        if site.kind is not SiteKind.CALL or in_old_torch_branch(self.context, site.node):
            return
        configured = None
        if site.reentrancy is Reentrancy.UNKNOWN:
            configured = self.configured_reentrant(site)
            if configured is None:
                return
        elif not site.reentrancy.is_reentrant:
            return
        if self.guard_never_holds(site.node):
            return
        classdef, function = self._enclosing.get(site.node, (None, None))
        inputs = [arg.value for arg in site.positional if not _constant(arg.value)]
        if function is None or not inputs or any(arg.star for arg in site.positional):
            return
        origins = self._origins_in(function, classdef)
        reasons = [origins.of(value, site.node) for value in inputs]
        if not reasons or any(not reason for reason in reasons):
            return
        region = self.site_region(site)
        if region is None:
            return
        # Where an input is frozen by a script, what that script freezes besides (its
        # run trains what it leaves trainable).
        scripts = {
            f.function for where, f in self._cited_freezings.items() if any(_citing(where) in reason for reason in reasons)
        }
        frozen = {**self._frozen_from_outside(classdef, scripts), **self._frozen_of(classdef)}
        owner = f"{self._module}.{classdef.name.value}" if classdef is not None else None
        trainable = TrainableParameters(self.context.project, frozen, owner).of(
            region.runs, _first_attribute(site.function), region.label
        )
        if not trainable:
            return
        self._report(site, reasons[0], trainable, configured)

    def _report(self, site: CheckpointSite, reason: str, trainable: list[str], configured: str | None) -> None:
        api = site.api.short_name
        how = configured or ("`use_reentrant=True`" if site.reentrancy is Reentrancy.EXPLICIT_TRUE else "`use_reentrant` left out")
        message = (
            f"`{api}` runs the reentrant implementation ({how}) and none of its tensor inputs requires grad "
            f"({reason}): backward never reaches the region, so its parameters ({shown(trainable, 2)}) get no "
            "gradient, nor do those of later reentrant regions fed from it (torch only warns, once, \"None of the "
            "inputs have requires_grad=True\"); pass `use_reentrant=False`"
        )
        if configured is None and self._fixable(site):
            self.report(
                site.node,
                message,
                replacements=[use_reentrant_false(site.node)],
                fix_message="Set `use_reentrant=False`",
            )
        else:
            self.report(site.node, message)

    def _fixable(self, site: CheckpointSite) -> bool:
        if site.via_partial is not None or site.imported_partial is not None or site.has_star_kwargs:
            return False
        if self.context.versions.applies(_USE_REENTRANT) is Applies.NO:
            return False
        if site.reentrancy is Reentrancy.IMPLICIT:
            return True
        return any(arg.keyword is not None and arg.keyword.value == "use_reentrant" for arg in site.node.args)

    # --- what the origins ask ------------------------------------------------------------------

    def _origins_in(self, function: cst.FunctionDef, classdef: cst.ClassDef | None) -> InputOrigins:
        found = self._origins.get(function)
        if found is None:
            producers = Producers(
                position=lambda node: self.context.position(node).start.line,
                is_no_grad_context=self._is_no_grad_context,
                frozen_call=lambda call: self._frozen_call(call, classdef),
                checkpoint_inputs=self._checkpoint_inputs,
                model_input=lambda name: self._model_input(name, function, classdef),
            )
            found = self._origins[function] = InputOrigins(function, producers)
        return found

    def _is_no_grad_context(self, item: cst.BaseExpression) -> bool:
        return isinstance(item, cst.Call) and bool(absolute_names(self.context, item.func) & NO_GRAD_CONTEXTS)

    def _frozen_call(self, call: cst.Call, classdef: cst.ClassDef | None) -> tuple[str, bool] | None:
        """`self.A(...)` with A frozen by the class: (why, whether its output never requires grad)."""
        func = call.func
        if classdef is None or not (isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == "self"):
            return None
        attribute = func.attr.value
        frozen = self._frozen_of(classdef).get(attribute) or self._frozen_of(classdef).get(ALL)
        if frozen is not None:
            how, line = frozen
            where = f"which `{classdef.name.value}` freezes at line {line}"
        else:
            outside = self._outside(classdef)
            held = outside.holds(attribute) if outside is not None else None
            if held is None:
                return None
            how, where = held.api, f"{_citing(held.where)} (`{held.written}`)"
            self._cited_freezings[held.where] = held
        _, values = self.values_at(call, func)
        project = self.context.project
        embedding = how == PRETRAINED_EMBEDDING or bool(values) and all(
            isinstance(v, Instance) and EMBEDDING_MODULES & set(project.ancestors(v.cls)) for v in values
        )
        if how == WEIGHT_ONLY and not embedding:
            return None
        what = "embedding" if embedding else "module"
        return f"the output of the {what} `self.{attribute}`, {where}", embedding

    def _outside(self, classdef: cst.ClassDef) -> OutsideFreezing | None:
        """What code outside the class freezes of its instances, less what the class itself
        unfreezes (None: nothing)."""
        if classdef not in self._outside_freezing:
            found = self.context.project.frozen_from_outside(f"{self._module}.{classdef.name.value}")
            if found.freezings:
                # `without_unfrozen` keeps the attributes no method of the class unfreezes.
                frozen = {f.attribute: f for f in found.freezings}
                kept = without_unfrozen(frozen, classdef)
                found = OutsideFreezing(found.freezings, found.unfrozen | (frozen.keys() - kept.keys()))
            self._outside_freezing[classdef] = found if found.freezings else None
        return self._outside_freezing[classdef]

    def _frozen_from_outside(self, classdef: cst.ClassDef | None, functions: set[str]) -> dict[str, tuple[str, int]]:
        """The attributes of the class that `functions` (outside it) freeze, as
        `TrainableParameters` takes them: the whole instance but what is made trainable again
        is each of its other children (`model.requires_grad_(False)`, then
        `model.head.requires_grad_(True)`). A run of one script freezes what that script does."""
        outside = self._outside(classdef) if classdef is not None and functions else None
        if outside is None:
            return {}
        outside = OutsideFreezing(tuple(f for f in outside.freezings if f.function in functions), outside.unfrozen)
        frozen = {
            f.attribute: (f.api, 0) for f in outside.freezings if f.attribute != ALL and outside.holds(f.attribute) is f
        }
        whole = outside.holds(ALL)
        if whole is not None and whole.attribute == ALL:
            if not whole.kept_trainable:
                frozen[ALL] = (whole.api, 0)
            else:
                denotation = self.context.project.denotation
                for attribute in denotation.children(denotation.instance(f"{self._module}.{classdef.name.value}")):
                    if attribute != ALL and outside.holds(attribute) is whole:
                        frozen.setdefault(attribute, (whole.api, 0))
        return frozen

    def _frozen_of(self, classdef: cst.ClassDef | None) -> dict[str, tuple[str, int]]:
        if classdef is None:
            return {}
        found = self._frozen.get(classdef)
        if found is None:
            found = frozen_attributes(
                classdef, lambda call: bool(absolute_names(self.context, call.func) & EMBEDDING_FROM_PRETRAINED)
                and not any(arg.keyword is not None and arg.keyword.value == "freeze" for arg in call.args),
                lambda node: self.context.position(node).start.line,
            )
            found = self._frozen[classdef] = self._kept_by_subclasses(classdef, found)
        return found

    def _kept_by_subclasses(self, classdef: cst.ClassDef, frozen: dict[str, tuple[str, int]]) -> dict[str, tuple[str, int]]:
        """What a class freezes, less what its subclasses unfreeze (a subclass of another file,
        not read here, may unfreeze anything)."""
        project = self.context.project
        owner = f"{self._module}.{classdef.name.value}"
        for other in project.subclasses_of(owner) if frozen else ():
            subclass = self._classdefs.get(other)
            if subclass is None:
                return {}
            frozen = without_unfrozen(frozen, subclass)
        return frozen

    def _checkpoint_inputs(self, call: cst.Call) -> tuple[cst.BaseExpression, ...] | None:
        site = next((s for s in self.context.sites if s.node is call and s.kind is SiteKind.CALL), None)
        if site is None or not site.reentrancy.is_reentrant or any(arg.star for arg in site.positional):
            return None
        return tuple(arg.value for arg in site.positional if not _constant(arg.value)) or None

    def _model_input(self, name: str, function: cst.FunctionDef, classdef: cst.ClassDef | None) -> str | None:
        """`name` is a parameter of `function`: the model's raw input when `function` is the
        `forward` of the outermost model, or a method of it that only `forward` calls, each
        time with such an input (`def forward(self, x): return self._checkpointed_forward(x)`)."""
        if classdef is None or function not in classdef.body.body:
            return None
        parameters = function.params.params
        if not parameters or name == parameters[0].name.value or any(p.name.value == name for p in function.params.kwonly_params):
            return None
        if function.name.value != "forward":
            return self._handed_by_forward(name, function, classdef)
        owner = f"{self._module}.{classdef.name.value}"
        if owner not in self._outermost:
            self._outermost[owner] = outermost_model(self.context.project, owner)
        built = self._outermost[owner]
        if built is None:
            return None
        return f"`{name}`, the input of `{classdef.name.value}.forward`, the outermost model (built at {built})"

    def _handed_by_forward(self, name: str, method: cst.FunctionDef, classdef: cst.ClassDef) -> str | None:
        """Why every call of `self.<method>(...)` in the class passes, for `name`, what does
        not require grad; None unless all of them are in `forward` and do."""
        position = [p.name.value for p in method.params.params].index(name) - 1
        calls = [
            call for call, (owner, _) in self._enclosing.items()
            if owner is classdef and isinstance(call.func, cst.Attribute) and call.func.attr.value == method.name.value
            and isinstance(call.func.value, cst.Name) and call.func.value.value == "self"
        ]
        reasons = []
        for call in calls:
            caller = self._enclosing[call][1]
            if caller is None or caller.name.value != "forward" or caller not in classdef.body.body:
                return None
            if any(arg.star or arg.keyword is not None for arg in call.args[: position + 1]) or len(call.args) <= position:
                return None
            reasons.append(self._origins_in(caller, classdef).of(call.args[position].value, call))
        return reasons[0] if reasons and all(reasons) else None


def _citing(where: str) -> str:
    """How a reason cites a freezing done outside the class (`which train.py:12 freezes`)."""
    return f"which {where} freezes"


def _constant(expr: cst.BaseExpression) -> bool:
    """A value that is no tensor: a literal, None, a string."""
    if isinstance(expr, cst.Name):
        return expr.value in ("None", "True", "False")
    return isinstance(expr, (cst.Integer, cst.Float, cst.SimpleString, cst.ConcatenatedString, cst.FormattedString))


def _first_attribute(function: cst.BaseExpression | None) -> str | None:
    """`A` of `self.A` / `self.A[0]` as the checkpointed callable."""
    while isinstance(function, cst.Subscript):
        function = function.value
    if isinstance(function, cst.Attribute) and isinstance(function.value, cst.Name) and function.value.value == "self":
        return function.attr.value
    return None
