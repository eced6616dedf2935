"""The project index's questions about functions whose keywords reach torch's checkpoint
(their facts: `ckptlint.model.file_facts.forwarding`): a mixin of `ckptlint.model.index.ProjectIndex`,
which provides `files`, `_files_of_kind`, `_definition` and `ancestors`."""

from __future__ import annotations

from ckptlint.model.project.reads import tracked_cached_property

from ckptlint.model.file_facts.facts import ForwardingFact, ForwardingKind

FORWARDING_KIND, DECORATED_KIND = "forwarding", "decorated"


class ForwardingQueries:
    @tracked_cached_property(cutoff=True)
    def forwarding(self) -> dict[str, ForwardingFact]:
        """Helpers and decorators by name, and the functions decorated by a project decorator
        when one of the decorators is such (timm's thousand `@register_model` functions are
        not loaded when none is)."""
        found = {
            f.name: f for _, facts in self._files_of_kind(FORWARDING_KIND) for f in facts.forwarding
            if f.kind in (ForwardingKind.HELPER, ForwardingKind.DECORATOR)
        }
        if any(f.kind is ForwardingKind.DECORATOR for f in found.values()):
            found.update(
                (f.name, f) for _, facts in self._files_of_kind(DECORATED_KIND) for f in facts.forwarding
                if f.kind is ForwardingKind.DECORATED
            )
        return found

    def hands_on_to_checkpoint_wrapper(self, name: str) -> bool:
        """Whether project function `name` is a plain hand-on to torch's `checkpoint_wrapper`
        (`ForwardingKind.WRAPPER`): a call of it is one of torch's, with its arguments."""
        fact = self._definition(name, "forwarding")
        return fact is not None and fact.kind is ForwardingKind.WRAPPER

    def forwarding_target(self, name: str) -> tuple[ForwardingFact, ForwardingFact | None] | None:
        """Calling project function `name` hands its `**kwargs` to torch's checkpoint without
        `use_reentrant`: the helper (or the decorator whose wrapper does), and the decorated
        function when `name` is one."""
        if not self.forwarding:
            return None
        fact = self._definition(name, "forwarding")
        if fact is not None and fact.kind is ForwardingKind.HELPER:
            return fact, None
        if fact is not None and fact.kind is ForwardingKind.DECORATED:
            decorator = self._definition(fact.via, "forwarding")
            if decorator is not None and decorator.kind is ForwardingKind.DECORATOR:
                return decorator, fact
        return None

    @tracked_cached_property(cutoff=True)
    def forwarding_words(self) -> frozenset[str]:
        """The names (last component) under which the project's code calls a function whose
        keywords reach torch's checkpoint: a file naming none of them calls none."""
        return frozenset(
            name.rsplit(".", 1)[-1] for name in self.forwarding if self.forwarding_target(name) is not None
        )

    def mentions_forwarding(self, text: str) -> bool:
        """Whether `text` may call one of them (a cheap test on the text, before any parse)."""
        return any(f"{word}(" in text for word in self.forwarding_words)

    def calls_forwarding(self, relative_path: str) -> bool:
        """Whether the file (its facts in the index) names, by import or definition, a
        function whose keywords reach torch's checkpoint, or defines a class inheriting one
        as a method."""
        facts = self.files.get(relative_path)
        if facts is None or not self.forwarding:
            return False
        if any(self.forwarding_target(absolute) is not None for _, absolute in facts.names):
            return True
        return any(
            self.forwarding_target(f"{ancestor}.{word}") is not None
            for cls in facts.classes for ancestor in self.ancestors(cls.name) for word in self.forwarding_words
        )
