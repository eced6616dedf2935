"""ckptlint's runtime verifier: replays a training step with and without checkpointing.

Needs torch (`pip install 'ckptlint[runtime]'`); the static linter never imports this
package. Entry points:

- `verify(model, inputs, loss_fn=None, ...)` for pytest and notebooks;
- `verify_case("file.py", "make_case")` for `ckptlint verify file.py:make_case`;
- `verify_script("train.py", args)` for `ckptlint verify train.py -- ARGS` (the script's own
  step, loss included, re-run from its start for each measured step);
- `verify_distributed("file.py:make_case", nproc=2)` for `ckptlint verify ... --nproc 2`:
  FSDP set-ups on N ranks under torchrun (`make_case(rank, world_size)`).

Each returns a frozen `Report` (`.verdict`, findings ranked cause first, `.time` with its
samples, `.regions` with what checkpointing each region saves and costs, `.to_text()`,
`.to_json()`, `.to_html()`) or
raises `VerifyError` (`NoCheckpointingFound`, `NoTrainingStep`) when there is nothing to
verify. See DESIGN.md, "Runtime verifier".
"""

from ckptlint.runtime_check._distributed import verify_distributed
from ckptlint.runtime_check._step import StepInputs
from ckptlint.runtime_check._targets import DEFAULT_TIMEOUT_S, verify_case, verify_script, verify_target
from ckptlint.runtime_check._types import (
    AttributeChange,
    BudgetPlan,
    BufferComparison,
    Finding,
    GradientComparison,
    LossComparison,
    MemoryFigure,
    MemoryReport,
    NoCheckpointingFound,
    NoTrainingStep,
    Recomputation,
    RegionCost,
    RngComparison,
    TensorMismatch,
    Timing,
    Tolerance,
    VerifyError,
)
from ckptlint.runtime_check._distributed_types import CollectiveComparison, DistributedReport, RankStatus, ReferenceComparison, UnitNesting
from ckptlint.runtime_check._report import Report
from ckptlint.runtime_check._verify import verify, verify_step

__all__ = [
    "DEFAULT_TIMEOUT_S",
    "AttributeChange",
    "BudgetPlan",
    "BufferComparison",
    "CollectiveComparison",
    "DistributedReport",
    "Finding",
    "GradientComparison",
    "LossComparison",
    "MemoryFigure",
    "MemoryReport",
    "NoCheckpointingFound",
    "NoTrainingStep",
    "RankStatus",
    "Recomputation",
    "ReferenceComparison",
    "RegionCost",
    "Report",
    "RngComparison",
    "StepInputs",
    "TensorMismatch",
    "Timing",
    "Tolerance",
    "UnitNesting",
    "VerifyError",
    "verify",
    "verify_case",
    "verify_distributed",
    "verify_script",
    "verify_step",
    "verify_target",
]
