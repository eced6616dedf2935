# The wrapper forwards keywords; a positional call of an `*args` wrapper.

from torch.utils.checkpoint import checkpoint

def forward(self, h, mask):
    for layer in self.layers:
        def layer_(*args, **kwargs):
            return checkpoint(layer, *args, use_reentrant=False, **kwargs)
        def plain_(*args):
            return checkpoint(layer, *args, use_reentrant=False)
        h = layer_(h, attn_mask=mask)
        h = plain_(h, mask)
    return h
