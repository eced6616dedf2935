# A custom op handed its forward and derivative functions: backward calls the derivative, with grad off, and recomputes nothing.
import torch


class ElementwiseOp(torch.autograd.Function):
    @staticmethod
    def forward(ctx, fn, derivative, x):
        ctx.derivative = derivative
        ctx.save_for_backward(x)
        with torch.no_grad():
            return fn(x)

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        return None, None, grad_output * ctx.derivative(x)
