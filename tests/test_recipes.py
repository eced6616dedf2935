"""Training recipes (YAML / JSON) and launch scripts: parsing with positions, the settings they
imply, and the FSDP / Hugging Face rules over them (issue 10)."""

from __future__ import annotations

import difflib
import json
import textwrap
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from ckptlint.cli import main
from ckptlint.config import Settings
from ckptlint.engine import fix_text, lint_text
from ckptlint.model.syntax.launch_commands import read_launch
from ckptlint.model.syntax.recipe_documents import RecipeSyntaxError, parse_recipe
from ckptlint.model.syntax.shell_scripts import command_words, parse_script
from tests.test_fixtures import RECIPE_FIXTURES, expected_findings, project_of, relative

TF4 = {"transformers": "4.46.3", "torch": "2.13"}
TF5 = {"transformers": "5.17.0", "torch": "2.13"}


def lint(tmp_path: Path, name: str, text: str, versions=TF4, **files: str):
    """Lint `name` (written with `text`) in a project under tmp_path holding `files` too."""
    for other, content in files.items():
        target = tmp_path / other.replace("__", "/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(textwrap.dedent(content).lstrip("\n"))
    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    source = textwrap.dedent(text).lstrip("\n")
    path.write_text(source)
    settings = Settings.default(tmp_path, target_versions=versions)
    return lint_text(source, path, settings, display_path=name), source, path, settings


def found(outcome) -> list[tuple[int, int, str]]:
    return [(d.location.row, d.location.column, d.code) for d in outcome.diagnostics]


# --- documents ---------------------------------------------------------------------------


def test_yaml_settings_carry_key_and_value_positions():
    text = "a: 1\nfsdp_config:\n  fsdp_activation_checkpointing: yes  # on\nlist: [x, y]\n"
    (recipe,) = parse_recipe(text, "r.yaml", is_json=False)
    setting = recipe.get("fsdp_config", "fsdp_activation_checkpointing")
    assert setting.value is True  # YAML 1.1, as `yaml.safe_load` reads it
    assert (setting.key_span.start.row, setting.key_span.start.column) == (3, 3)
    assert (setting.value_span.start.column, setting.value_span.end.column) == (34, 37)
    assert setting.plain_scalar
    assert recipe.get("list").value == ["x", "y"]


def test_merge_keys_anchors_and_duplicates_follow_safe_load():
    text = "base: &base\n  fsdp: full_shard\n  gradient_checkpointing: true\nrun:\n  <<: *base\n  gradient_checkpointing: false\ndup: 1\ndup: 2\n"
    (recipe,) = parse_recipe(text, "r.yaml", is_json=False)
    assert recipe.get("run", "fsdp").value == "full_shard"
    assert recipe.get("run", "gradient_checkpointing").value is False
    assert recipe.get("dup").value == 2
    assert yaml.safe_load(text)["run"]["gradient_checkpointing"] is False


def test_json_with_tabs_and_positions():
    text = '{\n\t"fsdp": "full_shard",\n\t"gradient_checkpointing": true\n}\n'
    (recipe,) = parse_recipe(text, "r.json", is_json=True)
    setting = recipe.get("gradient_checkpointing")
    assert (setting.key_span.start.row, setting.key_span.start.column) == (3, 2)
    assert setting.value is True


@pytest.mark.parametrize(
    ("text", "is_json", "row", "message"),
    [
        ('{"fsdp": "full_shard",}', True, 1, "invalid JSON: Expecting property name"),
        ("fsdp: [full_shard\ngradient_checkpointing: true\n", False, 2, "invalid YAML"),
        ("a: !!python/object:os.system {}\n", False, 1, "invalid YAML"),
        ("a: *undefined\n", False, 1, "invalid YAML"),
    ],
)
def test_syntax_errors_are_positioned(text, is_json, row, message):
    with pytest.raises(RecipeSyntaxError) as raised:
        parse_recipe(text, "r", is_json=is_json)
    assert raised.value.row == row
    assert str(raised.value).startswith(message)


def test_alias_bombs_stay_bounded():
    lines = ["a0: &a0 {gradient_checkpointing: true}"]
    lines += [f"a{i}: &a{i} {{x: *a{i - 1}, y: *a{i - 1}}}" for i in range(1, 30)]
    (recipe,) = parse_recipe("\n".join(lines) + "\n", "r.yaml", is_json=False)
    assert len(recipe.settings) <= 5_000


# --- shell ---------------------------------------------------------------------------------


def test_shell_words_quotes_continuations_variables_and_redirections():
    script = textwrap.dedent(
        """\
        CFG=configs/fsdp.yaml  # the accelerate config
        export NPROC=8
        nohup accelerate launch --config_file $CFG --num_processes "${NPROC}" train.py \\
            --fsdp 'full_shard auto_wrap' --run "$(date +%s)" --x=$UNSET > log.txt 2>&1 &
        cat <<EOF > notes.txt
        --gradient_checkpointing True
        EOF
        python -u train.py --lr 1e-5; echo done
        """
    )
    commands = parse_script(script)
    words = [[w.value for w in command_words(c)] for c in commands]
    assert words[0] == [
        "accelerate", "launch", "--config_file", "configs/fsdp.yaml", "--num_processes", "8", "train.py",
        "--fsdp", "full_shard auto_wrap", "--run", None, None,
    ]
    assert words[1] == ["cat"]
    assert words[2] == ["python", "-u", "train.py", "--lr", "1e-5"]
    assert words[3] == ["echo", "done"]
    fsdp_value = command_words(commands[0])[8]
    assert (fsdp_value.span.start.row, fsdp_value.span.start.column) == (4, 12)


def test_launchers_are_recognised():
    def launch(line):
        (command,) = parse_script(line)
        return read_launch(command)

    accelerate = launch("accelerate launch --use_fsdp --fsdp_activation_checkpointing true -m axolotl.cli.train x.yml")
    assert accelerate.launcher == "accelerate" and accelerate.entry.value == "axolotl.cli.train"
    assert [o.name for o in accelerate.launcher_options] == ["use_fsdp", "fsdp_activation_checkpointing"]
    assert [w.value for w in accelerate.recipe_files] == ["x.yml"]
    torchrun = launch("python -m torch.distributed.run --nproc_per_node 2 --standalone train.py --gradient_checkpointing")
    assert torchrun.launcher == "torchrun" and torchrun.entry.value == "train.py"
    assert [(o.name, o.value) for o in torchrun.options] == [("gradient_checkpointing", None)]
    assert launch("llamafactory-cli train r.yaml use_reentrant_gc=false").overrides[0].name == "use_reentrant_gc"
    assert launch("trl sft --config r.yaml --gradient_checkpointing").recipe_files[0].value == "r.yaml"
    assert launch("echo accelerate launch train.py") is None
    assert launch("pip install accelerate") is None


# --- rules over recipes ----------------------------------------------------------------------


def test_trainer_recipe_full_shard_is_ckpt004(tmp_path):
    outcome, *_ = lint(tmp_path, "sft.yaml", "gradient_checkpointing: true\nfsdp: full_shard auto_wrap\n")
    assert found(outcome) == [(1, 1, "CKPT004")]
    assert "line 2" in outcome.diagnostics[0].message


@pytest.mark.parametrize(
    ("recipe", "versions", "expected"),
    [
        # 4.x default kwargs are reentrant; 5.x's are not.
        ("gradient_checkpointing: true\nfsdp: shard_grad_op\n", TF4, [(1, 1, "CKPT002")]),
        ("gradient_checkpointing: true\nfsdp: shard_grad_op\n", TF5, []),
        # A kwargs mapping without the key runs torch's reentrant default in any version.
        ("gradient_checkpointing: true\ngradient_checkpointing_kwargs: {preserve_rng_state: false}\nfsdp: shard_grad_op\n", TF4, [(1, 1, "CKPT002")]),
        # transformers 5: the Trainer's `fsdp` wraps each layer, checkpointed inside its unit.
        ("gradient_checkpointing: true\ngradient_checkpointing_kwargs: {preserve_rng_state: false}\nfsdp: shard_grad_op\n", TF5, []),
        # Trainer-only keys: the Trainer pops them and passes None.
        ("gradient_checkpointing: true\ngradient_checkpointing_kwargs: {offload: true}\nfsdp: shard_grad_op\n", TF5, []),
        ("gradient_checkpointing: false\nfsdp: full_shard\n", TF4, []),
        ("gradient_checkpointing: true\nfsdp: ''\n", TF4, []),
        ("gradient_checkpointing: true\n", TF4, []),
        ("fsdp: full_shard\nfsdp_config: {activation_checkpointing: true}\n", TF4, []),
        # Both: the Trainer refuses to start, whatever the implementation.
        ("gradient_checkpointing: true\nfsdp: full_shard\nfsdp_config: {fsdp_activation_checkpointing: true}\n", TF5, [(1, 1, "CKPT005")]),
        # An accelerate config on its own never has a finding.
        ("distributed_type: FSDP\nfsdp_config: {fsdp_activation_checkpointing: true}\n", TF4, []),
        # A value only known at runtime.
        ("gradient_checkpointing: ${GC}\nfsdp: shard_grad_op\n", TF4, []),
    ],
)
def test_recipe_cases(tmp_path, recipe, versions, expected):
    outcome, *_ = lint(tmp_path, "recipe.yaml", recipe, versions)
    assert found(outcome) == expected


def test_unknown_transformers_version_is_named(tmp_path):
    outcome, *_ = lint(tmp_path, "r.yaml", "gradient_checkpointing: true\nfsdp: shard_grad_op\n", {"torch": "2.13"})
    if outcome.diagnostics:  # the installed transformers decides when nothing is declared
        assert outcome.diagnostics[0].code == "CKPT002"


def test_llamafactory_defaults(tmp_path):
    recipe = "stage: sft\nfinetuning_type: lora\ntemplate: llama3\nfsdp: shard_grad_op\n"
    outcome, *_ = lint(tmp_path, "lf.yaml", recipe)
    assert found(outcome) == [(4, 1, "CKPT002")]  # reported at FSDP: no checkpointing key written
    assert "`use_reentrant_gc: false`" in outcome.diagnostics[0].message
    outcome, *_ = lint(tmp_path, "lf.yaml", recipe + "use_reentrant_gc: false\n")
    assert found(outcome) == []
    outcome, *_ = lint(tmp_path, "lf.yaml", recipe + "disable_gradient_checkpointing: true\n")
    assert found(outcome) == []


def test_noqa_in_yaml_and_shell_comments(tmp_path):
    recipe = "gradient_checkpointing: true  # noqa: CKPT004\nfsdp: full_shard\n"
    outcome, *_ = lint(tmp_path, "r.yaml", recipe)
    assert found(outcome) == []
    outcome, *_ = lint(tmp_path, "r.yaml", recipe.replace("CKPT004", "CKPT002"))
    assert found(outcome) == [(1, 1, "CKPT004")]
    outcome, *_ = lint(tmp_path, "r.yaml", "# ckptlint: skip-file\n" + recipe.replace("  # noqa: CKPT004", ""))
    assert found(outcome) == []


def test_launch_script_combines_config_file_and_flags(tmp_path):
    outcome, *_ = lint(
        tmp_path,
        "launch.sh",
        """
        accelerate launch --config_file fsdp.yaml train.py \\
            --gradient_checkpointing True
        accelerate launch --config_file fsdp.yaml train.py --gradient_checkpointing False
        accelerate launch --config_file missing.yaml train.py --gradient_checkpointing True
        accelerate launch --use_fsdp --fsdp_sharding_strategy SHARD_GRAD_OP train.py --gradient_checkpointing
        """,
        **{"fsdp.yaml": "distributed_type: FSDP\nfsdp_config:\n  fsdp_sharding_strategy: FULL_SHARD\n"},
    )
    assert found(outcome) == [(2, 5, "CKPT004"), (5, 78, "CKPT002")]
    assert "fsdp.yaml:1" in outcome.diagnostics[0].message


def test_launch_script_reports_findings_of_one_recipe_only_in_that_recipe(tmp_path):
    outcome, *_ = lint(
        tmp_path,
        "scripts/run.sh",
        "trl sft --config recipes/sft.yaml\npython train.py recipes/sft.yaml\n",
        **{"recipes__sft.yaml": "gradient_checkpointing: true\nfsdp: full_shard\n"},
    )
    assert found(outcome) == []


def test_entry_point_field_default_decides(tmp_path):
    entry = """
        from dataclasses import dataclass, field
        from transformers import HfArgumentParser, TrainingArguments

        @dataclass
        class Args:
            use_reentrant: bool = field(default={default})

        args, training_args = HfArgumentParser((Args, TrainingArguments)).parse_args_into_dataclasses()
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={{"use_reentrant": args.use_reentrant}})
        """
    script = "torchrun train.py --fsdp shard_grad_op --gradient_checkpointing{extra}\n"
    for default, extra, expected in [
        ("True", "", ["CKPT002"]),
        ("True", " --use_reentrant false", []),
        ("False", "", []),
        ("False", " --use_reentrant=true", ["CKPT002"]),
    ]:
        outcome, *_ = lint(
            # transformers 4.46: on 5.x the Trainer's `fsdp` wraps each layer, checkpointed inside it.
            tmp_path, "run.sh", script.format(extra=extra), TF4, **{"train.py": entry.format(default=default)}
        )
        assert [d.code for d in outcome.diagnostics] == expected, (default, extra)


def test_yaml_fixes_change_only_the_value(tmp_path):
    recipe = "# DPO\ngradient_checkpointing: true   # memory\ngradient_checkpointing_kwargs:\n  use_reentrant: True  # old\nfsdp: shard_grad_op\n"
    outcome, source, path, settings = lint(tmp_path, "r.yaml", recipe)
    assert found(outcome) == [(2, 1, "CKPT002")]
    fixed = fix_text(source, path, settings, unsafe=True).text
    assert fixed == recipe.replace("use_reentrant: True", "use_reentrant: false")
    assert fix_text(source, path, settings, unsafe=False).text == source  # the fix is unsafe


@pytest.mark.parametrize("ending", ["\n", "\r\n"])
def test_yaml_fix_inserts_kwargs_after_the_key(tmp_path, ending):
    recipe = ending.join(["run:", "  gradient_checkpointing: true  # memory", "fsdp: shard_grad_op", ""])
    outcome, source, path, settings = lint(tmp_path, "r.yaml", recipe)
    assert found(outcome) == []  # not a top-level key: not the Trainer's argument
    recipe = ending.join(["gradient_checkpointing: true  # memory", "fsdp: shard_grad_op", ""])
    outcome, source, path, settings = lint(tmp_path, "r.yaml", recipe)
    fixed = fix_text(source, path, settings, unsafe=True).text
    assert fixed == ending.join(
        ["gradient_checkpointing: true  # memory", "gradient_checkpointing_kwargs: {use_reentrant: false}", "fsdp: shard_grad_op", ""]
    )
    assert yaml.safe_load(fixed)["gradient_checkpointing_kwargs"] == {"use_reentrant": False}
    # Without a final line break.
    outcome, source, path, settings = lint(tmp_path, "r.yaml", "fsdp: shard_grad_op\ngradient_checkpointing: true")
    assert fix_text(source, path, settings, unsafe=True).text.endswith(
        "gradient_checkpointing: true\ngradient_checkpointing_kwargs: {use_reentrant: false}"
    )


def test_json_fix_replaces_the_literal_only(tmp_path):
    recipe = '{"gradient_checkpointing": true, "gradient_checkpointing_kwargs": {"use_reentrant": true}, "fsdp": "shard_grad_op"}\n'
    outcome, source, path, settings = lint(tmp_path, "args.json", recipe)
    fixed = fix_text(source, path, settings, unsafe=True).text
    assert json.loads(fixed)["gradient_checkpointing_kwargs"] == {"use_reentrant": False}
    assert fixed == recipe.replace('"use_reentrant": true', '"use_reentrant": false')


# --- fixtures and the command line -----------------------------------------------------------


@pytest.mark.parametrize("path", RECIPE_FIXTURES, ids=lambda p: p.relative_to(p.parents[2]).as_posix())
def test_recipe_fixture_findings_and_fixes(path: Path):
    project_settings, index = project_of(path)
    text = path.read_text(encoding="utf-8")
    outcome = lint_text(text, path, project_settings, display_path=relative(path), project=index)
    assert outcome.parsed
    assert {(relative(path), d.location.row, d.code) for d in outcome.diagnostics} == expected_findings(path)
    fixed = fix_text(text, path, project_settings, unsafe=True, display_path=relative(path), project=index)
    assert fixed.error is None
    if path.suffix in (".yaml", ".yml"):
        assert yaml.safe_load(fixed.text) is not None
        # Only the edited value changed, or one line was added; comments and layout kept.
        old_lines, new_lines = text.splitlines(), fixed.text.splitlines()
        for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(a=old_lines, b=new_lines).get_opcodes():
            if tag == "replace":
                assert [a.replace("true", "false") for a in old_lines[i1:i2]] == new_lines[j1:j2]
            elif tag == "insert":
                assert all("use_reentrant" in line for line in new_lines[j1:j2])
            else:
                assert tag == "equal"
    assert fix_text(fixed.text, path, project_settings, unsafe=True, project=index).applied == ()


def test_cli_walks_recipes_and_honours_include(tmp_path, monkeypatch):
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "x"\ndependencies = ["transformers==4.46.3"]\n')
    (tmp_path / "sft.yaml").write_text("gradient_checkpointing: true\nfsdp: full_shard\n")
    (tmp_path / "data.json").write_text('{"tokens": [1, 2, 3]}')
    (tmp_path / "broken.yml").write_text("fsdp: [full_shard\n")
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, ["check", ".", "--no-cache", "--output-format", "json"])
    assert result.exit_code == 1
    reported = sorted((item["filename"], item["code"]) for item in json.loads(result.stdout))
    assert [(Path(f).name, c) for f, c in reported] == [("broken.yml", "CKPT900"), ("sft.yaml", "CKPT004")]
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "x"\ndependencies = ["transformers==4.46.3"]\n[tool.ckptlint]\ninclude = ["*.py"]\n'
    )
    result = CliRunner().invoke(main, ["check", ".", "--no-cache"])
    assert result.exit_code == 0, result.output


