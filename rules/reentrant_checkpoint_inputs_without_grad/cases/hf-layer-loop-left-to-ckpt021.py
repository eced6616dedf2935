# A Hugging Face model's own layer loop: its frozen / PEFT cases are CKPT021's, reported where checkpointing is enabled.
import torch.nn as nn
from transformers import PreTrainedModel


class TinyModel(PreTrainedModel):
    def __init__(self, config):
        super().__init__(config)
        self.embed_tokens = nn.Embedding(config.vocab_size, config.hidden_size)
        self.embed_tokens.requires_grad_(False)
        self.layers = nn.ModuleList(nn.Linear(config.hidden_size, config.hidden_size) for _ in range(2))

    def forward(self, input_ids):
        h = self.embed_tokens(input_ids)
        for layer in self.layers:
            if self.gradient_checkpointing and self.training:
                h = self._gradient_checkpointing_func(layer.__call__, h)
            else:
                h = layer(h)
        return h
