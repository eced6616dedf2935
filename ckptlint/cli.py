"""The command line: a thin click layer over the runner and the reporters.

`ckptlint src/` means `ckptlint check src/`; exit codes are 0 (nothing found, or all
fixed), 1 (findings remain; with --diff, fixes pending) and 2 (usage, configuration or
internal error).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click

from ckptlint import __version__, collector
from ckptlint.check_command import REPORTERS, CheckFinished, CheckRun, fail


class DefaultToCheck(click.Group):
    """A group whose default command is `check`, so `ckptlint src/` works as in Ruff."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if not args or (args[0] not in self.commands and args[0] not in ("--help", "-h", "--version")):
            args = ["check", *args]
        return super().parse_args(ctx, args)


def _color_from_environment() -> bool | None:
    """Ruff's conventions: FORCE_COLOR (or CLICOLOR_FORCE) forces colour, NO_COLOR turns it
    off; otherwise colour only on a terminal (None lets click decide)."""
    if os.environ.get("FORCE_COLOR") or os.environ.get("CLICOLOR_FORCE", "0") != "0":
        return True
    if os.environ.get("NO_COLOR"):
        return False
    return None


@click.group(cls=DefaultToCheck, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "--version", prog_name="ckptlint", message="%(prog)s %(version)s")
@click.pass_context
def main(ctx: click.Context) -> None:
    """Find, fix and verify misuse of activation checkpointing in PyTorch code."""
    ctx.color = _color_from_environment()


@main.command()
@click.argument("paths", nargs=-1, type=click.Path(path_type=Path))
@click.option("--select", multiple=True, help="Rule codes or prefixes to enable (replaces the configured selection).")
@click.option("--ignore", multiple=True, help="Rule codes or prefixes to disable.")
@click.option("--extend-select", multiple=True, help="Rule codes or prefixes to enable in addition (CKPT100, off by default, reports unused `# noqa`).")
@click.option("--per-file-ignores", multiple=True, metavar="PATTERN:CODES", help="Codes to ignore in files matching PATTERN, e.g. 'tests/*:CKPT001' (replaces the configured table; comma-separated pairs).")
@click.option("--extend-per-file-ignores", multiple=True, metavar="PATTERN:CODES", help="Like --per-file-ignores, in addition to the configured table.")
@click.option("--fix", is_flag=True, help="Apply safe fixes.")
@click.option("--unsafe-fixes", is_flag=True, help="Include unsafe fixes (with --fix or --diff) and show them as fixable.")
@click.option("--diff", is_flag=True, help="Print the fixes as a unified diff; write nothing. Exit 1 if any are pending.")
@click.option("--add-noqa", is_flag=True, help="Add `# noqa: CODE` to each line with a finding (into its `# noqa` if it has one); report how many.")
@click.option("-w", "--watch", is_flag=True, help="Lint again whenever a linted file, a directory walked or the configuration changes.")
@click.option("--output-format", type=click.Choice(list(REPORTERS)), default="text", show_default=True, help="`text` is Ruff's `concise`; `full` adds each finding's source line, a caret and its fix as a diff.")
@click.option("-o", "--output-file", type=click.Path(dir_okay=False, path_type=Path), help="Write the report to this file instead of standard output (without colour).")
@click.option("--statistics", is_flag=True, help="Show counts per rule instead of each finding.")
@click.option("--show-fixes", is_flag=True, help="List the fixes that were applied.")
@click.option("-q", "--quiet", is_flag=True, help="Print findings only: no summary, no warnings.")
@click.option("-s", "--silent", is_flag=True, help="Print nothing, findings included (errors that exit 2 excepted); the exit code tells.")
@click.option("--color", type=click.Choice(["auto", "always", "never"]), default="auto", show_default=True, help="Colour the output: auto means on a terminal, unless NO_COLOR is set or FORCE_COLOR forces it.")
@click.option("--exit-zero", is_flag=True, help="Exit 0 even when findings remain.")
@click.option("--fail-on", type=click.Choice(["error", "warning", "info"]), help="The least severity that makes the run exit 1 (default: `fail-on` in the configuration, else info: every finding).")
@click.option("--exit-non-zero-on-fix", is_flag=True, help="With --fix: exit 1 when any file was fixed, even if no finding remains.")
@click.option("--config", "config_options", multiple=True, metavar="FILE | KEY=VALUE", help="A configuration file to use, or a TOML `KEY = VALUE` pair that overrides the configuration, e.g. \"select = ['CKPT0']\" (repeatable; one file at most).")
@click.option("--target-version", multiple=True, metavar="PKG=VER", help="Target library version, e.g. torch=2.4.")
@click.option("--exclude", multiple=True, metavar="PATTERNS", help="File patterns to exclude (replaces the configured `exclude`; comma-separated).")
@click.option("--extend-exclude", multiple=True, metavar="PATTERNS", help="File patterns to exclude in addition (comma-separated).")
@click.option("--no-cache", is_flag=True, help="Neither read nor write the cache.")
@click.option("--cache-dir", type=click.Path(path_type=Path), help="Cache directory (default: .ckptlint_cache at the project root; outside any project, where the run starts).")
@click.option("--jobs", "-j", type=click.IntRange(min=1), help="Worker processes for large runs (default: the number of cores).")
@click.option("--stdin-filename", help="The name to report for standard input (path `-`).")
@click.option("--force-exclude", is_flag=True, help="Apply exclusions to paths named on the command line too.")
@click.option("--show-settings", is_flag=True, help="Print the resolved settings and where each came from, then exit.")
def check(paths: tuple[Path, ...], **options) -> None:
    """Lint PATHS (default: the current directory; `-` reads standard input)."""
    collector.tune()
    run = CheckRun(paths, options)
    if options["watch"]:
        run.watch()
    raise CheckFinished(run.once())