def test_noqa_at_the_end_of_a_continued_command(tmp_path):
    script = (
        "accelerate launch --config_file fsdp.yaml train.py \\\n"
        "    --gradient_checkpointing True \\\n"
        "    --output_dir out  # noqa: CKPT004\n"
        "accelerate launch --config_file fsdp.yaml train.py --gradient_checkpointing True\n"
    )
    outcome, *_ = lint(tmp_path, "run.sh", script, **{"fsdp.yaml": "distributed_type: FSDP\n"})
    assert found(outcome) == [(4, 52, "CKPT004")]


def test_shebang_scripts_without_suffix_are_launch_scripts(tmp_path):
    outcome, *_ = lint(
        tmp_path,
        "run_sft",
        "#!/usr/bin/env bash\naccelerate launch --config_file fsdp.yaml train.py --gradient_checkpointing\n",
        **{"fsdp.yaml": "distributed_type: FSDP\n"},
    )
    assert found(outcome) == [(2, 52, "CKPT004")]


def test_trainer_fsdp_config_overrides_the_accelerate_plugin(tmp_path):
    config = {"fsdp.yaml": "distributed_type: FSDP\nfsdp_config:\n  fsdp_activation_checkpointing: true\n"}
    script = "accelerate launch --config_file fsdp.yaml train.py {recipe} --gradient_checkpointing true\n"
    outcome, *_ = lint(tmp_path, "run.sh", script.format(recipe=""), TF5, **config)
    assert found(outcome) == [(1, 53, "CKPT005")]  # the Trainer refuses both, whatever the implementation
    overridden = {**config, "args.yaml": "fsdp_config:\n  activation_checkpointing: false\n"}
    outcome, *_ = lint(tmp_path, "run.sh", script.format(recipe="args.yaml"), TF4, **overridden)
    assert found(outcome) == [(1, 62, "CKPT004")]
    # transformers 5 runs it non-reentrant by default: no all-gather is added (EVIDENCE Q5).
    outcome, *_ = lint(tmp_path, "run.sh", script.format(recipe="args.yaml"), TF5, **overridden)
    assert found(outcome) == []


