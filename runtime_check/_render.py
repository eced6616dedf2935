"""A report as text (verdict line first, then a table) and as a self-contained HTML page."""

from __future__ import annotations

import html
import math
from collections import Counter
from typing import TYPE_CHECKING, Protocol

from ckptlint.runtime_check._types import SYMPTOM

if TYPE_CHECKING:
    from ckptlint.runtime_check._distributed_types import DistributedReport
    from ckptlint.runtime_check._types import (
        AttributeChange, BudgetPlan, BufferComparison, Finding, GradientComparison, LossComparison, MemoryFigure,
        MemoryReport, Recomputation, RegionCost, RngComparison, Series, Timelines, Timing, Tolerance,
    )


class Report(Protocol):
    """What the text and the page show of a verification (`_report.Report`, which renders
    itself with them: this module cannot import it back)."""

    @property
    def verdict(self) -> str: ...
    @property
    def passed(self) -> bool: ...
    @property
    def target(self) -> str: ...
    @property
    def model(self) -> str: ...
    @property
    def device(self) -> str: ...
    @property
    def dtype(self) -> str: ...
    @property
    def tolerance(self) -> Tolerance: ...
    @property
    def loss(self) -> LossComparison: ...
    @property
    def gradients(self) -> GradientComparison: ...
    @property
    def buffers(self) -> BufferComparison: ...
    @property
    def attributes(self) -> tuple[AttributeChange, ...]: ...
    @property
    def rng(self) -> RngComparison: ...
    @property
    def memory(self) -> MemoryReport: ...
    @property
    def time(self) -> Timing: ...
    @property
    def recomputation(self) -> Recomputation: ...
    @property
    def findings(self) -> tuple[Finding, ...]: ...
    @property
    def errors(self) -> tuple[Finding, ...]: ...
    @property
    def causes(self) -> tuple[Finding, ...]: ...
    @property
    def notes(self) -> tuple[str, ...]: ...
    @property
    def duration_s(self) -> float: ...
    @property
    def timelines(self) -> Timelines | None: ...
    @property
    def distributed(self) -> DistributedReport | None: ...
    @property
    def regions(self) -> tuple[RegionCost, ...]: ...
    @property
    def budget(self) -> BudgetPlan | None: ...

MAX_LISTED = 12
MIN_SYMPTOMS_LISTED = 3


def format_bytes(size: int) -> str:
    """Bytes for people: KiB below one MiB, so small models do not read as 0.00 MiB."""
    if abs(size) < 2**20:
        return f"{size / 2**10:.1f} KiB"
    if abs(size) < 2**30:
        return f"{size / 2**20:.2f} MiB"
    return f"{size / 2**30:.2f} GiB"


def _seconds(value: float) -> str:
    return f"{value * 1000:.1f} ms" if value < 1 else f"{value:.2f} s"


def _saving(figure: "MemoryFigure") -> str:
    if figure.baseline_bytes <= 0:
        return "n/a"
    if figure.saving >= 0:
        return f"{figure.saving:.1%} saved"
    return f"{-figure.saving:.1%} more"


def headline(report: "Report") -> str:
    world = report.distributed.world_size if report.distributed is not None else 0
    ranks = f" on {world} rank{'s' * (world != 1)}" if world else ""
    if report.passed:
        extra = f"gradients of {report.gradients.compared} tensors identical" if report.tolerance.exact else (
            f"gradients of {report.gradients.compared} tensors within tolerance"
        )
        return f"PASS  {report.target}{ranks}: {extra}; activation memory {_saving(report.memory.activations)}"
    codes = sorted({f.code for f in report.errors if f.code})
    count = len(report.errors)
    return f"FAIL  {report.target}{ranks}: {count} finding{'s' * (count != 1)}" + (f" ({', '.join(codes)})" if codes else "")


