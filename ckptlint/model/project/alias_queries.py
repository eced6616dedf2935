"""The project index's questions about torch's checkpoint under the project's own names
(`ckptlint.model.project.checkpoint_aliases`): names other modules give it, module-level partials
choosing its flag, getters returning it. A mixin of `ckptlint.model.index.ProjectIndex`,
which provides `files`, `_files_of_kind`, `_paths_of_kind` and `path_of`."""

from __future__ import annotations

from ckptlint.model.project.reads import tracked_cached_property

from ckptlint.model.file_facts.facts import FileFacts

CHECKPOINT_IMPORT_KIND = "checkpoint_imports"  # files importing (or returning) torch's checkpoint functions
REEXPORT_KIND = "reexports"  # package `__init__` files importing names from other modules


def returns_checkpoint(facts: FileFacts) -> bool:
    """Whether a function of the file returns torch's checkpoint (`get_checkpoint_fn()`)."""
    from ckptlint.model.project.checkpoint_aliases import returned_checkpoint_function

    # The name it returns is an import's (`names`) with the attributes written after it (in
    # the summaries): "checkpoint" is in one of them. Most files are answered without
    # decoding their summaries (the run's parent asks this of every file it indexes).
    if "checkpoint" not in facts.summaries_json and not any("checkpoint" in absolute for _, absolute in facts.names):
        return False
    names = dict(facts.names)
    return any(returned_checkpoint_function(s, names) is not None for s in facts.summaries if s.returns)


AliasTables = tuple[dict[str, str], dict[str, tuple[tuple[str, object], ...]], dict[str, tuple[str, ...]]]


def _tables_from_json(value) -> AliasTables:
    found, bound, alternatives = value
    return (
        {str(name): str(function) for name, function in found.items()},
        {str(name): tuple((str(keyword), flag) for keyword, flag in pairs) for name, pairs in bound.items()},
        {str(name): tuple(map(str, functions)) for name, functions in alternatives.items()},
    )


class AliasQueries:
    @tracked_cached_property(cutoff=True)
    def _checkpoint_alias_tables(self) -> AliasTables:
        from ckptlint.model.project.stored_tables import TableCodec, stored_table

        def compute() -> AliasTables:
            from ckptlint.model.project.checkpoint_aliases import checkpoint_aliases

            return checkpoint_aliases(
                list(self._files_of_kind(CHECKPOINT_IMPORT_KIND)), lambda: self._files_of_kind(REEXPORT_KIND)
            )

        # Every file linted asks (`imports_checkpoint_alias`): kept between runs. Read
        # from the store, it reads what computing it would (the facts of those files).
        self._record(f"kf:{CHECKPOINT_IMPORT_KIND}")
        self._record(f"kf:{REEXPORT_KIND}")
        if self.files_with is None:
            return compute()  # (the kinds of facts each file holds are not recorded)
        paths = self._paths_of_kind(CHECKPOINT_IMPORT_KIND) | self._paths_of_kind(REEXPORT_KIND)
        return stored_table(
            self.table_store, self.exported, "checkpoint_aliases", paths, compute, TableCodec(list, _tables_from_json)
        )

    @property
    def checkpoint_aliases(self) -> dict[str, str]:
        """Project names that are torch's checkpoint functions under another module's name
        (`ckptlint.model.project.checkpoint_aliases`), module-level partials choosing the flag among them."""
        return self._checkpoint_alias_tables[0]

    @property
    def checkpoint_alias_keywords(self) -> dict[str, tuple[tuple[str, object], ...]]:
        """The literal flags the partials among `checkpoint_aliases` bind, by name."""
        return self._checkpoint_alias_tables[1]

    @property
    def checkpoint_alias_alternatives(self) -> dict[str, tuple[str, ...]]:
        """The other libraries' checkpoint functions a getter among `checkpoint_aliases`
        may return instead of torch's (DeepSpeed's, where it is configured), by name."""
        return self._checkpoint_alias_tables[2]

    def imports_checkpoint_alias(self, relative_path: str) -> bool:
        """Whether the file imports torch's checkpoint under a name another module of the
        project gives it (`from .utils import checkpoint`), by its facts in the index; the
        aliases are looked for only when it imports from a file that may define one."""
        facts = self.files.get(relative_path)
        if facts is None:
            return False
        defining = self._paths_of_kind(CHECKPOINT_IMPORT_KIND) | self._paths_of_kind(REEXPORT_KIND)
        imported = [
            a for local, a in facts.names
            if a != f"{facts.module}.{local}" and not a.startswith("torch.") and self.path_of(a) in defining
        ]
        aliases = self.checkpoint_aliases
        if imported and any(a in aliases or f"{a}()" in aliases for a in imported):
            return True
        return bool(facts.star_imports) and self._star_imports_checkpoint(facts.module, aliases)

    def _star_imports_checkpoint(self, module: str, aliases: dict[str, str]) -> bool:
        """Whether the project modules `module` star-imports bind one of torch's checkpoint
        functions, or a project name for one, to a name the star import brings in
        (`from ..modules.attention import *`, where attention.py imports `checkpoint`)."""
        from ckptlint.model.library.torch import TORCH_CHECKPOINT_FUNCTIONS

        names = {name.rpartition(".")[2] for name in (*TORCH_CHECKPOINT_FUNCTIONS, *aliases)}
        return any(
            (absolute := self.star_imported(module, name)) is not None
            and (absolute in TORCH_CHECKPOINT_FUNCTIONS or absolute in aliases)
            for name in sorted(names)
        )
