"""ckptlint's runtime verifier: replays a training step with and without checkpointing.

Needs torch (`pip install 'ckptlint[runtime]'`); the static linter never imports this
package. Entry points:

- `verify(model, inputs, loss_fn=None, ...)` for pytest and notebooks;
- `verify_case("file.py", "make_case")` for `ckptlint verify file.py:make_case`;
- `verify_script("train.py", args)` for `ckptlint verify train.py -- ARGS`.

Each returns a frozen `Report` (`.verdict`, `.to_text()`, `.to_json()`, `.to_html()`) or
raises `VerifyError` (`NoCheckpointingFound`, `NoTrainingStep`) when there is nothing to
verify. See DESIGN.md, "Runtime verifier".
"""

from ckptlint.runtime_check._step import StepInputs
from ckptlint.runtime_check._targets import DEFAULT_TIMEOUT_S, verify_case, verify_script, verify_target
from ckptlint.runtime_check._types import (
    AttributeChange,
    BufferComparison,
    Finding,
    GradientComparison,
    LossComparison,
    MemoryFigure,
    MemoryReport,
    NoCheckpointingFound,
    NoTrainingStep,
    Recomputation,
    Report,
    RngComparison,
    TensorMismatch,
    Timing,
    Tolerance,
    VerifyError,
)
from ckptlint.runtime_check._verify import verify, verify_step

__all__ = [
    "DEFAULT_TIMEOUT_S",
    "AttributeChange",
    "BufferComparison",
    "Finding",
    "GradientComparison",
    "LossComparison",
    "MemoryFigure",
    "MemoryReport",
    "NoCheckpointingFound",
    "NoTrainingStep",
    "Recomputation",
    "Report",
    "RngComparison",
    "StepInputs",
    "TensorMismatch",
    "Timing",
    "Tolerance",
    "VerifyError",
    "verify",
    "verify_case",
    "verify_script",
    "verify_step",
    "verify_target",
]