def table_rows(report: "Report") -> list[tuple[str, str, str, str]]:
    checkpointed_ok = report.loss.checkpointed is not None
    unfinished = report.distributed.outcome if report.distributed is not None and report.distributed.outcome != "completed" else None
    rows = [("check", "without checkpointing", "checkpointed", "result")]
    loss = report.loss
    rows.append(
        (
            "loss",
            "-" if unfinished and math.isnan(loss.baseline) else f"{loss.baseline:.8g}",
            f"{loss.checkpointed:.8g}" if loss.checkpointed is not None else (unfinished or "raised"),
            ("identical" if loss.abs_diff == 0 else f"diff {loss.abs_diff:.3g}") if loss.matches else (
                f"DIFFERS by {loss.abs_diff:.3g}" if loss.abs_diff is not None else "not compared"
            ),
        )
    )
    gradients = report.gradients
    if not checkpointed_ok:
        gradient_result = "not compared"
    elif gradients.mismatched:
        kinds = Counter(m.kind for m in gradients.mismatched)
        details = []
        if kinds["value"]:
            details.append(f"{kinds['value']} by value, max abs {gradients.max_abs_diff:.3g}")
        if kinds["missing_checkpointed"]:
            details.append(f"{kinds['missing_checkpointed']} missing with checkpointing")
        if kinds["missing_baseline"]:
            details.append(f"{kinds['missing_baseline']} missing without checkpointing")
        if kinds["shape"]:
            details.append(f"{kinds['shape']} by shape")
        gradient_result = f"{len(gradients.mismatched)} DIFFER ({'; '.join(details)})"
    elif gradients.max_abs_diff == 0:
        gradient_result = "identical"
    else:
        gradient_result = f"within tolerance (max abs {gradients.max_abs_diff:.3g}, rel {gradients.max_rel_diff:.3g})"
    if unfinished:  # a distributed step that crashed or hung: nothing else was measured
        recomputation = report.recomputation
        rows.append(("checkpoint calls", f"{recomputation.regions}", "", f"{recomputation.reentrant_regions} reentrant"))
        return rows
    rows.append((f"gradients ({gradients.compared})", "", "", gradient_result))
    rows.append(
        (
            f"buffers ({report.buffers.compared})",
            "",
            "",
            (f"{len(report.buffers.mismatched)} DIFFER" if report.buffers.mismatched else "identical") if checkpointed_ok else "not compared",
        )
    )
    rows.append(
        ("module attributes", "", "", (f"{len(report.attributes)} DIFFER" if report.attributes else "identical") if checkpointed_ok else "not compared")
    )
    rows.append(
        (
            f"RNG state ({', '.join(report.rng.generators)})" if report.rng.generators else "RNG state",
            "",
            "",
            (f"DIFFERS ({', '.join(report.rng.mismatched)})" if report.rng.mismatched else "identical") if checkpointed_ok else "not compared",
        )
    )
    recomputation = report.recomputation
    rows.append(
        (
            "recomputed in backward",
            f"{recomputation.baseline_module_forwards} module forwards",
            f"{recomputation.checkpointed_module_forwards} module forwards",
            f"{recomputation.regions} checkpoint call(s)",
        )
    )
    activations = report.memory.activations
    rows.append(("activation memory", format_bytes(activations.baseline_bytes), format_bytes(activations.checkpointed_bytes), _saving(activations)))
    peak = report.memory.peak
    if peak is not None:
        label = "peak memory (CUDA)" if peak.metric.startswith("cuda") else "peak memory (CPU profiler)"
        rows.append((label, format_bytes(peak.baseline_bytes), format_bytes(peak.checkpointed_bytes), _saving(peak)))
    timing = report.time
    if timing.checkpointed_samples and timing.baseline_s > 0:
        baseline_spread, checkpointed_spread = timing.spread
        label = f"step time (median of {timing.repeats})" if timing.repeats > 1 else "step time (1 step)"
        rows.append((label, _timed(timing.baseline_s, baseline_spread, timing), _timed(timing.checkpointed_s, checkpointed_spread, timing), overhead_text(timing)))
    return rows


