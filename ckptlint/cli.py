"""The command line: a thin click layer over the runner and the reporters.

`ckptlint src/` means `ckptlint check src/`; exit codes are 0 (nothing found, or all
fixed), 1 (findings remain; with --diff, fixes pending) and 2 (usage, configuration or
internal error).
"""

from __future__ import annotations

import dataclasses
import difflib
import os
import sys
from pathlib import Path
from types import SimpleNamespace

import click

from ckptlint import __version__

EXIT_CLEAN, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2


class DefaultToCheck(click.Group):
    """A group whose default command is `check`, so `ckptlint src/` works as in Ruff."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if not args or (args[0] not in self.commands and args[0] not in ("--help", "-h", "--version")):
            args = ["check", *args]
        return super().parse_args(ctx, args)


def _codes(values: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(code.strip() for value in values for code in value.split(",") if code.strip())


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


# --output-format -> its module under ckptlint.reporters (imported only when chosen); `text`
# (Ruff's `concise`) and `full` print the summary after the findings.
REPORTERS = {
    "text": "text", "concise": "text", "full": "full", "json": "json_format", "json-lines": "json_lines",
    "sarif": "sarif", "github": "github", "gitlab": "gitlab", "rdjson": "rdjson", "junit": "junit",
}
TEXT_FORMATS = ("text", "concise", "full")


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
    run = CheckRun(paths, options)
    if options["watch"]:
        run.watch()
    raise CheckFinished(run.once())


class CheckRun:
    """One `check` invocation: its options, checked once; `once` lints, reports and gives
    the exit code; `watch` lints again on each change."""

    def __init__(self, paths: tuple[Path, ...], options: dict) -> None:
        self.o = o = SimpleNamespace(**options)
        # As in Ruff, `--stdin-filename` without paths reads standard input too.
        self.reading_stdin = paths == (Path("-"),) or (not paths and o.stdin_filename is not None)
        self.paths = paths or (Path("."),)
        if Path("-") in self.paths and not self.reading_stdin:
            _fail("`-` (standard input) cannot be combined with other paths")
        if o.stdin_filename is not None and not self.reading_stdin:
            _fail("--stdin-filename names standard input: use it with the path `-` (or no path), not with files")
        if o.no_cache and o.cache_dir is not None:
            _fail("--no-cache and --cache-dir contradict each other: give one of them")
        if o.exit_zero and o.exit_non_zero_on_fix:
            _fail("--exit-zero and --exit-non-zero-on-fix contradict each other: give one of them")
        self._refuse_with("--add-noqa", o.add_noqa, fix=o.fix, diff=o.diff, watch=o.watch, statistics=o.statistics)
        if o.add_noqa and self.reading_stdin:
            _fail("--add-noqa edits files: it cannot be used with standard input")
        self._refuse_with("--watch", o.watch, diff=o.diff, statistics=o.statistics, output_file=o.output_file is not None)
        if o.watch and self.reading_stdin:
            _fail("--watch lints files: it cannot be used with standard input")
        ctx = click.get_current_context()
        if o.color != "auto":
            ctx.color = o.color == "always"
        if o.output_file is not None:
            ctx.color = False  # as Ruff: a report file gets no escape codes
        _hint_mistyped_commands(self.paths)
        self.config_file, self.inline_config = _split_config_options(o.config_options)
        self.start = Path(o.stdin_filename).parent if self.reading_stdin and o.stdin_filename else self.paths[0]
        self.stdin_data = sys.stdin.buffer.read() if self.reading_stdin else b""

    @staticmethod
    def _refuse_with(flag: str, given: bool, **others: bool) -> None:
        for name, other in others.items():
            if given and other:
                _fail(f"{flag} cannot be combined with --{name.replace('_', '-')}")

    def settings(self):
        from ckptlint.config import ConfigError, Overrides, resolve_settings, validate_codes
        from ckptlint.types import DocsUrlError, docs_url_template

        o = self.o
        try:
            # Validated (and upper-cased) before use: `--select ckpt001` means CKPT001.
            selected, ignored, extended = (
                validate_codes(_codes(values), option)
                for option, values in (("--select", o.select), ("--ignore", o.ignore), ("--extend-select", o.extend_select))
            )
            settings = resolve_settings(
                self.start if self.start.exists() else Path("."),
                Overrides(
                    config_file=self.config_file,
                    select=selected or None,
                    ignore=ignored,
                    extend_select=extended,
                    target_versions=o.target_version,
                    cache_dir=o.cache_dir.resolve() if o.cache_dir else None,
                    exclude=_codes(o.exclude) or None,
                    extend_exclude=_codes(o.extend_exclude),
                    per_file_ignores=_per_file_ignores(o.per_file_ignores, "--per-file-ignores") if o.per_file_ignores else None,
                    extend_per_file_ignores=_per_file_ignores(o.extend_per_file_ignores, "--extend-per-file-ignores"),
                    inline=self.inline_config,
                ),
            )
            docs_url_template()  # a bad CKPTLINT_DOCS_URL is refused, not ignored
        except (ConfigError, DocsUrlError) as error:
            _fail(str(error))
        return settings

    def once(self) -> int:
        """Lint, report, and return the exit code."""
        from ckptlint.limits import AnalysisLimits, LimitError
        from ckptlint.runner import RunOptions, check_paths, check_stdin

        o = self.o
        settings = self.settings()
        if o.show_settings:
            click.echo(_describe_settings(settings))
            self._warn(settings.notices)
            return EXIT_CLEAN
        try:
            limits = AnalysisLimits.from_environment()
        except LimitError as error:
            _fail(str(error))
        options = RunOptions(
            fix=o.fix, unsafe_fixes=o.unsafe_fixes, diff=o.diff, jobs=o.jobs, use_cache=not o.no_cache, limits=limits,
            add_noqa=o.add_noqa,
        )
        if self.reading_stdin:
            result = _interruptible(check_stdin, self.stdin_data, o.stdin_filename, settings, options)
        else:
            result = _interruptible(check_paths, list(self.paths), settings, options, force_exclude=o.force_exclude)
        report = self._report(result, settings)  # writes standard input's fixed code itself
        if o.silent:
            report = ""
        if o.output_file is not None:
            _write_report(o.output_file, report)  # with --silent empty, as Ruff leaves it
        elif report:
            click.echo(report, nl=False)
        self._warn([*settings.notices, *result.notices])
        for message in [*result.errors, *result.internal_errors]:
            click.echo(click.style("error: ", fg="red", bold=True) + message, err=True)
        return self._exit_code(result)

    def _exit_code(self, result) -> int:
        o = self.o
        if result.errors or result.internal_errors:
            return EXIT_ERROR
        if o.exit_zero or o.add_noqa:  # as Ruff, --add-noqa succeeds once the directives are written
            return EXIT_CLEAN
        if o.diff:
            return EXIT_FINDINGS if result.fixed_count else EXIT_CLEAN
        if o.exit_non_zero_on_fix and o.fix and result.fixed_count:
            return EXIT_FINDINGS
        return EXIT_FINDINGS if result.diagnostics else EXIT_CLEAN

    def _warn(self, messages) -> None:
        if not (self.o.quiet or self.o.silent):  # Ruff's -q and -s turn warnings off too
            _warn(messages)

    def _report(self, result, settings) -> str:
        """What goes to standard output (or --output-file): the findings in the chosen
        format, with the text formats' summary; with --diff, the diff. The fixed code of
        standard input goes to standard output itself, the summary then to stderr."""
        from ckptlint.reporters import text

        o = self.o
        diagnostics = result.diagnostics
        fixed = result.fixed_count
        stdout_is_code = self.reading_stdin and o.fix and not o.diff
        if o.add_noqa:
            added = result.added_noqa_count
            if added and not (o.quiet or o.silent):  # as Ruff: nothing when nothing was added
                click.echo(f"Added {added} noqa directive{'' if added == 1 else 's'}.", err=True)
            self._warn(
                f"{d.path}{f':cell {d.cell}' if d.cell else ''}:{d.location.row}:{d.location.column}: "
                f"{d.code} left without a `# noqa` (no comment can end that line, or the file is not Python)"
                for d in diagnostics
            )
            return ""
        parts: list[str] = []
        if o.diff:
            for file in result.files:
                if file.fixed_source is not None and file.source is not None:
                    parts.append(_unified_diff(file.path, file.source, file.fixed_source))
        elif stdout_is_code:
            # The code goes back byte for byte as it came (encoding, BOM, line endings), and
            # unchanged when it could not be decoded or fixed: an editor replaces its buffer
            # with whatever is printed here.
            sys.stdout.flush()
            stream = sys.stdout.buffer
            stream.write(_fixed_stdin(self.stdin_data, result.files[0].fixed_source))
            stream.flush()
        report = self._findings(result, settings, diagnostics, stdout_is_code)
        if stdout_is_code:
            if report and not o.silent:
                click.echo(report, nl=False, err=True)
        else:
            parts.append(report)
        if o.output_format in TEXT_FORMATS and not (o.quiet or o.silent):
            extra = []
            if o.show_fixes:
                extra.append(text.render_applied_fixes(result.files, diff_mode=o.diff))
            summary = text.summarize(diagnostics, fixed, unsafe_fixes=o.unsafe_fixes, fix_mode=o.fix and not o.diff, diff_mode=o.diff)
            if result.hidden:
                count, because = text.hidden_by_versions(result.hidden)
                summary = dataclasses.replace(summary, not_shown=count, not_shown_because=because)
            extra.append(summary.render())
            if o.diff or stdout_is_code:
                click.echo("".join(extra), nl=False, err=True)
            else:
                parts += extra
        return "".join(parts)

    def _findings(self, result, settings, diagnostics, stdout_is_code: bool) -> str:
        from ckptlint.reporters import ReportContext, text

        o = self.o
        if o.diff:
            return ""  # as in Ruff, --diff prints the diff and nothing else on stdout
        if o.statistics:
            return text.render_statistics(diagnostics, unsafe_fixes=o.unsafe_fixes, as_json=o.output_format == "json")
        if o.output_format in ("text", "concise"):
            return text.render_diagnostics(diagnostics, unsafe_fixes=o.unsafe_fixes)
        import importlib

        from ckptlint.discovery import repository_root

        # Findings the target versions hide: in the SARIF log and as a GitHub notice, and
        # on stderr for every machine format (a JSON list has no place for them).
        not_shown = text.not_shown_sentence(*text.hidden_by_versions(result.hidden)) if result.hidden else ""
        reporter = importlib.import_module(f"ckptlint.reporters.{REPORTERS[o.output_format]}")
        context = ReportContext(
            repository_root=repository_root(Path.cwd(), settings.project_root),
            source=_SourceReader(result, self.stdin_data if self.reading_stdin else None),
            unsafe_fixes=o.unsafe_fixes,
        )
        rendered = reporter.render(diagnostics, not_shown=not_shown if o.output_format != "full" else "", context=context)
        if not_shown and o.output_format != "full" and not (o.quiet or o.silent):
            click.echo(click.style("note: ", fg="cyan", bold=True) + not_shown, err=True)
        return rendered

    def watch(self) -> None:
        """Ruff's watch mode: lint, then lint again on each change, until interrupted."""
        import datetime

        from ckptlint.watch import watch, watched_paths

        def say(message: str) -> None:
            if not self.o.silent:
                click.echo(f"[{datetime.datetime.now():%H:%M:%S}] {message}", err=True)

        def lint() -> None:
            if sys.stdout.isatty():
                click.clear()
            try:
                self.once()
            except SystemExit as stop:  # a configuration error is said, and watched until fixed
                if stop.code != EXIT_ERROR:
                    raise
            sys.stdout.flush()

        def watched():
            try:
                return watched_paths(list(self.paths), self.settings(), force_exclude=self.o.force_exclude)
            except SystemExit as stop:  # the configuration as it is now is said by the run
                if stop.code != EXIT_ERROR:
                    raise
                return [str(path.resolve()) for path in self.paths]

        say("Starting linter in watch mode...")
        try:
            watch(lint, watched, on_change=lambda changed: say("File change detected..."))
        except KeyboardInterrupt:
            raise CheckFinished(EXIT_CLEAN) from None


