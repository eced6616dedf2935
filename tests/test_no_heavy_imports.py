"""The linter reads source text only: it never imports torch or any ML library, and
`import ckptlint` / `--version` stay cheap."""

from __future__ import annotations

import os
import subprocess
import sys

HEAVY = ("torch", "transformers", "peft", "accelerate", "numpy")


def imported_during(args: list[str], cwd) -> tuple[int, set[str]]:
    """Exit status and every module imported by `python -m ckptlint ARGS`, its worker
    processes included (forked workers inherit `-X importtime` and its stderr)."""
    env = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "CLICOLOR_FORCE")}
    result = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "ckptlint", *args],
        capture_output=True, text=True, timeout=120, cwd=cwd, env=env,
    )  # fmt: skip
    imported = {
        line.rsplit("|", 1)[1].strip()
        for line in result.stderr.splitlines()
        if line.startswith("import time:") and "|" in line
    }
    assert "ckptlint.cli" in imported  # the listing works at all
    return result.returncode, imported


def _roots(imported: set[str], names) -> set[str]:
    return {name.split(".")[0] for name in imported if name.split(".")[0] in names}


def test_a_full_lint_run_imports_no_ml_library(tmp_path):
    (tmp_path / "pyproject.toml").write_text("[project]\nname='x'\ndependencies=['torch>=2.1']\n")
    (tmp_path / "model.py").write_text(
        "import torch\nfrom torch.utils.checkpoint import checkpoint\n"
        "def forward(self, x):\n    return checkpoint(self.block, x, mask=x)\n"
    )
    code, imported = imported_during(["check", "--fix", "--no-cache", str(tmp_path), "--output-format", "json"], tmp_path)
    assert _roots(imported, HEAVY) == set()
    assert "libcst" in _roots(imported, ("libcst",))  # the workers' imports are seen too
    assert code == 0  # the CKPT032 finding was fixed (safe fix)


