# Unknown reentrancy: a variable, or **kwargs that may carry use_reentrant=False.

from torch.utils.checkpoint import checkpoint

def forward(self, h, mask, reentrant, **ckpt_kwargs):
    h = checkpoint(self.layer, h, mask=mask, use_reentrant=reentrant)
    return checkpoint(self.layer, h, mask=mask, **ckpt_kwargs)
