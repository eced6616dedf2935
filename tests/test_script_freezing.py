"""Parameters frozen from outside a module's class (`ckptlint.model.file_facts.freezing`,
`ProjectIndex.frozen_from_outside`): which statements freeze or unfreeze what, which module
of which class the project model takes each to be, and CKPT007 following a training
script's freezing across files through warm runs."""

from __future__ import annotations

import ast
import textwrap

import pytest

from ckptlint.config import resolve_settings
from ckptlint.indexing import build_index
from ckptlint.model.file_facts.facts import EventKind
from ckptlint.model.file_facts.freezing import CONDITIONAL, WEIGHT, parameter_freezing
from conftest import json_findings

FROZEN, TRAINABLE = EventKind.FREEZES_PARAMETERS, EventKind.UNFREEZES_PARAMETERS


def events(code: str, *, freezes: bool = True, in_method: bool = False) -> list[tuple]:
    body = ast.parse(textwrap.dedent(code)).body
    return [(e.kind, e.target, e.api, e.source) for e in parameter_freezing(body, freezes=freezes, in_method=in_method)]


@pytest.mark.parametrize(
    ("code", "expected"),
    [
        ("model.embed.requires_grad_(False)", [(FROZEN, "model.embed", "", "")]),
        ("model.embed.requires_grad_(requires_grad=False)", [(FROZEN, "model.embed", "", "")]),
        ("for p in model.embed.parameters():\n    p.requires_grad = False", [(FROZEN, "model.embed", "", "")]),
        ("for n, p in list(model.stem.named_parameters()):\n    p.requires_grad_(False)", [(FROZEN, "model.stem", "", "")]),
        ("model.embed.weight.requires_grad = False", [(FROZEN, "model.embed", WEIGHT, "")]),
        ("model.embed.weight.requires_grad_(False)", [(FROZEN, "model.embed", WEIGHT, "")]),
        # A bias alone leaves the module training; making it trainable counts.
        ("model.embed.bias.requires_grad = False", []),
        ("model.embed.bias.requires_grad = True", [(TRAINABLE, "model.embed", "", "")]),
        # Made trainable: no argument, True, a value not known to be False.
        ("model.head.requires_grad_()", [(TRAINABLE, "model.head", "", "")]),
        ("model.head.requires_grad_(args.train_head)", [(TRAINABLE, "model.head", "", "")]),
        ("for p in model.parameters():\n    p.requires_grad = True", [(TRAINABLE, "model", "", "")]),
        # Under an `if`, in another loop: only sometimes; `with` and `try` bodies always run.
        ("if args.freeze:\n    model.embed.requires_grad_(False)", [(FROZEN, "model.embed", "", CONDITIONAL)]),
        ("for epoch in range(3):\n    model.embed.requires_grad_(False)", [(FROZEN, "model.embed", "", CONDITIONAL)]),
        ("with torch.no_grad():\n    model.embed.requires_grad_(False)", [(FROZEN, "model.embed", "", "")]),
        ("try:\n    model.embed.requires_grad_(False)\nexcept AttributeError:\n    pass", [(FROZEN, "model.embed", "", "")]),
        # A loop that freezes some parameters by name freezes nothing known; one that may set
        # any of them trainable makes the module trainable.
        ('for n, p in model.named_parameters():\n    if "embed" in n:\n        p.requires_grad = False', []),
        ('for n, p in model.named_parameters():\n    p.requires_grad = False\n    if "head" in n:\n        p.requires_grad = True',
         [(TRAINABLE, "model", "", "")]),
        # Nested definitions are their own functions.
        ("def inner():\n    model.embed.requires_grad_(False)", []),
    ],
)
def test_statements_that_freeze_or_unfreeze(code, expected):
    assert events(code) == expected


def test_a_method_freezes_only_in_its_constructor_and_never_its_own_attributes():
    """`self.embed` is the class's own freezing (read in the class); a wrapper's constructor
    freezing what it holds counts; any method's unfreezing counts."""
    code = "self.embed.requires_grad_(False)\nself.encoder.embed.requires_grad_(False)\nself.head.requires_grad_(True)\n"
    assert events(code, in_method=True) == [(FROZEN, "self.encoder.embed", "", ""), (TRAINABLE, "self.head", "", "")]
    assert events(code, freezes=False, in_method=True) == [(TRAINABLE, "self.head", "", "")]


