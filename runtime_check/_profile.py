"""Where checkpointing pays: per-region bytes saved and recompute time, and advice from them.

Measured, not estimated. Saved bytes: in the step without checkpointing, every storage
saved for backward is charged to the checkpoint region running when it was first saved
(innermost region; the region's own inputs are not charged, since checkpoint keeps them
anyway), and what each region holds when backward starts is its saving. Recompute time: in
the checkpointed steps, each region's function is timed when backward re-runs it (on CUDA
by CUDA events); the median over the measured and timed steps.

Known error: a tensor first saved inside a region and also saved by the op after it (the
region's output kept by the next layer) is charged to the region although checkpointing it
does not free it: a region's saving can be overstated by its output's size. The sum over
regions against the measured difference of the whole step says how much (a note in the
report when they differ by more than 10%).
"""

from __future__ import annotations

import itertools
import statistics
from typing import Sequence

from ckptlint.runtime_check._regions import RegionCall
from ckptlint.runtime_check._types import BudgetPlan, RegionCost

# A region "costs more than it saves" when its bytes saved per millisecond of recompute are
# below this fraction of the step's (all regions' bytes over all regions' time).
POOR_RETURN = 0.25
EXACT_UP_TO = 16  # regions; above, the budget plan is greedy


def region_name(call: RegionCall) -> str:
    return call.module if call.module is not None else call.description


def region_costs(
    calls: Sequence[RegionCall], saved_by_call: dict[int, int], recompute_samples: Sequence[dict[int, float]]
) -> tuple[RegionCost, ...]:
    """One entry per (region name, call site), most bytes saved per ms first."""
    groups: dict[tuple[str, str], list[int]] = {}
    for index, call in enumerate(calls):
        groups.setdefault((region_name(call), call.site), []).append(index)
    costs = []
    for (name, site), indices in groups.items():
        per_step = [sum(sample.get(i, 0.0) for i in indices) for sample in recompute_samples]
        costs.append(
            RegionCost(
                name=name,
                site=site,
                calls=len(indices),
                saved_bytes=sum(saved_by_call.get(i, 0) for i in indices),
                recompute_s=statistics.median(per_step) if per_step else 0.0,
            )
        )
    total_bytes = sum(c.saved_bytes for c in costs)
    total_s = sum(c.recompute_s for c in costs)
    step_return = total_bytes / total_s if total_s > 0 else None

    def poor(cost: RegionCost) -> bool:
        if cost.saved_bytes <= 0:
            return cost.recompute_s > 0
        return step_return is not None and cost.recompute_s > 0 and cost.saved_bytes / cost.recompute_s < POOR_RETURN * step_return

    ranked = [RegionCost(c.name, c.site, c.calls, c.saved_bytes, c.recompute_s, poor(c)) for c in costs]
    return tuple(sorted(ranked, key=lambda c: (-(c.saved_bytes_per_ms if c.saved_bytes_per_ms is not None else float("inf")), c.name, c.site)))


def budget_plan(costs: Sequence[RegionCost], baseline_bytes: int, budget_bytes: int) -> BudgetPlan:
    """The set of regions whose savings bring the activations held without checkpointing
    (`baseline_bytes`) under `budget_bytes` at the least total recompute time: every subset
    up to EXACT_UP_TO regions, else by bytes saved per ms, then dropping what is not needed."""
    needed = baseline_bytes - budget_bytes
    useful = [c for c in costs if c.saved_bytes > 0]
    if needed <= 0:
        return BudgetPlan(budget_bytes, True, (), baseline_bytes, 0.0, "exact")
    if sum(c.saved_bytes for c in useful) < needed:
        everything = tuple(c.name for c in useful)
        return BudgetPlan(budget_bytes, False, everything, baseline_bytes - sum(c.saved_bytes for c in useful), sum(c.recompute_s for c in useful), "exact")
    if len(useful) <= EXACT_UP_TO:
        best: tuple[RegionCost, ...] | None = None
        for size in range(1, len(useful) + 1):
            for subset in itertools.combinations(useful, size):
                if sum(c.saved_bytes for c in subset) >= needed and (
                    best is None or _cost_key(subset) < _cost_key(best)
                ):
                    best = subset
        chosen, method = best or tuple(useful), "exact"
    else:
        picked: list[RegionCost] = []
        for cost in sorted(useful, key=lambda c: -(c.saved_bytes / c.recompute_s if c.recompute_s > 0 else float("inf"))):
            if sum(c.saved_bytes for c in picked) >= needed:
                break
            picked.append(cost)
        for cost in sorted(picked, key=lambda c: -c.recompute_s):  # drop what the budget does not need
            if sum(c.saved_bytes for c in picked) - cost.saved_bytes >= needed:
                picked.remove(cost)
        chosen, method = tuple(picked), "greedy"
    order = {id(c): i for i, c in enumerate(costs)}
    chosen = tuple(sorted(chosen, key=lambda c: order[id(c)]))
    return BudgetPlan(
        budget_bytes,
        True,
        tuple(c.name for c in chosen),
        baseline_bytes - sum(c.saved_bytes for c in chosen),
        sum(c.recompute_s for c in chosen),
        method,
    )


def _cost_key(subset: Sequence[RegionCost]) -> tuple[float, int]:
    return sum(c.recompute_s for c in subset), len(subset)
