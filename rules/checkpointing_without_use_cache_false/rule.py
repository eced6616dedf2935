from __future__ import annotations

from ckptlint.model.script_models.steps import ModelHistory, ModelStep, StepKind, TrainerKind
from ckptlint.analysis.script_models import dotted_name, insert_line, is_simple_reference, line_of, script_models, source_of
from ckptlint.lazy_libcst import cst
from ckptlint.model.evaluation.fates import Site
from ckptlint.rule import Rule
from ckptlint.types import Applicability, Severity
from ckptlint.versions import VersionRange


# The words of a file that turns checkpointing on itself.
_ENABLING_WORDS = (b"gradient_checkpointing_enable", b"prepare_model_for_kbit_training", b"gradient_checkpointing=True")


class CheckpointingWithoutUseCacheFalse(Rule):
    """Gradient checkpointing on a generative Hugging Face model trained by hand or by transformers' `Trainer`, `use_cache` still on.

    ## What it does
    Finds `gradient_checkpointing_enable()` (or `prepare_model_for_kbit_training(...)` on a
    model loaded in 4 or 8 bit, which enables it) on a generative model (a decoder or
    encoder-decoder: `AutoModelForCausalLM`, `*ForCausalLM`, `*ForConditionalGeneration`,
    `*LMHeadModel`, `AutoModelForSeq2SeqLM`...) that the project trains in its own loop
    (`loss.backward()`, `accelerator.backward(loss)`, a Lightning `training_step`), or hands
    to transformers' `Trainer` (or a subclass), when nothing turns the KV cache off. With the
    `Trainer`, checkpointing may also come from `TrainingArguments(gradient_checkpointing=True)`
    written in the file (also through a helper returning them): the finding is then at the
    `Trainer(...)` call and the fix goes on the line before it. And from the command line:
    where the file's `TrainingArguments` are parsed (`HfArgumentParser(...)
    .parse_args_into_dataclasses()`, or built from argparse values) and a launch script of
    the project runs the file, or a script that imports it (FastChat's `train_mem.py`, whose
    `train()` lives in `train.py`), with `--gradient_checkpointing True` (or a bare
    `--gradient_checkpointing`, which `HfArgumentParser` reads as True), under any launcher
    (`python`, `torchrun`, `deepspeed`, `accelerate launch`): the finding is then at the
    `Trainer(...)` call and names the flag's line. The model is followed through the script (renamed,
    wrapped by `get_peft_model`, `accelerator.prepare` or `torch.compile`, returned by a
    helper function of the same file) and across the project's files: a helper that loads
    the model, enables checkpointing and returns it to scripts that train it
    (`load_model()` in `models.py`, the loop in `train.py`), a model handed to a training
    loop of another module (`train_loop(model, loader)`), kept by a Lightning module in
    `self.model` or by a project trainer class whose constructor stores it
    (`self.policy, self.optimizer = accelerator.prepare(policy, optimizer)`) and whose
    `train()` runs it, or runs backward on what a method running it returns
    (`self.accelerator.backward(self.loss(batch))`), or loaded by a helper and enabled by
    the script. The trainer class may inherit its constructor, its loop or the method
    running the model from project base classes (`class DPOTrainer(BaseTrainer)`, with
    `super().__init__(accelerator, policy, optimizer)` or none of its own), and may be
    picked through a variable (`trainer_class = trainers.DPOTrainer`) or by a name known
    only at run time (`getattr(trainers, config.trainer)`, `trainers.__dict__[name]`): then
    every public class and function of that module that can take the model is followed on
    its own, and the model counts as trained only where each of them trains it (a module
    that also offers an abstract base whose `loss` raises, or an evaluation loop, gives no
    finding); anything one of them does to the cache counts. The message then names
    the function that trains it. A model handed on its way to a project function of another
    module that neither trains it, nor checkpoints it, nor keeps it, nor passes it to code
    the project model cannot see (a parameter counter, a logging helper, an evaluation
    helper that switches to `model.eval()` and back) goes on in the caller; what that
    function does to it (turning its cache off) counts at the call.

    ## Why is this bad?
    A training forward has no use for the KV cache, and under checkpointing it is worse than
    useless. transformers before 5.0 leaves turning it off to each architecture's own
    forward: most switch it off and log "`use_cache=True` is incompatible with gradient
    checkpointing. Setting `use_cache=False`" (once; Blenderbot, BLIP, BLIP-2, InstructBLIP,
    Pix2Struct and Autoformer log it on every forward that reaches the check), the Mamba
    family switches it off silently, and some do not switch it off at all and keep building
    the cache in every training step (gpt_bigcode, i.e. StarCoder and SantaCoder, in 4.46;
    models loaded with `trust_remote_code=True` do whatever their code does). The script
    cannot tell which kind it loads when the name comes from the command line, and relying
    on a per-architecture fallback breaks when the architecture changes.

    ## Example
    ```python
    model = AutoModelForCausalLM.from_pretrained(args.model_name)
    model.gradient_checkpointing_enable()
    for batch in loader:
        loss = model(**batch).loss
        loss.backward()
    ```

    ## Use instead
    ```python
    model = AutoModelForCausalLM.from_pretrained(args.model_name)
    model.gradient_checkpointing_enable()
    model.config.use_cache = False
    ```

    ## Fix safety
    The fix inserts `<model>.config.use_cache = False` on the line after the call, with its
    indentation. It is **safe**: a training forward does not read the cache, and generation
    after training still accepts `use_cache=True` per call (or set the config back then).
    No fix when the call shares its line with a compound statement (`if gc: model...()`), or
    when the model is not named by a plain name or attribute (`get_model().…`).

    Not reported when the cache is turned off anywhere for that model (on a path that can
    run with the call), before or after the call, in the function or in a helper of the same file it calls: `model.config.use_cache =
    False` (also through `model.base_model.config` or a PEFT wrapper), `setattr(model.config,
    "use_cache", False)`, a config object with it (`AutoConfig.from_pretrained(...,
    use_cache=False)`, `config.use_cache = False`) passed to the loader,
    `from_pretrained(..., use_cache=False)` or `use_cache=False if args.gradient_checkpointing
    else True` (any value but a literal `True` counts, except one whose falsy case contradicts the
    condition checkpointing is turned on under: `use_cache=not args.no_gradient_checkpointing`
    with `if not args.no_gradient_checkpointing: model.gradient_checkpointing_enable()`, which
    keeps the cache on exactly when checkpointing is on), `use_cache=False` on a forward call,
    or a `**model_kwargs` whose contents are not known; in another file too, on the model's
    way to its training loop. Not reported either: models handed to TRL's trainers (their
    versions differ: TRL 0.15's `SFTTrainer` turns the cache off for a model it loads, 0.24's
    for every forward), to a project trainer that configures checkpointing itself or may set
    the cache itself (a subclass in the file whose code names `use_cache`, as a `compute_loss`
    calling `model(**inputs, use_cache=False)` does, or one of another module),
    `TrainingArguments` the file does not spell out (`HfArgumentParser`, `**vars(args)`) when
    no launch script of the project passes `--gradient_checkpointing` on to it (a value the
    script computes, `--gradient_checkpointing $GC`, is not known to be on; the last of
    several flags counts, as in argparse),
    encoder-only models (BERT, RoBERTa, CLIP text towers have no KV cache), `AutoModel` (any
    architecture; but `AutoModel.from_pretrained(..., trust_remote_code=True)` is reported,
    saying that the Hub's code picks the class and may be generative: chatglm-6b's
    `config.json` maps `AutoModel` to `ChatGLMForConditionalGeneration`), `use_cache = True` set back after training, scripts with no training loop
    anywhere in the project (a helper whose model is only evaluated), a model put in eval
    mode after checkpointing is enabled (`.eval()`, `.train(False)`) and never in training
    mode in the file nor handed to a trainer (a DPO reference model loaded like the policy:
    every architecture checkpoints only under `self.gradient_checkpointing and
    self.training`), models handed on
    their way to a function the project model cannot see into (a third-party library it
    has no facts for: it may turn the cache off), and
    projects targeting transformers >= 5.0.

    ## Evidence
    Measured on CPU with torch 2.13, tiny models built from configs (no downloads), 3
    training steps each with checkpointing on:

    - transformers 4.46.3: `LlamaForCausalLM` and `GPT2LMHeadModel` with `config.use_cache`
      left at its default `True` logged "`use_cache=True` is incompatible with gradient
      checkpointing. Setting `use_cache=False`." (GPT-2: "...Setting `use_cache=False`...")
      once per process and returned no cache. `GPTBigCodeForCausalLM` logged nothing and
      returned `past_key_values` in every training step (a list of per-layer tensors, 32,768
      bytes for 2 layers of width 64 at batch 4 x 32 tokens; for StarCoder-1B at batch 8 x
      2048 tokens in bf16 that is about 200 MiB held through backward), and none with
      `use_cache=False`. Of the 118 modeling files in 4.46.3 that both checkpoint layers and
      read `use_cache`, 8 lack the warning: mamba, mamba2 and falcon_mamba turn the cache
      off without it, qwen2_audio checkpoints only its audio encoder, esm, bros and tapas
      are encoders, and gpt_bigcode is the one decoder that never turns it off.
    - transformers 4.57.6 (source): the guard moved into `GradientCheckpointingLayer` for
      most architectures, gpt_bigcode included; what each architecture does differs between
      4.x minor versions (gpt_bigcode in 4.54.1 does not checkpoint its blocks at all).
    - The Trainer path (source): transformers 4.46.3 and 4.57.6 `Trainer` touch
      `config.use_cache` only for XLA FSDP with `xla_fsdp_grad_ckpt` (trainer.py:1943 /
      2134), TRL 0.12.2's `SFTTrainer` and `DPOTrainer` not at all: under 4.x a model a
      Trainer trains is left to its architecture exactly as in a manual loop, so the rule
      reports it the same way (the DESIGN.md catalogue's Trainer path); `HfArgumentParser`
      (measured on 5.17, the same parser since 4.x) reads `--gradient_checkpointing`,
      `--gradient_checkpointing True` and `--gradient_checkpointing 1` as True, also when a
      bare flag is followed by another option, and `--gradient_checkpointing false` as False;
      transformers 5.x's
      `Trainer.__init__` sets `model.config.use_cache = args.use_cache` (default False). On
      peft's own examples the notebook `peft_lora_clm_with_additional_tokens.ipynb` shows the
      architecture's "`use_cache=True` is incompatible with gradient checkpointing" warning in
      its saved output, beside a commented-out `model.config.use_cache = False`; most of
      peft's GPU tests set it "to silence the warnings".
    - transformers 5.0.0 (source) and 5.17.0 (measured): `GradientCheckpointingLayer.__call__`
      turns `use_cache` off (and drops `past_key_values`) for every checkpointed layer in
      training, and `GPTBigCodeForCausalLM` returned no cache: the rule does not apply.

    - A project function handed the model runs no transformers code unless its body does:
      one whose body the project model reads and finds nothing in (no forward, backward,
      trainer, cache, checkpointing call on it, nothing storing it or passing it on out of
      sight: `sum(p.numel() for p in model.parameters())`, `model.eval()` under
      `torch.no_grad()`) leaves `config.use_cache` as it was, and the caller's loop trains
      that same object.

    A test in `tests/test_hf_rules.py` re-checks on the installed transformers that a
    checkpointed decoder in training returns no cache once `config.use_cache = False`.
    """

    code = "CKPT020"
    severity = Severity.WARNING
    name = "checkpointing-without-use-cache-false"
    message = (
        "gradient checkpointing enabled by {call} on `{model}`, a generative `{cls}`, in a manual training "
        "loop while its KV cache is still on: transformers < 5.0 leaves the cache to each architecture (most "
        "turn it off with a warning; some, such as gpt_bigcode (StarCoder) in 4.46 and Hub code, keep building "
        "it in every training step); set `{model}.config.use_cache = False`"
    )
    fix = Applicability.SAFE
    targets = (VersionRange.of("transformers", max="5.0"),)
    triggers = (*_ENABLING_WORDS, b"Trainer")
    uses_project = True  # which imported functions belong to the project

    @classmethod
    def may_apply_to_project(cls, project, relative_path, settings, text) -> bool:
        # A `Trainer` file is asked about only where a launch script turns checkpointing on for it.
        return any(word.decode() in text for word in _ENABLING_WORDS) or project.checkpointing_launch_of(relative_path) is not None

    def __init__(self, context) -> None:
        super().__init__(context)
        self._launch: str | None = None

    def finish(self) -> None:
        reported = set()
        for history in script_models(self.context).histories:
            for step, trained_at in self._unguarded_checkpointing(history):
                if step.node in reported:
                    continue
                reported.add(step.node)
                self._report(history, step, trained_at)

    def _unguarded_checkpointing(self, history: ModelHistory) -> list[tuple[ModelStep, Site | None]]:
        """The calls that turn checkpointing on for a generative model trained by hand with
        its cache on (the first such call on each path through the code), with where it is
        trained when that is not in this file's own flow."""
        model_class = history.model_class
        if model_class is None or not (model_class.generative is True or _remote_auto_model(history)):
            return []
        trainers = history.of_kind(StepKind.TRAINER)
        if any(trainer.trainer is not TrainerKind.TRANSFORMERS for trainer in trainers):
            return []  # TRL's (some versions turn the cache off), or a project's own configuring one
        cache_off = history.of_kind(StepKind.USE_CACHE_OFF)
        enabling = [
            step
            for step in history.steps
            if step.kind is StepKind.GC_ENABLED
            or (step.kind is StepKind.KBIT_PREPARED and step.enables_checkpointing and history.quantized)
            # `TrainingArguments(gradient_checkpointing=True)`: the Trainer turns it on
            or (step.kind is StepKind.TRAINER and step.enables_checkpointing is True)
            # `TrainingArguments` from the command line, which a launch script of the project
            # gives `--gradient_checkpointing True`
            or (step.kind is StepKind.TRAINER and step.enables_checkpointing is None and self._launched_with_checkpointing())
        ]
        first = [
            step
            for index, step in enumerate(enabling)
            if not any(not earlier.exclusive_with(step) for earlier in enabling[:index])
            # the cache turned off wherever checkpointing may be on (`use_cache=not
            # args.no_gradient_checkpointing` turns it off only where it is not)
            and all(off.exclusive_with(step) for off in cache_off)
            and not history.kept_for_inference(step)
        ]
        if trainers or (history.training_starts is not None and not history.escaped_before(history.training_starts)):
            return [(step, None) for step in first]  # trained here: by hand, or by transformers' Trainer
        # The model leaves this file's flow (returned by a helper other modules call, or
        # handed to a function of another module): where it goes, in the project model.
        found = []
        for step in first:
            name = dotted_name(step.subject)
            if name is None:
                continue
            fate = self.context.project.model_fate(step.function, name, line_of(step.node))
            if fate.trained_by_hand and not fate.cache_off and not fate.unknown:
                found.append((step, fate.trained[0]))
        return found

    def _report(self, history: ModelHistory, step: ModelStep, trained_at: Site | None) -> None:
        subject = step.subject if is_simple_reference(step.subject) else None
        model = source_of(self.context, subject) if subject is not None else "model"
        call = {
            StepKind.GC_ENABLED: "`gradient_checkpointing_enable()`",
            StepKind.TRAINER: "`TrainingArguments(gradient_checkpointing=True)`",
        }.get(step.kind, "`prepare_model_for_kbit_training()`")
        if step.kind is StepKind.TRAINER and step.enables_checkpointing is None:
            call = f"`--gradient_checkpointing` ({self._launch}, read into the `TrainingArguments` this file parses)"
        message = self.message.format(call=call, model=model, cls=history.model_class.short_name)
        if history.has(StepKind.TRAINER):
            message = message.replace(
                "in a manual training loop", "trained by transformers' `Trainer` (which leaves `config.use_cache` alone before 5.0)", 1
            )
        if history.model_class.generative is not True:  # `AutoModel` with the Hub's own code
            message = message.replace(
                f"a generative `{history.model_class.short_name}`",
                f"an `{history.model_class.short_name}` loaded with `trust_remote_code=True` (the Hub's code picks the "
                "architecture, and it may be generative: ChatGLM's `AutoModel` is `ChatGLMForConditionalGeneration`)",
                1,
            )
        if trained_at is not None:
            message = message.replace(
                "in a manual training loop", f"in a manual training loop (by {trained_at})", 1
            )
        # After the call that turns checkpointing on; before the Trainer's construction, which does.
        fix = (
            insert_line(self.context, step.statement, f"{model}.config.use_cache = False", before=step.kind is StepKind.TRAINER)
            if subject is not None else None
        )
        self.report(
            self.context.cst_node_at(step.node, cst.Call),
            message + self.version_note(),
            replacements=[fix] if fix is not None else [],
            fix_message=f"Insert `{model}.config.use_cache = False`",
        )


    def _launched_with_checkpointing(self) -> bool:
        if self._launch is None:
            self._launch = self.context.project.checkpointing_launch_of(self.context.relative_path) or ""
        return bool(self._launch)



def _remote_auto_model(history: ModelHistory) -> bool:
    """`AutoModel.from_pretrained(..., trust_remote_code=True)`: the Hub's `auto_map` decides
    the class (chatglm-6b's config maps `AutoModel` to `ChatGLMForConditionalGeneration`), so
    it may be generative; task classes (`AutoModelForSequenceClassification`) are not."""
    return history.remote_code and history.model_class.generative is None and history.model_class.short_name == "AutoModel"
