"""The engine's own mechanisms: name resolution corners, supersession, noqa, fix
application, and isolation of a failing rule."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from ckptlint import registry
from ckptlint.analysis.checkpoint_sites import CheckpointSite
from ckptlint.config import Settings
from ckptlint.engine import apply_fixes, fix_text, lint_text
from ckptlint.rule import Rule
from ckptlint.types import Applicability, Diagnostic, Edit, Fix, Location

ROOT = Path("/project")
SETTINGS = Settings.default(ROOT, target_versions={"torch": "2.13"})


def findings(source: str, settings: Settings = SETTINGS) -> list[tuple[str, int, int]]:
    outcome = lint_text(textwrap.dedent(source).lstrip("\n"), ROOT / "m.py", settings)
    assert outcome.internal_errors == ()
    return [(d.code, d.location.row, d.location.column) for d in outcome.diagnostics]


def test_kwargs_finding_supersedes_implicit_reentrant_at_the_same_call():
    assert findings(
        """
        from torch.utils.checkpoint import checkpoint
        y = checkpoint(f, x, mask=m)
        z = checkpoint(f, x)
        """
    ) == [("CKPT032", 2, 5), ("CKPT001", 3, 5)]


def test_only_the_selected_rules_run():
    settings = Settings.default(ROOT, target_versions={"torch": "2.13"}, select=["CKPT001"])
    assert findings("from torch.utils.checkpoint import checkpoint\ny = checkpoint(f, x, mask=m)\n", settings) == [
        ("CKPT001", 2, 5)
    ]


@pytest.mark.parametrize(
    ("comment", "expected"),
    [
        ("# noqa", []),
        ("# noqa: CKPT001", []),
        ("#noqa:CKPT001,CKPT032", []),
        ("# NOQA: ckpt001", []),
        ("# noqa: CKPT032", [("CKPT001", 2, 5)]),
        ("# some other comment", [("CKPT001", 2, 5)]),
    ],
)
def test_noqa_on_the_reported_line(comment, expected):
    source = f"from torch.utils.checkpoint import checkpoint\ny = checkpoint(f, x)  {comment}\n"
    assert findings(source) == expected


def test_noqa_inside_a_string_is_not_a_comment():
    assert findings('from torch.utils.checkpoint import checkpoint\ny = checkpoint(f, "# noqa")\n') == [
        ("CKPT001", 2, 5)
    ]


def test_noqa_on_the_first_line_of_a_multiline_call():
    assert (
        findings(
            """
            import torch
            y = torch.utils.checkpoint.checkpoint(  # noqa: CKPT001
                f,
                x,
            )
            """
        )
        == []
    )


def test_skip_file_comment():
    assert findings("# ckptlint: skip-file\nfrom torch.utils.checkpoint import checkpoint\ncheckpoint(f, x)\n") == []


@pytest.mark.parametrize(
    "source",
    [
        # A partial of a partial: keywords merge, the inner use_reentrant holds.
        """
        import functools, torch
        base = functools.partial(torch.utils.checkpoint.checkpoint, use_reentrant=False)
        ckpt = functools.partial(base, preserve_rng_state=False)
        y = ckpt(f, x, mask=m)
        """,
        # A name rebound to something else is not known to be checkpoint.
        """
        from torch.utils.checkpoint import checkpoint
        run = checkpoint
        run = my_wrapper
        y = run(f, x)
        """,
        # A parameter named like the import shadows it.
        """
        from torch.utils.checkpoint import checkpoint
        def forward(self, x, checkpoint):
            return checkpoint(self.f, x)
        """,
        # `self.ckpt` assigned something unknown on one path.
        """
        from torch.utils.checkpoint import checkpoint
        class M:
            def __init__(self, fn=None):
                self.ckpt = checkpoint
                if fn is not None:
                    self.ckpt = fn
            def forward(self, x):
                return self.ckpt(self.f, x)
        """,
    ],
)
def test_resolution_stays_silent_when_unsure(source):
    assert findings(source) == []


def test_self_attribute_resolves_across_methods_in_any_order():
    assert findings(
        """
        import torch.utils.checkpoint as cp
        class M:
            def forward(self, x):
                return self.ckpt(self.f, x, scale=2)
            def __init__(self):
                self.ckpt = cp.checkpoint
        """
    ) == [("CKPT032", 4, 16)]


def test_a_nested_function_in_a_method_sees_self():
    assert findings(
        """
        import torch.utils.checkpoint as cp
        class M:
            def __init__(self):
                self.ckpt = cp.checkpoint
            def forward(self, x):
                def inner(t):
                    return self.ckpt(self.f, t)
                return inner(x)
        """
    ) == [("CKPT001", 7, 20)]


def _diagnostic(code: str, edits: list[tuple[int, int, int, int, str]], applicability=Applicability.SAFE):
    return Diagnostic(
        code=code,
        message="m",
        path="m.py",
        location=Location(1, 1),
        end_location=Location(1, 1),
        fix=Fix(applicability, "fix", tuple(Edit(Location(a, b), Location(c, d), s) for a, b, c, d, s in edits)),
    )


def test_overlapping_fixes_are_applied_one_round_at_a_time():
    text = "abcdef\n"
    first = _diagnostic("CKPT032", [(1, 2, 1, 4, "XY")])
    overlapping = _diagnostic("CKPT032", [(1, 3, 1, 5, "Z")])
    new_text, applied = apply_fixes(text, [first, overlapping], unsafe=False)
    assert new_text == "aXYdef\n"
    assert applied == [first]


def test_identical_edits_from_two_findings_are_applied_once():
    text = "abc\n"
    a = _diagnostic("CKPT032", [(1, 4, 1, 4, "!")])
    b = _diagnostic("CKPT032", [(1, 4, 1, 4, "!")])
    assert apply_fixes(text, [a, b], unsafe=False)[0] == "abc!\n"


def test_unsafe_fixes_need_the_flag():
    text = "abc\n"
    unsafe = _diagnostic("CKPT001", [(1, 1, 1, 2, "A")], Applicability.UNSAFE)
    assert apply_fixes(text, [unsafe], unsafe=False)[0] == text
    assert apply_fixes(text, [unsafe], unsafe=True)[0] == "Abc\n"


def test_nested_sites_are_both_fixed_and_counted():
    source = "import torch\ny = torch.utils.checkpoint.checkpoint(lambda t: torch.utils.checkpoint.checkpoint(f, t), x)\n"
    fixed = fix_text(source, ROOT / "m.py", SETTINGS, unsafe=True)
    assert fixed.text == (
        "import torch\ny = torch.utils.checkpoint.checkpoint(lambda t: torch.utils.checkpoint.checkpoint(f, t, "
        "use_reentrant=False), x, use_reentrant=False)\n"
    )
    assert [(a.code, a.row) for a in fixed.applied] == [("CKPT001", 2), ("CKPT001", 2)]
    assert fixed.remaining.diagnostics == ()


def test_fix_edits_are_minimal():
    source = "import torch\ny = torch.utils.checkpoint.checkpoint(f, x)\n"
    (diagnostic,) = lint_text(source, ROOT / "m.py", SETTINGS).diagnostics
    assert diagnostic.fix.edits == (Edit(Location(2, 43), Location(2, 43), ", use_reentrant=False"),)


class _Exploding(Rule):
    """Raises on every checkpoint site (test double)."""

    code = "CKPT099"
    name = "exploding"
    message = "never"

    def visit_checkpoint_site(self, site: CheckpointSite) -> None:
        raise ZeroDivisionError("boom")


def test_a_failing_rule_is_reported_and_the_others_still_run():
    source = "from torch.utils.checkpoint import checkpoint\ny = checkpoint(f, x)\n"
    outcome = lint_text(source, ROOT / "m.py", SETTINGS, rules=[*registry.all_rules(), _Exploding])
    assert [d.code for d in outcome.diagnostics] == ["CKPT001"]
    assert len(outcome.internal_errors) == 1
    assert "internal error in rule CKPT099 (exploding)" in outcome.internal_errors[0]
    assert "ZeroDivisionError: boom" in outcome.internal_errors[0]


@pytest.mark.parametrize("triggered", [True, False])
def test_syntax_newer_than_the_running_python_is_not_a_parse_error(triggered):
    # PEP 695 (Python 3.12): CPython 3.11's parser rejects it, libcst knows the grammar.
    source = "type Alias = int\ndef f[T](x: T) -> T:\n    return g(x)\n"
    if triggered:
        source = "from torch.utils.checkpoint import checkpoint\n" + source.replace("g(x)", "checkpoint(g, x)")
    assert findings(source) == ([("CKPT001", 4, 12)] if triggered else [])


def test_a_real_syntax_error_keeps_cpython_s_message_and_line():
    outcome = lint_text("import torch\nx = (1,\n", ROOT / "m.py", SETTINGS)
    assert [(d.code, d.location.row, d.message) for d in outcome.diagnostics] == [
        ("CKPT900", 2, "SyntaxError: '(' was never closed")
    ]


# --- fix edits: rendered locally, exactly as regenerating the module would -----------------

TRICKY_EDITS = """\
from torch.utils.checkpoint import checkpoint as ckpt
import torch.utils.checkpoint as cp

