"""CKPT030's runtime evidence: a late-binding lambda gives wrong gradients, silently, and the
fixed code (as `--fix` writes it) gives exactly the unchecked run's."""

from __future__ import annotations

import textwrap
import types
from pathlib import Path

import pytest

from ckptlint.config import Settings
from ckptlint.engine import fix_text, lint_text

MODEL = textwrap.dedent(
    """
    import torch
    import torch.nn as nn
    from torch.utils.checkpoint import checkpoint


    class Stack(nn.Module):
        def __init__(self, checkpointed):
            super().__init__()
            self.blocks = nn.ModuleList(nn.Linear(8, 8) for _ in range(3))
            self.checkpointed = checkpointed

        def forward(self, x):
            for block in self.blocks:
                if self.checkpointed:
                    x = checkpoint(lambda t: torch.tanh(block(t)), x, use_reentrant=False)
                else:
                    x = torch.tanh(block(x))
            return x
    """
).lstrip()


def gradients(source: str, checkpointed: bool):
    torch = pytest.importorskip("torch")
    module = types.ModuleType("closure_model")
    exec(compile(source, "closure_model.py", "exec"), module.__dict__)
    torch.manual_seed(0)
    model = module.Stack(checkpointed)
    model(torch.randn(4, 8, generator=torch.Generator().manual_seed(1))).sum().backward()
    return [p.grad for p in model.parameters()]


def settings() -> Settings:
    return Settings.default(Path("/project"), target_versions={"torch": "2.13"})


def test_late_binding_lambda_gives_silently_wrong_gradients_and_the_fix_restores_them():
    torch = pytest.importorskip("torch")
    reference = gradients(MODEL, checkpointed=False)
    late = gradients(MODEL, checkpointed=True)
    differences = [float((a - b).abs().max()) for a, b in zip(reference, late)]
    assert max(differences[:4]) > 1e-3  # the first two blocks were recomputed as the last one
    assert differences[4:] == [0.0, 0.0]  # the last block is the one the lambda saw

    path = Path("/project/model.py")
    [finding] = lint_text(MODEL, path, settings()).diagnostics
    assert (finding.code, finding.location.row) == ("CKPT030", 15)
    fixed = fix_text(MODEL, path, settings(), unsafe=False)
    assert "lambda t, block=block: torch.tanh(block(t))" in fixed.text
    assert lint_text(fixed.text, path, settings()).diagnostics == ()
    for a, b in zip(reference, gradients(fixed.text, checkpointed=True)):
        assert torch.equal(a, b)


def test_keywords_a_local_function_cannot_take_are_a_type_error():
    """CKPT032's local-callable form: the keywords reach the function and it rejects them."""
    torch = pytest.importorskip("torch")
    from torch.utils.checkpoint import checkpoint

    def create_custom_forward(module):
        def custom_forward(*inputs):
            return module(*inputs)

        return custom_forward

    x = torch.randn(2, 4, requires_grad=True)
    with pytest.raises(TypeError, match="custom_forward\\(\\) got an unexpected keyword argument 'encoder_hidden_states'"):
        checkpoint(create_custom_forward(torch.tanh), x, encoder_hidden_states=x, use_reentrant=False)
    with pytest.raises(ValueError, match="Unexpected keyword arguments: encoder_hidden_states"):
        checkpoint(create_custom_forward(torch.tanh), x, encoder_hidden_states=x, use_reentrant=True)


@pytest.mark.parametrize("reentrant", [False, True])
def test_a_dict_changed_after_the_call_changes_the_recomputation(reentrant):
    """CKPT031's evidence: the recomputation takes the branch the changed dict selects."""
    torch = pytest.importorskip("torch")
    import warnings

    from torch.utils.checkpoint import checkpoint

    def region(t, cfg):
        return torch.tanh(t) if cfg["act"] == "tanh" else torch.sigmoid(t)

    x0 = torch.linspace(-1, 1, 4)
    reference = x0.clone().requires_grad_()
    region(reference, {"act": "tanh"}).sum().backward()
    x = x0.clone().requires_grad_()
    cfg = {"act": "tanh"}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        y = checkpoint(region, x, cfg, use_reentrant=reentrant)
        cfg["act"] = "sigmoid"
        y.sum().backward()
    assert float((x.grad - reference.grad).abs().max()) > 0.4

    # A number read by the region: only the reentrant implementation rebuilds the graph with it.
    x = torch.ones(3, requires_grad=True)
    scale = {"value": 2.0}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        y = checkpoint(lambda t, s: t * s["value"], x, scale, use_reentrant=reentrant)
        scale["value"] = 3.0
        y.sum().backward()
    assert x.grad.tolist() == ([3.0] * 3 if reentrant else [2.0] * 3)


