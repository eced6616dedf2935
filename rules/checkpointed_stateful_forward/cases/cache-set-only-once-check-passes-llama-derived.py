# A cache set only once its check passes (Llama-derived rotary embeddings): the recomputation finds it set.
# A cache set only once its check passes (Llama-derived rotary embeddings, a subclass
# setting it in the method the check calls): the recomputation finds it set.

import torch
import torch.nn as nn
from torch.utils.checkpoint import checkpoint

class Rotary(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.dim = dim
        self.max_seq_len_cached = 0

    def _set_cache(self, seq_len):
        self.max_seq_len_cached = seq_len
        self.register_buffer("cos_cached", torch.ones(seq_len, self.dim), persistent=False)

    def forward(self, x, seq_len):
        if seq_len > self.max_seq_len_cached:
            self._set_cache(seq_len)
        return x * self.cos_cached[:seq_len]

class ScaledRotary(Rotary):
    def _set_cache(self, seq_len):
        self.max_seq_len_cached = seq_len
        self.register_buffer("cos_cached", torch.ones(seq_len, self.dim) / 2, persistent=False)

class Layer(nn.Module):
    def __init__(self):
        super().__init__()
        self.rotary = ScaledRotary(8)

    def forward(self, x):
        return self.rotary(x, x.shape[1])

def run(layer, x):
    return checkpoint(layer, x, use_reentrant=False)

run(Layer(), torch.ones(2, 4, 8))
