"""One file's text to its facts: the fact values and their JSON (`facts`), the function
summaries (`code`, with `ast_expressions` and `dict_stores`), the families of facts
extracted beside them (what methods do in training, checkpoint wrappers, forwarding helpers,
what functions do to Hugging Face models, BatchNorm freezing, registries, options, launch
scripts), their extraction (`extraction`) and the part other files can observe
(`fingerprints`)."""
