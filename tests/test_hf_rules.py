"""CKPT020 and CKPT021: the fine-tuning fixture projects linted under transformers 4.x and 5.x,
their fixes, the model-class table checked against the installed transformers, and the
library behaviour both rules rest on, re-run on tiny models (CPU, seconds)."""

from __future__ import annotations

import ast
import warnings
from pathlib import Path

import pytest

from ckptlint.analysis.script_models import MainInput, classify_model_class
from ckptlint.config import Settings
from ckptlint.engine import fix_text, lint_text
from ckptlint.indexing import build_index
from ckptlint.registry import rule_by_code
from ckptlint.rule_cases import python_markers
from ckptlint.versions import Version

REPO_ROOT = Path(__file__).resolve().parent.parent
TF4 = REPO_ROOT / "fixtures" / "finetune_tf4"  # declares transformers==4.46.3
TF5 = REPO_ROOT / "fixtures" / "finetune_tf5"  # declares transformers>=5.0
HF_CODES = ("CKPT020", "CKPT021")

# What each project reports under each transformers version: file, line, code.
EXPECTED = {
    (TF4, "4.46"): {
        ("dreambooth_lora.py", 46, "CKPT021"),  # checkpointing before text_encoder.add_adapter
        ("lora_accelerate.py", 53, "CKPT020"),
        ("lora_accelerate.py", 53, "CKPT021"),  # after get_peft_model in a helper
        ("qlora.py", 18, "CKPT020"),  # prepare_model_for_kbit_training, then transformers' Trainer
        ("qlora.py", 30, "CKPT020"),  # prepare_model_for_kbit_training in a manual loop
        ("trainer_lora.py", 25, "CKPT021"),  # TrainingArguments(gradient_checkpointing=True)
        ("trainer_lora.py", 48, "CKPT020"),  # the same arguments: the Trainer leaves the cache on
        ("trainer_lora.py", 67, "CKPT020"),  # non-reentrant, but the cache is still on
        ("unfreeze_tower.py", 13, "CKPT021"),  # no PEFT: a frozen tower with its last layers unfrozen
        ("unfreeze_tower.py", 53, "CKPT021"),  # the same through a helper and named_parameters()
        ("vision_lora.py", 16, "CKPT021"),
    },
    # transformers 5 defaults to non-reentrant, hooks `input_ids` models' embeddings and
    # turns the cache off in checkpointed layers: only an explicit reentrant checkpoint of a
    # vision tower (pixel inputs, never hooked) is left of the 4.x project.
    (TF4, "5.17"): {("unfreeze_tower.py", 53, "CKPT021")},
    (TF5, "5.17"): {
        ("trainer_vision.py", 16, "CKPT021"),  # a ViT with {"use_reentrant": True}
        ("vision_lora.py", 15, "CKPT021"),  # the same by hand
        ("vision_lora.py", 23, "CKPT021"),  # kwargs without `use_reentrant`
    },
    # The 5.x scripts rely on 5.x: pinned back to 4.46, they break.
    (TF5, "4.46"): {
        ("dreambooth_text_encoder.py", 13, "CKPT021"),
        ("lora_loop.py", 17, "CKPT020"),
        ("lora_loop.py", 17, "CKPT021"),
        ("lora_loop.py", 28, "CKPT020"),
        ("lora_loop.py", 28, "CKPT021"),
        ("trainer_vision.py", 16, "CKPT021"),
        ("trainer_vision.py", 28, "CKPT021"),
        ("trainer_vision.py", 34, "CKPT021"),
        ("trainer_vision.py", 39, "CKPT020"),  # 4.x's Trainer leaves the cache to the architecture
        ("vision_lora.py", 15, "CKPT021"),
        ("vision_lora.py", 23, "CKPT021"),
        ("vision_lora.py", 31, "CKPT021"),
    },
}
DECLARED = {TF4: "4.46", TF5: "5.17"}


def settings_for(project: Path, transformers: str) -> Settings:
    return Settings.default(project, target_versions={"torch": "2.13", "transformers": transformers})


def hf_findings(project: Path, transformers: str, texts: dict[str, str] | None = None) -> set[tuple[str, int, str]]:
    settings = settings_for(project, transformers)
    index = build_index(project, settings, use_cache=False)
    rules = [rule_by_code(code) for code in HF_CODES]
    found = set()
    for path in sorted(project.glob("*.py")):
        text = texts[path.name] if texts is not None else path.read_text(encoding="utf-8")
        outcome = lint_text(text, path, settings, rules=rules, project=index)
        assert outcome.parsed and outcome.internal_errors == ()
        found |= {(path.name, d.location.row, d.code) for d in outcome.diagnostics}
    return found


