"""Multi-file layouts shaped like real projects: their own `checkpoint` functions, wrappers
around torch's, saving code, other libraries' checkpointing. ckptlint must report exactly the
findings listed (for most layouts: none).

Every file is linted with the engine under a project root holding the whole layout, as
`ckptlint` would when pre-commit hands it one changed file.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from ckptlint.config import Settings
from ckptlint.engine import lint_text

LAYOUTS: dict[str, tuple[dict[str, str], set[tuple[str, int, str]]]] = {}


def layout(name: str, files: dict[str, str], expected: set[tuple[str, int, str]] = frozenset()) -> None:
    """Register a layout: `{relative path: source}` and the findings expected in it."""
    LAYOUTS[name] = ({path: textwrap.dedent(src).lstrip("\n") for path, src in files.items()}, set(expected))


# A timm-like package: its own `checkpoint` and `checkpoint_seq`, which pick the
# implementation themselves; models call them without `use_reentrant`.
layout(
    "timm-like",
    {
        "pyproject.toml": "[project]\nname = 'visionlib'\n",
        "visionlib/__init__.py": "from .models import create_model\n",
        "visionlib/layers/__init__.py": "from .grad_ckpt import checkpoint, checkpoint_seq\n",
        "visionlib/layers/grad_ckpt.py": """
            import os

            import torch
            import torch.utils.checkpoint

            _USE_REENTRANT = os.environ.get("VISIONLIB_REENTRANT_CKPT", "0") == "1"


            def checkpoint(function, *args, **kwargs):
                reentrant = kwargs.pop("use_reentrant", _USE_REENTRANT)
                return torch.utils.checkpoint.checkpoint(function, *args, use_reentrant=reentrant, **kwargs)


            def checkpoint_seq(functions, x, every=1, use_reentrant=None):
                if isinstance(functions, torch.nn.Sequential):
                    functions = list(functions.children())
                reentrant = _USE_REENTRANT if use_reentrant is None else use_reentrant

                def segment(start, end):
                    def forward(_x):
                        for j in range(start, end + 1):
                            _x = functions[j](_x)
                        return _x

                    return forward

                for start in range(0, len(functions), every):
                    end = min(start + every - 1, len(functions) - 1)
                    x = torch.utils.checkpoint.checkpoint(segment(start, end), x, use_reentrant=reentrant)
                return x
        """,
        "visionlib/models/__init__.py": "from .convnext import ConvNeXt\n\ndef create_model(name, **kw):\n    return ConvNeXt(**kw)\n",
        "visionlib/models/convnext.py": """
            import torch.nn as nn

            from ..layers import checkpoint, checkpoint_seq


            class Stage(nn.Module):
                def __init__(self, dim, depth):
                    super().__init__()
                    self.blocks = nn.Sequential(*[nn.Conv2d(dim, dim, 7, padding=3, groups=dim) for _ in range(depth)])
                    self.grad_checkpointing = False

                def forward(self, x):
                    if self.grad_checkpointing:
                        return checkpoint_seq(self.blocks, x)
                    return self.blocks(x)


            class ConvNeXt(nn.Module):
                def __init__(self, dims=(96, 192, 384, 768), depths=(3, 3, 9, 3)):
                    super().__init__()
                    self.stages = nn.ModuleList(Stage(d, n) for d, n in zip(dims, depths))
                    self.head = nn.Linear(dims[-1], 1000)

                def set_grad_checkpointing(self, enable=True):
                    for stage in self.stages:
                        stage.grad_checkpointing = enable

                def forward_head(self, x):
                    return self.head(x.mean((2, 3)))

                def forward(self, x):
                    for stage in self.stages:
                        x = checkpoint(stage, x) if stage.grad_checkpointing else stage(x)
                    return checkpoint(self.forward_head, x, pre_logits=False)
        """,
        "visionlib/models/vit.py": """
            import torch.nn as nn

            import visionlib.layers as layers
            from visionlib.layers.grad_ckpt import checkpoint as ckpt


            class ViT(nn.Module):
                def __init__(self, blocks):
                    super().__init__()
                    self.blocks = nn.Sequential(*blocks)

                def forward(self, x, every=2):
                    x = layers.checkpoint_seq(self.blocks, x, every=every)
                    return ckpt(nn.functional.layer_norm, x, x.shape[-1:])
        """,
    },
)

# A fairseq-like project: its own activation-checkpointing wrapper and autograd Function.
layout(
    "fairseq-like",
    {
        "setup.py": "from setuptools import setup\nsetup(name='seqlib')\n",
        "seqlib/modules/checkpoint_activations.py": """
            import functools

            import torch


            class CheckpointFunction(torch.autograd.Function):
                @staticmethod
                def forward(ctx, run_function, parent_ctx_dict, kwarg_keys, *args):
                    ctx.run_function = run_function
                    ctx.kwarg_keys = kwarg_keys
                    ctx.fwd_rng_state = torch.get_rng_state()  # as fairseq's utils.get_rng_state()
                    ctx.save_for_backward(*args)
                    with torch.no_grad():
                        return run_function(*args)

                @staticmethod
                def backward(ctx, *grads):
                    inputs = [t.detach().requires_grad_(t.requires_grad) for t in ctx.saved_tensors]
                    torch.set_rng_state(ctx.fwd_rng_state)
                    with torch.enable_grad():
                        outputs = ctx.run_function(*inputs)
                    torch.autograd.backward(outputs, grads)
                    return (None, None, None) + tuple(t.grad for t in inputs)


            def checkpoint(function, *args):
                return CheckpointFunction.apply(function, {}, (), *args)


            def checkpoint_wrapper(module, offload_to_cpu=False):
                module.forward = functools.partial(_checkpointed_forward, module.forward)
                return module


            def _checkpointed_forward(original_forward, *args):
                return checkpoint(original_forward, *args)
        """,
        "seqlib/models/transformer.py": """
            import torch.nn as nn

            from seqlib.modules.checkpoint_activations import checkpoint, checkpoint_wrapper


            class TransformerEncoder(nn.Module):
                def __init__(self, layers, checkpoint_activations=False):
                    super().__init__()
                    if checkpoint_activations:
                        layers = [checkpoint_wrapper(layer) for layer in layers]
                    self.layers = nn.ModuleList(layers)

                def forward(self, x):
                    for layer in self.layers:
                        x = layer(x)
                    return checkpoint(self.final, x)

                def final(self, x):
                    return x
        """,
        "seqlib/checkpoint_utils.py": """
            import os

            import torch


            def save_checkpoint(args, trainer, epoch_itr, val_loss):
                state = {"args": args, "model": trainer.model.state_dict(), "epoch": epoch_itr.epoch}
                checkpoint = os.path.join(args.save_dir, f"checkpoint{epoch_itr.epoch}.pt")
                torch.save(state, checkpoint)
                return checkpoint


            def load_checkpoint(path, trainer):
                checkpoint = torch.load(path, map_location="cpu")
                trainer.model.load_state_dict(checkpoint["model"])
                return checkpoint["epoch"]


            def checkpoint_paths(path, pattern=r"checkpoint(\\d+)\\.pt"):
                return sorted(p for p in os.listdir(path) if p.startswith("checkpoint"))
        """,
    },
)

# Hugging Face-style modeling code: the checkpoint function is configured in a base class
# from `gradient_checkpointing_kwargs` and called in another file.
layout(
    "hf-like",
    {
        "pyproject.toml": "[project]\nname = 'lmkit'\n",
        "lmkit/modeling_utils.py": """
            import functools

            import torch.nn as nn
            from torch.utils.checkpoint import checkpoint


            class PreTrainedModel(nn.Module):
                supports_gradient_checkpointing = True

                def gradient_checkpointing_enable(self, gradient_checkpointing_kwargs=None):
                    if gradient_checkpointing_kwargs is None:
                        gradient_checkpointing_kwargs = {"use_reentrant": False}
                    gradient_checkpointing_func = functools.partial(checkpoint, **gradient_checkpointing_kwargs)
                    for module in self.modules():
                        if hasattr(module, "gradient_checkpointing"):
                            module._gradient_checkpointing_func = gradient_checkpointing_func
                            module.gradient_checkpointing = True

                def save_pretrained(self, save_directory, checkpoint_name="model.safetensors"):
                    ...
        """,
        "lmkit/models/llama/modeling_llama.py": """
            import torch.nn as nn

            from ...modeling_utils import PreTrainedModel


            class LlamaModel(PreTrainedModel):
                def __init__(self, layers):
                    super().__init__()
                    self.layers = nn.ModuleList(layers)
                    self.gradient_checkpointing = False

                def forward(self, hidden_states, attention_mask=None, position_ids=None):
                    for decoder_layer in self.layers:
                        if self.gradient_checkpointing and self.training:
                            hidden_states = self._gradient_checkpointing_func(
                                decoder_layer.__call__, hidden_states, attention_mask, position_ids
                            )
                        else:
                            hidden_states = decoder_layer(hidden_states, attention_mask, position_ids)
                    return hidden_states
        """,
        "examples/train_clm.py": """
            from lmkit.models.llama.modeling_llama import LlamaModel
            from lmkit.trainer import Trainer, TrainingArguments

            args = TrainingArguments(output_dir="out", gradient_checkpointing=True, save_steps=500,
                                     resume_from_checkpoint="out/checkpoint-1000")
            model = LlamaModel(layers=[])
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
            trainer = Trainer(model=model, args=args)
            trainer.train(resume_from_checkpoint=True)
            trainer.save_checkpoint("out/final")
        """,
    },
)

# Lightning, Megatron, DeepSpeed, JAX and torch.distributed.checkpoint: other "checkpoint"s.
layout(
    "other-libraries",
    {
        ".git/HEAD": "ref: refs/heads/main\n",
        "lit/module.py": """
            import lightning as L
            import torch
            from lightning.pytorch.callbacks import ModelCheckpoint


            class LitModel(L.LightningModule):
                def on_save_checkpoint(self, checkpoint):
                    checkpoint["tokenizer"] = self.tokenizer_name

                def on_load_checkpoint(self, checkpoint):
                    self.tokenizer_name = checkpoint["tokenizer"]


            checkpoint_callback = ModelCheckpoint(dirpath="ckpts", monitor="val_loss", save_top_k=3)
            trainer = L.Trainer(callbacks=[checkpoint_callback])
            trainer.save_checkpoint("last.ckpt")
            model = LitModel.load_from_checkpoint(checkpoint_callback.best_model_path)
        """,
        "mega/layers.py": """
            from megatron.core import tensor_parallel
            from megatron.core.tensor_parallel.random import checkpoint


            def checkpointed_forward(self, hidden_states, attention_mask):
                hidden_states = tensor_parallel.checkpoint(self.custom(0, 2), False, hidden_states, attention_mask)
                return checkpoint(self.custom(2, 4), False, hidden_states, attention_mask)
        """,
        "ds/model.py": """
            import deepspeed
            import deepspeed.checkpointing as ds_ckpt


            def forward(self, x):
                x = ds_ckpt.checkpoint(self.block1, x)
                return deepspeed.checkpointing.checkpoint(self.block2, x)
        """,
        "jx/model.py": """
            import flax.linen as nn
            import jax


            class Block(nn.Module):
                @nn.compact
                def __call__(self, x):
                    return nn.Dense(64)(x)


            RematBlock = nn.checkpoint(Block)
            f = jax.checkpoint(lambda x: jax.numpy.sin(x))
        """,
        "dist/save.py": """
            import torch.distributed.checkpoint as dcp
            from torch.distributed.checkpoint.state_dict import get_state_dict


            def save(model, optimizer, step):
                model_state, optim_state = get_state_dict(model, optimizer)
                dcp.save({"model": model_state, "optim": optim_state}, checkpoint_id=f"ckpt/{step}")


            def load(state, step):
                dcp.load(state, checkpoint_id=f"ckpt/{step}")
        """,
    },
)

# A project module called `checkpoint` with a function called `checkpoint`, next to real
# torch checkpointing; only the latter is reported.
layout(
    "project-module-named-checkpoint",
    {
        "pyproject.toml": "[project]\nname = 'app'\n",
        "app/checkpoint.py": """
            import torch


            def checkpoint(model, path):
                torch.save(model.state_dict(), path)


            def restore(model, path):
                model.load_state_dict(torch.load(path))
        """,
        "app/model.py": """
            import torch
            import torch.nn as nn

            from app import checkpoint
            from app.checkpoint import checkpoint as save_weights


            class Net(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.body = nn.Linear(8, 8)

                def forward(self, x, mask=None):
                    x = torch.utils.checkpoint.checkpoint(self.body, x)
                    return torch.utils.checkpoint.checkpoint(self.masked, x, mask=mask)

                def masked(self, x, mask=None):
                    return x if mask is None else x * mask


            def save(net, path):
                checkpoint.checkpoint(net, path)
                save_weights(net, path + ".bak")
        """,
    },
    expected={("app/model.py", 14, "CKPT001"), ("app/model.py", 15, "CKPT032")},
)


def lint_layout(root: Path, files: dict[str, str]) -> set[tuple[str, int, str]]:
    settings = Settings.default(root, target_versions={"torch": "2.13"})
    found = set()
    for relative in sorted(files):
        if not relative.endswith(".py"):
            continue
        path = root / relative
        outcome = lint_text(path.read_text(encoding="utf-8"), path, settings, display_path=relative)
        assert outcome.parsed, relative
        assert outcome.internal_errors == (), outcome.internal_errors
        found |= {(relative, d.location.row, d.code) for d in outcome.diagnostics}
    return found


def write_layout(root: Path, files: dict[str, str]) -> None:
    for relative, source in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(source, encoding="utf-8")


@pytest.mark.parametrize("name", sorted(LAYOUTS))
def test_layout_findings(name: str, tmp_path: Path):
    files, expected = LAYOUTS[name]
    write_layout(tmp_path, files)
    assert lint_layout(tmp_path, files) == expected


# --- missed cases (false negatives) -----------------------------------------------------


def test_partial_enabled_later_is_resolved(tmp_path: Path):
    files = {
        "model.py": textwrap.dedent(
            """
            from functools import partial

            import torch.nn as nn
            from torch.utils.checkpoint import checkpoint


            class Model(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.block = nn.Linear(8, 8)
                    self.ckpt_fn = None

                def enable_checkpointing(self):
                    self.ckpt_fn = partial(checkpoint, use_reentrant=True)

                def forward(self, x, mask):
                    if self.ckpt_fn is not None:
                        return self.ckpt_fn(self.block, x, mask=mask)
                    return self.block(x)
            """
        ).lstrip("\n")
    }
    write_layout(tmp_path, files)
    assert lint_layout(tmp_path, files) == {("model.py", 18, "CKPT032")}


def test_explicit_reentrant_with_star_kwargs_and_extra_keywords(tmp_path: Path):
    files = {
        "layer.py": textwrap.dedent(
            """
            from torch.utils.checkpoint import checkpoint


            def run_layer(layer, hidden, mask, **layer_kwargs):
                return checkpoint(layer, hidden, use_reentrant=True, attention_mask=mask, **layer_kwargs)
            """
        ).lstrip("\n")
    }
    write_layout(tmp_path, files)
    assert lint_layout(tmp_path, files) == {("layer.py", 5, "CKPT032")}


def test_package_alias_of_torch_utils_passes_the_prefilter(tmp_path: Path):
    files = {
        "block.py": textwrap.dedent(
            """
            import torch.utils as tu


            def forward(self, x):
                return tu.checkpoint.checkpoint(self.block, x)
            """
        ).lstrip("\n")
    }
    write_layout(tmp_path, files)
    assert lint_layout(tmp_path, files) == {("block.py", 5, "CKPT001")}
