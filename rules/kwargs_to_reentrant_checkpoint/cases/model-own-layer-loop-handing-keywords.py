# A model's own layer loop handing keywords to transformers' checkpoint function, before 5.0.
# A model's own layer loop handing keywords to transformers' checkpoint function,
# enabled with the default kwargs: reentrant before transformers 5.0.
# ckptlint-case: target-version=transformers=4.39
# ckptlint-case: column=21
# ckptlint-case: message-contains=`ValueError: Unexpected keyword arguments: attention_mask`

from transformers import PretrainedConfig, PreTrainedModel

class TinyModel(PreTrainedModel):
    config_class = PretrainedConfig
    supports_gradient_checkpointing = True

    def forward(self, h, attention_mask=None):
        for layer in self.layers:
            if self.gradient_checkpointing and self.training:
                h = self._gradient_checkpointing_func(layer.__call__, h, attention_mask=attention_mask)  # expect: CKPT032
            else:
                h = layer(h, attention_mask=attention_mask)
        return h

model = TinyModel(PretrainedConfig())
model.gradient_checkpointing_enable()
