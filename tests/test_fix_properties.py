"""Property-based tests: fixes never corrupt code (issue 9, "Fixes that cannot corrupt code").

A hypothesis strategy composes realistic modules that call torch's `checkpoint` through the
usual import forms (an `as` alias, a module alias, the full `torch.utils.checkpoint` path, a
`functools.partial`), with random positional arguments, checkpoint's own keywords, extra
keywords, `**kwargs`, single- and multi-line layouts (trailing comma or not, hanging indent,
comments inside the argument list), checkpoints nested in lambdas inside checkpoints, LF / CRLF
/ mixed line endings, and tab or space indentation inside a `def` or a class method.

For every module the fixable rules (CKPT001, unsafe; CKPT032, safe) must produce fixes that:

1. leave code that parses (`ast` and libcst), with no fix error;
2. are idempotent: fixing the fixed text again changes nothing;
3. change only the reported spans: the first round's edits, applied with `apply_fixes`, keep
   every character outside the union of the edit spans identical (checked by rebuilding the
   text from the original and the edits), each span lies inside its diagnostic's range, and
   the code means the same apart from `use_reentrant` (equal ASTs once every `use_reentrant`
   keyword is dropped);
4. leave no CKPT001 / CKPT032 behind;
5. keep line endings: untouched lines keep theirs (from 3), and a file with one line-ending
   style still has only that style after fixing.
"""

from __future__ import annotations

import ast
from pathlib import Path

import libcst
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ckptlint.config import Settings
from ckptlint.engine import apply_fixes, fix_text, lint_text
from ckptlint.source import LineIndex

ROOT = Path("/p")
PATH = ROOT / "model.py"
SETTINGS = Settings.default(ROOT, target_versions={"torch": "2.13"})
FIXABLE = {"CKPT001", "CKPT032"}

IMPORTS = [
    "import functools",
    "import torch",
    "import torch.utils.checkpoint as cp",
    "from torch.utils.checkpoint import checkpoint",
    "from torch.utils.checkpoint import checkpoint as ck",
]
# Callees made available by IMPORTS (plus the partials below).
CALLEES = ["ck", "checkpoint", "cp.checkpoint", "torch.utils.checkpoint.checkpoint"]
PARTIAL_NAMES = ["ckpt_a", "ckpt_b"]

POSITIONAL = ["self.block", "x", "h", "layer(x)", "*args", "[x, h][0]"]
OWN_KEYWORDS = [
    "preserve_rng_state=False",
    "preserve_rng_state=True",
    "context_fn=policy",
    "debug=False",
    "determinism_check='none'",
]
EXTRA_KEYWORDS = ["mask=m", "scale=2.0", "attention_mask=m", "bias=None"]
REENTRANT = [None, "use_reentrant=True", "use_reentrant=False", "use_reentrant=reentrant"]
COMMENTS = ["# note", "# the residual stream", "#", "# use_reentrant? (", "# ) tricky, comment"]


# ---------------------------------------------------------------------------------------
# Strategies. A call is rendered for a given indent string (that of the statement holding
# it) and indent unit, so multi-line layouts indent consistently with the surrounding code.


@st.composite
def call_args(draw, depth: int):
    positional = draw(st.lists(st.sampled_from(POSITIONAL), min_size=0, max_size=3))
    if depth < 2 and draw(st.integers(0, 3)) == 0:
        # A checkpoint inside a lambda inside a checkpoint.
        inner = draw(call(depth + 1))
        positional.append(("lambda", inner))
    keywords = draw(st.lists(st.sampled_from(OWN_KEYWORDS + EXTRA_KEYWORDS), unique=True, max_size=3))
    reentrant = draw(st.sampled_from(REENTRANT))
    if reentrant is not None:
        keywords.insert(draw(st.integers(0, len(keywords))), reentrant)
    if draw(st.integers(0, 5)) == 0:
        keywords.append("**kwargs")
    return positional + keywords


@st.composite
def call(draw, depth: int = 0):
    callee = draw(st.sampled_from(CALLEES + PARTIAL_NAMES))
    args = draw(call_args(depth))
    layout = draw(st.sampled_from(["flat", "flat", "exploded", "hanging", "open"]))
    trailing_comma = draw(st.booleans())
    comments = [draw(st.one_of(st.none(), st.none(), st.sampled_from(COMMENTS))) for _ in args]
    comment_line = draw(st.one_of(st.none(), st.sampled_from(COMMENTS)))
    return ("call", callee, args, layout, trailing_comma, comments, comment_line)