class _SourceReader:
    """The text a diagnostic's rows are in, as reported: standard input's (fixed, if it
    was), the fixed text of a file fixed in memory (--diff), the file itself, a notebook's
    cell; read once per file."""

    def __init__(self, result, stdin_data: bytes | None) -> None:
        self._texts: dict[str, str | None] = {}
        for file in result.files:
            text = file.fixed_source if file.fixed_source is not None else file.source
            if text is not None:
                self._texts[file.path] = text
        if stdin_data is not None and result.files and result.files[0].path not in self._texts:
            from ckptlint.source import UndecodableSource, decode_source

            try:
                self._texts[result.files[0].path] = decode_source(stdin_data).text
            except UndecodableSource:
                self._texts[result.files[0].path] = None

    def __call__(self, diagnostic) -> str | None:
        path = diagnostic.path
        if path not in self._texts:
            from ckptlint.source import UndecodableSource, decode_source, read_source_bytes

            try:
                self._texts[path] = decode_source(read_source_bytes(path)).text
            except (OSError, UndecodableSource):
                self._texts[path] = None
        text = self._texts[path]
        if text is None or diagnostic.cell is None:
            return text
        from ckptlint.notebooks import NotebookError, read_notebook

        try:
            return read_notebook(text).cell_sources().get(diagnostic.cell)
        except NotebookError:
            return None


