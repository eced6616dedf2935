"""The torch behaviour CKPT001 and CKPT032 rest on, checked against the installed torch.

If a torch upgrade changes any of it (the default becomes non-reentrant, the warning text
changes, the reentrant variant starts forwarding keywords, checkpoint grows a keyword), a test
here fails and the rules' docs, messages and keyword tables must be revisited.
Everything runs on CPU with tiny tensors. Skipped when torch (the `runtime` extra) is absent.
"""

from __future__ import annotations

import contextlib
import inspect
import textwrap
import warnings
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
import torch.utils.checkpoint as torch_checkpoint  # noqa: E402

from ckptlint.analysis.checkpoint_sites import (  # noqa: E402
    CHECKPOINT_OWN_KEYWORDS,
    NON_REENTRANT_ONLY_KEYWORDS,
)
from ckptlint.config import Settings  # noqa: E402
from ckptlint.engine import fix_text, lint_text  # noqa: E402

pytestmark = pytest.mark.torch

CHECKPOINT_WARNING = "torch.utils.checkpoint: the use_reentrant parameter should be passed explicitly"
SEQUENTIAL_WARNING = (
    "torch.utils.checkpoint.checkpoint_sequential: the use_reentrant parameter should be passed explicitly"
)
CONTEXT_FN_OR_DEBUG = "Passing `context_fn` or `debug` is only supported when use_reentrant=False."
REENTRANT_NODE = "CheckpointFunctionBackward"


# --- helpers -----------------------------------------------------------------------------


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


def block() -> torch.nn.Module:
    return torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Tanh())


def leaf_input() -> torch.Tensor:
    return torch.randn(2, 4, requires_grad=True)


def autograd_node_names(output: torch.Tensor) -> set[str]:
    """Class names of every node in the autograd graph behind `output`."""
    seen, names, stack = set(), set(), [output.grad_fn]
    while stack:
        node = stack.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        names.add(type(node).__name__)
        stack.extend(next_node for next_node, _ in node.next_functions)
    return names


@contextlib.contextmanager
def recorded_warnings():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield caught


def use_reentrant_warnings(caught) -> list[warnings.WarningMessage]:
    return [w for w in caught if "use_reentrant parameter should be passed explicitly" in str(w.message)]


def scaled(x, scale=1.0):
    return torch.tanh(x) * scale


def settings() -> Settings:
    return Settings.default(Path(__file__).resolve().parent.parent, target_versions={"torch": "2.13"})


def lint_codes(source: str) -> list[tuple[int, str]]:
    outcome = lint_text(source, Path("case.py"), settings())
    return [(d.location.row, d.code) for d in outcome.diagnostics]


# --- (a) omitting use_reentrant: a warning, then the reentrant implementation ---------------


def test_checkpoint_without_flag_warns_and_runs_reentrant():
    with recorded_warnings() as caught:
        out = torch_checkpoint.checkpoint(block(), leaf_input())
    found = use_reentrant_warnings(caught)
    assert len(found) == 1
    assert found[0].category is UserWarning
    assert str(found[0].message).startswith(CHECKPOINT_WARNING)
    assert type(out.grad_fn).__name__ == REENTRANT_NODE


def test_checkpoint_warning_does_not_point_at_the_call():
    """CKPT001's message says torch's warning cannot point at the user's line."""
    with recorded_warnings() as caught:
        torch_checkpoint.checkpoint(block(), leaf_input())
    (found,) = use_reentrant_warnings(caught)
    assert Path(found.filename).resolve() != Path(__file__).resolve()


@pytest.mark.parametrize("use_reentrant, node", [(True, REENTRANT_NODE), (False, None)])
def test_checkpoint_with_flag_is_silent(use_reentrant, node):
    with recorded_warnings() as caught:
        out = torch_checkpoint.checkpoint(block(), leaf_input(), use_reentrant=use_reentrant)
    assert use_reentrant_warnings(caught) == []
    assert (REENTRANT_NODE in autograd_node_names(out)) == (node is not None)