def _timed(seconds: float, spread: float, timing: "Timing") -> str:
    return _seconds(seconds) + (f" ±{spread / 2:.0%}" if timing.repeats > 1 else "")


def overhead_text(timing: "Timing") -> str:
    """The overhead with its range; no ratio when the steps' noise exceeds the difference."""
    bounds = timing.overhead_range
    if bounds is None or timing.repeats < 2:
        return f"x{timing.overhead:.2f} (one step each: noise unknown)"
    span = f"x{bounds[0]:.2f}-x{bounds[1]:.2f}"
    if not timing.resolved:
        return f"no difference beyond the noise between steps ({span})"
    return f"x{timing.overhead:.2f} ({span})"


def _subject(finding: "Finding") -> str:
    """The subject, and the rank a distributed run saw it on (unless the subject is the rank)."""
    if finding.rank is None or finding.subject == f"rank {finding.rank}":
        return finding.subject
    return f"{finding.subject} (rank {finding.rank})"


def distributed_lines(report: "Report") -> list[str]:
    """How the ranks ran and how FSDP sharded the model, in sentences."""
    run = report.distributed
    if run is None:
        return []
    lines = [f"{run.world_size} rank{'s' * (run.world_size != 1)} under {run.launcher} (backend {run.backend}); {_sharding(run)}"]
    if run.nesting:
        lines.append("nesting: " + ", ".join(f"{n.pattern} x{n.count}" for n in run.nesting))
    known = [b for b in run.parameter_bytes_per_rank if b is not None]
    if known:
        share = f" of {format_bytes(run.full_parameter_bytes)}" if run.full_parameter_bytes else ""
        lines.append(
            "parameters per rank: "
            + ", ".join(f"rank {r} {format_bytes(b)}" if b is not None else f"rank {r} ?" for r, b in enumerate(run.parameter_bytes_per_rank))
            + share
        )
    reference = run.reference
    if reference is not None:
        compared = reference.baseline
        if compared.mismatched:
            text = f"{len(compared.mismatched)} of {compared.compared} gradients DIFFER (max abs {compared.max_abs_diff:.3g})"
        else:
            text = f"gradients of {compared.compared} tensors within tolerance (max abs diff {compared.max_abs_diff:.3g})"
        lines.append(
            f"single-process reference (global batch): {text}; loss {reference.loss:.8g}, ranks' mean {reference.sharded_loss:.8g}"
        )
    for status in run.ranks:
        text = f"rank {status.rank}: {status.state}" + ("" if status.state == "finished" else f" in '{status.phase}'")
        if status.location:
            text += f" ({status.location})" if status.location.startswith("inside ") else f" (at {status.location})"
        if status.error:
            text += f": {_short(status.error)}"
        lines.append(text)
    return lines


def _sharding(run) -> str:
    if not run.fsdp:
        return "no FSDP unit"
    return f"{' + '.join(run.fsdp)}, {run.units} unit{'s' * (run.units != 1)}"


def _short(text: str, limit: int = 160) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def collective_rows(report: "Report") -> list[tuple[str, str, str, str]]:
    """Collectives per rank in each phase of the step, both runs; kinds never called left out."""
    run = report.distributed
    if run is None:
        return []
    complete = all(c.complete for c in run.collectives)
    rows = [("collectives per rank", "without checkpointing", "checkpointed" if complete else "checkpointed (until it stopped)", "result")]
    for row in run.collectives:
        if row.baseline == 0 and not row.checkpointed:
            continue
        label = f"{row.kind.replace('_', '-')}s in {row.phase}"
        if row.checkpointed is None:
            rows.append((label, str(row.baseline), "-", "not reached"))
            continue
        extra = row.checkpointed - row.baseline
        result = "same" if extra == 0 else f"{extra:+d} with checkpointing"
        if not row.complete:
            result = "so far"
        rows.append((label, str(row.baseline), str(row.checkpointed), result))
    return rows if len(rows) > 1 else []


