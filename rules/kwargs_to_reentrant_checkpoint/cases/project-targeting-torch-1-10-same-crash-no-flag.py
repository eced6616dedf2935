# A project targeting torch 1.10: the same crash, and no flag to fix it with.
# ckptlint-case: target-version=torch=1.10
# ckptlint-case: column=12
# ckptlint-case: message-contains=the targeted torch (< 1.11) has no `use_reentrant` and raises `ValueError: Unexpected keyword arguments: attention_mask`

from torch.utils.checkpoint import checkpoint

def forward(self, h, mask):
    return checkpoint(self.layer, h, attention_mask=mask)  # expect: CKPT032