def test_axolotl_defaults_to_reentrant_kwargs(tmp_path):
    recipe = "base_model: m\ndatasets: []\ngradient_checkpointing: {value}\nfsdp: [shard_grad_op, auto_wrap]\n{extra}"
    # On transformers 4.46: before 4.52 the layer is recomputed outside its FSDP1 unit.
    for value, extra, versions, expected in [
        ("true", "", TF4, [(3, 1, "CKPT002")]),  # whatever transformers' default
        ("offload", "", TF4, [(3, 1, "CKPT002")]),
        ("true", "gradient_checkpointing_kwargs: {use_reentrant: false}\n", TF4, []),
        ("true", "rl: dpo\n", TF5, []),  # the kwargs stay None: transformers 5's default
        ("false", "", TF4, []),
        # transformers 5: each layer its own unit, checkpointed inside it: nothing measured.
        ("true", "", TF5, []),
    ]:
        outcome, *_ = lint(tmp_path, "ax.yml", recipe.format(value=value, extra=extra), versions)
        assert found(outcome) == expected, (value, extra, versions)


def test_include_must_be_a_list_of_patterns(tmp_path, monkeypatch):
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "x"\n[tool.ckptlint]\nextend-include = 3\n')
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, ["check", "."])
    assert result.exit_code == 2
    assert "extend-include" in result.output


