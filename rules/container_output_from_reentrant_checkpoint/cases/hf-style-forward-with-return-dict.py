# A project model whose forward follows transformers' `return_dict` convention, checkpointed whole.
# ckptlint-case: column=19
# ckptlint-case: message-contains=from `InternVisionEncoder.forward`
from torch import nn
from torch.utils.checkpoint import checkpoint
from transformers.modeling_outputs import BaseModelOutput


class InternVisionEncoder(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.config = config
        self.layers = nn.ModuleList([nn.TransformerEncoderLayer(config.hidden_size, 8) for _ in range(config.depth)])

    def forward(self, inputs_embeds, output_hidden_states=None, return_dict=None):
        return_dict = return_dict if return_dict is not None else self.config.use_return_dict
        hidden_states = inputs_embeds
        states = () if output_hidden_states else None
        for layer in self.layers:
            hidden_states = layer(hidden_states)
            if output_hidden_states:
                states = states + (hidden_states,)
        if not return_dict:
            return tuple(v for v in [hidden_states, states] if v is not None)
        return BaseModelOutput(last_hidden_state=hidden_states, hidden_states=states)


class VisionModel(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.embeddings = nn.Conv2d(3, config.hidden_size, 14, 14)
        self.encoder = InternVisionEncoder(config)

    def forward(self, pixel_values):
        embeds = self.embeddings(pixel_values).flatten(2).transpose(1, 2)
        outputs = checkpoint(self.encoder, embeds, use_reentrant=True)  # expect: CKPT035
        return outputs.last_hidden_state
