"""Run names are one folder name everywhere: config, CLIs, flows, store locations."""

from __future__ import annotations

import json

import pytest

from flows import cli
from flows import evaluate as evaluate_flow
from infra.checkpoint import convert
from infra.checkpoint.location import run_store_uri
from infra.checkpoint.store import CheckpointError
from rl_core.config import ConfigError, check_run_name, load_config

BAD_NAMES = ["../../x", "..", ".", "a/b", "/abs", "-dash-first", "", "x" * 129, "a b", "a\\b"]
GOOD_NAMES = ["a", "ppo-cartpole", "A.b_c-1", "run..2", "x" * 128]


@pytest.mark.parametrize("name", BAD_NAMES)
def test_config_refuses_bad_run_names(name):
    with pytest.raises(ConfigError) as info:
        load_config(overrides=[f"run.name={json.dumps(name)}"])  # YAML-quoted
    msg = str(info.value)
    assert f"run.name = {name!r}: not a valid run name: use 1 to 128 letters" in msg
    with pytest.raises(ValueError, match=r"is not valid: use 1 to 128 letters, digits"):
        check_run_name(name)
    with pytest.raises(CheckpointError, match="is not valid"):
        run_store_uri("outputs", name)
    with pytest.raises(CheckpointError, match="is not valid"):
        run_store_uri("outputs", name, "s3://bucket/ckpts")


@pytest.mark.parametrize("name", GOOD_NAMES)
def test_good_run_names_pass(name):
    assert load_config(overrides=[f"run.name={name}"]).run.name == name
    assert run_store_uri("/o", name, "s3://bucket/ckpts") == f"s3://bucket/ckpts/{name}"


def test_evaluate_flow_refuses_a_bad_run_name_before_touching_anything(tmp_path):
    with pytest.raises(CheckpointError, match=r"run name '\.\./\.\./x' is not valid"):
        evaluate_flow.evaluate.fn("../../x", output_dir=str(tmp_path / "outputs"))
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "main",
    [
        pytest.param(lambda name: evaluate_flow.main(["--run-name", name]), id="evaluate"),
        pytest.param(
            lambda name: convert.main(["--run-name", name, "--out", "/tmp/never"]), id="convert"
        ),
        pytest.param(
            lambda name: cli.build_parser().parse_intermixed_args(["--run-name", name]),
            id="train",
        ),
    ],
)
def test_clis_refuse_bad_run_names_with_a_clear_message(main, capsys):
    with pytest.raises(SystemExit) as info:
        main("../../x")
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert "argument --run-name: run name '../../x' is not valid: use 1 to 128" in err
