"""Checkpoint converter: training checkpoint -> standalone model directory -> same policy."""

from __future__ import annotations

import json

import gymnasium as gym
import numpy as np
import pytest
import torch

from infra.checkpoint import convert
from infra.checkpoint.export import (
    META_FILE,
    ExportError,
    export_policy,
    load_exported_policy,
    policy_from_checkpoint,
)
from infra.checkpoint.reader import locate_checkpoint
from infra.checkpoint.serialize import tensors_to_bytes
from infra.checkpoint.store import LocalCheckpointStore, step_dir_name
from rl_core.config import load_config
from rl_core.envs import EnvSpaces, probe_spaces
from rl_core.envs.spaces import env_spaces_to_dict
from rl_core.models import MODELS, BasePolicy, get_model, register_model
from tests.policy_checks import assert_same_outputs


def write_checkpoint(root, overrides=(), steps=(3,), spaces_json=True):
    """A committed checkpoint as TrainSession writes it (the files the converter reads)."""
    cfg = load_config(overrides=list(overrides))
    spaces = probe_spaces(cfg.env)
    store = LocalCheckpointStore(root)
    policies = {}
    for step in steps:
        torch.manual_seed(step)
        policy = get_model(cfg.model, spaces)
        folder = step_dir_name(step)
        store.write_bytes(f"{folder}/config.json", json.dumps(cfg.model_dump(mode="json")).encode())
        if spaces_json:
            store.write_bytes(
                f"{folder}/spaces.json", json.dumps(env_spaces_to_dict(spaces)).encode()
            )
        store.write_bytes(
            f"{folder}/actor_0/model.safetensors", tensors_to_bytes(policy.state_dict())
        )
        store.write_bytes(f"{folder}/COMPLETE", b"ok\n")
        store.commit(step, {"mlflow_run_id": "abc123"})
        policies[step] = policy.eval()
    return store, policies, spaces


def obs_batch(spaces, n=32, seed=0):
    space = spaces.observation_space
    space.seed(seed)
    return {"states": np.stack([space.sample() for _ in range(n)]).astype(np.float32)}


def assert_same_policy(a, b, spaces):
    assert_same_outputs(a, b, obs_batch(spaces))


@pytest.mark.parametrize(
    "overrides",
    [
        pytest.param((), id="cartpole-discrete"),
        pytest.param(
            ("env.env_id=Pendulum-v1", "model.continuous_action=tanh"), id="pendulum-tanh"
        ),
    ],
)
def test_converted_model_acts_like_the_checkpointed_one(tmp_path, overrides):
    store, policies, spaces = write_checkpoint(tmp_path / "ckpt", overrides)
    out = tmp_path / "model"
    assert convert.main(["--checkpoint", str(store.root), "--out", str(out)]) == 0
    assert sorted(p.name for p in out.iterdir()) == ["model.safetensors", META_FILE]
    loaded, meta = load_exported_policy(out)
    assert meta["model_type"] == "mlp_actor_critic" and meta["category"] == "embodied"
    assert meta["source"] == {
        "run_name": "ppo-cartpole",
        "step": 3,
        "checkpoint": f"{store.root}/step_000003",
        "mlflow_run_id": "abc123",
    }
    assert not loaded.training
    assert_same_policy(loaded, policies[3], spaces)
    # and the checkpoint itself rebuilds to the same policy
    from_ckpt, _, _ = policy_from_checkpoint(locate_checkpoint(store.root))
    assert_same_policy(from_ckpt, policies[3], spaces)


def test_step_selection_by_folder_flag_and_run_name(tmp_path):
    run_root = tmp_path / "outputs" / "myrun" / "checkpoints"
    store, policies, spaces = write_checkpoint(run_root, steps=(2, 4))
    cases = {
        "latest": (["--run-name", "myrun", "--output-dir", str(tmp_path / "outputs")], 4),
        "flag": (["--checkpoint", str(run_root), "--step", "2"], 2),
        "folder": (["--checkpoint", str(run_root / "step_000002")], 2),
    }
    for name, (args, step) in cases.items():
        out = tmp_path / name
        assert convert.main([*args, "--out", str(out)]) == 0
        loaded, meta = load_exported_policy(out)
        assert meta["source"]["step"] == step
        assert_same_policy(loaded, policies[step], spaces)


def test_checkpoint_without_spaces_file_asks_the_env(tmp_path):
    store, policies, spaces = write_checkpoint(tmp_path / "ckpt", spaces_json=False)
    policy, _, got = policy_from_checkpoint(locate_checkpoint(store.root))
    assert got == spaces
    assert_same_policy(policy, policies[3], spaces)