def run() -> None:
    """The command line (`ckptlint`, `python -m ckptlint`): `main`, and after a finished
    `check`, an exit that skips freeing the process's objects one by one (as mypy's
    `hard_exit`): the run holds the project's index and the rules' modules to its end, and
    the interpreter's teardown took 35-40 ms of a 1.6 s run. Output is flushed first; nothing
    `check` leaves needs an `atexit` handler. Other commands (`verify` runs torch, whose
    handlers may matter) exit as usual."""
    try:
        main()
    except CheckFinished as stop:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):  # a closed pipe (`| head`): nothing more to say
                pass
        os._exit(stop.code or 0)


@main.command()
@click.argument("code", required=False)
@click.option("--all", "show_all", is_flag=True, help="Print every rule's page.")
@click.option("--output-format", type=click.Choice(["text", "json"]), default="text", show_default=True)
def rule(code: str | None, show_all: bool, output_format: str) -> None:
    """Show the documentation of rule CODE (or of every rule with --all)."""
    from ckptlint.registry import all_rules, rule_by_code_or_name
    from ckptlint.rule_codes import ENGINE_CODES

    if show_all:
        selected = [*all_rules(), *ENGINE_CODES.values()]
    elif code:
        found = rule_by_code_or_name(code)
        if found is None:
            fail(f"unknown rule {code!r}; `ckptlint rule --all` lists them")
        selected = [found]
    else:
        fail("give a rule code (e.g. `ckptlint rule CKPT001`) or --all")
    if output_format == "json":
        import json

        payload = [
            {
                "code": r.code,
                "name": r.name,
                "summary": r.summary(),
                "fix": r.fix.value if r.fix else None,
                "targets": [str(t) for t in r.targets],
                "url": r.url(),
                "explanation": r.documentation(),
            }
            for r in sorted(selected, key=lambda r: r.code)
        ]
        click.echo(json.dumps(payload if show_all else payload[0], indent=2))
        return
    click.echo("\n".join(r.documentation() for r in sorted(selected, key=lambda r: r.code)), nl=False)


@main.command()
@click.argument("path", required=False, type=click.Path(path_type=Path), default=Path("."))
def clean(path: Path) -> None:
    """Delete the cache of the project containing PATH."""
    from ckptlint.config import ConfigError, resolve_settings

    try:
        settings = resolve_settings(path)
    except ConfigError as error:
        fail(str(error))
    from ckptlint.cache import clear_cache

    cache_dir = settings.cache_dir
    if cache_dir is not None and clear_cache(cache_dir):
        click.echo(f"Removed {cache_dir}")


@main.command()
def server() -> None:
    """Run the language server for editors (LSP over stdio; needs `pip install 'ckptlint[server]'`)."""
    try:
        from ckptlint.server import serve
    except ModuleNotFoundError as error:
        if (error.name or "").split(".")[0] in ("pygls", "lsprotocol"):
            fail("`ckptlint server` needs pygls, which is not installed: pip install 'ckptlint[server]'")
        raise
    collector.tune()
    sys.exit(serve())


