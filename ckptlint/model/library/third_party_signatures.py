"""Call signatures of third-party modules, as data: the `forward` parameters of library
blocks that projects construct and checkpoint themselves, for the checks that match a
checkpointed call's positional inputs to parameters (CKPT032). One entry per class (the
absolute name it is imported by) and version range where the signature differs, each with
the file and version it was read from. Add a class here only with its source read, never a
signature guessed from a name.
"""

from __future__ import annotations

from dataclasses import dataclass

from ckptlint.model.form.summary import Parameter
from ckptlint.versions import TargetVersions, VersionRange

_NONE = ("const", None)


def _positional(*names: str, defaults_from: int) -> tuple[Parameter, ...]:
    """Positional parameters, those from index `defaults_from` on defaulting to None."""
    return tuple(
        Parameter(name, _NONE if index >= defaults_from else None, (), "positional") for index, name in enumerate(names)
    )


@dataclass(frozen=True)
class LibrarySignature:
    """The `forward` of one library class (without `self`) over a range of the library's
    versions."""

    cls: str  # absolute, as imported: `open_clip.transformer.ResidualAttentionBlock`
    versions: VersionRange  # of the distribution: `open-clip-torch>=2.11`
    parameters: tuple[Parameter, ...]
    read_in: str  # where the signature was read: the file and the version

    @property
    def library(self) -> str:
        return self.versions.package


# --- open_clip (distribution `open-clip-torch`) -----------------------------------------
# `ResidualAttentionBlock` lived in `src/open_clip/model.py` up to 2.0.2 (`forward(self, x,
# attn_mask=None)`, read at v1.3.0 and v2.0.2); from 2.2.0 in `src/open_clip/transformer.py`,
# which `model.py` imports from without re-exporting it, and `open_clip/__init__.py` exports
# neither block (read at v2.0.2, v2.11.0, v2.20.0, v3.3.0).
# - `transformer.ResidualAttentionBlock.forward(self, x, attn_mask=None)`: v2.2.0 to v2.10.1
#   (read at v2.2.0 line 143, v2.10.1 line 192);
# - `forward(self, q_x, k_x=None, v_x=None, attn_mask=None)` from v2.11.0, CoCa's cross
#   attention (read at v2.11.0 line 232, v2.20.0 line 232, v3.3.0 line 289, and the 4.2.0.dev0
#   main branch): a mask passed second lands in `k_x`, which is why open_clip's own
#   `Transformer.forward` checkpoints `checkpoint(r, x, None, None, attn_mask)`;
# - `transformer.CustomResidualAttentionBlock.forward(self, x, attn_mask=None)` in every
#   release that has it, v2.2.0 to v3.3.0 and 4.2.0.dev0 (read at v2.2.0 line 184, v2.11.0
#   line 282, v2.20.0 line 282, v3.3.0 line 351).
_OPEN_CLIP = "open-clip-torch"
_X_MASK = _positional("x", "attn_mask", defaults_from=1)
_QKV_MASK = _positional("q_x", "k_x", "v_x", "attn_mask", defaults_from=1)

FORWARD_SIGNATURES: dict[str, tuple[LibrarySignature, ...]] = {
    "open_clip.model.ResidualAttentionBlock": (
        LibrarySignature(
            "open_clip.model.ResidualAttentionBlock",
            VersionRange.of(_OPEN_CLIP, max="2.2"),
            _X_MASK,
            "src/open_clip/model.py, open_clip v1.3.0 and v2.0.2",
        ),
    ),
    "open_clip.transformer.ResidualAttentionBlock": (
        LibrarySignature(
            "open_clip.transformer.ResidualAttentionBlock",
            VersionRange.of(_OPEN_CLIP, min="2.2", max="2.11"),
            _X_MASK,
            "src/open_clip/transformer.py, open_clip v2.2.0 and v2.10.1",
        ),
        LibrarySignature(
            "open_clip.transformer.ResidualAttentionBlock",
            VersionRange.of(_OPEN_CLIP, min="2.11"),
            _QKV_MASK,
            "src/open_clip/transformer.py, open_clip v2.11.0, v2.20.0 and v3.3.0",
        ),
    ),
    "open_clip.transformer.CustomResidualAttentionBlock": (
        LibrarySignature(
            "open_clip.transformer.CustomResidualAttentionBlock",
            VersionRange.of(_OPEN_CLIP, min="2.2"),
            _X_MASK,
            "src/open_clip/transformer.py, open_clip v2.2.0, v2.11.0, v2.20.0 and v3.3.0",
        ),
    ),
}


def forward_signatures(cls: str, versions: TargetVersions) -> tuple[LibrarySignature, ...]:
    """The signatures `cls.forward` may have in the versions the project may run: every
    entry whose range the targeted version (or the declared range) overlaps, all of them
    when the version is not known. Empty for a class the table does not hold."""
    return tuple(entry for entry in FORWARD_SIGNATURES.get(cls, ()) if versions.could_be(entry.versions))
