"""Functions whose keywords reach torch's checkpoint, defined in one module and called in
another (`ckptlint.model.file_facts.forwarding`): the index finds the calling files without their
naming checkpoint, and keeps every other file away from libcst."""

from __future__ import annotations

from pathlib import Path

import pytest

import ckptlint.engine as engine
from ckptlint.config import resolve_settings
from ckptlint.indexing import build_index
from ckptlint.model.file_facts.extraction import extract_facts
from ckptlint.model.file_facts.facts import ForwardingKind

PROJECT = Path(__file__).parent.parent / "fixtures" / "projects" / "forwarding"


@pytest.fixture(scope="module")
def project():
    settings = resolve_settings(PROJECT)
    return settings, build_index(PROJECT, settings, use_cache=False)


def test_the_index_knows_helpers_decorators_and_what_they_decorate(project):
    _, index = project
    kinds = {name: fact.kind for name, fact in index.forwarding.items()}
    assert kinds["linattn.utils.recompute.run_recomputed"] is ForwardingKind.HELPER
    assert kinds["linattn.utils.recompute.checkpoint"] is ForwardingKind.DECORATOR
    assert kinds["linattn.layers.base.RecomputedLayer._checkpoint_forward"] is ForwardingKind.HELPER
    # The flag chosen in the wrapper (written, or `setdefault`), or no torch checkpoint at all.
    for name in ("checkpoint_nonreentrant", "checkpoint_defaults", "timed"):
        assert f"linattn.utils.recompute.{name}" not in kinds
    assert "linattn.utils.saving.checkpoint" not in kinds
    helper, decorated = index.forwarding_target("linattn.ops.chunk_linear_attn")  # re-exported by `ops/__init__`
    assert helper.name == "linattn.utils.recompute.checkpoint"
    assert decorated.name == "linattn.ops.chunk.chunk_linear_attn"
    assert index.forwarding_target("linattn.ops.chunk.fused_decay") is None  # the saving decorator
    assert index.forwarding_words == {"chunk_linear_attn", "run_recomputed", "_checkpoint_forward", "attend"}


def test_only_the_files_that_call_one_are_parsed_with_libcst(project, monkeypatch):
    settings, index = project
    parsed: dict[str, bool] = {}
    real = engine.parse_module

    def recording(text, display, *, with_libcst, **kwargs):
        parsed[display] = with_libcst
        return real(text, display, with_libcst=with_libcst, **kwargs)

    monkeypatch.setattr(engine, "parse_module", recording)
    for relative in ("linattn/model.py", "linattn/data.py", "linattn/layers/attn.py"):
        path = PROJECT / relative
        outcome = engine.lint_text(path.read_text(), path, settings, display_path=relative, project=index)
        codes = [d.code for d in outcome.diagnostics]
        assert codes == ([] if relative == "linattn/data.py" else ["CKPT032"]), relative
    # `data.py` names a function `run_recomputed(` of its own: never parsed with libcst (nor
    # with `ast` again: the index parsed this very text).
    assert parsed == {"linattn/model.py": True, "linattn/layers/attn.py": True}


def test_a_helper_that_may_be_deepspeeds_is_none():
    text = (
        "try:\n"
        "    from deepspeed.checkpointing import checkpoint\n"
        "except ImportError:\n"
        "    from torch.utils.checkpoint import checkpoint\n\n"
        "def run(fn, *args, **kwargs):\n"
        "    return checkpoint(fn, *args, **kwargs)\n"
    )
    assert extract_facts(text, "pkg/ckpt.py").forwarding == ()
