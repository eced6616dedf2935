"""`ckptlint check`, the linter's command: one invocation's options checked, the run, the
report written and the exit code (`CheckRun`; `--watch` lints again on each change). The
click options that build it are in `cli.py`, the thin layer over this and the other
commands; only these two modules touch the terminal.
"""

from __future__ import annotations

import contextlib
import dataclasses
import difflib
import sys
from pathlib import Path
from types import SimpleNamespace

import click

# --output-format -> its module under ckptlint.reporters (imported only when chosen); `text`
# (Ruff's `concise`) and `full` print the summary after the findings.
REPORTERS = {
    "text": "text", "concise": "text", "full": "full", "json": "json_format", "json-lines": "json_lines",
    "sarif": "sarif", "github": "github", "gitlab": "gitlab", "rdjson": "rdjson", "junit": "junit",
}
TEXT_FORMATS = ("text", "concise", "full")

EXIT_CLEAN, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2


def _codes(values: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(code.strip() for value in values for code in value.split(",") if code.strip())


class CheckRun:
    """One `check` invocation: its options, checked once; `once` lints, reports and gives
    the exit code; `watch` lints again on each change."""

    def __init__(self, paths: tuple[Path, ...], options: dict) -> None:
        self.o = o = SimpleNamespace(**options)
        # As in Ruff, `--stdin-filename` without paths reads standard input too.
        self.reading_stdin = paths == (Path("-"),) or (not paths and o.stdin_filename is not None)
        self.paths = paths or (Path("."),)
        if Path("-") in self.paths and not self.reading_stdin:
            fail("`-` (standard input) cannot be combined with other paths")
        if o.stdin_filename is not None and not self.reading_stdin:
            fail("--stdin-filename names standard input: use it with the path `-` (or no path), not with files")
        if o.no_cache and o.cache_dir is not None:
            fail("--no-cache and --cache-dir contradict each other: give one of them")
        if o.exit_zero and o.exit_non_zero_on_fix:
            fail("--exit-zero and --exit-non-zero-on-fix contradict each other: give one of them")
        self._refuse_with("--add-noqa", o.add_noqa, fix=o.fix, diff=o.diff, watch=o.watch, statistics=o.statistics)
        if o.add_noqa and self.reading_stdin:
            fail("--add-noqa edits files: it cannot be used with standard input")
        self._refuse_with("--watch", o.watch, diff=o.diff, statistics=o.statistics, output_file=o.output_file is not None)
        if o.watch and self.reading_stdin:
            fail("--watch lints files: it cannot be used with standard input")
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
                fail(f"{flag} cannot be combined with --{name.replace('_', '-')}")

    def settings(self):
        from ckptlint.config import ConfigError, Overrides, resolve_settings, validate_codes
        from ckptlint.types import DocsUrlError, Severity, docs_url_template

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
                    fail_on=Severity(o.fail_on) if o.fail_on else None,
                ),
            )
            docs_url_template()  # a bad CKPTLINT_DOCS_URL is refused, not ignored
        except (ConfigError, DocsUrlError) as error:
            fail(str(error))
        return settings

    def once(self) -> int:
        """Lint, report, and return the exit code."""
        from ckptlint.limits import AnalysisLimits, LimitError
        from ckptlint.runner import RunOptions, check_paths, check_stdin

        o = self.o
        settings = self.settings()
        if o.show_settings:
            click.echo(_describe_settings(settings))
            self.warn(settings.notices)
            return EXIT_CLEAN
        try:
            limits = AnalysisLimits.from_environment()
        except LimitError as error:
            fail(str(error))
        options = RunOptions(
            fix=o.fix, unsafe_fixes=o.unsafe_fixes, diff=o.diff, jobs=o.jobs, use_cache=not o.no_cache, limits=limits,
            add_noqa=o.add_noqa,
        )
        if self.reading_stdin:
            result = _interruptible(check_stdin, self.stdin_data, o.stdin_filename, settings, options)
        else:
            with self._progress():
                result = _interruptible(check_paths, list(self.paths), settings, options, force_exclude=o.force_exclude)
        result = _with_configured_severities(result, settings)
        report = self._report(result, settings)  # writes standard input's fixed code itself
        if o.silent:
            report = ""
        if o.output_file is not None:
            _write_report(o.output_file, report)  # with --silent empty, as Ruff leaves it
        elif report:
            click.echo(report, nl=False)
        self.warn([*settings.notices, *result.notices])
        for message in [*result.errors, *result.internal_errors]:
            click.echo(click.style("error: ", fg="red", bold=True) + message, err=True)
        return self._exit_code(result, settings)

    def _progress(self):
        """The progress line on a terminal's standard error (`ckptlint.progress`); none with
        -q / -s, or when a machine format goes to standard output."""
        from ckptlint.progress import ProgressLine

        o = self.o
        machine_output = o.output_format not in TEXT_FORMATS and o.output_file is None
        if not ProgressLine.wanted(quiet=o.quiet or o.silent, machine_output_on_stdout=machine_output):
            return contextlib.nullcontext()
        return ProgressLine(sys.stderr, delay=ProgressLine.delay_from_environment())

    def _exit_code(self, result, settings) -> int:
        o = self.o
        if result.errors or result.internal_errors:
            return EXIT_ERROR
        if o.exit_zero or o.add_noqa:  # as Ruff, --add-noqa succeeds once the directives are written
            return EXIT_CLEAN
        if o.diff:
            return EXIT_FINDINGS if result.fixed_count else EXIT_CLEAN
        if o.exit_non_zero_on_fix and o.fix and result.fixed_count:
            return EXIT_FINDINGS
        failing = settings.fail_on.rank
        return EXIT_FINDINGS if any(d.severity.rank >= failing for d in result.diagnostics) else EXIT_CLEAN

    def warn(self, messages) -> None:
        if not (self.o.quiet or self.o.silent):  # Ruff's -q and -s turn warnings off too
            warn(messages)

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
            self.warn(
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


def _with_configured_severities(result, settings):
    """`result` with the configuration's `severity` table applied to its findings."""
    if not settings.severities:
        return result
    files = tuple(dataclasses.replace(f, diagnostics=tuple(settings.with_severities(f.diagnostics))) for f in result.files)
    return dataclasses.replace(result, files=files)


def _split_config_options(values: tuple[str, ...]) -> tuple[Path | None, tuple[str, ...]]:
    """`--config` values: a file (at most one), else TOML `KEY = VALUE` pairs (Ruff's rule:
    an existing file is a file; a value without `=` is a file that must exist)."""
    files = [Path(v) for v in values if Path(v).is_file() or "=" not in v]
    if len(files) > 1:
        fail(f"--config: give one configuration file at most, got {', '.join(map(str, files))}")
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
            fail(f"{option}: expected PATTERN:CODES (e.g. 'tests/*:CKPT001'), got {item!r}")
        try:
            table.setdefault(pattern, []).extend(validate_codes([code], f"{option} [{pattern}]"))
        except ConfigError as error:
            fail(str(error))
    return tuple((p, tuple(codes)) for p, codes in sorted(table.items()))


def _write_report(path: Path, report: str) -> None:
    """The report to --output-file (its directory created, as Ruff does), without colour."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(click.unstyle(report), encoding="utf-8")
    except OSError as error:
        fail(f"--output-file: cannot write {path}: {error.strerror or error}")


class CheckFinished(SystemExit):
    """The exit of a `check` that has written everything (output, fixes, cache)."""


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
        ("severity", "; ".join(f"{c}: {s.value}" for c, s in settings.severities) or "(the rules' own)", "severity"),
        ("fail-on", settings.fail_on.value, "fail-on"),
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
            commands = click.get_current_context().find_root().command.commands  # type: ignore[attr-defined]
            close = difflib.get_close_matches(path.name, sorted(commands), n=1, cutoff=0.75)
            if close:
                click.echo(
                    click.style("hint: ", fg="cyan", bold=True)
                    + f"`{path.name}` is no file or directory; did you mean `ckptlint {close[0]}`?",
                    err=True,
                )


def warn(messages) -> None:
    for message in messages:
        click.echo(click.style("warning: ", fg="yellow", bold=True) + message, err=True)


def fail(message: str) -> None:
    click.echo(click.style("error: ", fg="red", bold=True) + message, err=True)
    sys.exit(EXIT_ERROR)
