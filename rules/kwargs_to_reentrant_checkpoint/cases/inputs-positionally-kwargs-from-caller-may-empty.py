# The inputs positionally; `**kwargs` from the caller (may be empty); a literal flag dropped.

from torch.utils.checkpoint import checkpoint

def forward(self, h, mask, **kwargs):
    for layer in self.layers:
        if self.gradient_checkpointing:
            h = checkpoint(layer, h, mask, use_reentrant=False)
        else:
            h = layer(h, attention_mask=mask, use_cache=False, **kwargs)
    return h