def test_checkpoint_sequential_without_flag_warns_and_runs_reentrant():
    layers = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Tanh(), torch.nn.Linear(4, 4))
    with recorded_warnings() as caught:
        out = torch_checkpoint.checkpoint_sequential(layers, 2, leaf_input())
    found = use_reentrant_warnings(caught)
    assert found, "checkpoint_sequential no longer warns when use_reentrant is omitted"
    assert str(found[0].message).startswith(SEQUENTIAL_WARNING)
    assert all(w.category is UserWarning for w in found)
    # The last segment is never checkpointed; the first one runs reentrant.
    assert REENTRANT_NODE in autograd_node_names(out)


def test_checkpoint_sequential_with_flag_false_is_silent_and_non_reentrant():
    layers = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Tanh(), torch.nn.Linear(4, 4))
    with recorded_warnings() as caught:
        out = torch_checkpoint.checkpoint_sequential(layers, 2, leaf_input(), use_reentrant=False)
    assert use_reentrant_warnings(caught) == []
    assert REENTRANT_NODE not in autograd_node_names(out)


# --- (b) keyword arguments under the reentrant implementation ------------------------------


def test_kwargs_with_explicit_reentrant_raise():
    with pytest.raises(ValueError, match=r"^Unexpected keyword arguments: scale$"):
        torch_checkpoint.checkpoint(scaled, leaf_input(), scale=2.0, use_reentrant=True)


def test_kwargs_with_implicit_reentrant_warn_then_raise():
    with recorded_warnings() as caught:
        with pytest.raises(ValueError, match=r"^Unexpected keyword arguments: scale$"):
            torch_checkpoint.checkpoint(scaled, leaf_input(), scale=2.0)
    assert [str(w.message).startswith(CHECKPOINT_WARNING) for w in use_reentrant_warnings(caught)] == [True]


def test_kwargs_error_lists_every_name_in_call_order():
    """CKPT032's message quotes the error; it lists the names joined by commas."""
    with pytest.raises(ValueError, match=r"^Unexpected keyword arguments: scale,bias$"):
        torch_checkpoint.checkpoint(lambda x, scale, bias: x, leaf_input(), scale=2.0, bias=1.0, use_reentrant=True)


def test_kwargs_reach_the_function_when_non_reentrant():
    x = leaf_input()
    received = {}

    def f(t, scale=1.0):
        received["scale"] = scale
        return torch.tanh(t) * scale

    out = torch_checkpoint.checkpoint(f, x, scale=2.0, use_reentrant=False)
    assert received == {"scale": 2.0}
    assert torch.equal(out, torch.tanh(x) * 2.0)
    out.sum().backward()
    assert x.grad is not None


def test_checkpoint_sequential_rejects_kwargs_in_both_variants():
    """Why CKPT032 leaves checkpoint_sequential alone: switching cannot help there."""
    layers = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Linear(4, 4))
    for use_reentrant in (True, False):
        with pytest.raises(ValueError, match="Unexpected keyword arguments: foo"):
            torch_checkpoint.checkpoint_sequential(layers, 2, leaf_input(), use_reentrant=use_reentrant, foo=1)


# --- (c) context_fn / debug under the reentrant implementation -----------------------------


def two_null_contexts():
    return contextlib.nullcontext(), contextlib.nullcontext()


@pytest.mark.parametrize("keyword", [{"context_fn": two_null_contexts}, {"debug": True}], ids=["context_fn", "debug"])
@pytest.mark.parametrize("flag", [{"use_reentrant": True}, {}], ids=["explicit", "implicit"])
def test_context_fn_and_debug_need_non_reentrant(keyword, flag):
    with recorded_warnings():
        with pytest.raises(ValueError) as raised:
            torch_checkpoint.checkpoint(block(), leaf_input(), **keyword, **flag)
    assert str(raised.value) == CONTEXT_FN_OR_DEBUG