@pytest.mark.parametrize(
    ("name", "data", "expected"),
    [
        ("tabs.yaml", b"fsdp:\n\t- full_shard\n", [(2, 1, "CKPT900")]),
        ("bom.yaml", "\ufeffgradient_checkpointing: true\nfsdp: full_shard\n".encode(), [(1, 1, "CKPT004")]),
        ("cr.yaml", b"gradient_checkpointing: true\rfsdp: full_shard\r", [(1, 1, "CKPT004")]),
        ("data.json", b'{"vocab": {"fsdp": 1}}', []),
        ("empty.yaml", b"# fsdp notes only\n", []),
        ("weird.sh", b'echo "unterminated $(fsdp\ncat <<EOF\nfsdp\n', []),
        ("long.sh", b"accelerate launch t.py " + b"--gradient_checkpointing 1 " * 50000 + b"\n", []),
    ],
)
def test_hostile_recipes_never_crash(tmp_path, name, data, expected):
    assert _check(tmp_path, name, data) == expected


@pytest.mark.parametrize(("name", "prefix"), [("deep.yaml", b"fsdp: "), ("deep.json", b'{"fsdp": ')])
def test_a_recipe_nested_too_deeply_is_reported_not_crashed_on(tmp_path, name, prefix):
    """PyYAML >= 6.0.4 stops at 1,000 levels and says where; older builds and the pure-Python
    loader run out of stack, and then the position is unknown (the file's start)."""
    data = prefix + b"[" * 20000 + b"]" * 20000 + (b"}\n" if name.endswith(".json") else b"\n")
    (tmp_path / name).write_bytes(data)
    result = CliRunner().invoke(main, ["check", str(tmp_path / name), "--no-cache", "--output-format", "json"])
    [finding] = json.loads(result.stdout)
    assert (finding["code"], finding["location"]["row"]) == ("CKPT900", 1)
    assert finding["location"]["column"] in (1, len(prefix) + 1000)
    assert "nested too deeply" in finding["message"]


