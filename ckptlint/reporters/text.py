"""Human output, as Ruff prints it: one line per diagnostic, then a summary."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import click

from ckptlint.rule_codes import rule_name
from ckptlint.types import Applicability, Diagnostic, FileResult, Severity, fixable


_SEVERITY_COLOURS = {Severity.ERROR: "red", Severity.WARNING: "yellow", Severity.INFO: "blue"}


def headline(d: Diagnostic, *, unsafe_fixes: bool) -> str:
    """`CKPT001 [*] warning: message`: the code in its severity's colour, the fixable mark,
    the severity, the message."""
    colour = _SEVERITY_COLOURS[d.severity]
    marker = click.style("[*] ", fg="cyan") if fixable(d, unsafe_fixes) else ""
    return f"{click.style(d.code, fg=colour, bold=True)} {marker}{click.style(d.severity.value + ':', fg=colour)} {d.message}"


def render_diagnostics(diagnostics: Sequence[Diagnostic], *, unsafe_fixes: bool) -> str:
    lines = []
    for d in diagnostics:
        where = d.path if d.cell is None else f"{d.path}:cell {d.cell}"
        lines.append(f"{click.style(where, bold=True)}:{d.location.row}:{d.location.column}: {headline(d, unsafe_fixes=unsafe_fixes)}")
    return "".join(line + "\n" for line in lines)


@dataclass(frozen=True)
class Summary:
    remaining: int
    fixed: int
    fixable_now: int  # fixable with the current applicability
    hidden_unsafe: int  # fixable only with --unsafe-fixes
    unfixable: int  # no fix at all
    fix_mode: bool
    diff_mode: bool
    # Findings the target versions hide, and why (`hidden_by_versions`).
    not_shown: int = 0
    not_shown_because: str = ""
    # The remaining findings by severity, most severe first (`Severity.rank`).
    remaining_by_severity: tuple[tuple[Severity, int], ...] = ()

    def _only_errors_remain(self) -> bool:
        return all(severity is Severity.ERROR for severity, _ in self.remaining_by_severity)

    def _severities(self) -> str:
        """`1 error, 2 warnings`: what the remaining findings are, most severe first."""
        return ", ".join(_counted(count, severity.value) for severity, count in self.remaining_by_severity)

    def render(self) -> str:
        lines = []
        if self.diff_mode:
            if self.fixed:
                lines.append(f"Would fix {_errors(self.fixed)}.")
            else:
                lines.append("No errors would be fixed" + (f" ({self.unfixable} not fixable)." if self.unfixable else "."))
        elif self.remaining == 0 and self.fixed == 0:
            lines.append("All checks passed!")
        elif self.fix_mode and self.fixed:
            found = self.remaining + self.fixed
            if self._only_errors_remain():
                lines.append(f"Found {_errors(found)} ({self.fixed} fixed, {self.remaining} remaining).")
            else:
                lines.append(f"Found {_findings(found)} ({self.fixed} fixed, {self.remaining} remaining: {self._severities()}).")
        elif len(self.remaining_by_severity) > 1:
            lines.append(f"Found {_findings(self.remaining)} ({self._severities()}).")
        else:
            lines.append(f"Found {self._severities() or _errors(self.remaining)}.")
        if not self.fix_mode and not self.diff_mode and self.fixable_now:
            lines.append(f"[*] {self.fixable_now} fixable with the `--fix` option.")
        if self.hidden_unsafe:
            noun = "fix" if self.hidden_unsafe == 1 else "fixes"
            lines.append(f"({self.hidden_unsafe} hidden {noun} can be enabled with the `--unsafe-fixes` option.)")
        if self.not_shown and not self.diff_mode:
            lines.append(f"({not_shown_sentence(self.not_shown, self.not_shown_because)})")
        return "".join(line + "\n" for line in lines)


def hidden_by_versions(reasons: Sequence[str]) -> tuple[int, str]:
    """How many findings the target versions hide, and why (each reason once)."""
    return len(reasons), "; ".join(sorted(set(reasons)))


def not_shown_sentence(count: int, because: str) -> str:
    """What the summary (and the machine formats: SARIF's notifications, a GitHub notice,
    stderr beside JSON and JUnit) say about findings the target versions hide."""
    noun = "finding" if count == 1 else "findings"
    return f"{count} {noun} not shown: {because}; `--target-version` to see them."


def _counted(count: int, noun: str) -> str:
    # `info` is a mass noun: "6 info".
    plural = "" if count == 1 or noun == Severity.INFO.value else "s"
    return f"{count} {noun}{plural}"


def _errors(count: int) -> str:
    return _counted(count, "error")


def _findings(count: int) -> str:
    return _counted(count, "finding")


def summarize(diagnostics: Sequence[Diagnostic], fixed: int, *, unsafe_fixes: bool, fix_mode: bool, diff_mode: bool) -> Summary:
    return Summary(
        remaining=len(diagnostics),
        fixed=fixed,
        fixable_now=sum(1 for d in diagnostics if fixable(d, unsafe_fixes)),
        hidden_unsafe=0
        if unsafe_fixes
        else sum(1 for d in diagnostics if d.fix is not None and d.fix.applicability is Applicability.UNSAFE),
        unfixable=sum(1 for d in diagnostics if d.fix is None),
        fix_mode=fix_mode,
        diff_mode=diff_mode,
        remaining_by_severity=tuple(
            sorted(Counter(d.severity for d in diagnostics).items(), key=lambda item: -item[0].rank)
        ),
    )


# --statistics: a code some of whose findings `--fix` would fix (as the options stand), one
# whose findings have only unsafe fixes (`--unsafe-fixes` to apply them), one with no fix.
STATISTICS_MARKERS = {"fixable": "[*] ", "unsafe": "[-] ", None: "    "}


def render_statistics(diagnostics: Sequence[Diagnostic], *, unsafe_fixes: bool, as_json: bool) -> str:
    """Ruff's layout (count, code, marker, name), with Ruff's `[*]` for fixable codes, and
    `[-]` for codes fixable only with `--unsafe-fixes`; no marker column when no code has one."""
    counts = Counter(d.code for d in diagnostics)
    fixable_codes = {d.code for d in diagnostics if fixable(d, unsafe_fixes)}
    unsafe_codes = {d.code for d in diagnostics if d.fix is not None} - fixable_codes
    rows = []
    for code, count in sorted(counts.items(), key=lambda item: (-item[1], item[0])):
        rows.append({"code": code, "name": rule_name(code) or "", "count": count, "fixable": code in fixable_codes})
    if as_json:
        return json.dumps(rows, indent=2) + "\n"
    width = max((len(str(r["count"])) for r in rows), default=1)

    def marker(code: str) -> str:
        if not fixable_codes | unsafe_codes:
            return ""
        return STATISTICS_MARKERS["fixable" if code in fixable_codes else "unsafe" if code in unsafe_codes else None]

    return "".join(f"{str(r['count']).rjust(width)}\t{r['code']}\t{marker(r['code'])}{r['name']}\n" for r in rows)


def render_applied_fixes(files: Sequence[FileResult], *, diff_mode: bool) -> str:
    by_file = [(f.path, f.applied_fixes) for f in files if f.applied_fixes]
    if not by_file:
        return ""
    total = sum(len(fixes) for _, fixes in by_file)
    lines = [("Would fix" if diff_mode else "Fixed") + f" {_errors(total)}:"]
    for path, fixes in by_file:
        lines.append(f"- {path}:")
        for (code, message), count in sorted(Counter((f.code, f.message) for f in fixes).items()):
            lines.append(f"    {count} × {code} ({rule_name(code) or message})")
    return "".join(line + "\n" for line in lines)

