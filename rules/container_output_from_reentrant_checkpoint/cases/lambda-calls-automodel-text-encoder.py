# A lambda calling an `AutoModel` text encoder, checkpointed without `use_reentrant`.
# ckptlint-case: column=15
from torch import nn
from torch.utils.checkpoint import checkpoint
from transformers import AutoModel


class DualEncoder(nn.Module):
    def __init__(self, text_model, dim):
        super().__init__()
        self.text_encoder = AutoModel.from_pretrained(text_model)
        self.proj = nn.Linear(self.text_encoder.config.hidden_size, dim)

    def encode_text(self, input_ids, attention_mask):
        embeds = self.text_encoder.get_input_embeddings()(input_ids)
        out = checkpoint(  # expect: CKPT035
            lambda e: self.text_encoder(inputs_embeds=e, attention_mask=attention_mask), embeds
        )
        return self.proj(out.pooler_output)
