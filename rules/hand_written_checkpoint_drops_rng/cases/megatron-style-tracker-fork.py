# Megatron style: the recomputation runs inside the model-parallel RNG tracker's fork.
import torch

from megatron.core.tensor_parallel.random import get_cuda_rng_tracker


class CheckpointFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, run_function, *args):
        ctx.run_function = run_function
        ctx.tracker_states = get_cuda_rng_tracker().get_states()
        with torch.no_grad():
            outputs = run_function(*args)
        ctx.save_for_backward(*args)
        return outputs

    @staticmethod
    def backward(ctx, *grads):
        inputs = [t.detach().requires_grad_(True) for t in ctx.saved_tensors]
        get_cuda_rng_tracker().set_states(ctx.tracker_states)
        with torch.enable_grad():
            outputs = ctx.run_function(*inputs)
        torch.autograd.backward(outputs, grads)
        return (None,) + tuple(t.grad for t in inputs)