def _check(tmp_path, name, data):
    (tmp_path / name).write_bytes(data)
    result = CliRunner().invoke(
        main, ["check", str(tmp_path / name), "--no-cache", "--output-format", "json", "--target-version", "transformers=4.46"]
    )
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    return sorted((i["location"]["row"], i["location"]["column"], i["code"]) for i in json.loads(result.stdout))


def test_environment_and_json_string_kwargs(tmp_path):
    outcome, *_ = lint(
        tmp_path,
        "run.sh",
        """
        ACCELERATE_USE_FSDP=true FSDP_SHARDING_STRATEGY=SHARD_GRAD_OP python train.py args.yaml
        ACCELERATE_USE_FSDP=false python train.py args.yaml
        ACCELERATE_USE_FSDP=1 FSDP_ACTIVATION_CHECKPOINTING=true accelerate launch src/train.py lf.yaml
        """,
        TF5,
        **{
            "args.yaml": "gradient_checkpointing: true\ngradient_checkpointing_kwargs: '{\"use_reentrant\": true}'\n",
            "lf.yaml": "stage: sft\nfinetuning_type: lora\ntemplate: llama3\n",
        },
    )
    assert found(outcome) == [(1, 79, "CKPT002"), (3, 89, "CKPT005")]


@pytest.mark.parametrize(
    ("trl", "transformers", "expected"),
    [
        ("0.12.2", "4.46.3", []),  # checkpointing off by default before TRL 0.22
        ("0.22.0", "4.46.3", [(2, 65, "CKPT005"), (3, 18, "CKPT002")]),
        ("0.27.0", "4.46.3", [(2, 65, "CKPT005")]),  # TRL's config + trainer non-reentrant: only the Trainer refusal
        ("0.28.0", "4.46.3", [(2, 65, "CKPT005")]),
        ("0.28.0", "5.17.0", [(2, 65, "CKPT005")]),
    ],
)
def test_trl_turns_checkpointing_on_by_default(tmp_path, trl, transformers, expected):
    outcome, *_ = lint(
        tmp_path,
        "run.sh",
        """
        trl sft --config plain.yaml
        accelerate launch --config_file ac.yaml -m trl.cli sft --config plain.yaml
        trl sft --config grad_op.yaml
        """,
        {"trl": trl, "transformers": transformers, "torch": "2.13"},
        **{
            "plain.yaml": "model_name_or_path: m\n",
            "grad_op.yaml": "model_name_or_path: m\nfsdp: shard_grad_op\n",
            "ac.yaml": "distributed_type: FSDP\nfsdp_config: {fsdp_activation_checkpointing: true}\n",
        },
    )
    assert found(outcome) == expected


