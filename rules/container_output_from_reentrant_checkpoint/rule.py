from __future__ import annotations

from ckptlint.lazy_libcst import cst

from ckptlint.analysis.checkpoint_sites import CheckpointApi, CheckpointSite, SiteKind
from ckptlint.analysis.reentrant_sites import reentrant_run
from ckptlint.analysis.regions import RegionRule
from ckptlint.analysis.transforms import use_reentrant_false
from ckptlint.analysis.model_expressions import read
from ckptlint.model.evaluation.returned_containers import ContainerReturn, list_form, returned_containers
from ckptlint.model.form.values import FunctionRef, Instance
from ckptlint.model.library.transformers import RETURN_DICT
from ckptlint.types import Applicability, Severity


class ContainerOutputFromReentrantCheckpoint(RegionRule):
    """A reentrant `checkpoint` whose function returns its tensors in a dict, a dataclass or a Hugging Face `ModelOutput`.

    ## What it does
    Finds calls of `torch.utils.checkpoint.checkpoint` that run the reentrant implementation
    (`use_reentrant=True` written at the call or bound by the `functools.partial` it goes
    through; `use_reentrant` omitted, torch's reentrant default; an expression the project
    only ever sets to True) and whose checkpointed function hands back its tensors inside
    a container that is no tuple:
    - a dict (`return {"hidden": h, "pooled": p}`, `dict(...)`, an `OrderedDict`, a name
      bound to one; not a dict holding literals only);
    - a list (`return [h, p]`, a list comprehension, a name bound only to lists: a stage
      collecting its blocks' outputs with `features.append(x)` for a feature pyramid; not a
      list of literals only, nor one turned into a tuple: `return tuple(features)`), also
      inside a returned tuple (`return x, features`, the intermediate features of a dense
      prediction head) when the call unpacks the output and the function reads the list's
      name again (`out, features = checkpoint(...)`, then the auxiliary heads on `features`):
      the tuple's own tensors keep their gradient path, the list's lose theirs, and the
      message says so; a list dropped there (`out, _ = ...`), never read, or handed on
      unpacked is not reported (what its reader does with it is not followed);
    - an instance of a `@dataclass` of the project;
    - a Hugging Face `ModelOutput` (a transformers output class such as
      `BaseModelOutputWithPooling`, or a project subclass of `ModelOutput` / diffusers'
      `BaseOutput`);
    - what a transformers model returns when called without `return_dict=False`:
      `checkpoint(self.vision_tower, pixel_values)` with the tower a `CLIPVisionModel`,
      `AutoModel.from_pretrained(...)` or a project subclass of one, and a project model's
      `forward` that returns one of the above.
    The function is followed through the project model, across files: a module
    (`self.tower`), a method or nested function, `create_custom_forward(module)`, a lambda
    (`lambda p: self.tower(p)`), and the module or function its `return` calls.

    Not reported: indexing inside the region (`lambda p: tower(p).last_hidden_state`,
    `tower(p)[0]`, `.to_tuple()`, `stage(y)[-1]`), `return_dict=False` at the call inside the region (or in
    the wrapper that calls the model, or in `from_pretrained`), tuples and plain tensors,
    an encoder that is a transformers model on one branch of the constructor and a
    torchvision or timm model (a tensor) on another (every module the name may hold must
    return a container), the non-reentrant implementation (`use_reentrant=False`, `checkpoint_wrapper`'s default,
    transformers >= 5's gradient checkpointing), a project function called `checkpoint`,
    anything the model cannot resolve. A namedtuple is not reported: the reentrant
    implementation hands it back as a plain tuple, whose tensors do get gradients, and
    reading a field raises `AttributeError: 'tuple' object has no attribute 'hidden'` at
    the first forward, so the mistake cannot pass unseen. Not followed: DeepSpeed's
    `checkpoint` and Hugging Face's `_gradient_checkpointing_func` (whose checkpointed
    layers return tuples or tensors).

    ## Why is this bad?
    The reentrant checkpoint is an `autograd.Function` whose `forward` runs the function
    under `torch.no_grad()` and returns what it returns. autograd attaches the function's
    backward only to the tensors it returns directly or in a tuple; a dict, a dataclass or
    a `ModelOutput` is passed through as it is, with tensors computed under `no_grad`: they
    do not require grad, so nothing inside the region ever gets a gradient. The loss still
    goes down (the layers after the region train), no error is raised and no warning is
    printed: a vision tower "fine-tuned" this way stays frozen.

    ## Example
    ```python
    class Llava(nn.Module):
        def __init__(self):
            super().__init__()
            self.vision_tower = CLIPVisionModel.from_pretrained("openai/clip-vit-large-patch14")
            self.projector = nn.Linear(1024, 4096)

        def forward(self, pixel_values):
            out = checkpoint(self.vision_tower, pixel_values, use_reentrant=True)
            return self.projector(out.last_hidden_state)
    ```

    ## Use instead
    ```python
            out = checkpoint(self.vision_tower, pixel_values, use_reentrant=False)
    ```
    (or return a tensor or tuple from the region:
    `checkpoint(lambda p: self.vision_tower(p, return_dict=False)[0], pixel_values, use_reentrant=True)`).

    ## Fix safety
    The fix sets `use_reentrant=False` at the call, and is **safe**: the region trains
    nothing today, and the non-reentrant implementation keeps the container's tensors
    attached to the graph (its output is the function's own). Not offered where the flag
    comes from a configured option or a splatted dict, nor where the targeted torch is
    older than 1.11 (no `use_reentrant`).

    ## Evidence
    torch 2.13.0+cpu, transformers 5.17.0 (a script of our own, not kept in the repository):
    a module `Linear -> Linear` returning its two outputs, checkpointed with an input that
    requires grad, the first output fed to a trainable `Linear` head:
    - `use_reentrant=True`, returning a dict, a `@dataclass` or a
      `BaseModelOutputWithPooling`: the output's tensors have `requires_grad=False` and no
      `grad_fn`; after `backward()` none of the module's 4 parameters has a gradient, the
      head's have; no warning, no error (a list behaves the same);
    - returning a tuple or a tensor: `grad_fn=CheckpointFunctionBackward`, every parameter
      used gets its gradient;
    - returning a namedtuple: the output is a plain `tuple`, `out.hidden` raises
      `AttributeError: 'tuple' object has no attribute 'hidden'`;
    - `use_reentrant=False`: every container keeps its tensors in the graph
      (`grad_fn=AddmmBackward0`), the module's parameters get their gradients.
    A tiny `CLIPVisionModel` built from its config (2 layers): `checkpoint(tower, pixels,
    use_reentrant=True)` gives 0 of its 39 parameters a gradient; `lambda p: tower(p,
    return_dict=False)`, a config with `return_dict=False` or `.to_tuple()` in the region
    give 39 of 39, `lambda p: tower(p).last_hidden_state` and `tower(p)[0]` 37 of 39 (the
    pooler is unused), `use_reentrant=False` 37 of 39. The same measured with transformers
    4.46.3. With inputs that do not require grad (raw pixels) torch also prints `UserWarning:
    None of the inputs have requires_grad=True. Gradients will be None` (CKPT007's case);
    the container loses the gradients whatever the inputs. torch
    `utils/checkpoint.py`, `CheckpointFunction.forward`: `with torch.no_grad(): outputs =
    run_function(*args)`, `return outputs`; pytorch/pytorch#124725, where a maintainer
    calls it "expected behavior due to limitation of use_reentrant=True" and quotes the
    docs: "The reentrant version does not consider tensors in nested structures (e.g.,
    custom objects, lists, dicts, etc) as participating in autograd". Lists, measured on
    torch 2.13.0+cpu: `checkpoint(lambda t: [lin(t), lin(t) * 2], x, use_reentrant=True)`
    returns a `list` whose tensors have `requires_grad=False` (a tuple's: True; a list inside
    a returned tuple: False as well); the `PyramidBackbone` of this rule's list case (a stage
    of three conv blocks appending each output): 0 of the stage's 12 parameters get a
    gradient, nor does the stem before it (the cut reaches back), the fusion conv after it
    does; `use_reentrant=False`: 12 of 12 and the stem. Backward from the list's tensors
    alone raises `RuntimeError: element 0 of tensors does not require grad and does not have
    a grad_fn`. A region `a = lin(t); b = lin2(a); return b, [a, b]` with the loss
    `out.sum() + feats[0].pow(2).sum()`: reentrant, `feats[0].requires_grad` is False (`b`
    in the list is the tuple's own tensor, so it keeps its path) and the gradient of `lin`'s
    weight has norm 5.51 against 14.39 non-reentrant: the list's term is dropped, silently.
    The `DenseModel` of the tuple case (eval mode, so both runs compute the same): the first
    encoder layer's gradient differs from the non-reentrant one by a relative L2 of 0.71
    (norm 4.11 against 4.86); the auxiliary heads train in both. A tuple nested in the
    returned tuple behaves as the list: `lambda t: (lin2(lin(t)), (lin(t),))` hands back the
    inner tensor with `requires_grad=False` (not reported: a nested tuple is also how a layer
    hands back a KV cache no loss reads).
    """

    code = "CKPT035"
    severity = Severity.ERROR
    name = "container-output-from-reentrant-checkpoint"
    message = (
        "reentrant `checkpoint` ({why}) of {label}, which returns {what}: the reentrant implementation hands "
        "the container back with tensors that do not require grad, so nothing inside the region gets a "
        "gradient (no error, no warning); pass `use_reentrant=False`"
    )
    fix = Applicability.SAFE
    supersedes = ("CKPT001",)

    def visit_checkpoint_site(self, site: CheckpointSite) -> None:
        if site.kind is not SiteKind.CALL or site.api is not CheckpointApi.CHECKPOINT or site.function is None:
            return
        run = reentrant_run(self, site)
        if run is None or self.guard_never_holds(site.node):
            return
        found = self._containers(site)
        if not found:
            return
        label = _code(site.function)
        label = f"`{label}`" if len(label) <= 60 else "its function"
        if all(item.nested for item in found):
            if not self._nested_used(site.node, {i for item in found for i in item.nested}):
                return  # the list is dropped where the region's output is unpacked
            message = NESTED_MESSAGE
        else:
            message = self.message
        self.report(
            site.node,
            message.format(why=run.why, label=label, what=_shown(found)),
            replacements=[use_reentrant_false(site.node)]
            if run.fixable else [],
            fix_message="Set `use_reentrant=False`",
        )

    def finish(self) -> None:
        """Wrapped modules are `checkpoint_wrapper`'s (non-reentrant by default): nothing here."""

    def _nested_used(self, call: cst.Call, positions: set[int]) -> bool:
        """Whether the output is unpacked where it is computed (`out, features = checkpoint(...)`)
        and a name taking a nested container is read again in the function: a list that is
        only dropped (`out, _ = ...`) or never read costs no gradient."""
        statement, function = self.assignment_of(call), self.function_of(call)
        if statement is None or len(statement.targets) != 1 or not isinstance(statement.targets[0].target, (cst.Tuple, cst.List)):
            return False
        elements = statement.targets[0].target.elements
        targets = [
            element.value for i, element in enumerate(elements)
            if i in positions and isinstance(element.value, cst.Name) and element.value.value != "_"
        ]
        if not targets or function is None:
            return False
        # A read the project model's scopes resolve to one of these targets.
        names = self.context.names
        return any(
            node not in targets and any(bound.target in targets for bound in names.bindings(node) or ())
            for node in _names_in(function) if any(node.value == target.value for target in targets)
        )

    def _containers(self, site: CheckpointSite) -> list[ContainerReturn]:
        function = site.function
        denotation = self.context.project.denotation
        if isinstance(function, cst.Lambda):
            body = function.body
            if isinstance(body, cst.Dict) or (isinstance(body, cst.Call) and _code(body.func) == "dict"):
                return [ContainerReturn("a dict", ())]
            if list_form(read(body)):
                return [ContainerReturn("a list", ())]
            if not isinstance(body, cst.Call):
                return []  # indexed or read inside the region: a tensor or tuple comes out
            function, return_dict = body.func, _return_dict(body)
        else:
            return_dict = _return_dict(function) if isinstance(function, cst.Call) else None
        _, values = self.values_at(site.node, function)
        runs = [v for v in denotation.runs(self.not_ruled_out(site.node, function, values)) if isinstance(v, (Instance, FunctionRef))]
        found: list[ContainerReturn] = []
        for value in runs:
            containers = returned_containers(denotation, value, return_dict)
            if not containers:
                return []  # one of what the name may denote returns a tensor or tuple, or is not known
            found.extend(containers)
        return found