def markers(project: Path) -> set[tuple[str, int, str]]:
    found = set()
    for path in sorted(project.glob("*.py")):
        for marker in python_markers(path.read_text(encoding="utf-8")):
            found |= {(path.name, marker.row, code) for code in marker.codes if code in HF_CODES}
    return found


@pytest.mark.parametrize(("project", "transformers"), sorted(EXPECTED, key=lambda k: (k[0].name, k[1])), ids=lambda v: getattr(v, "name", v))
def test_fixture_project_findings(project: Path, transformers: str):
    assert hf_findings(project, transformers) == EXPECTED[(project, transformers)]


@pytest.mark.parametrize("project", [TF4, TF5], ids=lambda p: p.name)
def test_markers_are_the_declared_version_findings(project: Path):
    """The `# expect:` markers hold for the version the project's pyproject.toml declares."""
    assert markers(project) == EXPECTED[(project, DECLARED[project])]
    pyproject = (project / "pyproject.toml").read_text(encoding="utf-8")
    assert ("transformers==4.46.3" in pyproject) == (DECLARED[project] == "4.46")


@pytest.mark.parametrize("project", [TF4, TF5], ids=lambda p: p.name)
def test_safe_fixes_parse_and_are_clean(project: Path):
    settings = settings_for(project, DECLARED[project])
    fixed = {}
    for path in sorted(project.glob("*.py")):
        outcome = fix_text(path.read_text(encoding="utf-8"), path, settings, unsafe=False)
        assert outcome.error is None
        ast.parse(outcome.text)
        fixed[path.name] = outcome.text
    assert hf_findings(project, DECLARED[project], fixed) == set()


def test_project_helper_in_another_module_keeps_the_rules_silent():
    """seq2seq_lora.py prepares its PEFT model with a helper of train_utils.py: unknown
    from that file, so nothing is reported (with the project index); the same code with
    the helper's body written inline is reported without it."""
    assert not {f for f in hf_findings(TF4, "4.46") if f[0] == "seq2seq_lora.py"}
    text = (TF4 / "seq2seq_lora.py").read_text(encoding="utf-8").replace(
        "    model = prepare_peft_model_for_training(model)\n", ""
    )
    outcome = lint_text(text, TF4 / "seq2seq_lora.py", settings_for(TF4, "4.46"), rules=[rule_by_code("CKPT021")])
    assert [d.code for d in outcome.diagnostics] == ["CKPT021"]