@pytest.mark.parametrize(
    ("trl", "kwargs", "expected"),
    [
        ("0.26.0", "", [(1, 65, "CKPT002")]),  # transformers 4.x's reentrant default
        ("0.29.0", "", []),  # TRL's trainers default to use_reentrant=False
        ("0.29.0", "gradient_checkpointing_kwargs: {preserve_rng_state: false}\n", []),  # TRL adds the key
        ("0.29.0", "gradient_checkpointing_kwargs: {use_reentrant: true}\n", [(1, 65, "CKPT002")]),  # the user's stays
    ],
)
def test_trl_commands_default_to_non_reentrant_from_0_27(tmp_path, trl, kwargs, expected):
    """`trl dpo --config r.yaml` with `gradient_checkpointing: true` written, under an
    accelerate FSDP1 `SHARD_GRAD_OP` config: reentrant only where TRL leaves transformers'
    default (under FSDP2 nothing is reported: no harm measured there)."""
    outcome, *_ = lint(
        tmp_path,
        "run.sh",
        "accelerate launch --config_file ac.yaml -m trl.cli dpo --config r.yaml\n",
        {"trl": trl, "transformers": "4.46.3", "torch": "2.13"},
        **{
            "r.yaml": "model_name_or_path: m\ngradient_checkpointing: true\n" + kwargs,
            "ac.yaml": "distributed_type: FSDP\nfsdp_config: {fsdp_version: 1, fsdp_sharding_strategy: SHARD_GRAD_OP}\n",
        },
    )
    assert found(outcome) == expected


