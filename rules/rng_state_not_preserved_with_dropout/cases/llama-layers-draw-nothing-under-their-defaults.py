# Llama's layers draw nothing under their defaults; a BERT with dropout off; an unknown architecture.
# Llama's layers draw nothing under their defaults (`attention_dropout=0.0`); a BERT
# whose dropout the script turns off at load; an auto class of unknown architecture.

from transformers import AutoModel, BertForMaskedLM, LlamaForCausalLM
from transformers.models.llama.modeling_llama import LlamaDecoderLayer

kwargs = {"use_reentrant": False, "preserve_rng_state": False}
llama = LlamaForCausalLM.from_pretrained("meta-llama/Llama-3.2-1B")
llama.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False, "preserve_rng_state": False})
apply_activation_checkpointing(
    llama,
    checkpoint_wrapper_fn=functools.partial(checkpoint_wrapper, preserve_rng_state=False),
    check_fn=lambda m: isinstance(m, LlamaDecoderLayer),
)
encoder = AutoModel.from_pretrained(args.model)
encoder.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"preserve_rng_state": False})