FIX_LAYOUTS = {
    "crlf and tabs": (
        "from peft import get_peft_model\r\nfrom transformers import AutoModelForCausalLM\r\n"
        "def main():\r\n\tmodel = get_peft_model(AutoModelForCausalLM.from_pretrained('m'), config)\r\n"
        "\tif args.gc:\r\n\t\tmodel.gradient_checkpointing_enable()\r\n"
        "\tfor batch in loader:\r\n\t\tmodel(**batch).loss.backward()\r\n",
        "from peft import get_peft_model\r\nfrom transformers import AutoModelForCausalLM\r\n"
        "def main():\r\n\tmodel = get_peft_model(AutoModelForCausalLM.from_pretrained('m'), config)\r\n"
        "\tif args.gc:\r\n\t\tmodel.enable_input_require_grads()\r\n\t\tmodel.gradient_checkpointing_enable()\r\n"
        "\t\tmodel.config.use_cache = False\r\n\tfor batch in loader:\r\n\t\tmodel(**batch).loss.backward()\r\n",
    ),
    "several statements on the line": (
        "from peft import get_peft_model\nfrom transformers import AutoModelForCausalLM\n"
        "model = get_peft_model(AutoModelForCausalLM.from_pretrained('m'), config)\n"
        "step = 0; model.gradient_checkpointing_enable()  # memory\n"
        "for batch in loader:\n    model(**batch).loss.backward()\n",
        "from peft import get_peft_model\nfrom transformers import AutoModelForCausalLM\n"
        "model = get_peft_model(AutoModelForCausalLM.from_pretrained('m'), config)\n"
        "model.enable_input_require_grads()\n"
        "step = 0; model.gradient_checkpointing_enable()  # memory\n"
        "model.config.use_cache = False\n"
        "for batch in loader:\n    model(**batch).loss.backward()\n",
    ),
    "multi-line call, last in its block": (
        "from peft import get_peft_model\nfrom transformers import AutoModelForCausalLM\n"
        "def setup(model):\n    model = get_peft_model(model, config)\n"
        "    model.gradient_checkpointing_enable(\n        gradient_checkpointing_kwargs={'use_reentrant': True},\n    )\n"
        "    # done\n\n    return model\n"
        "model = setup(AutoModelForCausalLM.from_pretrained('m'))\n"
        "for batch in loader:\n    model(**batch).loss.backward()\n",
        "from peft import get_peft_model\nfrom transformers import AutoModelForCausalLM\n"
        "def setup(model):\n    model = get_peft_model(model, config)\n    model.enable_input_require_grads()\n"
        "    model.gradient_checkpointing_enable(\n        gradient_checkpointing_kwargs={'use_reentrant': True},\n    )\n"
        "    model.config.use_cache = False\n    # done\n\n    return model\n"
        "model = setup(AutoModelForCausalLM.from_pretrained('m'))\n"
        "for batch in loader:\n    model(**batch).loss.backward()\n",
    ),
    # No line can be inserted into `if x: y()`: reported, not fixed.
    "one-line if": (
        "from peft import get_peft_model\nfrom transformers import AutoModelForCausalLM\n"
        "model = get_peft_model(AutoModelForCausalLM.from_pretrained('m'), config)\n"
        "if args.gc: model.gradient_checkpointing_enable()\n"
        "for batch in loader: model(**batch).loss.backward()\n",
        None,
    ),
}


@pytest.mark.parametrize("layout", sorted(FIX_LAYOUTS))
def test_fix_layouts(layout: str):
    source, expected = FIX_LAYOUTS[layout]
    path = Path("/project/train.py")
    settings = Settings.default(path.parent, target_versions={"torch": "2.13", "transformers": "4.46"})
    found = lint_text(source, path, settings).diagnostics
    assert sorted(d.code for d in found) == ["CKPT020", "CKPT021"]
    fixed = fix_text(source, path, settings, unsafe=False)
    assert fixed.error is None
    if expected is None:
        assert all(d.fix is None for d in found) and fixed.text == source
        return
    assert fixed.text == expected
    assert lint_text(fixed.text, path, settings).diagnostics == ()
    assert fix_text(fixed.text, path, settings, unsafe=False).text == fixed.text


# --- the model-class table against the installed transformers ---------------------------


def _mapped_classes(transformers) -> set[str]:
    from transformers.models.auto import modeling_auto

    names: set[str] = set()
    for attribute in dir(modeling_auto):
        if attribute.startswith("MODEL_") and attribute.endswith("_MAPPING_NAMES"):
            for value in getattr(modeling_auto, attribute).values():
                names.update(value if isinstance(value, (list, tuple)) else [value])
    return names


def test_classes_said_to_take_other_inputs_do():
    """CKPT021 reports for transformers >= 5.0 only models classified as not taking
    `input_ids`; every such class of the installed transformers must really not."""
    transformers = pytest.importorskip("transformers")
    wrong = []
    checked = 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name in sorted(_mapped_classes(transformers)):
            if classify_model_class(f"transformers.{name}").main_input is not MainInput.OTHER:
                continue
            model_class = getattr(transformers, name, None)
            if model_class is None:
                continue
            checked += 1
            if getattr(model_class, "main_input_name", None) == "input_ids":
                wrong.append(name)
    assert checked > 100
    assert wrong == []


def test_auto_classes_said_to_take_other_inputs_mostly_do():
    transformers = pytest.importorskip("transformers")
    text_models_with_image_heads = {"ImageGPTForImageClassification", "ShieldGemma2ForImageClassification"}
    from ckptlint.model.library.transformers import _OTHER_INPUT_AUTO

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for auto in sorted(_OTHER_INPUT_AUTO):
            auto_class = getattr(transformers, auto, None)
            if auto_class is None:
                continue
            mapped = set()
            for value in auto_class._model_mapping._model_mapping.values():
                mapped.update(value if isinstance(value, (list, tuple)) else [value])
            takes_ids = {
                name
                for name in mapped
                if getattr(getattr(transformers, name, None), "main_input_name", None) == "input_ids"
            }
            assert takes_ids <= text_models_with_image_heads, auto


