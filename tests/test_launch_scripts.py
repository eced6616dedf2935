"""Launch scripts as FSDP uses: which `accelerate launch` commands the index reads from a
shell script (`ckptlint.model.file_facts.launch_scripts`), and which file of the project each one runs
under FSDP (`ProjectIndex.fsdp_uses`)."""

from __future__ import annotations

import textwrap

import pytest

from ckptlint.config import resolve_settings
from ckptlint.indexing import build_index
from ckptlint.model.file_facts.facts import AccelerateLaunch, FsdpKind
from ckptlint.model.file_facts.launch_scripts import launch_script_facts
from ckptlint.model.file_facts.options import configuration_facts
from conftest import json_findings

TRANSFORMERS_4 = "[project]\nname = 'x'\ndependencies = ['transformers==4.46.3']\n"
FSDP_CONFIG = "compute_environment: LOCAL_MACHINE\ndistributed_type: FSDP\nfsdp_config:\n  fsdp_sharding_strategy: FULL_SHARD\n"


def launches(script: str) -> tuple[AccelerateLaunch, ...]:
    return launch_script_facts(textwrap.dedent(script), "scripts.run").launches


def test_a_launch_inside_a_slurm_jobs_bash_c_keeps_its_row():
    """`srun ... bash -c "..."`: the quoted script is read as bash reads it (`\\$` is the
    inner script's `$`), on the rows it is written on; options holding variables the script
    does not set (`--jobid=$SLURM_JOB_ID`) do not hide it."""
    found = launches('''\
        #!/bin/bash
        BETA=$1
        srun --jobid=$SLURM_JOB_ID --nodes=2 bash -c "
        export HF_HUB_OFFLINE=1
        accelerate launch \\
            --config_file configs/fsdp.yaml \\
            --machine_rank \\$SLURM_PROCID \\
            train.py --beta ${BETA}
        "
        ''')
    assert found == (AccelerateLaunch("train.py", False, "configs/fsdp.yaml", 5),)


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("accelerate launch --use_fsdp train.py", AccelerateLaunch("train.py", False, "", 1, 1)),
        ("accelerate launch --use_fsdp --fsdp_version 2 -m pkg.train", AccelerateLaunch("pkg.train", True, "", 1, 2)),
        # `-m` first, the launcher's options after it (hallo's `train.sh`).
        ("accelerate launch -m --config_file c.yaml --num_processes 1 scripts.train --config x.yaml",
         AccelerateLaunch("scripts.train", True, "c.yaml", 1)),
        ("ACCELERATE_USE_FSDP=true accelerate launch train.py", AccelerateLaunch("train.py", False, "", 1, 1)),
        ("accelerate launch --use_fsdp false train.py", AccelerateLaunch("train.py", False, "", 1, 0)),
        ("accelerate launch --num_processes 8 train.py", AccelerateLaunch("train.py", False, "", 1, 0)),
        # The config named through a variable the script sets; one it does not set is unknown.
        ("CFG=configs/fsdp.yaml\naccelerate launch --config_file $CFG train.py", AccelerateLaunch("train.py", False, "configs/fsdp.yaml", 2)),
        ('accelerate launch --config_file "$CONFIG" train.py', None),
        ("torchrun --nproc_per_node 8 train.py", None),
        ("python -m accelerate.commands.launch --config_file fsdp.yaml train.py", AccelerateLaunch("train.py", False, "fsdp.yaml", 1)),
    ],
)
def test_launcher_options_and_config_files(command, expected):
    assert launches(command) == ((expected,) if expected is not None else ())


@pytest.mark.parametrize(
    ("config", "version"),
    [
        (FSDP_CONFIG, 1),
        (FSDP_CONFIG + "  fsdp_version: 2\n", 2),
        ("distributed_type: MULTI_GPU\nnum_processes: 8\n", 0),
        ("distributed_type: DEEPSPEED\ndeepspeed_config:\n  zero_stage: 3\n", 0),
        ("model:\n  distributed_type: FSDP\n", 0),  # a key of some other configuration
    ],
)
def test_accelerate_config_files(config, version):
    assert configuration_facts(config, "configs/x.yaml", "configs.x").accelerate_fsdp == version


def test_launched_files_are_found_from_the_root_or_the_scripts_directory(make_project):
    """Paths as a launch script writes them: relative to the project root (where scripts
    are run from), else to the script's own directory; a module after `-m` by its name. A
    launch of a file the project does not hold, or of an unknown config, is no use."""
    root = make_project({
        "configs/fsdp.yaml": FSDP_CONFIG,
        "train.py": "import torch\n",
        "examples/sharded/fsdp.yaml": FSDP_CONFIG,
        "examples/sharded/run.sh": "accelerate launch --config_file fsdp.yaml finetune.py\n",
        "examples/sharded/finetune.py": "import torch\n",
        # Run from its own directory (`cd $(dirname "$0")`), naming files above it.
        "recipes/sft/run.sh": 'cd $(dirname "$0")\naccelerate launch --config_file ../../configs/fsdp.yaml ../../train.py\n',
        "pkg/__init__.py": "",
        "pkg/lora.py": "import torch\n",
        "scripts/all.sh": (
            "accelerate launch --config_file configs/fsdp.yaml train.py\n"
            "accelerate launch --config_file configs/fsdp.yaml -m pkg.lora\n"
            "accelerate launch --config_file configs/missing.yaml train.py\n"
            "accelerate launch --config_file configs/fsdp.yaml missing.py\n"
        ),
    })
    index = build_index(root, resolve_settings(root), use_cache=False)
    assert [(u.kind, u.path, u.line, u.launched, u.config) for u in index.fsdp_uses] == [
        (FsdpKind.ACCELERATE_LAUNCH, "examples/sharded/run.sh", 1, "examples/sharded/finetune.py", "examples/sharded/fsdp.yaml"),
        (FsdpKind.ACCELERATE_LAUNCH, "recipes/sft/run.sh", 2, "train.py", "configs/fsdp.yaml"),
        (FsdpKind.ACCELERATE_LAUNCH, "scripts/all.sh", 1, "train.py", "configs/fsdp.yaml"),
        (FsdpKind.ACCELERATE_LAUNCH, "scripts/all.sh", 2, "pkg/lora.py", "configs/fsdp.yaml"),
    ]