def test_existing_output_is_kept_unless_overwrite(tmp_path, capsys):
    store, _, _ = write_checkpoint(tmp_path / "ckpt")
    out = tmp_path / "model"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    assert convert.main(["--checkpoint", str(store.root), "--out", str(out)]) == 2
    assert "already exists and is not empty" in capsys.readouterr().err
    assert (out / "notes.txt").read_text() == "mine"
    assert convert.main(["--checkpoint", str(store.root), "--out", str(out), "--overwrite"]) == 0
    assert sorted(p.name for p in out.iterdir()) == ["model.safetensors", META_FILE]
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no leftovers


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        ("nothing", "no committed checkpoint in"),
        ("weights", "is not a valid safetensors file"),
        ("shape", "do not fit model type 'mlp_actor_critic'"),
        ("config", "config.json is not valid JSON"),
        ("incomplete", "is not a complete checkpoint"),
    ],
)
def test_bad_checkpoints_are_clear_errors(tmp_path, capsys, damage, message):
    root = tmp_path / "ckpt"
    if damage != "nothing":
        store, _, _ = write_checkpoint(root)
        folder = root / "step_000003"
        if damage == "weights":
            (folder / "actor_0" / "model.safetensors").write_bytes(b"garbage")
        elif damage == "shape":
            cfg = json.loads((folder / "config.json").read_text())
            cfg["model"]["hidden_sizes"] = [32]
            (folder / "config.json").write_text(json.dumps(cfg))
        elif damage == "config":
            (folder / "config.json").write_text("{not json")
        elif damage == "incomplete":
            (folder / "COMPLETE").unlink()
    out = tmp_path / "model"
    code = convert.main(
        [
            "--checkpoint",
            str(root / "step_000003" if damage == "incomplete" else root),
            "--out",
            str(out),
        ]
    )
    assert code == 2
    assert message in capsys.readouterr().err
    assert not out.exists()


def test_load_rejects_directories_that_are_not_exports(tmp_path):
    with pytest.raises(ExportError, match="not an rlpipe model directory"):
        load_exported_policy(tmp_path)
    (tmp_path / META_FILE).write_text(json.dumps({"format": 99}))
    with pytest.raises(ExportError, match="has format 99"):
        load_exported_policy(tmp_path)


# -- Hugging Face layout -------------------------------------------------------------------
class TinyCausalLMPolicy(BasePolicy):
    """Minimal policy around a Hugging Face causal LM (greedy next token from ``states``)."""

    export_format = "hf_pretrained"

    def __init__(self, model):
        super().__init__()
        self.model = model

    def pretrained_model(self):
        return self.model

    def predict_action_batch(self, env_obs, mode="train", compute_values=True, **kwargs):
        ids = torch.as_tensor(np.asarray(env_obs["states"]), dtype=torch.long)
        logits = self.model(input_ids=ids).logits[:, -1]
        logprobs = torch.log_softmax(logits, -1)
        actions = logprobs.argmax(-1)
        return actions.numpy(), {
            "prev_logprobs": logprobs.gather(-1, actions[:, None])[:, 0],
            "prev_values": None,
            "forward_inputs": {"input_ids": ids},
        }

    def default_forward(self, forward_inputs, compute_values=True, compute_entropy=True, **kwargs):
        raise NotImplementedError


def build_tiny_lm(cfg, spaces):
    from transformers import AutoModelForCausalLM, Qwen2Config

    path = (cfg.model_extra or {}).get("model_path")
    if path:
        return TinyCausalLMPolicy(AutoModelForCausalLM.from_pretrained(path))
    torch.manual_seed(0)
    config = Qwen2Config(
        vocab_size=16,
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=32,
    )
    return TinyCausalLMPolicy(AutoModelForCausalLM.from_config(config))


def test_hf_policy_exports_a_from_pretrained_directory(tmp_path):
    from transformers import AutoModelForCausalLM

    register_model("test_tiny_lm", build_tiny_lm, category="reasoning")
    try:
        cfg = load_config(
            overrides=[
                "model.model_type=test_tiny_lm",
                "algorithm.adv_type=grpo",
                "reward.reward_type=math_verify",
            ]
        ).model
        spaces = EnvSpaces(gym.spaces.Box(0, 15, (5,), np.int64), gym.spaces.Discrete(16))
        policy = get_model(cfg, spaces)
        with torch.no_grad():  # move away from the seeded init
            for p in policy.parameters():
                p.add_(0.01 * torch.randn_like(p))
        config = {**cfg.model_dump(mode="json"), "model_path": "/gone/after/training"}
        out = export_policy(policy, config, spaces, tmp_path / "lm")
        names = {p.name for p in out.iterdir()}
        assert {"config.json", "model.safetensors", META_FILE} <= names
        ids = torch.randint(0, 16, (4, 5), generator=torch.Generator().manual_seed(1))
        hf = AutoModelForCausalLM.from_pretrained(out)
        assert torch.allclose(hf(input_ids=ids).logits, policy.model(input_ids=ids).logits)
        loaded, meta = load_exported_policy(out)
        assert meta["weights_format"] == "hf_pretrained" and meta["model"]["model_path"] == "."
        assert meta["category"] == "reasoning"
        obs = {"states": ids.numpy()}
        np.testing.assert_array_equal(
            loaded.predict_action_batch(obs)[0], policy.predict_action_batch(obs)[0]
        )
    finally:
        MODELS.unregister("test_tiny_lm")
