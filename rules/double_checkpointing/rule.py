from __future__ import annotations

from functools import cached_property

from ckptlint.lazy_libcst import cst

from ckptlint.analysis.checkpoint_sites import CheckpointSite, SiteKind
from ckptlint.analysis.branches import BranchPath, branch_paths
from ckptlint.analysis.fsdp import WrapStep, call_at
from ckptlint.model.library.transformers import GC_ENABLE
from ckptlint.analysis.huggingface import gc_enable_kwargs
from ckptlint.analysis.region_paths import region_checkpoints, shown
from ckptlint.analysis.regions import RegionRule, mentions_checkpointing
from ckptlint.model.file_facts.facts import EventKind, Impl
from ckptlint.model.syntax.names import module_name
from ckptlint.model.form.values import Constant, FunctionRef, Instance, arguments_of, truthiness
from ckptlint.model.library.torch import NESTING_SUPPORTED
from ckptlint.versions import Applies
from ckptlint.types import Severity

from .accelerate_plugin import plugin_checkpointed
from .flag_guards import conjuncts, guard_off, reads_flag
from .same_model import describe, same_model_twice

class DoubleCheckpointing(RegionRule):
    """The same layers checkpointed twice.

    ## What it does
    Finds two checkpointing mechanisms applied to the same layers:

    - Hugging Face `model.gradient_checkpointing_enable()` and torch's
      `apply_activation_checkpointing` (or `checkpoint_wrapper` on the model's layers) on the
      same model, also when the model was wrapped by FSDP in between or one of them happens
      in a project function the model is passed to;
    - a `checkpoint(...)` call inside a module class whose instances are also wrapped by
      `checkpoint_wrapper` (`apply_activation_checkpointing(check_fn=lambda m:
      isinstance(m, Block))`, a wrap policy naming the class, `checkpoint_wrapper(Block())`,
      Lightning's `activation_checkpointing_policy`, accelerate's
      `transformer_cls_names_to_wrap` with activation checkpointing on), in any file of the
      project; behind `if self.<flag>:` only when the flag is on wherever the project builds
      the class (a constructor default of True that no construction overrides).

    - a checkpointed region that runs a module (or function) which checkpoints its own
      forward again: the OpenMMLab `with_cp` flag passed down to an inner block
      (`self.context = GlobalContext(c, with_cp=with_cp)` whose forward runs
      `cp.checkpoint(_inner_forward, x)` when `self.with_cp and x.requires_grad`), or plain
      `checkpoint` inside `checkpoint` in the project's own code, in any file. The region is
      resolved with the outer site's guard taken to hold (a block built with `with_cp=True`
      passes it on); an inner module built with its flag off (`with_cp=False`) is not
      reported.

    - Hugging Face `model.gradient_checkpointing_enable()` on a model that an `Accelerator`
      built with `FullyShardedDataParallelPlugin(activation_checkpointing=True)` prepares
      in the same function (`accelerator.prepare(model, ...)`): accelerate applies torch's
      `apply_activation_checkpointing` with a `NO_REENTRANT` wrapper to the layers its wrap
      policy selects, so the rule below decides by the Hugging Face side.

    - a module wrapped by `checkpoint_wrapper` / `apply_activation_checkpointing` whose
      children checkpoint again in their forward (a layer's attention calling `checkpoint`
      on its kernel, as a `--inner-ckpt` option turns on), reported at the wrapper; an inner
      guard known to be off (a child built with `with_cp=False`) is not.

    Both sites are named in the message.

    Reported when the nesting really recomputes twice: one of the two is reentrant (HF
    gradient checkpointing on transformers < 5.0 without kwargs, a kwargs dict without
    `use_reentrant`, `CheckpointImpl.REENTRANT`, `use_reentrant=True` or omitted), the
    targeted torch is older than 2.1 (or unknown), or the inner checkpoint is not the last
    thing the outer region computes. Non-reentrant nested in non-reentrant on torch >= 2.1
    recomputes once only when the inner checkpoint's value is what the outer region returns
    (`return checkpoint(self.body, x, use_reentrant=False)` in the wrapped forward, or Hugging
    Face's checkpoint of a whole decoder layer inside torch's wrapper of that layer): torch
    stops the outer recomputation as soon as it has the inner checkpoint's inputs (early
    stop). That case is not reported. When the outer region computes anything after the
    inner checkpoint, the outer recomputation runs the inner layers again, and the inner
    checkpoint's own backward runs them a third time.

    ## Why is this bad?
    With a reentrant implementation on either side, each layer's forward runs three times
    per step instead of two: the outer recomputation runs the inner checkpoint, whose
    backward recomputes again. It saves no extra memory, and under FSDP every extra
    recomputation can all-gather the layer again.

    ## Example
    ```python
    model.gradient_checkpointing_enable()
    model = FSDP(model, auto_wrap_policy=policy)
    apply_activation_checkpointing(model, check_fn=lambda m: isinstance(m, LlamaDecoderLayer))
    ```

    ## Use instead
    ```python
    model = FSDP(model, auto_wrap_policy=policy)
    apply_activation_checkpointing(model, check_fn=lambda m: isinstance(m, LlamaDecoderLayer))
    ```

    A block that checkpoints its own forward only behind a flag (`if self.gradient_checkpointing:`)
    is not reported: it checkpoints only when asked to; nor are the two mechanisms on branches
    that never both run (`if args.fsdp: apply_activation_checkpointing(...)` / `else:
    model.gradient_checkpointing_enable()`, or `if not fsdp_ac:` ... `if fsdp_ac:`).

    ## In training recipes
    Also reported in YAML / JSON recipes and launch scripts: `gradient_checkpointing: true`
    (or the flag, or LLaMA-Factory's default) together with FSDP's own activation
    checkpointing (`fsdp_config: {activation_checkpointing: true}`, accelerate's
    `fsdp_activation_checkpointing: true` or `--fsdp_activation_checkpointing true`), across
    the script and the files it names. accelerate applies FSDP's with
    `CheckpointImpl.NO_REENTRANT`, so the rule above decides by the Hugging Face side; when
    both are `TrainingArguments` the Trainer refuses to start, which is reported whatever
    the implementation.

    ## Evidence
    torch 2.13 (CPU), two blocks whose forward may call `checkpoint` on their inner function,
    wrapped or not by `apply_activation_checkpointing`; calls of the inner function per step:
    no checkpointing 2; either one alone 4; inner non-reentrant in a `NO_REENTRANT` wrapper
    4 when the block returns the inner checkpoint's value, 6 when the block computes more
    after it; inner non-reentrant in a `REENTRANT` wrapper 6; inner reentrant in either
    wrapper 6. Gradients match in every case. `tests/test_fsdp_rules.py` re-measures this.

    One block (`Inner` checkpointed inside `Block.forward`, a layer after it), `Inner.forward`
    runs per step: no checkpointing 1; outer wrapper only 2; inner checkpoint only 2; both
    non-reentrant 3; reentrant outer and non-reentrant inner 3; non-reentrant outer and
    reentrant inner 3; both reentrant 3; the same with `torch.utils.checkpoint` as the outer
    region instead of `checkpoint_wrapper` 3. With the inner checkpoint as the block's last
    computation: both non-reentrant 2, any reentrant side 3, both non-reentrant under
    `set_checkpoint_early_stop(False)` 3. A 2-layer `LlamaForCausalLM` (transformers 5.17),
    `LlamaMLP.forward` runs per step: none 2; `gradient_checkpointing_enable()` 4;
    `apply_activation_checkpointing` on the decoder layers 4; both non-reentrant 4; HF
    reentrant inside the `NO_REENTRANT` wrapper 6; HF non-reentrant inside the `REENTRANT`
    wrapper 6. torch's `torch/utils/checkpoint.py` ("NOTE [ Nestable Checkpoint ]", rules 3
    and 5): checkpoints met during a recomputation are still respected, and a non-reentrant
    recomputation stops once it has recomputed the tensors it needs.

    accelerate 1.15.0 `Accelerator.prepare_model` (FSDP1, `fsdp_plugin.activation_checkpointing`)
    calls `apply_activation_checkpointing(model, checkpoint_wrapper_fn=partial(checkpoint_wrapper,
    checkpoint_impl=CheckpointImpl.NO_REENTRANT), auto_wrap_policy=...)`; with FSDP2
    `fsdp2_apply_ac` wraps each layer in `checkpoint_wrapper(layer, preserve_rng_state=False)`
    (`NO_REENTRANT` by default). The Llama rows above (HF reentrant inside the `NO_REENTRANT`
    wrapper 6, both non-reentrant 4) are that case.

    An earlier version of this page said non-reentrant nested in non-reentrant always
    recomputes once on torch >= 2.1; that holds only for the inner checkpoint as the outer
    region's last computation (a held-out FSDP2 project whose attention checkpointed its
    kernel inside a wrapped block measured 3 runs per step against 2).
    """

    code = "CKPT005"
    severity = Severity.WARNING
    name = "double-checkpointing"
    message = "the same layers are checkpointed twice"
    triggers = (b"gradient_checkpointing_enable", b"checkpoint_wrapper", b"apply_activation_checkpointing", b"checkpoint")
    requires = (b"checkpoint",)
    uses_project = True

    def __init__(self, context) -> None:
        super().__init__(context)
        self._flag_guards: list[cst.If] = []  # the enclosing `if`s whose test reads a checkpointing flag
        self._behind_flag: dict[cst.Call, tuple[cst.If, ...]] = {}
        # (scopes, plain name) -> what the file binds to the name there
        self._assigned: dict[tuple, list[cst.BaseExpression]] = {}

    def visit_Assign(self, node: cst.Assign) -> None:
        super().visit_Assign(node)
        for target in node.targets:
            if isinstance(target.target, cst.Name):
                self._assigned.setdefault((tuple(self._scopes), target.target.value), []).append(node.value)

    def visit_If(self, node: cst.If) -> None:
        super().visit_If(node)
        if reads_flag(node.test):
            self._flag_guards.append(node)

    def leave_If(self, original_node: cst.If) -> None:
        super().leave_If(original_node)
        if reads_flag(original_node.test):
            self._flag_guards.pop()

    def visit_Call(self, node: cst.Call) -> None:
        super().visit_Call(node)
        if self._flag_guards:
            self._behind_flag[node] = tuple(self._flag_guards)

    def visit_checkpoint_site(self, site: CheckpointSite) -> None:
        if site.kind is not SiteKind.CALL:
            return
        self._check_nested(site)
        if site.node in self._behind_flag and not self._guards_hold(site.node):
            return
        class_name = self._class_of(site.node)
        if class_name is None:
            return
        absolute = f"{module_name(self.context.relative_path)}.{class_name}"
        wrapping = self.context.project.wrapping_of(absolute)
        if wrapping is None:
            return
        path, wrapped = wrapping
        line = self.context.position(site.node).start.line
        forward = self.context.project.class_method(absolute, "forward")
        last = forward is not None and any(c.line == line and c.returned for c in forward.checkpoints)
        if self._recomputes_once(wrapped.impl is Impl.REENTRANT, site.reentrancy.is_reentrant, last):
            return
        guards = self._behind_flag.get(site.node, ())
        behind = " and ".join(f"`if {cst.Module([]).code_for_node(g.test)}:`" for g in guards)
        guarded = f" (behind {behind}, on wherever the project builds one)" if guards else ""
        self.report(
            site.node,
            f"`{site.api.short_name}` inside `{class_name}`{guarded}, whose instances are also wrapped for activation "
            f"checkpointing by `{wrapped.api}` at {path}:{wrapped.line}: each layer is recomputed twice in backward "
            "for no extra memory saving; keep one of the two",
        )

    def _guards_hold(self, call: cst.Call) -> bool:
        """Whether every checkpointing flag `call` sits behind is known to be on in the
        class's instances (`if self.ckpt_mlp:` with `ckpt_mlp=True` by default, and no
        construction passing False): the call is in each `if`'s body, and each test is
        `self.<flag>` (or an `and` of such) whose values the project model finds all true."""
        line = self.context.position(call).start.line
        for guard in self._behind_flag[call]:
            body = self.context.position(guard.body)
            if not body.start.line <= line <= body.end.line:
                return False  # the `else` branch
            for part in conjuncts(guard.test):
                if not (isinstance(part, cst.Attribute) and isinstance(part.value, cst.Name) and part.value.value == "self"):
                    return False
                _, values = self.values_at(call, part)
                if not values or not all(truthiness(v) is True for v in values):
                    return False
        return True

    def _class_of(self, call: cst.Call) -> str | None:
        classes = [name for kind, name in self._call_scopes.get(call, ()) if kind == "class"]
        return ".".join(classes) if classes else None

    def _check_nested(self, site: CheckpointSite) -> None:
        """A region that runs a module (or function) checkpointing its own forward: the mm*
        `with_cp` blocks nest whenever the flag is passed down."""
        project = self.context.project
        denotation = project.denotation
        scopes = self._call_scopes.get(site.node, ())
        owner = self._owner(scopes)
        init = denotation.method(owner, "__init__") if owner is not None else None
        parameters = {p.name for p in init.parameters} if init is not None else set()
        # The region runs only when its guard holds: `if self.with_cp:` in a block built
        # with `with_cp=True`, which it passes on to the modules it builds. The guard is the
        # site's own checkpoint call in the method's facts (`MethodFacts.checkpoints`).
        facts = None
        if owner is not None:
            in_class = len(owner.split(".")) - len(self._module.split("."))  # the scopes down to the class
            facts = project.class_method(owner, ".".join(name for _, name in scopes[in_class:]))
        line = self.context.position(site.node).start.line
        flags = next((c.flags for c in facts.checkpoints if c.line == line), ()) if facts is not None else ()
        guard = sorted(flag for flag in flags if flag in parameters)
        region = self.site_region(site, arguments_of((flag, frozenset({Constant(True)})) for flag in guard))
        if region is None:
            return
        outer_reentrant = site.reentrancy.is_reentrant
        modules = {v for v in region.runs if isinstance(v, Instance)}
        functions = {v.name for v in region.runs if isinstance(v, FunctionRef)}

        def counts(call, instance, method) -> bool:
            # The region's own forward (or function) returning the inner checkpoint's value.
            last = call.returned and instance is not None and (
                (instance in modules and method == "forward") or f"{instance.cls}.{method}" in functions
            )
            return not self._recomputes_once(outer_reentrant, call.reentrant is True, last) and not guard_off(
                denotation, call, instance
            )

        paths = region_checkpoints(region, self.context.project, counts)
        if not paths:
            return
        self.report(
            site.node,
            f"`{site.api.short_name}` recomputes a region that checkpoints again ({shown(paths)}): in backward the "
            "inner layers run a third time for no extra memory saving; checkpoint at one level only",
        )

    def check_wrapped(self, node, region, what, api) -> None:
        """Modules wrapped for checkpointing whose children checkpoint again (a layer's
        attention calling `checkpoint`), reported at the wrapper: the inner checkpoint is not
        the last thing the wrapped forward computes, so it runs a third time whatever the
        implementations. The wrapped class's own `checkpoint` calls are reported at the call
        (above)."""
        denotation = self.context.project.denotation
        wrapped = {v for v in region.runs if isinstance(v, Instance)}

        def counts(call, instance, method) -> bool:
            return instance not in wrapped and not guard_off(denotation, call, instance)

        paths = region_checkpoints(region, self.context.project, counts)
        if paths:
            self.report(
                node,
                f"`{api}` wraps `{what}` for activation checkpointing, and its forward checkpoints again inside "
                f"({shown(paths)}): in backward the inner layers run a third time for no extra memory saving; "
                "checkpoint at one level only",
            )

    @classmethod
    def may_apply_to_project(cls, project, relative_path, settings, text) -> bool:
        facts = project.files.get(relative_path)
        if facts is None:
            return False
        return (
            bool(same_model_twice(project, relative_path))
            or any(project.wrapping_of(cls_facts.name) is not None for cls_facts in facts.classes)
            or mentions_checkpointing(project, relative_path, settings, text)
            or all(word in text for word in ("FullyShardedDataParallelPlugin", "activation_checkpointing", GC_ENABLE))
        )

    def finish(self) -> None:
        super().finish()
        self._check_accelerate_plugin()
        path = self.context.relative_path
        for step, other in same_model_twice(self.context.project, path):
            node = call_at(self.context, self._calls, step.event.line, step.event.column)
            if node is None or not self._recomputes_twice(self._reentrant(step), self._reentrant(other)):
                continue
            other_node = call_at(self.context, self._calls, other.event.line, other.event.column)
            paths = self._branch_paths
            if other_node in paths and node in paths and paths[node].exclusive_with(paths[other_node]):
                continue  # `if args.fsdp: apply_activation_checkpointing(...)` / `else: gradient_checkpointing_enable()`
            self.report(
                node,
                f"`{describe(step)}` on `{step.name}` (at {step.where(path)}) after `{describe(other)}` on the "
                f"same model (at {other.where(path)}): its layers are checkpointed twice and each is recomputed "
                "twice in backward; keep one of the two",
            )

    def _check_accelerate_plugin(self) -> None:
        """Hugging Face checkpointing on a model an accelerator with a checkpointing FSDP plugin
        prepares: accelerate wraps its layers with a `NO_REENTRANT` checkpoint wrapper."""
        for found in plugin_checkpointed(self.context, self._calls, self._call_scopes, self._assigned):
            reentrancy, applies = gc_enable_kwargs(found.enabling).reentrancy(self.context.versions)
            hf_reentrant = reentrancy.is_reentrant
            paths = self._branch_paths
            if not self._recomputes_twice(hf_reentrant, False) or any(
                node in paths and found.enabling in paths and paths[node].exclusive_with(paths[found.enabling])
                for node in (found.plugin, found.prepare)
            ):
                continue
            line = self.context.position
            how = " (reentrant here" + ("; affects transformers<5.0, target version unknown)" if applies is Applies.UNKNOWN else ")")
            self.report(
                found.enabling,
                f"`gradient_checkpointing_enable()`{how if hf_reentrant else ''} on a model that "
                f"`{cst.Module([]).code_for_node(found.prepare.func)}` "
                f"(line {line(found.prepare).start.line}) hands to accelerate's FSDP plugin with `activation_checkpointing=True` "
                f"(line {line(found.plugin).start.line}), which wraps its layers in torch's checkpoint wrapper: each layer is "
                "recomputed twice in backward; keep one of the two (the plugin's, and drop this call)",
            )

    @cached_property
    def _branch_paths(self) -> dict[cst.Call, BranchPath]:
        return branch_paths(self.context)

    def _reentrant(self, step: WrapStep) -> bool:
        if step.kind is not EventKind.HF_GC:
            return step.impl is Impl.REENTRANT
        node = call_at(self.context, self._calls, step.event.line, step.event.column) if step.effect is None else None
        if node is None:
            return False  # enabled in another file: its kwargs are not known here
        return gc_enable_kwargs(node).reentrancy(self.context.versions)[0].is_reentrant

    def _recomputes_twice(self, *reentrant: bool) -> bool:
        """Hugging Face's checkpointing and torch's wrapper on the same layers: HF's checkpoint
        is the whole layer, the last thing the wrapper's region computes."""
        return not self._recomputes_once(reentrant[0], any(reentrant[1:]), True)

    def _recomputes_once(self, outer_reentrant: bool, inner_reentrant: bool, inner_is_last: bool) -> bool:
        """Whether a checkpoint nested in another's region still recomputes its layers only
        once: both non-reentrant, on torch >= 2.1, and the inner checkpoint the last thing
        the outer region computes (its recomputation stops early at the inner checkpoint's
        inputs). Otherwise the inner layers run a third time (Evidence)."""
        return (
            not outer_reentrant
            and not inner_reentrant
            and inner_is_last
            and self.context.versions.applies((NESTING_SUPPORTED,)) is Applies.NO
        )
