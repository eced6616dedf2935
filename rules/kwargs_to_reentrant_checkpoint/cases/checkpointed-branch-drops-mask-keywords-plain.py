# The checkpointed branch drops the mask and the keywords the plain branch builds up.
# ckptlint-case: column=17
# ckptlint-case: message-contains=the checkpointed call drops `attention_mask=mask`, `**kwargs`, which the non-checkpointed branch passes to `layer` (line 15)

from torch.utils.checkpoint import checkpoint

def forward(self, h, mask, rope=None):
    kwargs = {}
    if rope is not None:
        kwargs.update(rope=rope)
    for layer in self.layers:
        if self.gradient_checkpointing and self.training:
            h = checkpoint(layer, h, use_reentrant=False)  # expect: CKPT032
        else:
            h = layer(h, attention_mask=mask, **kwargs)
    return h