# --- the library behaviour, on tiny models -------------------------------------------------

torch_required = pytest.mark.torch


def _transformers():
    pytest.importorskip("torch")
    return pytest.importorskip("transformers")


def _is_transformers_5(transformers) -> bool:
    return Version.parse(transformers.__version__) >= Version.parse("5.0")


def _tiny_llama(transformers):
    import torch

    torch.manual_seed(0)
    config = transformers.LlamaConfig(
        vocab_size=128, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2,
    )
    return transformers.LlamaForCausalLM(config)


def _tiny_vit(transformers):
    import torch

    torch.manual_seed(0)
    config = transformers.ViTConfig(
        hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
        image_size=16, patch_size=8, num_labels=3,
    )
    return transformers.ViTForImageClassification(config)


def _with_adapters(model, head_name: str):
    """A frozen base with LoRA-like trainable low-rank adapters on every attention query and
    value projection (what `get_peft_model` builds, without peft), and a trainable head
    (`modules_to_save`), so that backward runs even when the adapters get nothing."""
    import torch
    from torch import nn

    class LowRankAdapter(nn.Module):
        def __init__(self, base: nn.Linear) -> None:
            super().__init__()
            self.base = base
            self.lora_A = nn.Parameter(torch.randn(4, base.in_features) * 0.01)
            self.lora_B = nn.Parameter(torch.randn(base.out_features, 4) * 0.01)

        def forward(self, x):
            return self.base(x) + x @ self.lora_A.T @ self.lora_B.T

    model.requires_grad_(False)
    adapters = []
    for name, module in list(model.named_modules()):
        for child_name, child in list(module.named_children()):
            if isinstance(child, nn.Linear) and child_name in ("q_proj", "v_proj", "query", "value"):
                adapter = LowRankAdapter(child)
                setattr(module, child_name, adapter)
                adapters.append(adapter)
    getattr(model, head_name).requires_grad_(True)
    assert adapters
    return model, adapters


def _adapter_gradients(model, adapters, inputs) -> tuple[int, list[str]]:
    """How many adapter tensors got a gradient after one training step, and the
    checkpoint warnings raised."""
    model.train()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model(**inputs).loss.backward()
    count = sum(p.grad is not None for adapter in adapters for p in (adapter.lora_A, adapter.lora_B))
    return count, [str(w.message) for w in caught if "requires_grad=True" in str(w.message)]


@torch_required
def test_reentrant_checkpointing_of_a_frozen_text_model_on_the_installed_transformers():
    """transformers < 5: the frozen embeddings' output enters the first checkpointed layer
    without requires_grad and the adapters get nothing (CKPT021). >= 5: transformers hooks
    the embeddings of `input_ids` models itself (CKPT021 stays silent)."""
    import torch

    transformers = _transformers()
    model, adapters = _with_adapters(_tiny_llama(transformers), "lm_head")
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": True})
    ids = torch.randint(0, 128, (2, 16))
    count, warned = _adapter_gradients(model, adapters, {"input_ids": ids, "labels": ids})
    if _is_transformers_5(transformers):
        assert count == 2 * len(adapters) and not warned
    else:
        assert count == 0 and any("None of the inputs have requires_grad=True" in w for w in warned)


@torch_required
def test_reentrant_checkpointing_of_a_frozen_vision_model_and_the_fix():
    """A ViT (`main_input_name == "pixel_values"`) with adapters and reentrant checkpointing
    gets no adapter gradients in every transformers version; CKPT021's fix,
    `enable_input_require_grads()` before the checkpointing call, restores them."""
    import torch

    transformers = _transformers()
    inputs = {"pixel_values": torch.randn(2, 3, 16, 16), "labels": torch.tensor([0, 1])}

    model, adapters = _with_adapters(_tiny_vit(transformers), "classifier")
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": True})
    count, warned = _adapter_gradients(model, adapters, inputs)
    assert count == 0 and any("None of the inputs have requires_grad=True" in w for w in warned)

    model, adapters = _with_adapters(_tiny_vit(transformers), "classifier")
    model.enable_input_require_grads()
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": True})
    count, warned = _adapter_gradients(model, adapters, inputs)
    assert count == 2 * len(adapters) and not warned

    model, adapters = _with_adapters(_tiny_vit(transformers), "classifier")
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    assert _adapter_gradients(model, adapters, inputs)[0] == 2 * len(adapters)


