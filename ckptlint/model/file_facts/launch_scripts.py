"""Which project files a launch script runs under FSDP: `accelerate launch --config_file
accelerate_config/fsdp.yaml train.py ...` in `scripts/train.sh`, where the config file says
`distributed_type: FSDP`. The Python code then never names FSDP (accelerate wraps the model
in `Accelerator.prepare`), yet every checkpoint it applies runs under FSDP.

The facts, per file: a launch script's `accelerate launch` commands (the entry as written,
the config file as written, the FSDP version the launcher's own options turn on:
`--use_fsdp`, `--fsdp_version 2`, `ACCELERATE_USE_FSDP=true` before the command), and an
accelerate config file's FSDP version. `ProjectIndex.fsdp_uses` joins them: a launch whose
config (or options) turn FSDP on is an FSDP use of the file it runs, found relative to the
project root or to the script's own directory, reaching what that file imports
(`ckptlint.model.project.scripts`). A config named by no launch, a launch of a path the index does
not hold, or a config written with variables the script does not set say nothing.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import TYPE_CHECKING

from ckptlint.model.file_facts.facts import AccelerateLaunch, FileFacts

if TYPE_CHECKING:
    from ckptlint.model.syntax.shell_scripts import Word

# The FSDP versions accelerate takes (`--fsdp_version`, `fsdp_config.fsdp_version`).
_VERSIONS = {"1": 1, "2": 2}
_SHELLS = frozenset({"bash", "sh", "zsh", "dash"})
_MAX_NESTING = 3  # `bash -c` inside `bash -c` ...
_DOUBLE_QUOTE_ESCAPE = re.compile(r'\\([$`"\\])')


def launch_script_facts(text: str, module: str) -> FileFacts:
    """The `accelerate launch` commands of a shell script that run a Python entry point,
    those of the scripts it runs as `bash -c "..."` (a SLURM job's `srun ... bash -c`) too."""
    checkpointing = "gradient_checkpointing" in text
    if "accelerate" not in text and "torch" not in text and not checkpointing:
        return FileFacts(module)
    launches = tuple(_launches(text, 0, depth=0)) if "accelerate" in text else ()
    return FileFacts(
        module,
        launches=launches,
        parallel_launches=tuple(_parallel_launches(text)),
        checkpointing_launches=tuple(_checkpointing_launches(text)) if checkpointing else (),
    )


def _checkpointing_launches(text: str) -> Iterator[tuple[str, int]]:
    """Commands that run a Python script of the project with `--gradient_checkpointing` on
    (`True`, `true`, `1`, or bare: `HfArgumentParser` reads a bare boolean flag as True),
    whatever the launcher (`python`, `torchrun`, `deepspeed`, `accelerate launch`): (the
    script as written, the flag's line). CKPT020: the script's `TrainingArguments` come from
    the command line, so this is where its `Trainer` is told to checkpoint."""
    from ckptlint.model.syntax.launch_commands import hf_bool, option_value, read_launch
    from ckptlint.model.syntax.shell_scripts import parse_script

    for command in parse_script(text):
        launch = read_launch(command)
        if launch is None or launch.entry is None or not launch.entry.value or launch.entry_is_module:
            continue
        if launch.launcher not in ("python", "torchrun", "accelerate", "deepspeed"):
            continue  # LLaMA-Factory, axolotl, TRL: their own programs
        flags = [option for option in launch.options if option.name == "gradient_checkpointing"]
        if flags and hf_bool(option_value(flags[-1])) is True:  # the last one given wins
            yield launch.entry.value, flags[-1].flag.span.start.row


def _parallel_launches(text: str) -> Iterator[tuple[str, int]]:
    """`torchrun` / `python -m torch.distributed.{run,launch}` with `--nproc_per_node` above 1
    (a literal: a variable's value is not known), `accelerate launch
    --multi_gpu` or `--num_processes` above 1, running a script without `--deepspeed` or
    `--fsdp` among its options (CKPT006: the Trainer's DDP on several processes)."""
    from ckptlint.model.syntax.launch_commands import read_launch
    from ckptlint.model.syntax.shell_scripts import parse_script

    for command in parse_script(text):
        launch = read_launch(command)
        if launch is None or launch.entry is None or not launch.entry.value or launch.entry_is_module:
            continue
        if any(option.name in ("deepspeed", "fsdp") for option in launch.options):
            continue
        if launch.launcher == "torchrun":
            several = _above_one(launch.launcher_option("nproc_per_node"))
        elif launch.launcher == "accelerate":
            several = launch.launcher_option("multi_gpu") is not None or _above_one(launch.launcher_option("num_processes"))
            several = several and launch.launcher_option("use_deepspeed", "use_fsdp") is None
        else:
            several = False
        if several:
            yield launch.entry.value, command.line


def _above_one(option) -> bool:
    if option is None or option.value is None:
        return False
    value = option.value.value if option.value is not option.flag else (
        option.value.value.split("=", 1)[1] if option.value.value is not None and "=" in option.value.value else None
    )
    if value is None:
        return False  # `--nproc_per_node $GPUS`: not known
    return (value.isdigit() and int(value) > 1) or value in ("gpu", "auto")


def _launches(text: str, row_offset: int, *, depth: int) -> Iterator[AccelerateLaunch]:
    from ckptlint.model.syntax.launch_commands import hf_bool, option_value, read_launch
    from ckptlint.model.syntax.shell_scripts import parse_script

    for command in parse_script(text):
        inner = _shell_script_argument(command.words)
        if inner is not None:
            nested = _quoted_script(text, inner.span) if depth < _MAX_NESTING else None
            if nested is not None and "accelerate" in nested:
                yield from _launches(nested, row_offset + inner.span.start.row - 1, depth=depth + 1)
            continue
        launch = read_launch(command)
        if launch is None or launch.launcher != "accelerate" or launch.entry is None or not launch.entry.value:
            continue
        config = launch.launcher_option("config_file")
        written = config.value.value if config is not None and config.value is not None else None
        if config is not None and not written:
            continue  # a config file the script computes: its FSDP is not known
        on = launch.launcher_option("use_fsdp")
        environment = dict(command.assignments).get("ACCELERATE_USE_FSDP")
        version_option = launch.launcher_option("fsdp_version")
        version = _VERSIONS.get(option_value(version_option) or "", 1) if version_option is not None else 1
        launcher_fsdp = (
            (on is not None and hf_bool(option_value(on)) is not False)
            or (environment is not None and environment.value is not None and hf_bool(environment.value) is True)
        )
        yield AccelerateLaunch(
            launch.entry.value, launch.entry_is_module, written or "", row_offset + command.line,
            version if launcher_fsdp else 0,
        )


def _shell_script_argument(words) -> Word | None:
    """The `<script>` of `bash -c <script>`, after any prefix (`srun --nodes=$N ... bash -c`,
    whose options may hold variables the script does not set)."""
    for shell, flag, script in zip(words, words[1:], words[2:]):
        if (shell.value or "").rsplit("/", 1)[-1] in _SHELLS and flag.value == "-c":
            return script
    return None


def _quoted_script(text: str, span) -> str | None:
    """The script a quoted `-c` argument holds, as bash reads it: inside double quotes a
    backslash before `$`, `"` or another backslash is dropped (a backslash-newline is kept:
    the inner script reads it as the same line continuation, on the same rows); None for
    an argument that is not one quoted string."""
    lines = text.split("\n")
    start = sum(len(line) + 1 for line in lines[: span.start.row - 1]) + span.start.column - 1
    end = sum(len(line) + 1 for line in lines[: span.end.row - 1]) + span.end.column - 1
    written = text[start:end]
    if len(written) < 2 or written[0] not in "\"'" or written[-1] != written[0]:
        return None
    body = written[1:-1]
    return _DOUBLE_QUOTE_ESCAPE.sub(r"\1", body) if written[0] == '"' else body


def accelerate_fsdp_version(documents) -> int:
    """The FSDP version an accelerate config file turns on (`distributed_type: FSDP`), 0 when
    it is none (or shards otherwise)."""
    from ckptlint.model.library.fsdp_settings import accelerate_fsdp, is_accelerate_config

    for document in documents:
        if is_accelerate_config(document.settings):
            fsdp = accelerate_fsdp(document.settings)
            return fsdp.version if fsdp is not None else 0
    return 0
