"""Options that decide reentrancy, declared in the YAML a Hydra / OmegaConf project loads:
read by the project index, followed from `use_reentrant=cfg.<name>` to their default, and
kept current on warm runs."""

from __future__ import annotations

from ckptlint.model.file_facts.facts import OptionDefault
from ckptlint.model.file_facts.options import configuration_facts
from tests.conftest import json_findings

CONFIG = """\
model:
  width: 768
  use_reentrant: true
  reentrant_ffn: off
  reentrant_label: "yes"
train:
  gradient_checkpointing_kwargs:
    use_reentrant: false
"""


def test_boolean_options_named_for_reentrancy_are_read_with_their_line():
    facts = configuration_facts(CONFIG, "conf/config.yaml", "conf.config.yaml")
    assert facts.options == (
        OptionDefault("use_reentrant", True, 3, "`model.use_reentrant: true`"),
        OptionDefault("reentrant_ffn", False, 4, "`model.reentrant_ffn: false`"),  # YAML 1.1: `off` is False
        OptionDefault("use_reentrant", False, 8, "`train.gradient_checkpointing_kwargs.use_reentrant: false`"),
    )


def test_files_that_say_nothing_of_reentrancy_or_are_not_yaml_hold_no_options():
    assert configuration_facts("model:\n  width: 3\n", "c.yaml", "c.yaml").options == ()
    assert configuration_facts("use_reentrant: [true\n", "c.yaml", "c.yaml").options == ()


MODEL = """
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
from torch.utils.checkpoint import checkpoint


def run(cfg, layers, x):
    for layer in layers:
        x = checkpoint(layer, x, use_reentrant=cfg.use_reentrant)
    return FSDP(layers)
"""


def test_the_yaml_default_decides_and_a_warm_run_sees_it_change(make_project, cli):
    root = make_project({"model.py": MODEL, "conf/config.yaml": "model:\n  use_reentrant: true\n"},
                        pyproject="[project]\nname = 'demo'\ndependencies = ['torch>=2.4']\n")
    first = cli(["check", ".", "--output-format", "json"], root)
    assert json_findings(first, root) == [("model.py", 7, 13, "CKPT002")]
    (root / "conf" / "config.yaml").write_text("model:\n  use_reentrant: false\n")
    assert json_findings(cli(["check", ".", "--output-format", "json"], root), root) == []
    # An override that disagrees with the default: the value at runtime is not known.
    (root / "conf" / "config.yaml").write_text("model:\n  use_reentrant: true\n")
    (root / "conf" / "experiment.yaml").write_text("model:\n  use_reentrant: false\n")
    assert json_findings(cli(["check", ".", "--output-format", "json"], root), root) == []