def _split_config_options(values: tuple[str, ...]) -> tuple[Path | None, tuple[str, ...]]:
    """`--config` values: a file (at most one), else TOML `KEY = VALUE` pairs (Ruff's rule:
    an existing file is a file; a value without `=` is a file that must exist)."""
    files = [Path(v) for v in values if Path(v).is_file() or "=" not in v]
    if len(files) > 1:
        _fail(f"--config: give one configuration file at most, got {', '.join(map(str, files))}")
    return (files[0] if files else None), tuple(v for v in values if not (Path(v).is_file() or "=" not in v))


def _per_file_ignores(values: tuple[str, ...], option: str) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """`--per-file-ignores 'tests/*:CKPT001,scripts/*:CKPT020'` (Ruff's PATTERN:CODE pairs; a
    bare code after a pair adds to that pair's pattern) -> (pattern, codes) by pattern."""
    from ckptlint.config import ConfigError, validate_codes

    table: dict[str, list[str]] = {}
    pattern = None
    for item in _codes(values):
        if ":" in item:
            pattern, _, code = item.rpartition(":")
            pattern = pattern.strip()
        else:
            code = item
        if not pattern:
            _fail(f"{option}: expected PATTERN:CODES (e.g. 'tests/*:CKPT001'), got {item!r}")
        try:
            table.setdefault(pattern, []).extend(validate_codes([code], f"{option} [{pattern}]"))
        except ConfigError as error:
            _fail(str(error))
    return tuple((p, tuple(codes)) for p, codes in sorted(table.items()))