NESTED_MESSAGE = (
    "reentrant `checkpoint` ({why}) of {label}, which returns {what}: the reentrant implementation attaches "
    "its backward only to the tensors it returns directly, so whatever the loss takes from the list sends no "
    "gradient into the region (the gradients are silently wrong); pass `use_reentrant=False`"
)


def _return_dict(call: cst.Call) -> bool | None:
    """The literal `return_dict=` a call passes (a partial binds), if any."""
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == RETURN_DICT:
            value = arg.value
            if isinstance(value, cst.Name) and value.value in ("True", "False", "None"):
                return {"True": True, "False": False, "None": None}[value.value]
            return None if not isinstance(value, (cst.Integer,)) else bool(int(value.value))
    return None


def _shown(found: list[ContainerReturn]) -> str:
    shown = sorted({item.shown() for item in found})
    return shown[0] if len(shown) == 1 else "; ".join(shown[:3]) + (f" and {len(shown) - 3} more" if len(shown) > 3 else "")


def _names_in(node: cst.CSTNode) -> list[cst.Name]:
    found: list[cst.Name] = []

    class Names(cst.CSTVisitor):
        def visit_Name(self, name: cst.Name) -> None:
            found.append(name)

    node.visit(Names())
    return found


def _code(node: cst.CSTNode) -> str:
    return cst.Module([]).code_for_node(node)