@torch_required
def test_checkpointed_training_forward_and_the_kv_cache():
    """CKPT020's fix leaves no cache in a checkpointed training forward; from transformers 5
    none is built even without it, which is why the rule targets < 5.0 only."""
    import torch

    transformers = _transformers()
    rule = rule_by_code("CKPT020")
    installed = Version.parse(transformers.__version__)
    ids = torch.randint(0, 128, (2, 16))
    for use_cache in (False, True):
        model = _tiny_llama(transformers)
        model.config.use_cache = use_cache
        model.gradient_checkpointing_enable()
        model.train()
        output = model(input_ids=ids, labels=ids)
        output.loss.backward()
        if not use_cache:
            assert output.past_key_values is None
        elif _is_transformers_5(transformers):
            assert output.past_key_values is None
            assert not all(r.contains(installed) for r in rule.targets)


@torch_required
def test_peft_order_of_operations_on_the_installed_versions():
    """With peft installed: checkpointing after `get_peft_model` on a text model leaves the
    LoRA weights without gradients before transformers 5, and enabling it before
    `get_peft_model` (peft then hooks the embeddings) works in every version."""
    import torch

    transformers = _transformers()
    peft = pytest.importorskip("peft")
    ids = torch.randint(0, 128, (2, 16))

    def lora_gradients(checkpoint_first: bool) -> int:
        base = _tiny_llama(transformers)
        if checkpoint_first:
            base.gradient_checkpointing_enable()
        model = peft.get_peft_model(base, peft.LoraConfig(r=4, target_modules=["q_proj", "v_proj"], modules_to_save=["lm_head"]))
        if not checkpoint_first:
            model.gradient_checkpointing_enable()
        model.train()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model(input_ids=ids, labels=ids).loss.backward()
        return sum(p.grad is not None for n, p in model.named_parameters() if "lora_" in n)

    assert lora_gradients(checkpoint_first=True) == 8
    assert lora_gradients(checkpoint_first=False) == (8 if _is_transformers_5(transformers) else 0)


@pytest.mark.parametrize(
    "text, expected",
    [
        ('TrainingArguments("o", gradient_checkpointing=True, fsdp="full_shard")', True),
        ('TrainingArguments(\n    "o",\n    gradient_checkpointing = True,\n    fsdp = [\n        "full_shard"],\n)', True),
        ('args = dict(gradient_checkpointing=\\\n    True, fsdp=\\\n    FSDPOption.FULL_SHARD)', True),
        # Every transformers model: the words, never the keywords of one call.
        ('if self.gradient_checkpointing and self.training:\n    pass\nis_fsdp_managed = fsdp_enabled()', False),
        ('TrainingArguments("o", gradient_checkpointing=False, fsdp="full_shard")', False),
        ('TrainingArguments("o", gradient_checkpointing=True)\nif fsdp == "full_shard": pass', False),
    ],
)
def test_ckpt004_parses_only_files_with_both_keywords(text, expected):
    """CKPT004's prefilter: the two keywords as a call passes them, however spaced."""
    from ckptlint.rules.hf_checkpointing_with_fsdp_full_shard.rule import HfCheckpointingWithFsdpFullShard

    assert HfCheckpointingWithFsdpFullShard.may_apply_to(text) is expected


@pytest.mark.parametrize(
    "text, expected",
    [
        # A helper that wraps and enables, trained by another module: parsed (the project
        # model follows the model to its loop).
        ("model = get_peft_model(model, config)\nmodel.gradient_checkpointing_enable()\nreturn model\n", True),
        ("model = get_peft_model(model, config)\nloss.backward()\n", False),
        ("model = get_peft_model(model, config)\nargs = TrainingArguments(gradient_checkpointing=True)\n"
         "trainer = Trainer(model, args)\n", True),
        # transformers' modeling files name the attribute only.
        ("if self.gradient_checkpointing and self.training:\n    out = self._gradient_checkpointing_func(f, x)\n", False),
    ],
)
def test_ckpt021_parses_only_files_that_turn_checkpointing_on(text, expected):
    """CKPT021 starts at a call that turns gradient checkpointing on: without one, no parse."""
    from ckptlint.rules.peft_checkpointing_without_input_grads.rule import PeftCheckpointingWithoutInputGrads

    assert PeftCheckpointingWithoutInputGrads.may_apply_to(text) is expected