def _write_report(path: Path, report: str) -> None:
    """The report to --output-file (its directory created, as Ruff does), without colour."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(click.unstyle(report), encoding="utf-8")
    except OSError as error:
        _fail(f"--output-file: cannot write {path}: {error.strerror or error}")


class CheckFinished(SystemExit):
    """The exit of a `check` that has written everything (output, fixes, cache)."""


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


def _interruptible(run, *args, **kwargs):
    """Run `run`; SIGINT or SIGTERM ends it at once with exit status 128 + the signal (130,
    143). The first signal unwinds the run like Ctrl-C (worker processes are killed, a fix
    being written is finished or its temporary file removed); further signals are ignored
    so that this clean-up itself is never cut short."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        return run(*args, **kwargs)  # signal handlers can only be set in the main thread
    received: list[int] = []

    def stop(signum, frame):
        received.append(signum)
        for name in (signal.SIGINT, signal.SIGTERM):
            signal.signal(name, signal.SIG_IGN)
        raise KeyboardInterrupt

    previous = {name: signal.signal(name, stop) for name in (signal.SIGINT, signal.SIGTERM)}
    try:
        return run(*args, **kwargs)
    except KeyboardInterrupt:
        click.echo("ckptlint: interrupted", err=True)
        sys.exit(128 + (received[0] if received else signal.SIGINT))
    finally:
        for name, handler in previous.items():
            signal.signal(name, handler)


def _fixed_stdin(data: bytes, fixed_source: str | None) -> bytes:
    if fixed_source is None:
        return data
    from ckptlint.source import decode_source

    return decode_source(data).encode(fixed_source)


def _unified_diff(path: str, old: str, new: str) -> str:
    if path.lower().endswith(".ipynb"):  # the code of each changed cell, not the file's JSON
        from ckptlint.notebooks import cell_diff

        return cell_diff(path, old, new)
    lines = difflib.unified_diff(
        old.splitlines(keepends=True), new.splitlines(keepends=True), fromfile=f"a/{path}", tofile=f"b/{path}"
    )
    return "".join(line if line.endswith(("\n", "\r")) else line + "\n\\ No newline at end of file\n" for line in lines)


