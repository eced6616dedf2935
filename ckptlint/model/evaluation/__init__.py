"""The evaluator (`denotation.Denotation`: what an expression of the project denotes) with
its collaborators as mixins (calling a value, what module instances hold, containers and the
library calls it interprets, parameters resolved at call sites, conditions, registries), and
what it answers across files: which project functions a call runs (`call_targets`) and
where a Hugging Face model goes (`fates`)."""
