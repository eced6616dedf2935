# A checkpointing wrapper taking only `*args`, called with a keyword when it is chosen.
# ckptlint-case: column=13
# ckptlint-case: message-contains=passed to `layer_(*args)` (line 10), which checkpoints and takes no keywords

from torch.utils.checkpoint import checkpoint

def forward(self, h, mask):
    for layer in self.layers:
        if self.gradient_checkpointing and self.training:
            def layer_(*args):
                return checkpoint(layer, *args, use_reentrant=False)
        else:
            layer_ = layer
        h = layer_(h, attn_mask=mask)  # expect: CKPT032
    return h