@pytest.mark.parametrize("layer", ["dropout", "batchnorm"])
@pytest.mark.parametrize("reentrant", [False, True])
def test_eval_mode_between_forward_and_backward(reentrant, layer):
    """CKPT031's evidence for `model.eval()` before backward: the recomputation runs the
    region in eval mode; non-reentrant raises, reentrant returns the eval network's gradients."""
    torch = pytest.importorskip("torch")
    import warnings

    from torch.utils.checkpoint import CheckpointError, checkpoint

    torch.manual_seed(0)
    norm = torch.nn.Dropout(0.3) if layer == "dropout" else torch.nn.BatchNorm1d(8)
    head = torch.nn.Sequential(torch.nn.Linear(8, 8), norm)
    x0 = torch.randn(4, 8)
    reference = x0.clone().requires_grad_()
    torch.manual_seed(1)
    head(reference).pow(2).sum().backward()
    x = x0.clone().requires_grad_()
    torch.manual_seed(1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        y = checkpoint(head, x, use_reentrant=reentrant).pow(2).sum()
        head.eval()
        if not reentrant:
            with pytest.raises(CheckpointError):
                y.backward()
            return
        y.backward()
    assert float((x.grad - reference.grad).abs().max()) > 1e-2


def test_late_binding_through_a_wrapper_defined_in_another_module(cli, make_project):
    from conftest import json_findings

    root = make_project(
        {
            "utils.py": """
                import torch.utils.checkpoint as cp


                def run_checkpointed(function, *inputs):
                    return cp.checkpoint(function, *inputs, use_reentrant=False)
            """,
            "model.py": """
                from utils import run_checkpointed


                def forward(blocks, x):
                    for block in blocks:
                        x = run_checkpointed(lambda t: block(t), x)
                    for block in blocks:
                        x = run_checkpointed(lambda t, block=block: block(t), x)
                    return x
            """,
            "vendor_model.py": """
                from timm.models import checkpoint_seq


                def forward(stages, x):
                    for stage in stages:
                        x = checkpoint_seq(lambda t: stage(t), x)
                    return x
            """,
        },
        pyproject="[project]\nname = 'demo'\n\n[tool.ckptlint]\ncheckpoint-functions = ['timm.models.checkpoint_seq']\n",
    )
    result = cli(["--output-format", "json", "--no-cache", "."], root)
    assert json_findings(result, root) == [("model.py", 6, 13, "CKPT030"), ("vendor_model.py", 6, 13, "CKPT030")]
    # The model file alone, as pre-commit passes it: the wrapper is still known.
    alone = cli(["--output-format", "json", "--no-cache", "model.py"], root)
    assert json_findings(alone, root) == [("model.py", 6, 13, "CKPT030")]


@pytest.mark.parametrize("reentrant", [False, True])
def test_dropout_recomputed_without_the_rng_state_draws_another_mask(reentrant):
    """CKPT033's evidence: without the saved RNG state the recomputed mask differs."""
    torch = pytest.importorskip("torch")
    import torch.nn as nn
    from torch.utils.checkpoint import checkpoint

    torch.manual_seed(0)
    block = nn.Sequential(nn.Linear(16, 16), nn.Dropout(0.5)).train()

    def input_gradient(**options):
        torch.manual_seed(1)
        x = torch.randn(8, 16, requires_grad=True)
        if options:
            y = checkpoint(block, x, use_reentrant=reentrant, **options)
        else:
            y = block(x)
        y.pow(2).sum().backward()
        return x.grad

    reference = input_gradient()
    assert torch.equal(input_gradient(preserve_rng_state=True), reference)
    assert not torch.allclose(input_gradient(preserve_rng_state=False), reference)


def test_checkpoint_wrapper_passes_preserve_rng_state_on():
    """CKPT033 through `checkpoint_wrapper`: torch's wrapper hands `preserve_rng_state=False`
    to checkpoint, and the recomputed dropout mask differs."""
    torch = pytest.importorskip("torch")
    import functools

    import torch.nn as nn
    from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import (
        apply_activation_checkpointing,
        checkpoint_wrapper,
    )

    def input_gradient(wrapper_fn):
        torch.manual_seed(0)
        model = nn.Sequential(nn.Sequential(nn.Linear(16, 16), nn.Dropout(0.5))).train()
        if wrapper_fn is not None:
            apply_activation_checkpointing(
                model, checkpoint_wrapper_fn=wrapper_fn, check_fn=lambda m: isinstance(m[-1], nn.Dropout) if isinstance(m, nn.Sequential) and len(m) == 2 else False
            )
        torch.manual_seed(1)
        x = torch.randn(8, 16, requires_grad=True)
        model(x).pow(2).sum().backward()
        return x.grad

    reference = input_gradient(None)
    assert torch.equal(input_gradient(checkpoint_wrapper), reference)
    assert not torch.allclose(input_gradient(functools.partial(checkpoint_wrapper, preserve_rng_state=False)), reference)


def test_dropout_two_modules_away_in_another_file(cli, make_project):
    from conftest import json_findings

    root = make_project(
        {
            "layers.py": """
                import torch.nn as nn


                class Attention(nn.Module):
                    def __init__(self, width):
                        super().__init__()
                        self.qkv = nn.Linear(width, 3 * width)
                        self.attn_drop = nn.Dropout(0.1)


                class Mixer(nn.Module):
                    def __init__(self, width):
                        super().__init__()
                        self.norm = nn.LayerNorm(width)
                        self.attention = Attention(width)
            """,
            "model.py": """
                import torch.nn as nn
                from torch.utils.checkpoint import checkpoint

                from layers import Mixer


                class Model(nn.Module):
                    def __init__(self, width, depth):
                        super().__init__()
                        self.mixers = nn.ModuleList([Mixer(width) for _ in range(depth)])
                        self.norms = nn.ModuleList([nn.LayerNorm(width) for _ in range(depth)])

                    def forward(self, x):
                        for mixer in self.mixers:
                            x = checkpoint(mixer, x, use_reentrant=False, preserve_rng_state=False)
                        for norm in self.norms:
                            x = checkpoint(norm, x, use_reentrant=False, preserve_rng_state=False)
                        return x
            """,
        }
    )
    result = cli(["--output-format", "json", "--no-cache", "model.py"], root)
    findings = json_findings(result, root, with_message=True)
    assert [f[:4] for f in findings] == [("model.py", 15, 17, "CKPT033")]
    assert "Model.mixers -> Mixer.attention -> Attention.attn_drop -> (torch.nn.Dropout)" in findings[0][4]


@pytest.mark.parametrize("reentrant", [False, True])
def test_checkpointed_batchnorm_counts_every_batch_twice(reentrant):
    """CKPT010's evidence: one checkpointed training step, num_batches_tracked == 2."""
    torch = pytest.importorskip("torch")
    import torch.nn as nn
    from torch.utils.checkpoint import checkpoint

    torch.manual_seed(0)
    block = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4)).train()
    plain = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4)).train()
    plain.load_state_dict(block.state_dict())
    x = torch.randn(2, 3, 8, 8, requires_grad=True)
    plain(x).sum().backward()
    checkpoint(block, x, use_reentrant=reentrant).sum().backward()
    assert int(plain[1].num_batches_tracked) == 1
    assert int(block[1].num_batches_tracked) == 2
    assert not torch.allclose(block[1].running_mean, plain[1].running_mean)