def _aligned(rows: list[tuple[str, ...]]) -> list[str]:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return ["  " + "  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip() for row in rows]


def region_rows(report: "Report") -> list[tuple[str, ...]]:
    rows: list[tuple[str, ...]] = [("region", "checkpoint call", "calls", "activations saved", "recompute", "saved per ms")]
    for region in report.regions[:MAX_LISTED]:
        per_ms = region.saved_bytes_per_ms
        rows.append(
            (
                region.name,
                region.site,
                str(region.calls),
                format_bytes(region.saved_bytes),
                _seconds(region.recompute_s),
                f"{format_bytes(int(per_ms))}/ms" if per_ms is not None else "-",
            )
        )
    if len(report.regions) > MAX_LISTED:
        rows.append((f"... and {len(report.regions) - MAX_LISTED} more (--json lists them all)", "", "", "", "", ""))
    return rows


def advice_lines(report: "Report") -> list[str]:
    """Regions that cost more than they save, and the plan for --memory-budget."""
    lines = []
    for region in report.regions:
        if region.costs_more_than_it_saves:
            lines.append(
                f"{region.name} ({region.site}) costs more than it saves: {format_bytes(region.saved_bytes)} of activations "
                f"for {_seconds(region.recompute_s)} of recompute per step, under a quarter of the step's bytes per ms: "
                "a candidate to stop checkpointing"
            )
    plan = report.budget
    if plan is not None:
        budget = format_bytes(plan.budget_bytes)
        if not plan.fits:
            lines.append(
                f"memory budget {budget}: does not fit even with every region checkpointed ({format_bytes(plan.held_bytes)} "
                "held); checkpoint more of the model, or lower the batch"
            )
        elif not plan.checkpoint:
            lines.append(f"memory budget {budget}: fits without checkpointing ({format_bytes(plan.held_bytes)} held)")
        else:
            skipped = [r.name for r in report.regions if r.name not in plan.checkpoint and r.saved_bytes > 0]
            lines.append(
                f"memory budget {budget}: checkpoint {', '.join(plan.checkpoint)} ({format_bytes(plan.held_bytes)} held, "
                f"{_seconds(plan.recompute_s)} of recompute per step, {plan.method})"
                + (f"; {', '.join(skipped)} need not be checkpointed" if skipped else "")
            )
    return lines


def finding_lines(findings: "tuple[Finding, ...]") -> list[str]:
    """Every cause, error and warning; symptoms (gradient differences) only up to MAX_LISTED
    lines in all, with a count of the rest, so a cause is never cut off."""
    room = max(MAX_LISTED - sum(f.role != SYMPTOM for f in findings), MIN_SYMPTOMS_LISTED)
    symptoms = [f for f in findings if f.role == SYMPTOM]
    lines = []
    for finding in findings:
        if finding.role == SYMPTOM and symptoms.index(finding) >= room:
            continue
        explained = f" (explained by {finding.explained_by})" if finding.explained_by else ""
        lines.append(
            f"  {finding.severity:<7}  {finding.role or '':<7}  {finding.code or '-':<7}  {_subject(finding)}: {finding.message}{explained}"
        )
        if finding.role == SYMPTOM and symptoms.index(finding) == room - 1 and len(symptoms) > room:
            lines.append(f"  ... and {len(symptoms) - room} more difference(s) of the same kind (--json lists them all)")
    return lines


def render_text(report: "Report") -> str:
    lines = [headline(report)]
    lines.append(
        f"model {report.model} on {report.device} ({report.dtype}); tolerance: {report.tolerance.source}"
        + ("" if report.tolerance.exact else f" (rtol {report.tolerance.rtol:g}, atol {report.tolerance.atol:g})")
    )
    lines.append("")
    lines.extend(_aligned(table_rows(report)))
    if report.distributed is not None:
        collectives = collective_rows(report)
        if collectives:
            lines.append("")
            lines.extend(_aligned(collectives))
        lines.append("")
        lines.append("distributed:")
        lines.extend(f"  {line}" for line in distributed_lines(report))
    if report.findings:
        lines.append("")
        lines.append("findings (causes first, then the differences they explain):" if report.causes else "findings:")
        lines.extend(finding_lines(report.findings))
    if report.regions:
        lines.append("")
        lines.append("regions (what checkpointing each saves and costs; best return first):")
        lines.extend(_aligned(region_rows(report)))
    advice = advice_lines(report)
    if advice:
        lines.append("")
        lines.append("advice:")
        lines.extend(f"  - {line}" for line in advice)
    if report.notes:
        lines.append("")
        lines.append("notes:")
        lines.extend(f"  - {note}" for note in report.notes)
    lines.append("")
    lines.append(f"verified in {report.duration_s:.2f} s")
    return "\n".join(lines) + "\n"


# --- HTML ------------------------------------------------------------------------------------

_STYLE = """
body{font-family:system-ui,-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:2em auto;max-width:980px;color:#222;padding:0 1em}
h1{font-size:1.4em}h2{font-size:1.1em;margin-top:1.6em}
.verdict{font-size:1.3em;font-weight:600;padding:.5em .8em;border-radius:6px;display:inline-block}
.pass{background:#e3f5e1;color:#1b5e20}.fail{background:#fde2e1;color:#b71c1c}
table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ddd;padding:.3em .6em;text-align:left;vertical-align:top;font-size:.92em}
th{background:#f5f5f5}.cause{border-left:5px solid #b71c1c;background:#fff5f4;padding:.2em 1em;margin:1em 0}
.cause h2{margin-top:.4em}.error{color:#b71c1c;font-weight:600}.warning{color:#8a6d00;font-weight:600}
code{font-family:ui-monospace,Menlo,Consolas,monospace;font-size:.95em}.muted{color:#666}
svg text{font-family:system-ui,Helvetica,Arial,sans-serif;font-size:11px;fill:#333}
"""

_COLORS = {"without checkpointing": "#7f7f7f", "checkpointed": "#1f77b4"}


def render_html(report: "Report") -> str:
    e = html.escape
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>ckptlint verify: {e(report.verdict.upper())} {e(report.target)}</title>",
        f"<style>{_STYLE}</style></head><body>",
        f"<h1>ckptlint verify <code>{e(report.target)}</code></h1>",
        f'<p class="verdict {e(report.verdict)}">{e(headline(report))}</p>',
        f'<p class="muted">model <code>{e(report.model)}</code> on {e(report.device)} ({e(report.dtype)}); '
        f"tolerance: {e(report.tolerance.source)}; verified in {report.duration_s:.2f} s</p>",
    ]
    if report.causes:
        parts.append('<div class="cause"><h2>Cause</h2><ul>')
        parts.extend(
            f"<li><strong>{e(f.code or 'no rule')}</strong> <code>{e(_subject(f))}</code>: {e(f.message)}</li>" for f in report.causes
        )
        parts.append("</ul></div>")
    parts += ["<h2>Summary</h2>", _html_table(table_rows(report))]
    if report.distributed is not None:
        parts.append("<h2>Distributed</h2>")
        collectives = collective_rows(report)
        if collectives:
            parts.append(_html_table(collectives))
        parts.append("<ul>" + "".join(f"<li>{e(line)}</li>" for line in distributed_lines(report)) + "</ul>")
    if report.findings:
        rows = [("severity", "role", "code", "subject", "message", "explained by")] + [
            (f.severity, f.role or "", f.code or "", _subject(f), f.message, f.explained_by or "") for f in report.findings
        ]
        parts += ["<h2>Findings</h2>", _html_table(rows, severity_column=0)]
    if report.gradients.mismatched:
        rows = [("parameter", "kind", "max abs diff", "max rel diff", "without", "checkpointed", "code")] + [
            (
                m.name,
                m.kind,
                _format(m.max_abs_diff),
                _format(m.max_rel_diff),
                m.baseline,
                m.checkpointed,
                m.code or "",
            )
            for m in report.gradients.mismatched
        ]
        parts += ["<h2>Gradients that differ</h2>", _html_table(rows)]
    if report.buffers.mismatched:
        rows = [("buffer", "module", "kind", "max abs diff", "without", "checkpointed", "code")] + [
            (m.name, m.module or "", m.kind, _format(m.max_abs_diff), m.baseline, m.checkpointed, m.code or "")
            for m in report.buffers.mismatched
        ]
        parts += ["<h2>Buffers that differ</h2>", _html_table(rows)]
    if report.attributes:
        rows = [("module", "attribute", "without", "checkpointed")] + [
            (a.module, a.attribute, a.baseline, a.checkpointed) for a in report.attributes
        ]
        parts += ["<h2>Module attributes that differ</h2>", _html_table(rows)]
    timelines = report.timelines
    if timelines is not None:
        parts.append("<h2>Live saved-activation bytes over the step</h2>")
        parts.append(
            '<p class="muted">Bytes of tensors saved for backward and still held (parameters and buffers excluded), '
            "from the first forward op to the end of backward; each run's forward fills the left half, its backward "
            "the right half.</p>"
        )
        parts.append(_chart([s for s in (timelines.saved_baseline, timelines.saved_checkpointed) if s is not None]))
        live = [s for s in (timelines.live_baseline, timelines.live_checkpointed) if s is not None]
        if live:
            parts.append("<h2>Live allocator bytes over the step (CPU profiler)</h2>")
            parts.append(
                '<p class="muted">Everything the step allocated and had not freed yet: activations, recomputation '
                "transients, gradients. Its maximum is the peak in the summary.</p>"
            )
            parts.append(_chart(live))
    if report.regions:
        parts.append("<h2>Where checkpointing pays: per region</h2>")
        parts.append(
            '<p class="muted">Activation bytes checkpointing each region saves (held from forward to backward without '
            "it), and the time its recomputation costs in backward; best return first.</p>"
        )
        parts.append(_region_chart(report))
        parts.append(_html_table(region_rows(report)))
    advice = advice_lines(report)
    if advice:
        parts.append("<h2>Advice</h2><ul>" + "".join(f"<li>{e(line)}</li>" for line in advice) + "</ul>")
    if report.notes:
        parts.append("<h2>Notes</h2><ul>" + "".join(f"<li>{e(n)}</li>" for n in report.notes) + "</ul>")
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