def _describe_settings(settings) -> str:
    """Every setting, each followed by where it came from (the command line, the config
    file, the default); the target versions last, each with its source and, for a declared
    dependency, the other declarations of the package."""
    from ckptlint.rule_codes import all_codes

    def listed(values) -> str:
        return ", ".join(values) or "(none)"

    shown = [
        ("selected rules", ", ".join(c for c in all_codes() if c in settings.enabled_codes) or "(none)", "select"),
        ("exclude", listed(settings.exclude), "exclude"),
        ("extend-exclude", listed(settings.extend_exclude), "extend-exclude"),
        ("include", listed(settings.include), "include"),
        ("per-file-ignores", "; ".join(f"{p}: {', '.join(c)}" for p, c in settings.per_file_ignores) or "(none)", "per-file-ignores"),
        ("stateful-modules", listed(settings.stateful_modules), "stateful-modules"),
        ("checkpoint-functions", listed(settings.checkpoint_functions), "checkpoint-functions"),
        ("fsdp", settings.fsdp, "fsdp"),
        ("respect-gitignore", "true" if settings.respect_gitignore else "false", "respect-gitignore"),
        ("cache dir", str(settings.cache_dir), "cache-dir"),
    ]
    lines = [
        f"project root:      {settings.origins.get('project root', settings.project_root)}",
        f"config file:       {settings.origins.get('config file', settings.config_file or 'none found (defaults)')}",
    ]
    for label, value, key in shown:
        lines.append(f"{label + ':':<18} {value}")
        lines.append(f"  from:            {settings.origins.get(key, 'default')}")
    lines.append("target versions:")
    for package, target in settings.target_versions.all().items():
        declared = settings.target_versions.declared_range(package) if target is None else None
        lines.append(f"  {package:<13}  {target.describe() if target else declared.describe() if declared else 'unknown'}")
        lines.extend(f"  {'':<13}    also declared: {origin}" for origin in (target.also_declared if target else ()))
    return "\n".join(lines)


def _hint_mistyped_commands(paths: tuple[Path, ...]) -> None:
    """`ckptlint rules` lints a path `rules` (check is the default command): when no such
    path exists and the word is close to a command's name, say which command it may mean.
    The path is still reported as unreadable (CKPT901), as any other missing path."""
    import difflib

    for path in paths:
        if len(path.parts) == 1 and not path.suffix and not path.exists():
            close = difflib.get_close_matches(path.name, sorted(main.commands), n=1, cutoff=0.75)
            if close:
                click.echo(
                    click.style("hint: ", fg="cyan", bold=True)
                    + f"`{path.name}` is no file or directory; did you mean `ckptlint {close[0]}`?",
                    err=True,
                )


def _warn(messages) -> None:
    for message in messages:
        click.echo(click.style("warning: ", fg="yellow", bold=True) + message, err=True)


def _fail(message: str) -> None:
    click.echo(click.style("error: ", fg="red", bold=True) + message, err=True)
    sys.exit(EXIT_ERROR)


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
            _fail(f"unknown rule {code!r}; `ckptlint rule --all` lists them")
        selected = [found]
    else:
        _fail("give a rule code (e.g. `ckptlint rule CKPT001`) or --all")
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
        _fail(str(error))
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
            _fail("`ckptlint server` needs pygls, which is not installed: pip install 'ckptlint[server]'")
        raise
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
        _fail("--backend applies to distributed runs: give --nproc N too")
    budget_bytes = _byte_count(memory_budget) if memory_budget is not None else None
    if budget_bytes is not None and nproc is not None:
        _fail("--memory-budget applies to single-process runs, not with --nproc")
    try:
        from ckptlint import runtime_check
    except ModuleNotFoundError as error:
        if (error.name or "").split(".")[0] == "torch":
            _fail("`ckptlint verify` needs torch, which is not installed: pip install 'ckptlint[runtime]'")
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
        _fail(str(error))
    except Exception as error:  # a bug in ckptlint, not in the user's step
        traceback.print_exc()
        _fail(f"internal error while verifying {target}: {type(error).__name__}: {error}")

    if report_file is not None:
        try:
            report_file.write_text(report.to_html(), encoding="utf-8")
        except OSError as error:
            _fail(f"cannot write {report_file}: {error.strerror or error}")
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
        _fail(f"--memory-budget: {text!r} is not a byte count (e.g. 2000000, 512MiB, 1.5GiB)")
    if value < 0:
        _fail("--memory-budget must not be negative")
    return int(value)
