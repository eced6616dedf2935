"""A Hugging Face model followed across the project's files (`ckptlint.model.evaluation.fates`): a
helper that enables checkpointing and returns the model is reported where a script trains it,
stays quiet where the project only evaluates it or turns the cache off on the way, and a warm
run sees the training script's edit."""

from __future__ import annotations

from pathlib import Path

from conftest import json_findings

from ckptlint.model.file_facts.extraction import extract_facts
from ckptlint.model.index import ProjectIndex

PYPROJECT = "[project]\nname = 'demo'\ndependencies = ['transformers==4.46.3']\n"

MODELS = """
from transformers import AutoModelForCausalLM


def load_model(name):
    model = AutoModelForCausalLM.from_pretrained(name)
    model.gradient_checkpointing_enable()
    return model
"""

TRAIN = """
from models import load_model


def main(args, loader):
    model = load_model(args.model)
{workaround}    for batch in loader:
        model(**batch).loss.backward()
"""


def _index(files: dict[str, str]) -> ProjectIndex:
    import textwrap

    return ProjectIndex(
        Path("/project"),
        {path: extract_facts(textwrap.dedent(text).lstrip("\n"), path) for path, text in files.items()},
    )


def test_a_helper_is_reported_where_its_model_is_trained_and_a_warm_run_sees_the_fix(cli, make_project):
    root = make_project({"models.py": MODELS, "train.py": TRAIN.format(workaround="")}, PYPROJECT)
    first = json_findings(cli(["--output-format", "json", "."], root), root, with_message=True)
    assert [f[:4] for f in first] == [("models.py", 6, 5, "CKPT020")]
    assert "in a manual training loop (by `main` in train.py)" in first[0][4]

    # The cache turned off in the training script: the helper's cached result is stale.
    (root / "train.py").write_text(TRAIN.format(workaround="    model.config.use_cache = False\n").lstrip("\n"))
    assert json_findings(cli(["--output-format", "json", "."], root), root) == []


def test_a_model_passed_to_an_enabling_helper_and_bound_from_its_result_keeps_its_origin(cli, make_project):
    """`model = enable(model)`: the call passes the loaded model before the assignment binds
    the helper's result, so the helper sees the loaded `AutoModelForCausalLM`."""
    helpers = """
    from transformers import AutoModelForCausalLM


    def load(name):
        return AutoModelForCausalLM.from_pretrained(name)


    def enable(model):
        model.gradient_checkpointing_enable()
        return model
    """
    train = """
    from helpers import enable, load


    def main(loader):
        model = load("gpt2")
        model = enable(model)
        for batch in loader:
            model(**batch).loss.backward()
    """
    root = make_project({"helpers.py": helpers, "train.py": train}, PYPROJECT)
    found = json_findings(cli(["--output-format", "json", "."], root), root)
    assert [f[:4] for f in found] == [("helpers.py", 9, 5, "CKPT020")]


def test_a_helper_whose_model_is_only_evaluated_is_quiet(cli, make_project):
    evaluate = """
    import torch
    from models import load_model


    @torch.no_grad()
    def evaluate(args, loader):
        model = load_model(args.model)
        return [model(**batch).logits for batch in loader]
    """
    root = make_project({"models.py": MODELS, "evaluate.py": evaluate}, PYPROJECT)
    assert json_findings(cli(["--output-format", "json", "."], root), root) == []


def test_the_fate_goes_through_callees_callers_and_a_class_keeping_the_model():
    index = _index(
        {
            "models.py": MODELS,
            "build.py": """
                from models import load_model
                from transformers import AutoTokenizer


                def build(name):
                    model = load_model(name)
                    return model, AutoTokenizer.from_pretrained(name)
            """,
            "lit.py": """
                import lightning as L
                from build import build


                class Lit(L.LightningModule):
                    def __init__(self, name):
                        super().__init__()
                        self.model, self.tokenizer = build(name)

                    def training_step(self, batch, batch_idx):
                        return self.model(**batch).loss
            """,
        }
    )
    fate = index.model_fate("models.load_model", "model", 6)
    assert [(site.path, site.function) for site in fate.trained] == [("lit.py", "lit.Lit.training_step")]
    assert fate.trained_by_hand and not fate.cache_off and not fate.unknown


