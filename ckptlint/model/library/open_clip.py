"""What open_clip's factories return and what its models hold, as data: enough for the
evaluator to follow `model, _, _ = open_clip.create_model_and_transforms(...)` to
`model.transformer.resblocks` and the block classes there, whose `forward` signatures are in
`third_party_signatures.py`. What a model holds changed between versions; the evaluator does
not know the project's versions, so a value found through these facts carries the versions it
holds for (`library_instance`), and the rule that reads it (CKPT032) keeps it only where the
project may run one of them (`instance_versions`).
"""

from __future__ import annotations

from ckptlint.model.form.values import Instance
from ckptlint.versions import VersionRange

_OPEN_CLIP = "open-clip-torch"
_SINCE_2_2 = VersionRange.of(_OPEN_CLIP, min="2.2")
_VERSIONS_KEY = "<versions>"  # an Instance argument no constructor call can pass

# `open_clip.create_model(...)` builds a `CLIP`, or a `CustomTextCLIP` / `CoCa` for the
# configurations that ask for them; `create_model_and_transforms(...)` returns `(model,
# preprocess_train, preprocess_val)` (`src/open_clip/factory.py`, read at v2.2.0, v2.11.0,
# v2.20.0, v2.32.0, v3.0.0, v3.3.0; CoCa from v2.11.0). `open_clip/__init__.py` re-exports
# both from `.factory`. Only `CLIP` has a `transformer` attribute: `CustomTextCLIP` holds
# its text tower as `text`, `CoCa` as `text` too (`model.py`, `coca_model.py`).
OPEN_CLIP_MODELS = ("open_clip.model.CLIP", "open_clip.model.CustomTextCLIP", "open_clip.coca_model.CoCa")
CREATE_MODEL = frozenset({"open_clip.create_model", "open_clip.factory.create_model"})
CREATE_MODEL_AND_TRANSFORMS = frozenset(
    {"open_clip.create_model_and_transforms", "open_clip.factory.create_model_and_transforms"}
)
MODEL_AND_TRANSFORMS_ITEMS = 3

# What an open_clip module's attribute holds, per version range: the classes, and whether the
# attribute is an `nn.ModuleList` of them.
# - `CLIP.transformer = text.transformer`, the text tower's `Transformer` (`model.py`, read
#   at v2.2.0 line 150, v2.20.0 line 204, v2.32.0 line 243, v3.3.0 line 286; before 2.2
#   CLIP and its Transformer lived in `model.py`, not covered here);
# - `Transformer.resblocks = nn.ModuleList([ResidualAttentionBlock(...) ...])` from v2.2.0 to
#   v2.32.0 (`transformer.py`, read at v2.2.0 line 207, v2.20.0 line 305, v2.32.0 line
#   338); from v3.0.0 `Transformer(..., block_type=None, qk_norm=False, ...)` builds
#   `CustomResidualAttentionBlock`s instead when `block_type == 'custom'` or any of the
#   custom options is set (read at v3.0.0 lines 483-510, v3.3.0), which a model
#   configuration's text tower may ask for.
LIBRARY_ATTRIBUTES: dict[tuple[str, str], tuple[tuple[VersionRange, str, bool], ...]] = {
    ("open_clip.model.CLIP", "transformer"): ((_SINCE_2_2, "open_clip.transformer.Transformer", False),),
    ("open_clip.transformer.Transformer", "resblocks"): (
        (_SINCE_2_2, "open_clip.transformer.ResidualAttentionBlock", True),
        (VersionRange.of(_OPEN_CLIP, min="3.0"), "open_clip.transformer.CustomResidualAttentionBlock", True),
    ),
}


def library_instance(cls: str, versions: VersionRange) -> Instance:
    """An instance of a library class that exists in `versions` only."""
    return Instance(cls, ((_VERSIONS_KEY, frozenset({versions})),))


def instance_versions(instance: Instance) -> VersionRange | None:
    """The versions a library instance found through these facts exists in (None: any)."""
    found = instance.argument(_VERSIONS_KEY)
    return next(iter(found)) if found else None


def created_models() -> frozenset[Instance]:
    return frozenset(Instance(cls) for cls in OPEN_CLIP_MODELS)


def attribute_values(instance: Instance, name: str) -> set | None:
    """What `instance.<name>` holds by these facts: module instances, or `nn.ModuleList`s of
    them; None when the facts do not say (another class or attribute)."""
    entries = LIBRARY_ATTRIBUTES.get((instance.cls, name))
    if entries is None:
        return None
    outer = instance_versions(instance)
    found: set = set()
    members: set = set()
    for versions, cls, listed in entries:
        if outer is not None and not outer.overlaps(versions):
            continue
        held = library_instance(cls, _narrowed(versions, outer))
        (members if listed else found).add(held)
    if members:
        found.add(Instance("torch.nn.ModuleList", (), (frozenset(members),), False))
    return found


def _narrowed(versions: VersionRange, outer: VersionRange | None) -> VersionRange:
    """The versions in both ranges (they overlap)."""
    if outer is None:
        return versions
    low = max((v for v in (versions.min, outer.min) if v is not None), default=None)
    high = min((v for v in (versions.max, outer.max) if v is not None), default=None)
    return VersionRange(versions.package, low, high)