def _format(value: float | None) -> str:
    if value is None:
        return ""
    if math.isinf(value):
        return "inf"
    return f"{value:.3g}"


def _html_table(rows: list[tuple[str, ...]], severity_column: int | None = None) -> str:
    e = html.escape
    head = "".join(f"<th>{e(cell)}</th>" for cell in rows[0])
    body = []
    for row in rows[1:]:
        cells = []
        for index, cell in enumerate(row):
            css = f' class="{e(cell)}"' if index == severity_column else ""
            cells.append(f"<td{css}>{e(cell)}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def _downsample(points: tuple[int, ...], limit: int) -> list[tuple[float, int]]:
    """(position in [0, 1], bytes), at most `limit` points, keeping each bucket's maximum."""
    count = len(points)
    if count == 0:
        return []
    if count == 1:
        return [(0.0, points[0]), (1.0, points[0])]
    if count <= limit:
        return [(i / (count - 1), p) for i, p in enumerate(points)]
    sampled = []
    for bucket in range(limit):
        start = bucket * count // limit
        end = max(start + 1, (bucket + 1) * count // limit)
        index = max(range(start, end), key=lambda i: points[i])
        sampled.append((index / (count - 1), points[index]))
    sampled.append((1.0, points[-1]))
    return sampled


def _chart(series: list["Series"]) -> str:
    width, height = 760, 280
    left, right, top, bottom = 78, 16, 16, 42
    plot_w, plot_h = width - left - right, height - top - bottom
    largest = max((max(s.points) for s in series if s.points), default=0) or 1

    def x(position: float) -> float:
        return left + position * plot_w

    def y(value: int) -> float:
        return top + plot_h - (value / largest) * plot_h

    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
        'role="img" aria-label="live bytes over forward and backward">',
        f'<rect x="{left}" y="{top}" width="{plot_w}" height="{plot_h}" fill="#fafafa" stroke="#ccc"/>',
        f'<line x1="{x(0.5):.1f}" y1="{top}" x2="{x(0.5):.1f}" y2="{top + plot_h}" stroke="#999" stroke-dasharray="4 3"/>',
        f'<text x="{x(0.25):.1f}" y="{height - 22}" text-anchor="middle">forward</text>',
        f'<text x="{x(0.75):.1f}" y="{height - 22}" text-anchor="middle">backward</text>',
    ]
    for fraction in (0.0, 0.5, 1.0):
        value = int(largest * fraction)
        out.append(
            f'<line x1="{left - 4}" y1="{y(value):.1f}" x2="{left}" y2="{y(value):.1f}" stroke="#666"/>'
            f'<text x="{left - 6}" y="{y(value) + 4:.1f}" text-anchor="end">{html.escape(format_bytes(value))}</text>'
        )
    for index, item in enumerate(series):
        color = _COLORS.get(item.label, "#d62728")
        boundary = min(max(item.boundary, 0), max(len(item.points) - 1, 0))
        forward = item.points[: boundary + 1] or (0,)
        backward = item.points[boundary:] or (forward[-1],)
        coordinates = [(0.5 * p, v) for p, v in _downsample(forward, 300)]
        coordinates += [(0.5 + 0.5 * p, v) for p, v in _downsample(backward, 300)]
        path = " ".join(f"{x(p):.1f},{y(v):.1f}" for p, v in coordinates)
        out.append(f'<polyline fill="none" stroke="{color}" stroke-width="1.8" points="{path}"/>')
        peak = max(item.points) if item.points else 0
        legend_x = left + 10 + index * 300
        out.append(
            f'<rect x="{legend_x}" y="{height - 14}" width="14" height="4" fill="{color}"/>'
            f'<text x="{legend_x + 20}" y="{height - 9}">{html.escape(item.label)} (max {html.escape(format_bytes(peak))})</text>'
        )
    out.append("</svg>")
    return "\n".join(out)


def _region_chart(report: "Report") -> str:
    """Two bars per region: bytes saved (left, blue) and recompute time (right, orange)."""
    regions = report.regions[:MAX_LISTED]
    row, label_w, bar_w = 22, 230, 250
    width, height = label_w + 2 * bar_w + 40, 30 + row * len(regions)
    most_bytes = max((r.saved_bytes for r in regions), default=0) or 1
    most_time = max((r.recompute_s for r in regions), default=0.0) or 1.0
    e = html.escape
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
        'role="img" aria-label="activation bytes saved and recompute time per checkpointed region">',
        f'<text x="{label_w}" y="14">activations saved</text>',
        f'<text x="{label_w + bar_w + 20}" y="14">recompute time</text>',
    ]
    for index, region in enumerate(regions):
        y = 22 + index * row
        saved = max(region.saved_bytes, 0) / most_bytes * (bar_w - 70)
        spent = region.recompute_s / most_time * (bar_w - 70)
        color = "#d62728" if region.costs_more_than_it_saves else "#1f77b4"
        out.append(
            f'<text x="{label_w - 6}" y="{y + 12}" text-anchor="end">{e(region.name[:34])}</text>'
            f'<rect x="{label_w}" y="{y}" width="{saved:.1f}" height="14" fill="{color}"/>'
            f'<text x="{label_w + saved + 4:.1f}" y="{y + 12}">{e(format_bytes(region.saved_bytes))}</text>'
            f'<rect x="{label_w + bar_w + 20}" y="{y}" width="{spent:.1f}" height="14" fill="#ff7f0e"/>'
            f'<text x="{label_w + bar_w + 24 + spent:.1f}" y="{y + 12}">{e(_seconds(region.recompute_s))}</text>'
        )
    out.append("</svg>")
    return "\n".join(out)