def test_axolotl_fsdp2_config_without_the_fsdp_list(tmp_path):
    recipe = (
        "base_model: m\ndatasets: []\ngradient_checkpointing: true\nfsdp_version: 2\n"
        "fsdp_config:\n  reshard_after_forward: {reshard}\n  activation_checkpointing: {ac}\n"
    )
    for reshard, ac, expected in [
        ("true", "false", []),  # FSDP2: reentrant measured harmless (CKPT002's Evidence)
        ("false", "false", []),  # axolotl's reentrant default under FSDP2: likewise
        ("true", "true", [(3, 1, "CKPT005")]),
    ]:
        outcome, *_ = lint(tmp_path, "ax.yml", recipe.format(reshard=reshard, ac=ac), TF5)
        assert found(outcome) == expected, (reshard, ac)


def test_non_reentrant_checkpointing_adds_no_all_gather_under_fsdp1(tmp_path):
    # EVIDENCE Q5: the recomputation runs in the unit's backward, after FSDP's own all-gather.
    recipe = "gradient_checkpointing: true\nfsdp: full_shard auto_wrap\n{kwargs}"
    for kwargs, versions, expected in [
        ("", TF4, [(1, 1, "CKPT004")]),
        # transformers >= 4.52 checkpoints each layer inside its unit: neither CKPT004 nor,
        # with `auto_wrap` (a unit per layer), CKPT002.
        ("gradient_checkpointing_kwargs: {use_reentrant: true}\n", TF5, []),
        ("gradient_checkpointing_kwargs: {use_reentrant: true}\n", {"transformers": "4.51.3", "torch": "2.13"}, [(1, 1, "CKPT004")]),
        ("", {"transformers": "4.53.0", "torch": "2.13"}, []),
        ("gradient_checkpointing_kwargs: {use_reentrant: false}\n", TF4, []),
        ("", TF5, []),
    ]:
        outcome, *_ = lint(tmp_path, "sft.yaml", recipe.format(kwargs=kwargs), versions)
        assert found(outcome) == expected, (kwargs, versions)


def test_layer_units_of_an_accelerate_config_on_transformers_4_52_and_later(tmp_path):
    # An accelerate FSDP1 config wrapping each decoder layer: the layers checkpoint inside their
    # units from 4.52 (nothing measured); without a policy (accelerate's NO_WRAP) one unit holds
    # them all, and backward crashes.
    config = "distributed_type: FSDP\nfsdp_config:\n  fsdp_sharding_strategy: SHARD_GRAD_OP\n{policy}"
    script = "accelerate launch --config_file ac.yaml train.py --gradient_checkpointing True\n"
    for policy, versions, expected in [
        ("  fsdp_auto_wrap_policy: TRANSFORMER_BASED_WRAP\n", {"transformers": "4.55.0", "torch": "2.13"}, []),
        ("", {"transformers": "4.55.0", "torch": "2.13"}, ["CKPT002"]),
        ("  fsdp_auto_wrap_policy: TRANSFORMER_BASED_WRAP\n", TF4, ["CKPT002"]),
    ]:
        outcome, *_ = lint(tmp_path, "run.sh", script, versions, **{"ac.yaml": config.format(policy=policy), "train.py": "import transformers\n"})
        assert [d.code for d in outcome.diagnostics] == expected, (policy, versions)