def test_a_launch_reaches_the_file_it_runs_and_its_imports_not_the_other_scripts(cli, make_project):
    """Reported in the launched script and in the helper it imports, named by the launch;
    another training script, launched data parallel, stays quiet. Changing the config file
    alone changes the findings of a warm run."""
    gc_script = '''\
        import torch
        from transformers import AutoModelForCausalLM
        from helpers import enable
        model = AutoModelForCausalLM.from_pretrained("m")
        model.config.use_cache = False
        model.gradient_checkpointing_enable()
        enable(model)
        for batch in []:
            model(**batch).loss.backward()
        '''
    root = make_project({
        "fsdp.yaml": FSDP_CONFIG,
        "ddp.yaml": "distributed_type: MULTI_GPU\n",
        "helpers.py": "def enable(model):\n    model.gradient_checkpointing_enable()\n",
        "sharded.py": gc_script,
        "plain.py": gc_script,
        "run.sh": "accelerate launch --config_file fsdp.yaml sharded.py\naccelerate launch --config_file ddp.yaml plain.py\n",
    }, pyproject=TRANSFORMERS_4)
    args = ["check", "--output-format", "json", "--select", "CKPT002", "."]
    findings = json_findings(cli(args, root), root, with_message=True)
    assert [f[:4] for f in findings] == [("helpers.py", 2, 5, "CKPT002"), ("sharded.py", 6, 1, "CKPT002")]
    assert all("`accelerate launch --config_file fsdp.yaml` of sharded.py at run.sh:1" in f[4] for f in findings)
    (root / "fsdp.yaml").write_text("distributed_type: MULTI_GPU\n")
    assert json_findings(cli(args, root), root) == []


@pytest.mark.parametrize(
    ("script", "expected"),
    [
        ("torchrun --nproc_per_node 8 train.py --gradient_checkpointing True", (("train.py", 1),)),
        # A bare flag is True to `HfArgumentParser`, also before another option; the flag's row.
        ("deepspeed train.py \\\n  --gradient_checkpointing \\\n  --bf16 True", (("train.py", 2),)),
        ("python train.py --gradient_checkpointing=1", (("train.py", 1),)),
        ("accelerate launch --num_processes 2 sft.py --gradient_checkpointing true", (("sft.py", 1),)),
        # Off, off again after on (the last one counts), or known only to the shell.
        ("python train.py --gradient_checkpointing False", ()),
        ("python train.py --gradient_checkpointing True --gradient_checkpointing False", ()),
        ("python train.py --gradient_checkpointing $GC", ()),
        # A launcher's own program, a module, or the flag given to the launcher.
        ("llamafactory-cli train --gradient_checkpointing True", ()),
        ("python -m pkg.train --gradient_checkpointing True", ()),
        ("python train.py --gradient_checkpointing_kwargs '{\"use_reentrant\": false}'", ()),
    ],
)
def test_launches_that_turn_checkpointing_on(script, expected):
    assert launch_script_facts(script + "\n", "scripts.run").checkpointing_launches == expected


def test_a_trainer_script_follows_the_flag_its_launch_script_gives(cli, make_project):
    """CKPT020 through the command line: `HfArgumentParser`'s `TrainingArguments` of a script
    a launch script gives `--gradient_checkpointing True` (also a module the launched entry
    point imports) are reported at the `Trainer(...)` call, naming the flag; the flag turned
    off in the script alone changes the findings of a warm run."""
    trainer = '''\
        from transformers import AutoModelForCausalLM, HfArgumentParser, Trainer, TrainingArguments


        def train():
            (args,) = HfArgumentParser(TrainingArguments).parse_args_into_dataclasses()
            model = AutoModelForCausalLM.from_pretrained("gpt2")
            Trainer(model=model, args=args).train()
        '''
    root = make_project({
        "pkg/__init__.py": "",
        "pkg/train.py": trainer,
        "entry.py": "from pkg.train import train\n\ntrain()\n",
        "direct.py": trainer,
        "unlaunched.py": trainer,
        "run.sh": "torchrun --nproc_per_node 2 entry.py --gradient_checkpointing True\npython direct.py \\\n  --gradient_checkpointing\n",
    }, pyproject=TRANSFORMERS_4)
    args = ["check", "--output-format", "json", "--select", "CKPT020", "."]
    findings = json_findings(cli(args, root), root, with_message=True)
    assert [f[:4] for f in findings] == [("direct.py", 7, 5, "CKPT020"), ("pkg/train.py", 7, 5, "CKPT020")]
    assert "`--gradient_checkpointing` (run.sh:3, read into" in findings[0][4]
    assert "`--gradient_checkpointing` (run.sh:1, read into" in findings[1][4]
    (root / "run.sh").write_text("python direct.py --gradient_checkpointing False\n")
    assert json_findings(cli(args, root), root) == []