def render(node, indent: str, unit: str, nl) -> str:
    """Render a drawn call. `nl()` gives the next line ending (so mixed endings are possible)."""
    _, callee, args, layout, trailing_comma, comments, comment_line = node
    inner = indent + unit
    rendered = [
        f"lambda y: {render(a[1], inner, unit, nl)}" if isinstance(a, tuple) else a for a in args
    ]
    if not rendered:
        return f"{callee}()"
    if layout == "flat":
        return f"{callee}({', '.join(rendered)})"
    if layout == "open":
        # `callee(a, b,\n    c)`: hanging with the first args on the opening line.
        head, tail = rendered[: len(rendered) // 2 or 1], rendered[len(rendered) // 2 or 1 :]
        text = f"{callee}({', '.join(head)}"
        if tail:
            text += "," + nl() + inner + ", ".join(tail)
        return text + ("," if trailing_comma else "") + ")"
    parts = [f"{callee}("]
    if layout == "hanging":
        # Args on their own lines, closing paren on the last arg's line.
        body = []
        for i, arg in enumerate(rendered):
            last = i == len(rendered) - 1
            body.append(inner + arg + ("," if not last or trailing_comma else ""))
        return callee + "(" + nl() + nl().join(body) + ")"
    # exploded: one arg per line, comments after args, closing paren on its own line.
    for i, arg in enumerate(rendered):
        last = i == len(rendered) - 1
        line = inner + arg + ("," if not last or trailing_comma else "")
        if comments[i] is not None:
            line += "  " + comments[i]
        parts.append(nl() + line)
        if comment_line is not None and i == 0:
            parts.append(nl() + inner + comment_line)
    parts.append(nl() + indent + ")")
    return "".join(parts)


@st.composite
def modules(draw):
    ending = draw(st.sampled_from(["\n", "\r\n", "mixed"]))
    unit = draw(st.sampled_from(["    ", "\t", "  "]))
    if ending == "mixed":
        choices = draw(st.lists(st.sampled_from(["\n", "\r\n"]), min_size=64, max_size=64))
        counter = iter(choices * 50)
        nl = lambda: next(counter)  # noqa: E731
    else:
        nl = lambda: ending  # noqa: E731

    lines: list[tuple[str, str]] = []  # (indent, code); code may contain nl() breaks already

    def emit(indent: str, code: str) -> None:
        lines.append((indent, code))

    for imp in IMPORTS:
        emit("", imp)
    for name in PARTIAL_NAMES:
        base = draw(st.sampled_from(["functools.partial(checkpoint", "functools.partial(ck", "functools.partial(torch.utils.checkpoint.checkpoint"]))
        kw = draw(st.lists(st.sampled_from(["preserve_rng_state=True", "use_reentrant=True", "use_reentrant=False", "debug=False"]), unique=True, max_size=2))
        emit("", f"{name} = {base}{''.join(', ' + k for k in kw)})")
    emit("", "")

    statements = draw(st.lists(call(), min_size=1, max_size=4))
    container = draw(st.sampled_from(["module", "def", "class"]))
    if container == "module":
        for i, node in enumerate(statements):
            emit("", f"y{i} = {render(node, '', unit, nl)}")
    elif container == "def":
        emit("", "def forward(self, x, h, m, layer, reentrant, policy, *args, **kwargs):")
        for i, node in enumerate(statements):
            emit(unit, f"y{i} = {render(node, unit, unit, nl)}")
        emit(unit, "return y0")
    else:
        emit("", "class Block:")
        emit(unit, "def forward(self, x, h, m, layer, reentrant, policy, *args, **kwargs):")
        body = unit * 2
        for i, node in enumerate(statements):
            emit(body, f"y{i} = {render(node, body, unit, nl)}")
        emit(body, "return y0")
    return "".join(indent + code + nl() for indent, code in lines)


# ---------------------------------------------------------------------------------------
# Helpers.


class _DropUseReentrant(ast.NodeTransformer):
    def visit_Call(self, node: ast.Call) -> ast.Call:
        self.generic_visit(node)
        node.keywords = [k for k in node.keywords if k.arg != "use_reentrant"]
        return node


def _meaning(text: str) -> str:
    return ast.dump(_DropUseReentrant().visit(ast.parse(text)))


def _endings(text: str) -> set[str]:
    crlf = text.count("\r\n")
    found = set()
    if crlf:
        found.add("\r\n")
    if text.count("\n") > crlf:
        found.add("\n")
    if text.count("\r") > crlf:
        found.add("\r")
    return found


def _fixable(diagnostics):
    return [d for d in diagnostics if d.code in FIXABLE]


def check_fix_properties(text: str) -> None:
    ast.parse(text)  # the generator only makes valid modules
    outcome = lint_text(text, PATH, SETTINGS)
    assert outcome.parsed
    assert outcome.internal_errors == ()

    # (3) The first round changes only the reported spans.
    index = LineIndex(text)
    first, applied = apply_fixes(text, outcome.diagnostics, unsafe=True)
    spans = []
    for diagnostic in applied:
        lo, hi = index.offset(diagnostic.location), index.offset(diagnostic.end_location)
        for edit in diagnostic.fix.edits:
            start, end = index.offset(edit.location), index.offset(edit.end_location)
            assert lo <= start <= end <= hi, (diagnostic, edit)
            spans.append((start, end, edit.content))
    spans = sorted(set(spans))
    rebuilt, cursor = [], 0
    for start, end, content in spans:
        assert start >= cursor, f"overlapping edits {spans}"
        rebuilt.append(text[cursor:start])
        rebuilt.append(content)
        cursor = end
    rebuilt.append(text[cursor:])
    assert "".join(rebuilt) == first
    # ... and the only change in meaning is `use_reentrant`.
    assert _meaning(first) == _meaning(text)

    # (1) Fixing everything gives code that parses.
    fixed = fix_text(text, PATH, SETTINGS, unsafe=True)
    assert fixed.error is None, fixed.error
    ast.parse(fixed.text)
    libcst.parse_module(fixed.text)
    assert _meaning(fixed.text) == _meaning(text)

    # (4) Nothing fixable is left.
    assert [d.code for d in fixed.remaining.diagnostics if d.code in FIXABLE] == []
    assert _fixable(lint_text(fixed.text, PATH, SETTINGS).diagnostics) == []

    # (2) Idempotent.
    again = fix_text(fixed.text, PATH, SETTINGS, unsafe=True)
    assert again.text == fixed.text
    assert again.applied == ()
    assert again.error is None

    # (5) One line-ending style in, the same style out (untouched lines: covered by (3)).
    if len(_endings(text)) == 1:
        assert _endings(fixed.text) == _endings(text)


# ---------------------------------------------------------------------------------------
# The properties.


@settings(
    max_examples=90,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(modules())
def test_fixes_never_corrupt_generated_code(text):
    check_fix_properties(text)


@st.composite
def mutated(draw):
    """A generated module, then a mutation: a random line's ending flipped, or the whole
    file's indentation switched between tabs and spaces inside brackets."""
    text = draw(modules())
    lines = text.splitlines(keepends=True)
    i = draw(st.integers(0, len(lines) - 1))
    kind = draw(st.sampled_from(["flip_ending", "strip_final_newline", "blank_lines"]))
    if kind == "flip_ending":
        line = lines[i]
        body = line.rstrip("\r\n")
        lines[i] = body + ("\n" if line.endswith("\r\n") else "\r\n")
    elif kind == "strip_final_newline":
        lines[-1] = lines[-1].rstrip("\r\n")
    else:
        lines.insert(i + 1, "\r\n" if lines[i].endswith("\r\n") else "\n")
    return "".join(lines)


@settings(
    max_examples=30,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(mutated())
def test_fixes_never_corrupt_mutated_code(text):
    try:
        ast.parse(text)
    except SyntaxError:
        return  # a blank line inside a bracket or the like is still valid; anything else is skipped
    check_fix_properties(text)


# ---------------------------------------------------------------------------------------
# Hand-picked layouts the generator reaches rarely.

EXAMPLES = [
    "from torch.utils.checkpoint import checkpoint as ck\r\ny = ck(\r\n    f,\r\n    x,  # c\r\n)\r\n",
    "import torch\ndef f(x):\n\treturn torch.utils.checkpoint.checkpoint(\n\t\tblock,\n\t\tx,\n\t\tmask=m,\n\t)\n",
    "from torch.utils.checkpoint import checkpoint\ny = checkpoint(lambda z: checkpoint(g, z), x)\n",
    "from torch.utils.checkpoint import checkpoint\ny = checkpoint(f, x  # trailing comment\n)\n",
    "from torch.utils.checkpoint import checkpoint\ny = checkpoint(\n    # only a comment first\n    f, x, mask=m)\n",
    "import torch.utils.checkpoint as cp\ny = cp.checkpoint(f, x, use_reentrant=True, mask=m,)\n",
    "from torch.utils.checkpoint import checkpoint\ny = checkpoint()\n",
]


def test_hand_picked_layouts():
    for text in EXAMPLES:
        check_fix_properties(text)
