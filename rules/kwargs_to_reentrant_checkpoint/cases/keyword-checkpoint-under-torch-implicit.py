# A keyword to checkpoint under torch's implicit reentrant default.
# ckptlint-case: column=12
# ckptlint-case: message-contains=Unexpected keyword arguments: attention_mask

from torch.utils.checkpoint import checkpoint

def forward(self, h, mask):
    return checkpoint(self.layer, h, attention_mask=mask)  # expect: CKPT032