def test_a_model_handed_to_code_the_index_cannot_see_is_unknown_and_a_loop_elsewhere_trains_it():
    index = _index(
        {
            "loops.py": """
                def compute_loss(model, batch):
                    return model(**batch).loss


                def train_loop(model, loader):
                    for batch in loader:
                        compute_loss(model, batch).backward()
            """,
            "train.py": """
                from transformers import AutoModelForCausalLM
                from fancy import fit
                from loops import train_loop


                def main(args, loader):
                    model = AutoModelForCausalLM.from_pretrained(args.model)
                    model.gradient_checkpointing_enable()
                    train_loop(model, loader)
                    fit(model)
            """,
        }
    )
    fate = index.model_fate("train.main", "model", 7)
    assert [site.function for site in fate.trained] == ["loops.train_loop"]
    assert [site.line for site in fate.unknown] == [10]


def test_what_a_helper_returns_loaded_wrapped_and_returned_at_once():
    index = _index(
        {
            "models.py": """
                from peft import LoraConfig, get_peft_model
                from transformers import AutoModelForCausalLM, AutoModelForSeq2SeqLM


                def base(name):
                    return AutoModelForSeq2SeqLM.from_pretrained(name, load_in_4bit=True)


                def lora(name):
                    model = AutoModelForCausalLM.from_pretrained(name, use_cache=False)
                    model = get_peft_model(model, LoraConfig(r=8))
                    return model, 8
            """,
        }
    )
    base = index.returned_model("models.base")
    assert (base.model_class, base.quantized, base.peft) == ("transformers.AutoModelForSeq2SeqLM", True, False)
    lora = index.returned_model("models.lora", 0)
    assert (lora.model_class, lora.cache_off, lora.peft) == ("transformers.AutoModelForCausalLM", True, True)
    assert index.returned_model("models.lora") is None  # the whole tuple is not a model


HELPERS = """
import torch
from peft import LoraConfig, get_peft_model
from fancy import fit


def count_parameters(model):
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def log_model(model, logger):
    logger.info("%d", count_parameters(model))


@torch.no_grad()
def evaluate(model, loader):
    model.eval()
    losses = [model(**batch).loss for batch in loader]
    model.train()
    return losses


def add_lora(model, rank=8):
    peft_model = get_peft_model(model, LoraConfig(r=rank))
    return peft_model


def add_lora_through(model):
    model = add_lora(model)
    return model


def prepare(model):
    model.config.use_cache = False
    model.enable_input_require_grads()


def train_loop(model, loader):
    for batch in loader:
        model(**batch).loss.backward()


def hand_on(model):
    fit(model)


class Keeper:
    def __init__(self, model):
        self.model = model
"""


def test_what_a_helper_does_to_a_model_it_is_given():
    index = _index({"helpers.py": HELPERS})

    def handed(function, parameter=0):
        found = index.handed_model(f"helpers.{function}", parameter)
        fate = found.fate
        return (found.leaves, found.returned, bool(fate.peft), bool(fate.cache_off), bool(fate.input_grads))

    # Read-only helpers (one with no facts at all, one passing it to another): nothing.
    assert handed("count_parameters") == (False, False, False, False, False)
    assert handed("log_model") == (False, False, False, False, False)
    assert handed("evaluate") == (False, False, False, False, False)  # runs it, no backward
    # Wrapped and handed back, also through a second helper; prepared.
    assert handed("add_lora") == (False, True, True, False, False)
    assert handed("add_lora_through") == (False, True, True, False, False)
    assert handed("prepare") == (False, False, False, True, True)
    # Trained, handed to code the index cannot see, kept: the model leaves the caller's sight.
    assert handed("train_loop")[0] and handed("hand_on")[0] and handed("Keeper")[0]
    assert index.handed_model("helpers.missing", 0).leaves
    assert index.handed_model("helpers.count_parameters", "other").leaves  # no such parameter


BRANCHING = """
from peft import LoraConfig, get_peft_model, prepare_model_for_kbit_training
from transformers import AutoModelForCausalLM


def add_adapters(model, quantized, *, turn_off_cache=True, probe=None):
    if quantized and turn_off_cache:
        model = prepare_model_for_kbit_training(model)
    if turn_off_cache:
        model(probe, use_cache=False) if quantized else model(probe)
    return get_peft_model(model, LoraConfig())


def rebinding(model, quantized):
    quantized = not quantized
    if quantized:
        model.enable_input_require_grads()


def load(name, lora=False):
    model = AutoModelForCausalLM.from_pretrained(name)
    if lora:
        model.config.use_cache = False
    return model


def build(name, lora=False):
    return load(name, lora=lora)
"""


