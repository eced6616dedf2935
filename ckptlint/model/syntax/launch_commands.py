"""What a launch command starts: the launcher and its options, the Python entry point, the
recipe files it is given and the flags it passes.

Recognised: `python [-u] script.py | -m module`, `torchrun` / `python -m torch.distributed.run`
(and `.launch`), `accelerate launch`, `deepspeed`, `llamafactory-cli train` (and `lmf`),
`axolotl train`, `trl sft|dpo|grpo|...`. The program's arguments are read the way
`HfArgumentParser` reads them: `--name value`, `--name=value`, a bare `--name` (a boolean
flag), and a positional `.yaml` / `.yml` / `.json` file holding the arguments.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ckptlint.model.syntax.shell_scripts import Command, Word, command_words

RECIPE_FILE = re.compile(r"\.(ya?ml|json)$", re.IGNORECASE)
_PYTHON = re.compile(r"^(?:.*/)?python(?:[23](?:\.\d+)?)?$")
_TORCH_RUN_MODULES = ("torch.distributed.run", "torch.distributed.launch")
# Launcher options that take no value (everything else starting with `-` takes one unless
# written `--opt=value`).
_LAUNCHER_SWITCHES = frozenset(
    {
        "--standalone", "--no-python", "--no_python", "--module", "-m", "--run-path", "--run_path",
        "--use_fsdp", "--use-fsdp", "--use_deepspeed", "--use-deepspeed", "--multi_gpu", "--multi-gpu",
        "--cpu", "--tpu", "--quiet", "-q", "--debug", "--no_local_rank", "--no-local-rank",
        "--monitor_interval", "--same_network", "--dynamo_use_fullgraph", "--dynamo_use_dynamic",
        "--enable_cpu_affinity", "--fsdp_offload_params", "--fsdp_use_orig_params",
        "--fsdp_cpu_ram_efficient_loading", "--fsdp_sync_module_states", "--fsdp_activation_checkpointing",
        "--use_xpu", "--mixed_precision_no", "--autotuning", "--force_multi", "--bind_cores_to_rank",
    }
)
# `--opt value` launcher options whose value may be omitted before the script (accelerate's
# boolean FSDP options accept `--fsdp_activation_checkpointing true` and a bare switch).
_OPTIONAL_VALUES = frozenset({"true", "false", "True", "False", "1", "0", "yes", "no"})
_HF_BOOLEANS = {"yes": True, "true": True, "t": True, "y": True, "1": True,
                "no": False, "false": False, "f": False, "n": False, "0": False}  # fmt: skip


@dataclass(frozen=True)
class Option:
    """`--name value`: the name as the program sees it (dashes as underscores), the word
    naming it, and the value word (None for a bare flag)."""

    name: str
    flag: Word
    value: Word | None


@dataclass(frozen=True)
class Launch:
    command: Command
    launcher: str  # python, torchrun, accelerate, deepspeed, llamafactory, axolotl, trl
    entry: Word | None  # the script, or the module after `-m`
    entry_is_module: bool
    launcher_options: tuple[Option, ...]
    recipe_files: tuple[Word, ...]  # recipe files given to the program
    options: tuple[Option, ...]  # the program's own flags
    overrides: tuple[Option, ...] = ()  # LLaMA-Factory's `key=value` words

    def launcher_option(self, *names: str) -> Option | None:
        found = [option for option in self.launcher_options if option.name in names]
        return found[-1] if found else None


def hf_bool(value: object) -> bool | None:
    """A value as `HfArgumentParser` / YAML give it, as a boolean (None: not one)."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str):
        return _HF_BOOLEANS.get(value.strip().lower())
    return None


def _name(word: Word) -> str | None:
    if word.value is None or not word.value.startswith("-"):
        return None
    return word.value.lstrip("-").split("=", 1)[0].replace("-", "_")


def _options(words: list[Word]) -> tuple[list[Option], list[Word], list[Option]]:
    """A program's arguments: `--flags` (with values), positional words and `key=value` words."""
    options: list[Option] = []
    positional: list[Word] = []
    overrides: list[Option] = []
    i = 0
    while i < len(words):
        word = words[i]
        name = _name(word)
        if name is None:
            value = word.value
            if value is not None and "=" in value and re.match(r"^[A-Za-z_][\w.]*=", value):
                key, _, _ = value.partition("=")
                overrides.append(Option(key, word, word))
            else:
                positional.append(word)
            i += 1
            continue
        if word.value is not None and "=" in word.value:
            options.append(Option(name, word, word))
            i += 1
        elif i + 1 < len(words) and (words[i + 1].value is None or not words[i + 1].value.startswith("--")):
            options.append(Option(name, word, words[i + 1]))
            i += 2
        else:
            options.append(Option(name, word, None))
            i += 1
    return options, positional, overrides


