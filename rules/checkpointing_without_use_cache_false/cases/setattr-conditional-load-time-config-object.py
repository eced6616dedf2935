# setattr, a conditional at load time, a config object, a forward argument.

import transformers
from transformers import AutoConfig, AutoModelForCausalLM, LlamaConfig, LlamaForCausalLM

a = AutoModelForCausalLM.from_pretrained("a")
setattr(a.config, "use_cache", False)
b = transformers.AutoModelForCausalLM.from_pretrained("b", use_cache=False if args.gc else True)
config = AutoConfig.from_pretrained("c")
config.use_cache = False
c = AutoModelForCausalLM.from_pretrained("c", config=config)
d = LlamaForCausalLM(LlamaConfig(num_hidden_layers=2, use_cache=False))
e = AutoModelForCausalLM.from_pretrained("e")
for m in (a, b, c, d, e):
    m.gradient_checkpointing_enable()
for batch in loader:
    e(input_ids=batch["input_ids"], labels=batch["labels"], use_cache=False).loss.backward()