def test_import_and_version_do_not_load_the_engine():
    script = "import sys, ckptlint; print(sorted(m for m in sys.modules if m.startswith(('libcst', 'torch', 'click'))))"
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert result.stdout.strip() == "[]"
    result = subprocess.run(
        [sys.executable, "-c", "import sys\nfrom ckptlint.cli import main\ntry: main(['--version'])\nexcept SystemExit: pass\nprint(sorted(m for m in sys.modules if m.startswith(('libcst', 'torch'))))"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    from ckptlint import __version__

    assert result.stdout.strip().splitlines() == [f"ckptlint {__version__}", "[]"]


def test_rule_manifest_matches_the_rules():
    """The registry answers codes, names and `uses_project` without importing the rules
    (libcst), from `ckptlint/rule_manifest.py`, which `python -m ckptlint.docs` generates."""
    from pathlib import Path

    from ckptlint.registry import all_rules, manifest_module, manifest_of, triggers_of
    from ckptlint.rule_manifest import RULE_MANIFEST, RULE_TRIGGERS

    generated = Path(__file__).resolve().parent.parent / "ckptlint" / "rule_manifest.py"
    assert generated.read_text(encoding="utf-8") == manifest_module(), "stale: run `python -m ckptlint.docs`"
    assert RULE_MANIFEST == manifest_of(all_rules())
    assert RULE_TRIGGERS == triggers_of(all_rules())
    assert all(rule.triggers for rule in all_rules())  # else the trigger words would not gate it


def test_a_run_served_from_the_cache_does_not_import_libcst(tmp_path):
    """A warm run (nothing changed) answers from the cache: the rules and libcst are never
    imported, which is most of a small run's start-up time."""
    (tmp_path / "pyproject.toml").write_text("[project]\nname='x'\n")
    (tmp_path / "model.py").write_text(
        "from torch.utils.checkpoint import checkpoint\ndef forward(self, x):\n    return checkpoint(self.block, x)\n"
    )
    (tmp_path / "unrelated.py").write_text("x = 1\n")
    # Recipes are read again on every run (their findings depend on the files they name):
    # that needs no libcst either.
    (tmp_path / "train.yaml").write_text("gradient_checkpointing: true\nfsdp: full_shard auto_wrap\n")
    runs = [imported_during(["check", str(tmp_path), "--output-format", "json"], tmp_path) for _ in range(2)]
    (first_code, first), (second_code, second) = runs
    assert (first_code, _roots(first, ("libcst",))) == (1, {"libcst"})
    assert (second_code, _roots(second, ("libcst",))) == (1, set())


def test_a_file_no_rule_can_apply_to_is_only_syntax_checked(tmp_path):
    """No trigger word of any rule: CPython's parser checks the syntax, libcst and the rules
    are not imported (a small file then lints in about 0.1 s). A syntax error still goes to
    libcst, which knows grammars newer than the running Python."""
    (tmp_path / "pyproject.toml").write_text("[project]\nname='x'\n")
    (tmp_path / "util.py").write_text("import torch\n\ndef scale(x):\n    return x * 2\n")
    code, imported = imported_during(["check", "--no-cache", str(tmp_path), "--output-format", "json"], tmp_path)
    assert (code, _roots(imported, ("libcst",))) == (0, set())
    assert not {name for name in imported if name.startswith("ckptlint.rules")}


def test_an_edit_imports_libcst_only_where_a_rule_may_look(tmp_path):
    """While the index extracts the files that changed, the parent imports the rules (and
    libcst) for the lint that follows only when one of them names a rule's trigger word: an
    edit to a file no rule looks at costs no libcst, one to a checkpointing file is linted."""
    (tmp_path / "pyproject.toml").write_text("[project]\nname='x'\n")
    model = tmp_path / "model.py"
    model.write_text("from torch.utils.checkpoint import checkpoint\ndef forward(self, x):\n    return checkpoint(self.block, x)\n")
    unrelated = tmp_path / "unrelated.py"
    unrelated.write_text("x = 1\n")
    args = ["check", str(tmp_path), "--output-format", "json"]
    assert imported_during(args, tmp_path)[0] == 1
    unrelated.write_text("x = 1  # edited\n")
    code, imported = imported_during(args, tmp_path)
    assert (code, _roots(imported, ("libcst",))) == (1, set())
    model.write_text(model.read_text() + "# edited\n")
    code, imported = imported_during(args, tmp_path)
    assert (code, _roots(imported, ("libcst",))) == (1, {"libcst"})


# Names `gradient_checkpointing` (a trigger word), holds nothing any rule reports.
GRADIENT_CHECKPOINTING_LAYER_MODEL = """\
from torch import nn
from transformers.modeling_layers import GradientCheckpointingLayer
from transformers.modeling_utils import PreTrainedModel


class Block(GradientCheckpointingLayer):
    def __init__(self, width):
        super().__init__()
        self.proj = nn.Linear(width, width)

    def forward(self, hidden):
        return self.proj(hidden)


class TinyModel(PreTrainedModel):
    supports_gradient_checkpointing = True

    def __init__(self, config):
        super().__init__(config)
        self.layers = nn.ModuleList(Block(config.width) for _ in range(config.depth))
        self.gradient_checkpointing = False

    def forward(self, hidden):
        for layer in self.layers:
            hidden = layer(hidden)
        return hidden
"""


def test_the_rules_and_their_gates_import_no_libcst(tmp_path):
    """Every rule module imports, and its gates answer, with libcst made unimportable: a
    file the gates turn away never costs libcst's import (`ckptlint.lazy_libcst`)."""
    script = (
        "import sys\n"
        "sys.modules['libcst'] = None  # an import of it raises\n"
        "from pathlib import Path\n"
        "from ckptlint.config import resolve_settings\n"
        "from ckptlint.engine import lint_text\n"
        "from ckptlint.lazy_libcst import libcst_loaded\n"
        "from ckptlint.registry import all_rules\n"
        "path = Path(sys.argv[1])\n"
        "outcome = lint_text(path.read_text(), path, resolve_settings(path.parent))\n"
        "print(len(all_rules()), outcome.diagnostics, libcst_loaded())\n"
    )
    (tmp_path / "pyproject.toml").write_text("[project]\nname='x'\n")
    model = tmp_path / "modeling.py"
    model.write_text(GRADIENT_CHECKPOINTING_LAYER_MODEL)
    result = subprocess.run([sys.executable, "-c", script, str(model)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    from ckptlint.registry import all_rules

    assert result.stdout.split() == [str(len(all_rules())), "()", "False"]


def test_a_model_file_no_rule_looks_into_is_linted_without_libcst(tmp_path):
    """A Hugging Face style model file names `gradient_checkpointing` (a trigger word) but
    holds nothing a rule reports: its rules' gates, asked with the file's facts, turn it
    away before any libcst parse, so neither the run nor its workers import libcst."""
    (tmp_path / "pyproject.toml").write_text("[project]\nname='x'\n")
    (tmp_path / "modeling.py").write_text(GRADIENT_CHECKPOINTING_LAYER_MODEL)
    code, imported = imported_during(["check", "--no-cache", str(tmp_path), "--output-format", "json"], tmp_path)
    assert (code, _roots(imported, ("libcst",))) == (0, set())
    assert "ckptlint.rule" in imported  # the gates were asked