@pytest.mark.parametrize("keyword", [{"context_fn": two_null_contexts}, {"debug": True}], ids=["context_fn", "debug"])
def test_context_fn_and_debug_work_non_reentrant(keyword):
    with recorded_warnings():
        out = torch_checkpoint.checkpoint(block(), leaf_input(), use_reentrant=False, **keyword)
    out.sum().backward()


# --- (d) checkpoint's own keywords -----------------------------------------------------------


def test_own_keywords_match_the_signature():
    parameters = inspect.signature(torch_checkpoint.checkpoint).parameters.values()
    keyword_only = {p.name for p in parameters if p.kind is inspect.Parameter.KEYWORD_ONLY}
    assert keyword_only == CHECKPOINT_OWN_KEYWORDS - {"preserve_rng_state"}
    assert [p.kind for p in parameters][-1] is inspect.Parameter.VAR_KEYWORD


def test_preserve_rng_state_is_accepted_under_reentrant():
    for value in (True, False):
        with recorded_warnings() as caught:
            out = torch_checkpoint.checkpoint(block(), leaf_input(), use_reentrant=True, preserve_rng_state=value)
        assert use_reentrant_warnings(caught) == []
        out.sum().backward()


NON_DEFAULT_VALUES = {
    "preserve_rng_state": False,
    "context_fn": two_null_contexts,
    "determinism_check": "none",
    "debug": True,
    "early_stop": False,
}


@pytest.mark.parametrize("keyword", sorted(CHECKPOINT_OWN_KEYWORDS - {"use_reentrant"}))
def test_reentrant_rejects_exactly_the_non_reentrant_only_keywords(keyword):
    """The table CKPT032 uses: which own keywords the reentrant variant refuses."""
    call = lambda: torch_checkpoint.checkpoint(  # noqa: E731
        block(), leaf_input(), use_reentrant=True, **{keyword: NON_DEFAULT_VALUES[keyword]}
    )
    if keyword in NON_REENTRANT_ONLY_KEYWORDS:
        with pytest.raises(ValueError, match="only supported when use_reentrant=False"):
            call()
    else:
        call().sum().backward()


# --- (e) the fixes make the code run, with the unchecked gradient ---------------------------

MODULE_HEADER = """
import contextlib

import torch
from torch.utils.checkpoint import checkpoint


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x, scale=1.0):
        return torch.tanh(self.lin(x)) * scale


def selective():
    return contextlib.nullcontext(), contextlib.nullcontext()
"""

CKPT032_CASES = {
    "implicit": "return checkpoint(block, x, scale=2.0).sum()",
    "explicit-true": "return checkpoint(block, x, use_reentrant=True, scale=2.0).sum()",
    "multi-line": "return checkpoint(\n        block,\n        x,\n        scale=2.0,  # doubled\n    ).sum()",
    "context_fn": "return (checkpoint(block, x, context_fn=selective) * 2.0).sum()",
}


def module_source(body: str) -> str:
    """A small module with the checkpoint call under test in `loss(block, x)`."""
    return textwrap.dedent(MODULE_HEADER).lstrip("\n") + "\n\ndef loss(block, x):\n    " + body + "\n"


def load(source: str) -> dict:
    namespace: dict = {}
    exec(compile(source, "<ckptlint case>", "exec"), namespace)
    return namespace


def gradients(namespace: dict, x: torch.Tensor, reference: torch.nn.Module):
    block = namespace["Block"]()
    block.lin.load_state_dict(reference.state_dict())
    x = x.detach().clone().requires_grad_(True)
    namespace["loss"](block, x).backward()
    return block.lin.weight.grad, block.lin.bias.grad, x.grad


def unchecked_gradients(reference: torch.nn.Module, x: torch.Tensor):
    block = torch.nn.Linear(4, 4)
    block.load_state_dict(reference.state_dict())
    x = x.detach().clone().requires_grad_(True)
    (torch.tanh(block(x)) * 2.0).sum().backward()
    return block.weight.grad, block.bias.grad, x.grad


