# The RNG state named only in a docstring and a comment: nothing in the code keeps it.
import torch


class CheckpointFunction(torch.autograd.Function):  # expect: CKPT034
    """Recomputes `run_function` in backward. TODO: save torch.get_rng_state() like torch does."""

    @staticmethod
    def forward(ctx, run_function, *args):
        ctx.run_function = run_function
        ctx.save_for_backward(*args)
        with torch.no_grad():
            return run_function(*args)

    @staticmethod
    def backward(ctx, *grads):
        inputs = [t.detach().requires_grad_(True) for t in ctx.saved_tensors]
        with torch.enable_grad():  # preserve_rng_state is not implemented here
            outputs = ctx.run_function(*inputs)
        return (None,) + torch.autograd.grad(outputs, inputs, grads)
