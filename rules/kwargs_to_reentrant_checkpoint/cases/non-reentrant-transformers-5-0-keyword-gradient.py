# Non-reentrant on transformers >= 5.0: a keyword to `_gradient_checkpointing_func`.
# transformers' `_gradient_checkpointing_func` given keywords: non-reentrant from 5.0,
# or where the project enables it with `use_reentrant: False`; positional arguments;
# the call choosing the implementation itself.
# ckptlint-case: target-version=transformers=5.0

from transformers import PretrainedConfig, PreTrainedModel

class TinyModel(PreTrainedModel):
    config_class = PretrainedConfig
    supports_gradient_checkpointing = True

    def forward(self, h, attention_mask=None):
        for layer in self.layers:
            if self.gradient_checkpointing and self.training:
                h = self._gradient_checkpointing_func(layer.__call__, h, attention_mask=attention_mask)
            else:
                h = layer(h, attention_mask=attention_mask)
        return h

model = TinyModel(PretrainedConfig())
model.gradient_checkpointing_enable()
