from __future__ import annotations

from ckptlint.lazy_libcst import cst

from ckptlint.analysis.checkpoint_sites import SITE_REQUIRES, SITE_TRIGGERS, CheckpointApi, CheckpointSite, SiteKind
from ckptlint.model.library.torch import Reentrancy
from ckptlint.analysis.reentrancy import in_old_torch_branch, reports_implicit_reentrant
from ckptlint.model.file_facts.facts import ForwardingKind
from ckptlint.model.syntax.names import module_name
from ckptlint.analysis.transforms import use_reentrant_false
from ckptlint.rule import Rule
from ckptlint.types import Applicability, Severity
from ckptlint.versions import Applies, TargetVersions, VersionRange


class CheckpointImplicitReentrant(Rule):
    """`checkpoint` or `checkpoint_sequential` called without `use_reentrant`.

    ## What it does
    Finds calls to `torch.utils.checkpoint.checkpoint` and `checkpoint_sequential` (through
    any import alias, module alias, assigned name or `functools.partial`) that do not pass
    `use_reentrant`. Also through a project getter (`checkpoint = get_checkpoint_fn()`,
    defined in any module, returning torch's function; one that returns DeepSpeed's where it
    is configured is reported as a call that may be DeepSpeed's, without a fix), and through
    an import guarded for old torch (`except ImportError: checkpoint = None`: `None` cannot
    be called, so where the call runs the name is torch's).

    ## Why is this bad?
    Without the argument torch silently falls back to the *reentrant* implementation, which
    is the one that ignores inputs without `requires_grad` (parameters in the region then get
    no gradient), rejects keyword arguments, `.grad()` and `backward(inputs=...)`, runs
    backward hooks inside a nested backward, and composes badly with FSDP and DDP. torch has
    deprecated omitting the flag since 2.1, but it only warns: the warning points at a line
    inside torch, not at your call, and is printed once per process however many call sites
    there are, so it cannot tell you which call to fix.

    ## Example
    ```python
    from torch.utils.checkpoint import checkpoint

    def forward(self, x):
        return checkpoint(self.block, x)
    ```

    ## Use instead
    ```python
    def forward(self, x):
        return checkpoint(self.block, x, use_reentrant=False)
    ```

    ## Fix safety
    The fix adds `use_reentrant=False`. It is **unsafe**: it switches the implementation. The
    non-reentrant variant is the one torch recommends and is correct in more situations, but
    it behaves differently where the reentrant one had quirks your code may rely on (e.g. a
    region whose output is never used in backward, or code that expects the region's inputs
    to be detached). Pass `use_reentrant=True` instead to keep today's behaviour explicitly.

    A project whose declared range reaches below torch 1.11 (`torch>=1.8`) is reported too,
    since it also runs the torch versions with the implicit default, but without the fix:
    its oldest torch would reject the argument. Only a project that runs nothing newer than
    1.10 is not reported.

    Not reported in a branch that only runs on torch older than 1.11, which has no
    `use_reentrant` (the `else` of `if is_torch_version(">=", "1.11.0"):`, as diffusers'
    models write it; also `version.parse(torch.__version__)` comparisons), nor when
    `use_reentrant` is passed at all (a literal, a variable or an expression), when `**kwargs` are splatted into the call (they may carry it), or when the
    `functools.partial` the call goes through binds it. A partial that does not bind it is
    reported once, where it is built, unless every call through it in the file passes the
    argument.

    A helper that hands its own `**kwargs` on (`def auto_grad_checkpoint(module, *args,
    **kwargs): return checkpoint(module, *args, **kwargs)`, PixArt's shape) leaves the choice
    to its callers: it is reported, without a fix, when the project calls it (in any module)
    and no call passes `use_reentrant` or splats `**`; not when it is also held as a value
    (a table, a `partial`), nor when no call of it is found.

    A name that one import binds to torch's `checkpoint` and another to DeepSpeed's
    (`try: from deepspeed...checkpointing import checkpoint` / `except: from
    torch.utils.checkpoint import checkpoint`, or the same under `if
    os.getenv("ENV_TYPE") == "deepspeed"`) is reported too, without a fix: wherever torch's
    is the one imported, it runs the reentrant default. The flag cannot go at the call, since
    DeepSpeed's `checkpoint` takes none; the message says to bind it where torch's is
    imported (`checkpoint = functools.partial(torch_checkpoint, use_reentrant=False)`).

    ## Evidence
    torch 2.13: `checkpoint(function, *args, use_reentrant=None, ...)`; `None` warns
    "torch.utils.checkpoint: the use_reentrant parameter should be passed explicitly..."
    and then sets `use_reentrant = True` (the output's `grad_fn` is
    `CheckpointFunctionBackward`). The warning uses `stacklevel=2` but `checkpoint` is
    wrapped by `torch._disable_dynamo`, so it is attributed to `torch/_dynamo/eval_frame.py`.
    `checkpoint_sequential` warns separately and also defaults to reentrant. The flag exists
    since torch 1.11 (pytorch/pytorch#65537); the warning since 2.1 (pytorch/pytorch#100551).
    A test in `tests/test_torch_semantics.py` re-checks this against the installed torch.
    DeepSpeed, `deepspeed/runtime/activation_checkpointing/checkpointing.py`: releases up to
    2024 define `def checkpoint(function, *args)` (any keyword, `use_reentrant` included, is a
    `TypeError`); current ones `def checkpoint(function, *args, **kwargs)`, which pack the
    keywords and pass them on to `function` (`function_with_kwargs`): `use_reentrant=False`
    would reach the checkpointed layer's `forward`. Neither has the flag, so no fix may add
    it at a call that may be DeepSpeed's.
    """

    code = "CKPT001"
    severity = Severity.WARNING
    name = "checkpoint-implicit-reentrant"
    message = (
        "`{api}` without `use_reentrant`: torch falls back to the reentrant implementation "
        "and its warning cannot point at this line; pass `use_reentrant=False`"
    )
    fix = Applicability.UNSAFE
    # `use_reentrant` exists from torch 1.11; before it, passing it raises.
    targets = (VersionRange.of("torch", min="1.11"),)
    triggers = SITE_TRIGGERS
    reached_through_aliases = True  # torch's checkpoint under another module's name
    # The index: torch's checkpoint under another module's name or returned by a getter, and
    # the calls of a helper that hands its `**kwargs` on to it (`_check_forwarded`).
    uses_project = True
    requires = SITE_REQUIRES
    words_in_code_only = True  # sites only: a docstring's `torch.utils.checkpoint` is none

    @classmethod
    def applies_to_versions(cls, versions: TargetVersions) -> bool:
        # A project that still supports torch < 1.11 but also runs newer ones meets the
        # implicit default there: reported, without the fix its oldest torch would reject.
        return all(versions.could_be(version_range) for version_range in cls.targets)

    def _check_forwarded(self, site: CheckpointSite) -> None:
        """`checkpoint(fn, *args, **kwargs)` in a helper that hands its own `**kwargs` on
        (`ckptlint.model.forwarding`): the caller may pass `use_reentrant` through them, so
        the call alone says nothing; reported when the project calls the helper and no call
        passes it (nor splats `**`), each call found through the project model. No fix: a
        flag written here would clash with one a later caller passes."""
        if site.kind is not SiteKind.CALL or site.api is not CheckpointApi.CHECKPOINT or "use_reentrant" in site.keywords:
            return
        if not site.has_star_kwargs or site.via_partial is not None or in_old_torch_branch(self.context, site.node):
            return
        scopes, kinds = self._enclosing.get(site.node, ((), ()))
        if kinds not in (("function",), ("class", "function")):
            return  # a module-level function or a method: what other code can call
        name = ".".join((module_name(self.context.relative_path), *scopes))
        project = self.context.project
        target = project.forwarding_target(name)
        if target is None or target[0].kind is not ForwardingKind.HELPER or target[0].name != name:
            return
        calls = project.denotation.calls_without_reentrant(name)
        if not calls:
            return
        shown = ", ".join(f"{path}:{line}" for path, line in calls[:3]) + (f" and {len(calls) - 3} more" if len(calls) > 3 else "")
        self.report(
            site.node,
            f"`{site.api.short_name}` without `use_reentrant`, in `{scopes[-1]}`, which hands its `**kwargs` on to it: "
            f"no call of `{scopes[-1]}` in the project passes `use_reentrant` ({shown}), so torch falls back to the "
            "reentrant implementation; pass `use_reentrant=False` here (or have every call pass it)" + self.version_note(),
        )

    def finish(self) -> None:
        """A name bound to torch's checkpoint by one import and to another library's by
        another (DeepSpeed's, chosen by a `try` or an environment variable): where torch's
        runs, its default is reentrant; no fix, as the other one takes no `use_reentrant`."""
        if self.context.versions.applies(self.targets) is Applies.NO:
            return
        for site in self.context.possible_sites:
            if site.reentrancy is not Reentrancy.IMPLICIT:
                continue
            others = ", ".join(f"`{name}`" for name in site.alternatives)
            deepspeed = any(name.startswith("deepspeed.") for name in site.alternatives)
            rejects = (
                "DeepSpeed's takes no `use_reentrant` (older releases raise `TypeError`, newer ones hand it "
                "to the checkpointed function)" if deepspeed else "the other binding may not accept it"
            )
            self.report(
                site.node,
                f"`{site.api.short_name}` without `use_reentrant`, where the name is torch's (it may also be "
                f"{others}): torch falls back to the reentrant implementation; {rejects}, so pass the flag only where "
                f"torch's is imported (`{site.api.short_name} = functools.partial({site.api.short_name}, "
                "use_reentrant=False)` right after that import), not at this call" + self.version_note(),
            )

    def __init__(self, context) -> None:
        super().__init__(context)
        # The enclosing classes and functions (names, kinds), outermost first: a snapshot
        # taken when a definition is entered or left, shared by the calls inside it.
        self._stack: list[tuple[tuple[str, ...], tuple[str, ...]]] = [((), ())]
        self._enclosing: dict[cst.Call, tuple[tuple[str, ...], tuple[str, ...]]] = {}

    def _enter(self, name: str, kind: str) -> None:
        names, kinds = self._stack[-1]
        self._stack.append(((*names, name), (*kinds, kind)))

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        self._enter(node.name.value, "class")

    def leave_ClassDef(self, original_node: cst.ClassDef) -> None:
        self._stack.pop()

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._enter(node.name.value, "function")

    def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
        self._stack.pop()

    def visit_Call(self, node: cst.Call) -> None:
        if self._stack[-1][1][-1:] == ("function",):
            self._enclosing[node] = self._stack[-1]

    def visit_checkpoint_site(self, site: CheckpointSite) -> None:
        if site.reentrancy is Reentrancy.UNKNOWN:
            self._check_forwarded(site)
            return
        if not reports_implicit_reentrant(site, self.context.sites, self.context):
            return
        message = self.message.format(api=site.api.short_name)
        if self.context.versions.applies(self.targets) is Applies.NO:
            self.report(
                site.node,
                f"{message} on torch >= 1.11 (the project also supports older torch, where the argument does not "
                "exist and passing it raises: pass it only when `torch.__version__` is 1.11 or later)",
            )
            return
        self.report(
            site.node,
            message + self.version_note(),
            replacements=[use_reentrant_false(site.node)],
            fix_message="Add `use_reentrant=False`",
        )
