# `use_reentrant=False` at the `_gradient_checkpointing_func` call, beside a keyword.
# ckptlint-case: target-version=transformers=4.46

from transformers import PretrainedConfig, PreTrainedModel

class TinyModel(PreTrainedModel):
    config_class = PretrainedConfig
    supports_gradient_checkpointing = True

    def forward(self, h, attention_mask=None):
        for layer in self.layers:
            if self.gradient_checkpointing and self.training:
                h = self._gradient_checkpointing_func(layer.__call__, h, attention_mask=attention_mask, use_reentrant=False)
            else:
                h = layer(h, attention_mask=attention_mask)
        return h

model = TinyModel(PretrainedConfig())
model.gradient_checkpointing_enable()