@main.command()
@click.argument("target")
@click.argument("script_args", nargs=-1, type=click.UNPROCESSED)
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON instead of text.")
@click.option(
    "--report",
    "report_file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Also write a self-contained HTML report (tables and a memory chart) to this file.",
)
@click.option("--rtol", type=click.FloatRange(min=0), help="Relative tolerance (default: exact for float32 on CPU, else from the dtype).")
@click.option("--atol", type=click.FloatRange(min=0), help="Absolute tolerance (default: exact for float32 on CPU, else from the dtype).")
@click.option(
    "--timeout",
    type=click.FloatRange(min=0, min_open=True),
    default=300.0,
    show_default=True,
    help="Script mode: seconds the script may run before its first training step. "
    "With --nproc: seconds the whole distributed run may take; then every rank is stopped and reported.",
)
@click.option(
    "--repeat",
    type=click.IntRange(min=1),
    default=5,
    show_default=True,
    help="Timed steps of each kind, interleaved, after the warm-up and measured steps: the median counts, "
    "and the overhead is given with its range (script mode times the steps the script trains after each measured "
    "one, and re-runs the script only for the pairs it did not train).",
)
@click.option(
    "--memory-budget",
    "memory_budget",
    metavar="BYTES",
    help="Activation memory the step may hold between forward and backward (bytes, or with KiB/MiB/GiB): "
    "advise the regions to checkpoint that fit it at the least recompute time.",
)
@click.option("--no-peak", is_flag=True, help="Skip the peak-memory measurement (on CPU: one profiled step of each kind).")
@click.option(
    "--nproc",
    type=click.IntRange(min=1),
    help="Run the step on N ranks under torchrun (FSDP set-ups); TARGET's make_case(rank, world_size) builds each rank's model.",
)
@click.option(
    "--backend",
    type=click.Choice(["gloo", "nccl"]),
    help="With --nproc: the torch.distributed backend (default gloo; nccl needs one GPU per rank).",
)
def verify(
    target: str,
    script_args: tuple[str, ...],
    as_json: bool,
    report_file: Path | None,
    rtol: float | None,
    atol: float | None,
    timeout: float,
    repeat: int,
    memory_budget: str | None,
    no_peak: bool,
    nproc: int | None,
    backend: str | None,
) -> None:
    """Replay one training step with and without checkpointing, and compare.

    TARGET is `file.py:make_case` (a function returning `model`, `inputs` and optionally
    `loss_fn`) or a training script `train.py`, run unmodified up to its first training
    step (pass its arguments after `--`). With `--nproc N` the step runs on N ranks under
    torchrun and `make_case(rank, world_size)` builds each rank's (FSDP) model. Exit 0
    pass, 1 fail, 2 error.
    """
    import contextlib
    import traceback

    if backend is not None and nproc is None:
        fail("--backend applies to distributed runs: give --nproc N too")
    budget_bytes = _byte_count(memory_budget) if memory_budget is not None else None
    if budget_bytes is not None and nproc is not None:
        fail("--memory-budget applies to single-process runs, not with --nproc")
    try:
        from ckptlint import runtime_check
    except ModuleNotFoundError as error:
        if (error.name or "").split(".")[0] == "torch":
            fail("`ckptlint verify` needs torch, which is not installed: pip install 'ckptlint[runtime]'")
        raise

    try:
        # The model's and the script's prints go to stderr: stdout carries the report.
        with contextlib.redirect_stdout(sys.stderr):
            if nproc is not None:
                report = runtime_check.verify_distributed(
                    target,
                    nproc,
                    backend=backend or "gloo",
                    timeout=timeout,
                    script_args=tuple(script_args),
                    rtol=rtol,
                    atol=atol,
                    repeat=repeat,
                    measure_peak=not no_peak,
                )
            else:
                report = runtime_check.verify_target(
                    target,
                    tuple(script_args),
                    timeout=timeout,
                    rtol=rtol,
                    atol=atol,
                    repeat=repeat,
                    measure_peak=not no_peak,
                    memory_budget=budget_bytes,
                )
    except runtime_check.VerifyError as error:
        fail(str(error))
    except Exception as error:  # a bug in ckptlint, not in the user's step
        traceback.print_exc()
        fail(f"internal error while verifying {target}: {type(error).__name__}: {error}")

    if report_file is not None:
        try:
            report_file.write_text(report.to_html(), encoding="utf-8")
        except OSError as error:
            fail(f"cannot write {report_file}: {error.strerror or error}")
        click.echo(f"wrote {report_file}", err=True)
    click.echo(report.to_json() if as_json else report.to_text(), nl=False)
    sys.exit(report.exit_code)


_BYTE_UNITS = {"": 1, "b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "kib": 2**10, "mib": 2**20, "gib": 2**30}


def _byte_count(text: str) -> int:
    """`--memory-budget 512MiB` -> 536870912; exit 2 on anything else."""
    stripped = text.strip().lower().replace(" ", "")
    number = stripped.rstrip("kmgib")
    unit = stripped[len(number) :]
    try:
        value = float(number) * _BYTE_UNITS[unit]
    except (ValueError, KeyError):
        fail(f"--memory-budget: {text!r} is not a byte count (e.g. 2000000, 512MiB, 1.5GiB)")
    if value < 0:
        fail("--memory-budget must not be negative")
    return int(value)
