# ALBERT-style weight sharing: one layer run num_layers times, each under a reentrant
# checkpoint (`use_reentrant` omitted), in a model DDP wraps in another function.
# ckptlint-case: column=22
# ckptlint-case: message-contains=which one forward runs twice (in the loop at line 19), in a model trained under DDP (`DistributedDataParallel(...)` at
import torch.nn as nn
import torch.utils.checkpoint
from torch.nn.parallel import DistributedDataParallel as DDP


class SharedLayerStack(nn.Module):
    def __init__(self, dim, num_layers):
        super().__init__()
        self.num_layers = num_layers
        self.embed = nn.Embedding(32000, dim)
        self.shared_layer = nn.TransformerEncoderLayer(dim, 8, batch_first=True)

    def forward(self, input_ids):
        hidden = self.embed(input_ids)
        for _ in range(self.num_layers):
            hidden = torch.utils.checkpoint.checkpoint(self.shared_layer, hidden)  # expect: CKPT006
        return hidden


def build(rank):
    model = SharedLayerStack(256, 12).to(rank)
    return DDP(model, device_ids=[rank], broadcast_buffers=False)
