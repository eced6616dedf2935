"""`# noqa` comments: which codes a comment suppresses. The same syntax in Python, YAML and
shell comments, so the engine and the recipe linter share it."""

from __future__ import annotations

import re

NOQA = re.compile(r"#\s*noqa(?::\s*(?P<codes>[A-Za-z]+[0-9]+(?:[\s,]+[A-Za-z]+[0-9]+)*))?", re.IGNORECASE)


def written_codes(match: re.Match) -> list[str]:
    """The codes one `# noqa: A, B` directive names, as written."""
    return [code for code in re.split(r"[\s,]+", match.group("codes") or "") if code]


def noqa_codes(comment: str) -> frozenset[str] | None:
    """The codes the `# noqa` directives in `comment` suppress: None for a bare `# noqa`
    (every code), an empty set when there is no directive."""
    codes: set[str] = set()
    for match in NOQA.finditer(comment):
        if match.group("codes") is None:
            return None
        codes.update(code.upper() for code in written_codes(match))
    return frozenset(codes)


def suppresses(line: str, code: str) -> bool:
    codes = noqa_codes(line)
    return codes is None or code in codes
