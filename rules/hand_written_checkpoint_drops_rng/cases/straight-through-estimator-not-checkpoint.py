# A straight-through estimator and a custom op with its own backward formula: Functions that recompute nothing.
import torch


class RoundSTE(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        with torch.no_grad():
            return torch.round(x)

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output


class ScaledGelu(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, scale):
        ctx.save_for_backward(x)
        ctx.scale = scale
        return torch.nn.functional.gelu(x) * scale

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        with torch.enable_grad():
            x = x.detach().requires_grad_(True)
            y = torch.nn.functional.gelu(x) * ctx.scale
        (grad,) = torch.autograd.grad(y, x, grad_output)
        return grad, None
