# `Function` imported from torch.autograd, the recomputation under `set_grad_enabled(True)`, differentiated by `.backward()`.
from torch import no_grad, set_grad_enabled
from torch.autograd import Function


class RecomputeBlock(Function):  # expect: CKPT034
    @staticmethod
    def forward(ctx, fn, x):
        ctx.fn = fn
        ctx.save_for_backward(x)
        with no_grad():
            return fn(x)

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        x = x.detach().requires_grad_(True)
        with set_grad_enabled(True):
            out = ctx.fn(x)
        out.backward(grad_output)
        return None, x.grad