def option_value(option: Option) -> str | None:
    """The option's value text (`"true"` for a bare flag); None when not known."""
    if option.value is None:
        return "true"
    if option.value is option.flag:
        return option.value.value.split("=", 1)[1] if option.value.value is not None else None
    return option.value.value


def _launcher_options(words: list[Word]) -> tuple[list[Option], int]:
    """Options before the script: returns them and the index of the first other word."""
    options = []
    i = 0
    while i < len(words) and words[i].value is not None and words[i].value.startswith("-"):
        word = words[i]
        name = word.value.split("=", 1)[0]
        if "=" in word.value:
            options.append(Option(_name(word), word, word))
            i += 1
        elif name in _LAUNCHER_SWITCHES:
            if name in ("-m", "--module") and not (i + 1 < len(words) and (words[i + 1].value or "").startswith("-")):
                break  # `-m module`; a `-m` followed by more options marks the entry as a module
            following = words[i + 1].value if i + 1 < len(words) else None
            if following in _OPTIONAL_VALUES:
                options.append(Option(_name(word), word, words[i + 1]))
                i += 2
            else:
                options.append(Option(_name(word), word, None))
                i += 1
        else:
            options.append(Option(_name(word), word, words[i + 1] if i + 1 < len(words) else None))
            i += 2
    return options, i


def _program(command: Command, launcher: str, launcher_options: list[Option], rest: list[Word]) -> Launch | None:
    """The entry point (`script.py` or `-m module`, also `accelerate launch -m --config_file
    c.yaml module`) and its arguments."""
    if rest and rest[0].value in ("-m", "--module") and len(rest) > 1:
        entry, module, arguments = rest[1], True, rest[2:]
    elif rest and any(option.flag.value in ("-m", "--module") for option in launcher_options):
        entry, module, arguments = rest[0], True, rest[1:]
    elif rest:
        entry, module, arguments = rest[0], False, rest[1:]
    else:
        return None
    options, positional, overrides = _options(list(arguments))
    recipes = [word for word in positional if word.value is not None and RECIPE_FILE.search(word.value)]
    # `--config recipe.yaml`: TRL's parser (and scripts built on it) read their arguments from it.
    configs = [o for o in options if o.name == "config" and o.value is not None and RECIPE_FILE.search(o.value.value or "")]
    recipes.extend(o.value for o in configs)
    options = [o for o in options if o not in configs]
    return Launch(
        command, launcher, entry, module, tuple(launcher_options), tuple(recipes), tuple(options), tuple(overrides)
    )


def read_launch(command: Command) -> Launch | None:
    """The training launch a command is, if it is one."""
    words = list(command_words(command))
    if not words or words[0].value is None:
        return None
    program = words[0].value.rsplit("/", 1)[-1]
    if _PYTHON.match(words[0].value):
        rest = words[1:]
        while rest and rest[0].value in ("-u", "-O", "-B", "-W", "-X") :
            rest = rest[2:] if rest[0].value in ("-W", "-X") else rest[1:]
        if len(rest) > 1 and rest[0].value == "-m" and rest[1].value in _TORCH_RUN_MODULES:
            options, start = _launcher_options(rest[2:])
            return _program(command, "torchrun", options, rest[2 + start :])
        if len(rest) > 1 and rest[0].value == "-m" and rest[1].value == "accelerate.commands.launch":
            options, start = _launcher_options(rest[2:])
            return _program(command, "accelerate", options, rest[2 + start :])
        return _program(command, "python", [], rest)
    if program == "torchrun":
        options, start = _launcher_options(words[1:])
        return _program(command, "torchrun", options, words[1 + start :])
    if program == "deepspeed":
        options, start = _launcher_options(words[1:])
        return _program(command, "deepspeed", options, words[1 + start :])
    if program == "accelerate" and len(words) > 1 and words[1].value == "launch":
        options, start = _launcher_options(words[2:])
        return _program(command, "accelerate", options, words[2 + start :])
    if program in ("llamafactory-cli", "lmf") and len(words) > 1 and words[1].value == "train":
        options, positional, overrides = _options(words[2:])
        recipes = tuple(w for w in positional if w.value is not None and RECIPE_FILE.search(w.value))
        return Launch(command, "llamafactory", None, False, (), recipes, tuple(options), tuple(overrides))
    if program == "axolotl" and len(words) > 1 and words[1].value == "train":
        launcher_options, start = _launcher_options(words[2:])
        options, positional, overrides = _options(words[2 + start :])
        recipes = tuple(w for w in positional if w.value is not None and RECIPE_FILE.search(w.value))
        return Launch(command, "axolotl", None, False, (), recipes, tuple(launcher_options + options), ())
    if program == "trl" and len(words) > 1:
        options, positional, overrides = _options(words[2:])
        config = [o.value for o in options if o.name == "config" and o.value is not None]
        recipes = tuple(w for w in config if w.value is not None)
        return Launch(command, "trl", words[1], False, (), recipes, tuple(o for o in options if o.name != "config"), ())
    return None