class Block:
    def forward(self, h, mask):
        for layer in self.layers:
            h = ckpt(
                layer,
                h,
                mask=mask,  # a comment inside
            )
            h = cp.checkpoint(layer,
                              h, mask=mask)
        x = [ckpt(f, h, mask=mask) for f in self.fs] + \\
            [ckpt(g, h) for g in self.gs]
        return (lambda: ckpt(
            self.last, h))()
"""


def test_local_fix_edits_equal_regenerating_the_whole_module(monkeypatch):
    """Every fix the rules offer on the fixtures and on awkward layouts (tabs, calls over
    several lines, continuation lines, comments) is the same edit whether the node is
    rendered on its own or the whole module is regenerated."""
    from ckptlint.rule import FileContext

    sources = {"tricky.py": TRICKY_EDITS, "tabs.py": TRICKY_EDITS.replace("    ", "\t")}
    for path in sorted(Path(__file__).parent.parent.joinpath("fixtures").rglob("*.py")):
        sources[str(path)] = path.read_text(encoding="utf-8")

    def lint_all():
        results = {}
        for name, text in sources.items():
            outcome = lint_text(text, Path(name), SETTINGS)
            results[name] = [d for d in outcome.diagnostics if d.fix is not None]
        return results

    local = lint_all()
    monkeypatch.setattr(FileContext, "_local_texts", lambda self, original, replacement: None)
    assert lint_all() == local
    assert sum(map(len, local.values())) >= 50  # the comparison covers many fixes
    assert len(local["tricky.py"]) == len(local["tabs.py"]) == 5
