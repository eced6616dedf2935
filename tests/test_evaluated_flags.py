"""Flags the project model evaluates where a literal is not written at the call: module
constants and their negation, constructor parameters every construction sets, a helper's
wrapper chosen from a parameter, partials of torch's checkpoint under another module's name."""

from __future__ import annotations

from ckptlint.config import resolve_settings
from ckptlint.engine import lint_text
from ckptlint.indexing import build_index
from ckptlint.model.evaluation.denotation import Denotation
from ckptlint.model.file_facts.facts import Impl
from ckptlint.model.form.values import Constant, Frame
from tests.test_fixtures import FIXTURES, project_of

SETTINGS = """
USE_REENTRANT = False
STRICT = True
TOGGLED = False


def toggle():
    global TOGGLED
    TOGGLED = True
"""

STACKS = """
import torch.nn as nn


class Pinned(nn.Module):
    def __init__(self, reentrant=False):
        super().__init__()
        self.reentrant = reentrant


class Mixed(nn.Module):
    def __init__(self, reentrant=False):
        super().__init__()
        self.reentrant = reentrant


class Tabled(nn.Module):
    def __init__(self, reentrant=False):
        super().__init__()
        self.reentrant = reentrant


class Unknown(nn.Module):
    def __init__(self, reentrant=False):
        super().__init__()
        self.reentrant = reentrant
"""

BUILD = """
\"\"\"Builds the model's stacks.\"\"\"

import sys

from stacks import Mixed, Pinned, Tabled, Unknown

TABLE = {"tabled": Tabled}


def build():
    return [Pinned(reentrant=True), Mixed(reentrant=True), Mixed(), Tabled(reentrant=True),
            Unknown(reentrant="--reentrant" in sys.argv)]
"""


def _index(make_project, files: dict[str, str]):
    root = make_project(files)
    return build_index(root, resolve_settings(root), use_cache=False, jobs=1)


def test_module_flags_and_their_negation(make_project):
    denotation = Denotation(_index(make_project, {"settings.py": SETTINGS, "model.py": "from settings import *\n"}))
    frame = Frame("settings.<module>", "settings", (), None)
    assert denotation.evaluate(("name", "USE_REENTRANT"), frame) == frozenset({Constant(False)})
    assert denotation.evaluate(("not", ("name", "USE_REENTRANT")), frame) == frozenset({Constant(True)})
    assert denotation.evaluate(("not", ("name", "STRICT")), frame) == frozenset({Constant(False)})
    # A flag a function rebinds through `global` is not the constant it starts as.
    assert denotation.evaluate(("name", "TOGGLED"), frame) == frozenset()
    # `not` of something not known is not known.
    assert denotation.evaluate(("not", ("name", "missing")), frame) == frozenset()


def test_a_parameter_every_construction_sets_drops_the_default(make_project):
    denotation = Denotation(_index(make_project, {"stacks.py": STACKS, "build.py": BUILD}))

    def reentrant(cls: str) -> frozenset:
        return denotation.attribute(denotation.instance(f"stacks.{cls}"), "reentrant")

    assert reentrant("Pinned") == frozenset({Constant(True)})
    # Built once without the argument: the default runs too.
    assert reentrant("Mixed") == frozenset({Constant(True), Constant(False)})
    # Held in a table: it may be built where no call shows it.
    assert Constant(False) in reentrant("Tabled")
    # A value computed at run time: not every call passes a constant.
    assert Constant(False) in reentrant("Unknown")


def test_a_dataclass_default_reaches_the_constructor(make_project):
    files = {
        "stacks.py": STACKS,
        "cfg.py": "from dataclasses import dataclass, field\n\n\n@dataclass\nclass Cfg:\n    reentrant: bool = field(default=True)\n    off: bool = False\n",
        "build.py": "# the model\nfrom cfg import Cfg\nfrom stacks import Pinned, Mixed\n\nPinned(reentrant=Cfg().reentrant)\nMixed(reentrant=Cfg(reentrant=False).reentrant)\n",
    }
    denotation = Denotation(_index(make_project, files))
    assert denotation.attribute(denotation.instance("stacks.Pinned"), "reentrant") == frozenset({Constant(True)})
    assert denotation.attribute(denotation.instance("stacks.Mixed"), "reentrant") == frozenset({Constant(False)})


AC = """
from functools import partial

from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import (
    CheckpointImpl, apply_activation_checkpointing, checkpoint_wrapper,
)


def apply_ac(model, reentrant: bool = True):
    impl = CheckpointImpl.REENTRANT if reentrant else CheckpointImpl.NO_REENTRANT
    wrapper = partial(checkpoint_wrapper, checkpoint_impl=impl)
    apply_activation_checkpointing(model, checkpoint_wrapper_fn=wrapper)
    return model
"""

TRAIN = """
import torch.nn as nn

from ac import apply_ac


def pretrain():
    model = apply_ac(nn.Linear(2, 2))
    return model


def finetune():
    model = apply_ac(nn.Linear(2, 2), reentrant=False)
    return model
"""


def test_a_wrapper_chosen_from_a_parameter_is_what_each_call_chooses(make_project):
    index = _index(make_project, {"ac.py": AC, "train.py": TRAIN})
    assert index.returns_parameter("ac.apply_ac", 0)
    # On its own: one call passes False, so either.
    assert index.local_wrapper_at("ac.apply_ac", "wrapper", 11, None)[0] is Impl.UNKNOWN
    assert index.local_wrapper_at("ac.apply_ac", "wrapper", 11, ("train.pretrain", 7))[0] is Impl.REENTRANT
    assert index.local_wrapper_at("ac.apply_ac", "wrapper", 11, ("train.finetune", 12))[0] is Impl.NON_REENTRANT


def test_a_partial_choosing_the_flag_is_an_alias_with_its_keywords(make_project):
    ckpt = (
        "import functools\nfrom torch.utils.checkpoint import checkpoint\n\n"
        "reentrant_ckpt = functools.partial(checkpoint, use_reentrant=True)\n"
        "plain_ckpt = functools.partial(checkpoint)\n"
        "bound_ckpt = functools.partial(checkpoint, use_reentrant=False, context_fn=make_context)\n"
    )
    index = _index(make_project, {"ckpt.py": ckpt, "net.py": "from ckpt import reentrant_ckpt, plain_ckpt\n"})
    assert index.checkpoint_aliases["ckpt.reentrant_ckpt"] == "torch.utils.checkpoint.checkpoint"
    assert index.checkpoint_alias_keywords == {"ckpt.reentrant_ckpt": (("use_reentrant", True),)}
    # Without the flag (its own file reports the omission), or binding what is no literal: none.
    assert "ckpt.plain_ckpt" not in index.checkpoint_aliases
    assert "ckpt.bound_ckpt" not in index.checkpoint_aliases
    assert index.imports_checkpoint_alias("net.py")


def test_findings_name_where_the_value_comes_from():
    path = FIXTURES / "projects" / "evaluated_reentrancy" / "blocks.py"
    settings, index = project_of(path)
    messages = {d.location.row: d.message for d in lint_text(path.read_text(), path, settings, project=index).diagnostics}
    assert "every `OptionStack` the project builds is given `reentrant` True (train.py:16)" in messages[19]
    assert "`USE_REENTRANT = False` at flags.py:4" in messages[66]
