"""The linter reads source text only: it never imports torch or any ML library, and
`import ckptlint` / `--version` stay cheap."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

HEAVY = ("torch", "transformers", "peft", "accelerate", "numpy")


def test_a_full_lint_run_imports_no_ml_library(tmp_path):
    (tmp_path / "pyproject.toml").write_text("[project]\nname='x'\ndependencies=['torch>=2.1']\n")
    (tmp_path / "model.py").write_text(
        "import torch\nfrom torch.utils.checkpoint import checkpoint\n"
        "def forward(self, x):\n    return checkpoint(self.block, x, mask=x)\n"
    )
    script = textwrap.dedent(
        f"""
        import json, sys
        from ckptlint.cli import main
        try:
            main(["check", "--fix", "--no-cache", {str(tmp_path)!r}, "--output-format", "json"])
        except SystemExit as exit:
            code = exit.code
        print(json.dumps({{"exit": code, "modules": sorted(m for m in sys.modules if m.split(".")[0] in {HEAVY!r})}}))
        """
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["modules"] == []
    assert report["exit"] == 0  # the CKPT032 finding was fixed (safe fix)


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
    (libcst); `python -m ckptlint.registry` prints the manifest to paste when a rule changes."""
    from ckptlint.registry import RULE_MANIFEST, RULE_TRIGGERS, all_rules, manifest_of, triggers_of

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
    script = textwrap.dedent(
        f"""
        import json, sys
        from ckptlint.cli import main
        try:
            main(["check", {str(tmp_path)!r}, "--output-format", "json"])
        except SystemExit as exit:
            code = exit.code
        print(json.dumps({{"exit": code, "libcst": any(m.startswith("libcst") for m in sys.modules)}}))
        """
    )
    runs = [subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, cwd=tmp_path)
            for _ in range(2)]
    first, second = (json.loads(run.stdout.strip().splitlines()[-1]) for run in runs)
    assert first == {"exit": 1, "libcst": True}
    assert second == {"exit": 1, "libcst": False}


def test_a_file_no_rule_can_apply_to_is_only_syntax_checked(tmp_path):
    """No trigger word of any rule: CPython's parser checks the syntax, libcst and the rules
    are not imported (a small file then lints in about 0.1 s). A syntax error still goes to
    libcst, which knows grammars newer than the running Python."""
    (tmp_path / "pyproject.toml").write_text("[project]\nname='x'\n")
    (tmp_path / "util.py").write_text("import torch\n\ndef scale(x):\n    return x * 2\n")
    script = textwrap.dedent(
        f"""
        import json, sys
        from ckptlint.cli import main
        try:
            main(["check", "--no-cache", {str(tmp_path)!r}, "--output-format", "json"])
        except SystemExit as exit:
            code = exit.code
        print(json.dumps({{"exit": code, "libcst": any(m.startswith("libcst") for m in sys.modules)}}))
        """
    )
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert json.loads(run.stdout.strip().splitlines()[-1]) == {"exit": 0, "libcst": False}
