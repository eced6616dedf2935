"""Which functions of a file are worth interpreting: the names each reads and whether it
mentions anything the interpreter follows, through the functions of the file it calls too."""

from __future__ import annotations

import re

import libcst as cst


# Identifiers that make a function worth interpreting even when it gets nothing followed.
RELEVANT_IDENTIFIER = re.compile(
    r"^(backward|training_step|from_pretrained|from_config|_from_config|gradient_checkpointing\w*|"
    r"enable_input_require_grads|add_adapter|load_adapter|get_peft_model|prepare_model_for_\w+|use_cache|"
    r"requires_grad_?|register_forward_hook|setattr|dict)$|Peft|Trainer|Arguments|Config$|Model|For[A-Z]|Backbone$"
)


class LocalFunctionFacts:
    """Names a function reads and whether it mentions anything the analysis follows,
    including through the functions of the file it calls."""

    def __init__(self) -> None:
        self.reads: set[str] = set()
        self.relevant = False
        self.enables = False  # names `gradient_checkpointing_enable` / `prepare_model_for_kbit_training`
        self.callees: set[cst.FunctionDef] = set()


def close_over_callees(facts: dict[cst.FunctionDef, LocalFunctionFacts]) -> None:
    changed = True
    while changed:
        changed = False
        for function_facts in facts.values():
            for callee in function_facts.callees:
                other = facts.get(callee)
                if other is None:
                    continue
                if other.relevant and not function_facts.relevant:
                    function_facts.relevant = changed = True
                if not other.reads <= function_facts.reads:
                    function_facts.reads |= other.reads
                    changed = True