@pytest.mark.parametrize("case", sorted(CKPT032_CASES))
def test_ckpt032_fix_makes_failing_code_run(case):
    source = module_source(CKPT032_CASES[case])
    codes = lint_codes(source)
    assert [code for _, code in codes] == ["CKPT032"], codes

    fixed = fix_text(source, Path("case.py"), settings(), unsafe=False)  # the fix is safe
    assert fixed.error is None
    assert [f.code for f in fixed.applied] == ["CKPT032"]
    assert lint_codes(fixed.text) == []

    reference = torch.nn.Linear(4, 4)
    x = torch.randn(3, 4)
    with recorded_warnings():
        with pytest.raises(ValueError, match="Unexpected keyword arguments: scale|only supported when use_reentrant"):
            gradients(load(source), x, reference)
    with recorded_warnings() as caught:
        got = gradients(load(fixed.text), x, reference)
    assert use_reentrant_warnings(caught) == []
    for actual, expected in zip(got, unchecked_gradients(reference, x)):
        torch.testing.assert_close(actual, expected, rtol=0, atol=1e-6)


def test_ckpt001_fix_silences_the_warning_and_keeps_the_gradient():
    source = module_source("return (checkpoint(block, x) * 2.0).sum()")
    assert [code for _, code in lint_codes(source)] == ["CKPT001"]
    fixed = fix_text(source, Path("case.py"), settings(), unsafe=True)
    assert [f.code for f in fixed.applied] == ["CKPT001"]
    assert "checkpoint(block, x, use_reentrant=False)" in fixed.text

    reference = torch.nn.Linear(4, 4)
    x = torch.randn(3, 4)
    with recorded_warnings() as caught:
        before = gradients(load(source), x, reference)
    assert use_reentrant_warnings(caught)
    with recorded_warnings() as caught:
        after = gradients(load(fixed.text), x, reference)
    assert use_reentrant_warnings(caught) == []
    for a, b, expected in zip(before, after, unchecked_gradients(reference, x)):
        torch.testing.assert_close(a, expected, rtol=0, atol=1e-6)
        torch.testing.assert_close(b, expected, rtol=0, atol=1e-6)


# --- known engine bugs, confirmed against torch ---------------------------------------------


def test_debug_false_is_accepted_under_reentrant():
    """torch raises only for `debug is not False`; `debug=False` is the default and runs."""
    with recorded_warnings() as caught:
        out = torch_checkpoint.checkpoint(block(), leaf_input(), use_reentrant=True, debug=False)
    assert use_reentrant_warnings(caught) == []
    out.sum().backward()


def test_ckpt032_not_reported_for_debug_false():
    source = "from torch.utils.checkpoint import checkpoint\ny = checkpoint(f, x, use_reentrant=True, debug=False)\n"
    assert lint_codes(source) == []


def test_checkpoint_sequential_takes_use_reentrant_positionally():
    """`use_reentrant` is checkpoint_sequential's fourth positional parameter."""
    layers = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Tanh(), torch.nn.Linear(4, 4))
    with recorded_warnings() as caught:
        out = torch_checkpoint.checkpoint_sequential(layers, 2, leaf_input(), False)
    assert use_reentrant_warnings(caught) == []
    assert REENTRANT_NODE not in autograd_node_names(out)
    with pytest.raises(TypeError, match="multiple values for argument 'use_reentrant'"):
        torch_checkpoint.checkpoint_sequential(layers, 2, leaf_input(), False, use_reentrant=False)


def test_ckpt001_not_reported_for_positional_use_reentrant_in_checkpoint_sequential():
    source = "import torch.utils.checkpoint as cp\ny = cp.checkpoint_sequential(layers, 2, x, False)\n"
    assert lint_codes(source) == []