MODEL = '''\
    import torch.nn as nn
    from torch.utils.checkpoint import checkpoint


    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(100, 16)
            self.blocks = nn.ModuleList([nn.Linear(16, 16) for _ in range(3)])
            self.head = nn.Linear(16, 100)

        def forward(self, ids):
            x = self.embed(ids)
            for block in self.blocks:
                x = checkpoint(block, x, use_reentrant=True)
            return self.head(x)
    '''
TRAIN = '''\
    from pkg.model import Net


    def main(loader):
        model = Net()
        {freeze}
        for ids in loader:
            model(ids).mean().backward()
    '''


def test_the_module_each_freezing_names_is_resolved_per_class(make_project):
    """`model.embed` of a `Net` built in the function; a function that freezes and makes
    trainable again keeps what it leaves frozen; another class's freezing is not Net's."""
    root = make_project({
        "pkg/__init__.py": "",
        "pkg/model.py": MODEL,
        "train.py": TRAIN.format(freeze="model.embed.requires_grad_(False)"),
        "probe.py": TRAIN.format(freeze="model.requires_grad_(False)\n        model.head.requires_grad_(True)"),
        "other.py": "import torch.nn as nn\n\nteacher = nn.Embedding(4, 4)\nteacher.requires_grad_(False)\n",
    })
    index = build_index(root, resolve_settings(root), use_cache=False)
    outside = index.frozen_from_outside("pkg.model.Net")
    assert [(f.attribute, f.function, f.where, f.written, f.kept_trainable) for f in outside.freezings] == [
        ("*", "probe.main", "probe.py:6", "model", frozenset({"head"})),
        ("embed", "train.main", "train.py:6", "model.embed", frozenset()),
    ]
    assert outside.holds("embed").where == "train.py:6"  # its own freezing before the whole instance's
    assert outside.holds("blocks").where == "probe.py:6"
    assert outside.holds("head") is None
    assert index.frozen_from_outside("torch.nn.Linear").freezings == ()


def test_ckpt007_follows_the_freezing_a_training_script_does(cli, make_project):
    """The blocks after an embedding the script freezes are reported in the model's file,
    naming the script's line; the freezing moved, made conditional, or undone by another
    function that freezes nothing changes the findings of a warm run."""
    root = make_project({"pkg/__init__.py": "", "pkg/model.py": MODEL, "train.py": TRAIN.format(freeze="pass")})
    args = ["check", "--output-format", "json", "--select", "CKPT007", "."]
    assert json_findings(cli(args, root), root) == []
    (root / "train.py").write_text(textwrap.dedent(TRAIN.format(freeze="model.embed.requires_grad_(False)")))
    findings = json_findings(cli(args, root), root, with_message=True)
    assert [f[:4] for f in findings] == [("pkg/model.py", 15, 17, "CKPT007")]
    assert "which train.py:6 freezes (`model.embed`)" in findings[0][4]
    (root / "train.py").write_text(textwrap.dedent(TRAIN.format(freeze="\n        model.embed.requires_grad_(False)")))
    assert "which train.py:7 freezes" in json_findings(cli(args, root), root, with_message=True)[0][4]
    (root / "train.py").write_text(textwrap.dedent(TRAIN.format(freeze="if loader:\n            model.embed.requires_grad_(False)")))
    assert json_findings(cli(args, root), root) == []
    (root / "train.py").write_text(textwrap.dedent(TRAIN.format(freeze="model.embed.requires_grad_(False)")))
    (root / "stage2.py").write_text("def unfreeze(trainer):\n    trainer.model.embed.requires_grad_(True)\n")
    assert len(json_findings(cli(args, root), root)) == 1  # `trainer.model` is not known to be a Net
    (root / "pkg/model.py").write_text(
        textwrap.dedent(MODEL) + "\n    def unfreeze(self):\n        self.embed.requires_grad_(True)\n"
    )
    assert json_findings(cli(args, root), root) == []