def test_what_a_helper_does_depends_on_the_branches_its_arguments_take():
    index = _index({"helpers.py": BRANCHING})

    def handed(function, arguments):
        fate = index.handed_model(f"helpers.{function}", 0, arguments).fate
        return bool(fate.input_grads), bool(fate.cache_off), bool(fate.peft)

    # Literal arguments (by position or keyword), defaults, `not`, `and`, conditional expressions.
    assert handed("add_adapters", ((0, None), (1, False))) == (False, False, True)
    assert handed("add_adapters", ((0, None), ("quantized", True))) == (True, True, True)
    assert handed("add_adapters", ((0, None), (1, True), ("turn_off_cache", False))) == (False, False, True)
    # Not known: a value only known at runtime, `**kwargs`, a call not described; a rebound parameter.
    assert handed("add_adapters", ((0, None), (1, None))) == (True, True, True)
    assert handed("add_adapters", ((0, None), ("*", None))) == (True, True, True)
    assert handed("add_adapters", None) == (True, True, True)
    assert handed("rebinding", ((0, None), (1, True))) == (True, False, False)

    def cache_off(function, arguments):
        return index.returned_model(f"helpers.{function}", -1, arguments).cache_off

    assert not cache_off("load", ((0, None),))  # the default leaves the branch out
    assert cache_off("load", ((0, None), ("lora", True)))
    assert cache_off("load", ((0, None), ("lora", None)))
    assert not cache_off("build", ((0, None),))  # `lora=lora` handed on: the default again
    assert cache_off("build", ((0, None), (1, True)))


def test_a_read_only_helper_does_not_end_the_fate_and_a_src_package_import_finds_it(cli, make_project):
    models = """
    from transformers import AutoModelForCausalLM


    def load_model(name):
        model = AutoModelForCausalLM.from_pretrained(name)
        model.gradient_checkpointing_enable()
        return model


    def count_parameters(model):
        return sum(p.numel() for p in model.parameters())
    """
    train = """
    from src.models import count_parameters, load_model


    def main(args, loader):
        model = load_model(args.model)
        print(count_parameters(model))
        for batch in loader:
            model(**batch).loss.backward()
    """
    root = make_project({"src/__init__.py": "", "src/models.py": models, "train.py": train}, PYPROJECT)
    assert json_findings(cli(["--output-format", "json", "."], root), root) == [("src/models.py", 6, 5, "CKPT020")]


def test_an_imported_dict_constant_gives_the_checkpointing_kwargs(cli, make_project):
    script = """
    from peft import get_peft_model
    from transformers import AutoModelForImageClassification

    from settings import {name}


    def main(loader, lora_config):
        model = get_peft_model(AutoModelForImageClassification.from_pretrained("vit"), lora_config)
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={name})
        for pixel_values, labels in loader:
            model(pixel_values=pixel_values, labels=labels).loss.backward()
    """
    settings = """
    REENTRANT = {"use_reentrant": True}
    NON_REENTRANT = {"use_reentrant": False}
    WITHOUT_FLAG = {"preserve_rng_state": False, **EXTRA}
    """
    pyproject = "[project]\nname = 'demo'\ndependencies = ['transformers>=5.0', 'peft>=0.17']\n"
    found = {}
    for name in ("REENTRANT", "NON_REENTRANT", "WITHOUT_FLAG"):
        root = make_project({"settings.py": settings, "train.py": script.format(name=name)}, pyproject)
        found[name] = json_findings(cli(["--output-format", "json", "."], root), root)
    assert found == {"REENTRANT": [("train.py", 9, 5, "CKPT021")], "NON_REENTRANT": [], "WITHOUT_FLAG": []}


def test_tests_do_not_inherit_fsdp_from_the_package_nor_the_package_from_tests():
    from ckptlint.model.syntax.names import is_test_path

    assert [is_test_path(p) for p in ("tests/e2e/test_x.py", "pkg/test_utils.py", "pkg/conftest.py",
                                      "torch/testing/_internal/common_fsdp.py", "pkg/model.py",
                                      "pkg/latest.py", "contest/run.py")] == [True, True, True, True, False, False, False]
    fsdp = "from torch.distributed.fsdp import FullyShardedDataParallel as FSDP\nmodel = FSDP(model)\n"
    index = _index({"pkg/train.py": fsdp, "tests/test_shard.py": fsdp, "tests/test_other.py": "import torch\n",
                    "pkg/model.py": "import torch.nn\n"})
    assert [u.path for u in index.fsdp_uses_reaching("pkg/model.py")] == ["pkg/train.py"]
    assert [u.path for u in index.fsdp_uses_reaching("tests/test_shard.py")] == ["tests/test_shard.py"]
    assert index.fsdp_uses_reaching("tests/test_other.py") == ()
