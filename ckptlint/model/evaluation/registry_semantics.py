"""What reading a registry denotes (`REG[key]`, `REG.get(key)`, `REG.build(dict(type=key,
...))`): the classes the project registers under a key (`ckptlint.model.file_facts.registries`, in the
index), or mmcv's norm layers by their type names. A mixin of the evaluator."""

from __future__ import annotations

from ckptlint.model.library.openmmlab import is_norm_registry, registered_norm_class
from ckptlint.model.form.summary import Expr
from ckptlint.model.form.values import NOTHING, ClassRef, Constant, Frame, Mapping


class RegistrySemantics:
    """A mixin of `ckptlint.model.evaluation.denotation.Denotation`: what reading a registry denotes."""

    def _registry(self, expr: Expr, frame: Frame) -> str | None:
        """The registry a global name stands for, when the project registers classes in it."""
        if expr[0] not in ("name", "attr"):
            return None
        name = self._global_dotted(expr, frame)
        if name is None:
            return None
        if name in self.index.registries or (is_norm_registry(name) and self._module_of(name) is None):
            return name  # the project's, or a library's that knows mmcv's norm type names
        return None

    def _registered(self, registry: str, keys: frozenset) -> set:
        """The classes registered under `keys` (by the project, or mmcv's norm type names);
        none when a key is not a known string."""
        if not keys or not all(isinstance(k, Constant) and isinstance(k.value, str) for k in keys):
            return set()
        table = self.index.registries.get(registry, {})
        found = {ClassRef(cls) for key in keys for cls in table.get(key.value, ())}
        library = {registered_norm_class(registry, key.value) for key in keys} - {None}
        return found | {ClassRef(cls) for cls in library}

    def _from_registry(self, registry: str, method: str, first: frozenset, named: dict) -> set:
        if method == "get":
            return self._registered(registry, first)
        found: set = set()
        for config in first:  # `build(cfg)`: the class named by `type`, built with the rest
            if not isinstance(config, Mapping):
                continue
            entries = dict(config.entries)
            for cls in self._registered(registry, entries.get("type", NOTHING)):
                arguments = {k: v for k, v in entries.items() if isinstance(k, str) and k != "type"}
                found.add(self._construct(cls, [], arguments, False))
        return found
