"""Hugging Face and PEFT model objects in a training script, and what happens to each, in order.

A fine-tuning script loads a model (`AutoModelForCausalLM.from_pretrained`, a
`LlamaForCausalLM(config)`, a project helper that returns one), wraps it with PEFT
(`get_peft_model`, `PeftModel.from_pretrained`, `model.add_adapter`), turns gradient
checkpointing on (`gradient_checkpointing_enable`, `prepare_model_for_kbit_training`,
`TrainingArguments(gradient_checkpointing=True)` handed to a `Trainer`), works around its
pitfalls (`enable_input_require_grads`, `config.use_cache = False`) and trains it. Whether
checkpointing is a bug depends on the order of those steps on one model object, so this
package follows model objects through the file and records their steps.

How: each *context* (the module's top-level code, each class's methods sharing `self.*`, each
function nothing in the file calls) is interpreted once, statement by statement in source
order, with an environment from names (`model`, `self.model`) to the objects they hold.
Branches are walked one after the other; steps remember which `if` branch they sit in and
what its condition requires, so `if lora:` ... `if not lora:` never meet. Where a call decides
a parameter's truth (a literal it passes, or a literal default it leaves), the branch (or the
arm of a conditional expression) that truth rules out is not run: `if quantized:` in a helper
called with `quantized=False` does nothing; a value only known at runtime runs both. Calls to functions
and methods defined in the same file (also methods of objects of its classes) are
interpreted in place, with their parameters bound to the caller's objects, so a helper that
enables checkpointing or sets `use_cache` counts where it is called; functions that can
touch nothing followed here are skipped. A model handed to a function of another module of
the project goes on here with what the project model says that function does to it
(`ProjectIndex.handed_model`: its cache turned off, input grads, `get_peft_model`; the model
it hands back); one that the function trains, checkpoints, keeps, or hands to code the
project model cannot see is marked *escaped*, and where it goes from there (and from a helper
that returns it to other modules) the rules ask the project model (`ckptlint.model.evaluation.fates`).
A dict constant imported from another module (`from config import GC_KWARGS`) is what the
project model's evaluator says it holds. A model that a
project function of another module returns, or passes to a function of this file that
nothing here calls, gets its class and what was done to it from the project model too.
The interpreter runs on the file's `ast` tree, whose nodes its steps name (a rule reaches
the libcst node of one with `FileContext.cst_node_at`). What a name or attribute denotes is
a `ScriptNames`: `scopes.ScopeNames` computes libcst's qualified names on the `ast` tree, so
that the answers do not depend on the tree read (`ckptlint.analysis.script_models` hands the
interpreter libcst's own for the few constructs it does not model).
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from ckptlint.model.library.transformers import MainInput, ModelClass, classify_model_class
from ckptlint.model.script_models.names import QualifiedName, ScriptNames
from ckptlint.model.script_models.steps import ModelHistory, ModelStep, ScriptModels, StepKind, TrainerKind

if TYPE_CHECKING:
    from ckptlint.model.index import ProjectIndex

__all__ = [
    "MainInput", "ModelClass", "ModelHistory", "ModelStep", "QualifiedName", "ScriptModels", "ScriptNames", "StepKind",
    "TrainerKind", "classify_model_class", "interpret",
]


def interpret(tree: ast.Module, text: str, relative_path: str, project: ProjectIndex, names: ScriptNames) -> ScriptModels:
    """The model objects of a file (its `ast` tree, of `text`) and their steps."""
    from ckptlint.model.script_models.interpreter import Interpreter

    return Interpreter(tree, text, relative_path, project, names).run()