@pytest.mark.parametrize("reentrant", [False, True])
def test_a_checkpointed_counter_counts_twice(reentrant):
    """CKPT011's evidence: every write in the region happens again in backward."""
    torch = pytest.importorskip("torch")
    import torch.nn as nn
    from torch.utils.checkpoint import checkpoint

    class Counting(nn.Module):
        def __init__(self):
            super().__init__()
            self.linear = nn.Linear(4, 4)
            self.calls = 0

        def forward(self, x):
            self.calls += 1
            return self.linear(x)

    block = Counting()
    checkpoint(block, torch.randn(2, 4, requires_grad=True), use_reentrant=reentrant).sum().backward()
    assert block.calls == 2


def test_batchnorm_defined_in_one_module_checkpointed_in_another_four_ways(cli, make_project):
    from conftest import json_findings

    root = make_project(
        {
            "blocks.py": """
                import torch.nn as nn


                class ConvBN(nn.Module):
                    def __init__(self, channels):
                        super().__init__()
                        self.conv = nn.Conv2d(channels, channels, 3, padding=1)
                        self.bn = nn.BatchNorm2d(channels)

                    def forward(self, x):
                        return self.bn(self.conv(x))


                class ConvGN(nn.Module):
                    def __init__(self, channels):
                        super().__init__()
                        self.conv = nn.Conv2d(channels, channels, 3, padding=1)
                        self.norm = nn.GroupNorm(4, channels)
                        self.frozen = nn.BatchNorm2d(channels, track_running_stats=False)

                    def forward(self, x):
                        return self.frozen(self.norm(self.conv(x)))
            """,
            "helpers.py": """
                from torch.utils.checkpoint import checkpoint


                def run_checkpointed(module, *inputs):
                    return checkpoint(module, *inputs, use_reentrant=False)
            """,
            "model.py": """
                import torch.nn as nn
                from torch.utils.checkpoint import checkpoint, checkpoint_sequential
                from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import apply_activation_checkpointing

                from blocks import ConvBN, ConvGN
                from helpers import run_checkpointed


                class Net(nn.Module):
                    def __init__(self, channels):
                        super().__init__()
                        self.stage = nn.Sequential(ConvBN(channels), ConvBN(channels))
                        self.head = ConvBN(channels)
                        self.gn_stage = nn.Sequential(ConvGN(channels), ConvGN(channels))

                    def forward(self, x):
                        x = checkpoint(self.stage, x, use_reentrant=False)
                        x = checkpoint_sequential(self.stage, 2, x, use_reentrant=False)
                        x = run_checkpointed(self.head, x)
                        x = checkpoint(self.gn_stage, x, use_reentrant=False)
                        return x


                def build(channels):
                    net = Net(channels)
                    apply_activation_checkpointing(net, check_fn=lambda m: isinstance(m, ConvBN))
                    return net
            """,
        }
    )
    result = cli(["--output-format", "json", "--no-cache", "--select", "CKPT010", "."], root)
    findings = json_findings(result, root, with_message=True)
    assert [f[:4] for f in findings] == [
        ("model.py", 17, 13, "CKPT010"),
        ("model.py", 18, 13, "CKPT010"),
        ("model.py", 19, 13, "CKPT010"),
        ("model.py", 26, 5, "CKPT010"),
    ]
    assert "Net.stage -> ConvBN.bn -> (torch.nn.BatchNorm2d)" in findings[0][4]


@pytest.mark.parametrize(("position", "updates"), [("first", 2), ("last", 1)])
def test_checkpoint_sequential_leaves_its_last_segment_unchecked(position, updates):
    """CKPT010's evidence for `checkpoint_sequential`: a BatchNorm in the last segment runs
    once (torch runs that segment without checkpointing); in an earlier one, twice."""
    torch = pytest.importorskip("torch")
    import torch.nn as nn
    from torch.utils.checkpoint import checkpoint_sequential

    layers = [nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 8)]
    bn = nn.BatchNorm1d(8)
    sequence = nn.Sequential(*([bn, *layers] if position == "first" else [*layers, bn])).train()
    x = torch.randn(4, 8, requires_grad=True)
    checkpoint_sequential(sequence, 2, x, use_reentrant=False).sum().backward()
    assert int(bn.num_batches_tracked) == updates