def test_axolotl_activation_offloading_and_the_nested_fsdp_version(tmp_path):
    # axolotl's trainer builder turns Hugging Face checkpointing off for every offloading mode
    # but `hidden_states` (a full fine-tune is then wrapped non-reentrant by
    # `apply_activation_checkpointing`); the FSDP version may be written in `fsdp_config`.
    recipe = "base_model: m\ndatasets: []\ngradient_checkpointing: true\n{offloading}{fsdp}"
    top, nested = "fsdp_version: 2\nfsdp_config: {reshard_after_forward: true}\n", "fsdp_config: {fsdp_version: 2}\n"
    for offloading, fsdp, expected in [
        ("activation_offloading: true\n", top, []),
        ("activation_offloading: legacy\n", top, []),
        ("activation_offloading: disk\n", nested, []),
        ("activation_offloading: ${OFFLOAD}\n", top, []),  # not known here: nothing said
        # Checkpointing stays on, reentrant, but under FSDP2: no harm measured (CKPT002's Evidence).
        ("activation_offloading: hidden_states\n", top, []),
        ("activation_offloading: false\n", top, []),
        ("", nested, []),
        ("", "fsdp_config: {version: 2}\n", []),
    ]:
        outcome, *_ = lint(tmp_path, "ax.yml", recipe.format(offloading=offloading, fsdp=fsdp), TF5)
        assert found(outcome) == expected, (offloading, fsdp)


def test_helm_and_jinja_templates_are_not_yaml_yet(tmp_path):
    template = "gradient_checkpointing: {{ .Values.gc }}\nfsdp: {% if shard %}full_shard{% endif %}\n"
    outcome, *_ = lint(tmp_path, "templates/train.yaml", template)
    assert found(outcome) == []


def test_deepspeed_section_follows_what_the_project_code_does(tmp_path, monkeypatch):
    """CKPT008 in a JSON / YAML file asks the project's Python code; a cached result of the
    config is not reused once the code starts configuring DeepSpeed's checkpointing."""
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "x"\n')
    (tmp_path / "ds_config.json").write_text(
        '{\n  "train_micro_batch_size_per_gpu": "auto",\n  "zero_optimization": {"stage": 3},\n'
        '  "activation_checkpointing": {"partition_activations": true}\n}\n'
    )
    # Not DeepSpeed configs: an FSDP `fsdp_config` file, an `activation_checkpointing` mapping
    # beside no DeepSpeed key.
    (tmp_path / "fsdp.json").write_text('{"fsdp_config": {"activation_checkpointing": true}, "fsdp": "full_shard"}\n')
    (tmp_path / "other.yaml").write_text("activation_checkpointing:\n  cpu_checkpointing: true\nlr: 0.1\n")
    # An accelerate config holding a whole DeepSpeed config under `deepspeed_config:`.
    (tmp_path / "accelerate.yaml").write_text(
        "distributed_type: DEEPSPEED\ndeepspeed_config:\n  zero_optimization:\n    stage: 3\n"
        "  activation_checkpointing:\n    cpu_checkpointing: true\n"
    )
    monkeypatch.chdir(tmp_path)

    def reported():
        result = CliRunner().invoke(main, ["check", ".", "--select", "CKPT008", "--output-format", "json"])
        items = json.loads(result.stdout)
        return sorted((Path(i["filename"]).name, i["location"]["row"], i["location"]["column"]) for i in items)

    assert reported() == []  # no Python code hands the configs on: who reads them is unknown
    (tmp_path / "train.py").write_text(
        'from transformers import TrainingArguments\nTrainingArguments("o", deepspeed="ds_config.json")\n'
    )
    assert reported() == [("accelerate.yaml", 5, 3), ("ds_config.json", 4, 3)]
    assert reported() == [("accelerate.yaml", 5, 3), ("ds_config.json", 4, 3)]  # from the cache
    (tmp_path / "wiring.py").write_text(
        'import deepspeed\n\ndef setup():\n    deepspeed.checkpointing.configure(None, deepspeed_config="ds_config.json")\n'
    )
    assert reported() == []
