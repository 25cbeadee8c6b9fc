"""Pixel policies: the CNN actor-critic (``pixel_actor_critic``) and the VLA (``vla_oft``).

Shapes, seeded and deterministic actions, log-probs that training recomputes exactly,
padding that does not change a VLA's actions, demonstrations scored through
``demo_forward_inputs`` (and cloned), and exported models that act like the originals.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch

from infra.checkpoint.export import (
    POLICY_WEIGHTS_FILE,
    export_policy,
    load_exported_policy,
)
from infra.checkpoint.init_from import load_initial_weights
from kinds.embodied.sections import EmbodiedModelConfig
from rl_core.envs import EnvSpaces
from rl_core.models import MODELS, BasePolicy, get_model
from rl_core.models.mlp_actor_critic import MLPActorCritic
from rl_core.models.pixel_actor_critic import PixelActorCritic
from rl_core.models.tiny_lm import create_tiny_lm
from rl_core.models.vla_oft import VLAOFTPolicy
from rl_core.training.behaviour_cloning import bc_step
from rl_core.training.nonfinite import SkippedUpdateGuard

IMAGE = gym.spaces.Box(0, 255, (16, 16, 3), np.uint8)
STATES = gym.spaces.Box(-1.0, 1.0, (4,), np.float32)
TEXT = gym.spaces.Text(64)
CHUNK, STEP_DIM = 3, 2
CHUNK_BOX = gym.spaces.Box(-1.0, 1.0, (CHUNK * STEP_DIM,), np.float32)
SMALL_CNN = {"cnn_channels": [8, 16], "cnn_feature_dim": 32, "hidden_sizes": [32]}


@pytest.fixture(scope="module")
def tiny_lm(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return create_tiny_lm(tmp_path_factory.mktemp("lm") / "tiny", num_hidden_layers=1)


def pixel_policy(action_space: gym.Space, obs_space: gym.Space | None = None, **cfg: Any):
    if obs_space is None:
        obs_space = gym.spaces.Dict({"main_images": IMAGE, "states": STATES})
    model = EmbodiedModelConfig(model_type="pixel_actor_critic", **{**SMALL_CNN, **cfg})
    torch.manual_seed(0)
    return get_model(model, EnvSpaces(obs_space, action_space))


def vla_config(path: Path, **cfg: Any) -> EmbodiedModelConfig:
    fields = {
        "model_type": "vla_oft",
        "model_path": str(path),
        "action_chunk": CHUNK,
        "num_image_tokens": 4,
        "max_instruction_tokens": 32,
        "init_log_std": -0.5,
        **SMALL_CNN,
        **cfg,
    }
    return EmbodiedModelConfig(**fields)


def vla_spaces(states: bool = True) -> EnvSpaces:
    keys = {"main_images": IMAGE, "task_descriptions": TEXT}
    if states:
        keys["states"] = STATES
    return EnvSpaces(gym.spaces.Dict(keys), CHUNK_BOX)


def vla_policy(path: Path, states: bool = True, **cfg: Any) -> VLAOFTPolicy:
    torch.manual_seed(0)
    return get_model(vla_config(path, **cfg), vla_spaces(states))


def observations(n: int = 4, seed: int = 0, texts: list[str] | None = None) -> dict[str, Any]:
    rng = np.random.default_rng(seed)
    texts = texts or [["pick up the red block", "open the drawer"][i % 2] for i in range(n)]
    return {
        "main_images": rng.integers(0, 256, (n, *IMAGE.shape), dtype=np.uint8),
        "states": rng.uniform(-1, 1, (n, *STATES.shape)).astype(np.float32),
        "task_descriptions": np.array(texts),
    }


def kick(policy: torch.nn.Module, scale: float = 0.05, seed: int = 7) -> None:
    """Move the parameters away from their init (the action heads start at ~0 means)."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for param in policy.parameters():
            if param.is_floating_point():
                param.add_(scale * torch.randn(param.shape, generator=gen).to(param.dtype))


def eval_mean(policy: BasePolicy, obs: dict[str, Any]) -> torch.Tensor:
    """The unclipped action mean (the eval-mode model action)."""
    return policy.predict_action_batch(obs, mode="eval")[1]["forward_inputs"]["model_action"]


# -- registry and builders -----------------------------------------------------------------
def test_models_are_registered_as_embodied(tiny_lm: Path) -> None:
    assert MODELS.get("pixel_actor_critic").category == "embodied"
    assert MODELS.get("VLA_OFT").category == "embodied"  # names are case-insensitive
    assert isinstance(pixel_policy(gym.spaces.Discrete(3)), PixelActorCritic)
    assert isinstance(vla_policy(tiny_lm), VLAOFTPolicy)


@pytest.mark.parametrize("model_type", ["pixel_actor_critic", "vla_oft"])
def test_observations_without_main_images_are_a_clear_error(model_type: str, tiny_lm: Path) -> None:
    model = EmbodiedModelConfig(model_type=model_type, model_path=str(tiny_lm))
    spaces = EnvSpaces(gym.spaces.Dict({"states": STATES, "task_descriptions": TEXT}), CHUNK_BOX)
    with pytest.raises(ValueError, match=r"needs a 'main_images' key .* it has \['states', "):
        get_model(model, spaces)
    with pytest.raises(ValueError, match="needs image observations"):
        get_model(model, EnvSpaces(STATES, CHUNK_BOX))


def test_vla_checks_its_backbone_and_action_chunk(tiny_lm: Path, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="action_chunk = 4 must divide"):
        vla_policy(tiny_lm, action_chunk=4)
    with pytest.raises(ValueError, match="not a local Hugging Face model directory"):
        vla_policy(tmp_path)
    with pytest.raises(ValueError, match="supports 1-D Box action spaces"):
        get_model(
            vla_config(tiny_lm), EnvSpaces(vla_spaces().observation_space, gym.spaces.Discrete(3))
        )
    with pytest.raises(ValueError, match="max_position_embeddings"):
        vla_policy(tiny_lm, max_instruction_tokens=300)


def test_model_config_bounds() -> None:
    cfg = EmbodiedModelConfig()
    assert cfg.cnn_channels == [32, 64, 64] and cfg.action_chunk == 1 and cfg.model_path is None
    assert not cfg.trust_remote_code and cfg.dtype == "float32"
    for bad in ({"cnn_channels": []}, {"cnn_channels": [0]}, {"action_chunk": 0}):
        with pytest.raises(ValueError):
            EmbodiedModelConfig(**bad)


# -- the CNN actor-critic ------------------------------------------------------------------
@pytest.mark.parametrize(
    ("action_space", "squash", "obs_space"),
    [
        pytest.param(gym.spaces.Discrete(5), "clip", None, id="discrete"),
        pytest.param(gym.spaces.Box(-2.0, 1.0, (3,), np.float32), "clip", None, id="clip"),
        pytest.param(gym.spaces.Box(-2.0, 1.0, (3,), np.float32), "tanh", None, id="tanh"),
        pytest.param(gym.spaces.Discrete(5), "clip", IMAGE, id="image-box"),
    ],
)
def test_pixel_policy_acts_and_recomputes_its_logprobs(action_space, squash, obs_space) -> None:
    policy = pixel_policy(action_space, obs_space, continuous_action=squash)
    kick(policy)
    obs = observations(6)
    if obs_space is IMAGE:
        obs = {"main_images": obs["main_images"]}
    actions, result = policy.predict_action_batch(obs, generator=torch.Generator().manual_seed(1))
    assert actions.shape == (6, *action_space.shape)
    assert all(action_space.contains(a.astype(action_space.dtype)) for a in actions)
    inputs = result["forward_inputs"]
    assert inputs["main_images"].dtype == torch.uint8
    assert ("states" in inputs) == (obs_space is None)
    out = policy.default_forward(inputs)
    torch.testing.assert_close(out["logprobs"], result["prev_logprobs"])
    torch.testing.assert_close(out["values"], result["prev_values"])
    torch.testing.assert_close(policy.value_forward(obs), result["prev_values"])
    assert out["entropy"].shape == (6,)
    # seeded: the same generator seed gives the same actions, another seed others
    again, _ = policy.predict_action_batch(obs, generator=torch.Generator().manual_seed(1))
    other, _ = policy.predict_action_batch(obs, generator=torch.Generator().manual_seed(2))
    np.testing.assert_array_equal(actions, again)
    assert not np.array_equal(actions, other)
    # eval: deterministic whatever the generator
    a, _ = policy.predict_action_batch(obs, mode="eval", generator=torch.Generator().manual_seed(1))
    b, _ = policy.predict_action_batch(obs, mode="eval", generator=torch.Generator().manual_seed(2))
    np.testing.assert_array_equal(a, b)


# -- the VLA ---------------------------------------------------------------------------------
def test_vla_acts_in_chunks_and_recomputes_its_logprobs(tiny_lm: Path) -> None:
    policy = vla_policy(tiny_lm)
    kick(policy)
    obs = observations(4)
    gen = torch.Generator().manual_seed(3)
    actions, result = policy.predict_action_batch(obs, generator=gen)
    assert actions.shape == (4, CHUNK * STEP_DIM) and all(CHUNK_BOX.contains(a) for a in actions)
    inputs = result["forward_inputs"]
    assert sorted(inputs) == [
        "attention_mask",
        "input_ids",
        "main_images",
        "model_action",
        "states",
    ]
    assert all(isinstance(v, torch.Tensor) for v in inputs.values())
    assert inputs["main_images"].dtype == torch.uint8
    assert inputs["input_ids"].shape == inputs["attention_mask"].shape == (4, 32)
    out = policy.default_forward(inputs)
    torch.testing.assert_close(out["logprobs"], result["prev_logprobs"])
    torch.testing.assert_close(out["values"], result["prev_values"])
    torch.testing.assert_close(policy.value_forward(obs), result["prev_values"])
    assert out["entropy"].shape == (4,)
    again, _ = policy.predict_action_batch(obs, generator=torch.Generator().manual_seed(3))
    np.testing.assert_array_equal(actions, again)
    a, _ = policy.predict_action_batch(obs, mode="eval", generator=torch.Generator().manual_seed(1))
    b, _ = policy.predict_action_batch(obs, mode="eval", generator=torch.Generator().manual_seed(2))
    np.testing.assert_array_equal(a, b)
    # instructions as a list work like a numpy str array; the text changes the actions
    listed = {**obs, "task_descriptions": list(obs["task_descriptions"])}
    torch.testing.assert_close(eval_mean(policy, listed), eval_mean(policy, obs))
    swapped = {**obs, "task_descriptions": obs["task_descriptions"][::-1].copy()}
    assert not torch.allclose(eval_mean(policy, swapped), eval_mean(policy, obs))
    with pytest.raises(KeyError, match="task_descriptions"):
        policy.predict_action_batch({k: v for k, v in obs.items() if k != "task_descriptions"})


def test_vla_without_states_reads_images_and_text_only(tiny_lm: Path) -> None:
    policy = vla_policy(tiny_lm, states=False)
    obs = {k: v for k, v in observations(2).items() if k != "states"}
    _, result = policy.predict_action_batch(obs)
    assert "states" not in result["forward_inputs"] and policy.state_proj is None


def test_vla_outputs_do_not_depend_on_padding(tiny_lm: Path) -> None:
    policy = vla_policy(tiny_lm)
    kick(policy, 0.2)
    obs = observations(2, texts=["push", "slide the blue puck to the far left corner"])
    alone = {k: v[:1] for k, v in obs.items()}
    reference = eval_mean(policy, alone)[0]
    value = policy.value_forward(alone)[0]
    for side in ("right", "left"):
        for length in (20, 48):
            policy.tokenizer.padding_side = side
            policy.max_instruction_tokens = length
            torch.testing.assert_close(eval_mean(policy, obs)[0], reference)
            torch.testing.assert_close(policy.value_forward(obs)[0], value)
    policy.tokenizer.padding_side = "right"


def test_vla_truncates_long_instructions_with_a_warning(tiny_lm: Path, caplog) -> None:
    policy = vla_policy(tiny_lm, max_instruction_tokens=8)
    ids, mask = policy.tokenize(["a" * 20, "b"])
    assert ids.shape == (2, 8) and mask.tolist() == [[1] * 8, [1] + [0] * 7]
    assert "truncated" in caplog.text


# -- demonstrations ------------------------------------------------------------------------
def _policies(tiny_lm: Path) -> list[tuple[str, BasePolicy, dict[str, Any]]]:
    box = gym.spaces.Box(-2.0, 1.0, (3,), np.float32)
    torch.manual_seed(0)
    mlp = MLPActorCritic(4, box, [16], continuous_action="tanh", init_log_std=-0.5)
    mlp_discrete = MLPActorCritic(4, gym.spaces.Discrete(3), [16])
    states = {"states": observations(5)["states"]}
    return [
        ("mlp-tanh", mlp, states),
        ("mlp-discrete", mlp_discrete, states),
        ("pixel-clip", pixel_policy(box, init_log_std=-0.5), observations(5)),
        ("pixel-tanh", pixel_policy(box, continuous_action="tanh"), observations(5)),
        ("pixel-discrete", pixel_policy(gym.spaces.Discrete(4)), observations(5)),
        ("vla-clip", vla_policy(tiny_lm), observations(5)),
        ("vla-tanh", vla_policy(tiny_lm, continuous_action="tanh"), observations(5)),
    ]


def test_demo_forward_inputs_score_the_policys_own_eval_actions(tiny_lm: Path) -> None:
    for name, policy, obs in _policies(tiny_lm):
        kick(policy)
        eval_actions, eval_result = policy.predict_action_batch(obs, mode="eval")
        inputs = policy.demo_forward_inputs(obs, eval_actions)
        logprobs = policy.default_forward(inputs)["logprobs"]
        torch.testing.assert_close(
            logprobs, eval_result["prev_logprobs"], atol=1e-3, rtol=1e-4, msg=name
        )
        if "tanh" not in name:  # the mean is the mode (a squashed density's is elsewhere)
            sampled = policy.predict_action_batch(obs, generator=torch.Generator().manual_seed(0))
            assert (logprobs >= sampled[1]["prev_logprobs"] - 1e-3).all(), name


def test_demo_actions_at_tanh_bounds_stay_finite(tiny_lm: Path) -> None:
    policy = vla_policy(tiny_lm, continuous_action="tanh")
    obs = observations(2)
    corners = np.stack([CHUNK_BOX.low, CHUNK_BOX.high])
    inputs = policy.demo_forward_inputs(obs, corners)
    assert torch.isfinite(inputs["model_action"]).all()
    assert torch.isfinite(policy.default_forward(inputs)["logprobs"]).all()


def test_a_bc_step_raises_the_demonstrated_actions_logprob(tiny_lm: Path) -> None:
    for name, policy, obs in _policies(tiny_lm):
        space_actions, _ = policy.predict_action_batch(
            obs, generator=torch.Generator().manual_seed(9)
        )
        demo = policy.demo_forward_inputs(obs, space_actions)
        before = policy.default_forward(demo, compute_values=False)["logprobs"].mean()
        optimizer = torch.optim.SGD(policy.parameters(), lr=1e-2)
        optimizer.zero_grad()
        (-before).backward()
        optimizer.step()
        after = policy.default_forward(demo, compute_values=False)["logprobs"].mean()
        assert after > before, name


def test_mlp_without_demo_support_names_its_type() -> None:
    class NoDemos(BasePolicy):
        def default_forward(self, forward_inputs, compute_values=True, compute_entropy=True):
            return {}

        def predict_action_batch(self, env_obs, mode="train", compute_values=True, **kwargs):
            return None, {}

    with pytest.raises(NotImplementedError, match="NoDemos does not implement demo_forward"):
        NoDemos().demo_forward_inputs({}, np.zeros(1))


class _ImageDemos:
    """A fixed image -> action map, shaped like :class:`rl_core.data.demos.Demos`."""

    def __init__(self, n: int = 8) -> None:
        self.obs = observations(n, seed=4)
        rng = np.random.default_rng(5)
        self.actions = rng.uniform(-0.8, 0.8, (n, CHUNK * STEP_DIM)).astype(np.float32)

    def __len__(self) -> int:
        return len(self.actions)

    def env_obs(self, rows: np.ndarray) -> dict[str, Any]:
        return {k: v[rows] for k, v in self.obs.items()}


@pytest.mark.parametrize("model", ["pixel_actor_critic", "vla_oft"])
def test_behaviour_cloning_fits_a_fixed_image_to_action_map(model: str, tiny_lm: Path) -> None:
    demos = _ImageDemos()
    if model == "vla_oft":
        policy = vla_policy(tiny_lm, init_log_std=-1.0)
    else:
        policy = pixel_policy(CHUNK_BOX, init_log_std=-1.0)
    optimizer = torch.optim.Adam(policy.parameters(), lr=5e-3)
    guard, gen = SkippedUpdateGuard(3), torch.Generator().manual_seed(0)
    losses = [
        bc_step(policy, optimizer, demos, 8, gen, 1.0, guard, 0, 5e-3)["train/bc_loss"]
        for _ in range(100)
    ]
    assert losses[-1] < losses[0] - 1.0, losses
    mean = eval_mean(policy, demos.obs)
    start = np.abs(demos.actions).mean()
    assert float((mean - torch.as_tensor(demos.actions)).abs().mean()) < 0.5 * start


# -- export ----------------------------------------------------------------------------------
def _same_outputs(a: BasePolicy, b: BasePolicy, obs: dict[str, Any]) -> None:
    for mode in ("eval", "train"):
        act_a, res_a = a.predict_action_batch(
            obs, mode=mode, generator=torch.Generator().manual_seed(5)
        )
        act_b, res_b = b.predict_action_batch(
            obs, mode=mode, generator=torch.Generator().manual_seed(5)
        )
        np.testing.assert_array_equal(act_a, act_b)
        assert torch.equal(res_a["prev_logprobs"], res_b["prev_logprobs"])
        assert torch.equal(res_a["prev_values"], res_b["prev_values"])


def test_exported_pixel_policy_acts_like_the_original(tmp_path: Path) -> None:
    policy = pixel_policy(CHUNK_BOX).eval()
    kick(policy)
    spaces = EnvSpaces(gym.spaces.Dict({"main_images": IMAGE, "states": STATES}), CHUNK_BOX)
    model = EmbodiedModelConfig(model_type="pixel_actor_critic", **SMALL_CNN)
    out = export_policy(policy, model.model_dump(mode="json"), spaces, tmp_path / "cnn")
    loaded, meta = load_exported_policy(out)
    assert meta["weights_format"] == "state_dict"
    _same_outputs(policy, loaded, observations(3))


def test_exported_vla_is_its_backbone_directory_and_needs_no_original(
    tiny_lm: Path, tmp_path: Path
) -> None:
    from transformers import AutoModelForCausalLM

    backbone_dir = tmp_path / "backbone"
    shutil.copytree(tiny_lm, backbone_dir)
    policy = get_model(vla_config(backbone_dir), vla_spaces()).eval()
    kick(policy)
    model = vla_config(backbone_dir).model_dump(mode="json")
    out = export_policy(policy, model, vla_spaces(), tmp_path / "vla")
    shutil.rmtree(backbone_dir)  # the export must not need the training-time model_path
    names = {p.name for p in out.iterdir()}
    assert {"config.json", "model.safetensors", POLICY_WEIGHTS_FILE} <= names
    assert any(n.startswith("tokenizer") for n in names)
    AutoModelForCausalLM.from_pretrained(out)  # a plain from_pretrained directory
    loaded, meta = load_exported_policy(out)
    assert meta["weights_format"] == "hf_backbone" and meta["model"]["model_path"] == "."
    obs = observations(3)
    _same_outputs(policy, loaded, obs)
    # a warm start: the exported weights loaded into a policy built from another backbone
    other = create_tiny_lm(tmp_path / "other", seed=1, num_hidden_layers=1)
    fresh = get_model(vla_config(other), vla_spaces()).eval()
    load_initial_weights(fresh, str(out))
    _same_outputs(policy, fresh, obs)
    with pytest.raises(RuntimeError, match="does not fit"):
        load_initial_weights(get_model(vla_config(other), vla_spaces(states=False)), str(out))


def test_init_from_an_exported_vla_sets_its_backbone_and_its_weights(
    tiny_lm: Path, tmp_path: Path
) -> None:
    from infra.driver.init_from import apply_init_from
    from rl_core.config import load_config

    policy = vla_policy(tiny_lm)
    out = export_policy(
        policy, vla_config(tiny_lm).model_dump(mode="json"), vla_spaces(), tmp_path / "m"
    )
    cfg = load_config(
        "ppo_cartpole",
        ["model.model_type=vla_oft", f"run.init_from={out}", f"run.output_dir={tmp_path}"],
    )
    started = apply_init_from(cfg, f"sqlite:///{tmp_path / 'mlflow.db'}")
    assert started.model.model_path == started.model.init_weights == str(out)


def test_bfloat16_backbone_keeps_float32_heads_and_exact_logprobs(tiny_lm: Path) -> None:
    policy = vla_policy(tiny_lm, dtype="bfloat16")
    assert policy.backbone.dtype == torch.bfloat16 and policy.log_std.dtype == torch.float32
    _, result = policy.predict_action_batch(
        observations(3), generator=torch.Generator().manual_seed(0)
    )
    out = policy.default_forward(result["forward_inputs"])
    assert out["logprobs"].dtype == torch.float32
    torch.testing.assert_close(out["logprobs"], result["prev_logprobs"])


def test_a_ppo_update_trains_the_vla_on_stacked_rollout_steps(tiny_lm: Path) -> None:
    from rl_core.config import load_config
    from rl_core.data.batch import stack_steps, to_numpy_tree
    from rl_core.training.ppo import compute_advantages, ppo_update

    cfg = load_config(
        "ppo_cartpole",
        ["model.model_type=vla_oft", "actor.num_minibatches=2", "actor.update_epochs=1"],
    )
    policy = vla_policy(tiny_lm)
    gen = torch.Generator().manual_seed(0)
    steps = []
    for t in range(3):  # instructions of other lengths at each step: one stacked shape
        obs = observations(2, seed=t, texts=["go", "x" * (5 + 7 * t)])
        _, result = policy.predict_action_batch(obs, generator=gen)
        steps.append(
            to_numpy_tree(
                {k: result[k] for k in ("forward_inputs", "prev_logprobs", "prev_values")}
            )
        )
    batch = stack_steps(steps)
    batch.update(
        rewards=np.ones((3, 2), np.float32),
        terminated=np.zeros((3, 2), bool),
        truncated=np.zeros((3, 2), bool),
        trunc_index=np.zeros((0, 2), np.int64),
        trunc_obs={},
        next_obs=observations(2, seed=9),
    )
    assert batch["forward_inputs"]["input_ids"].shape == (3, 2, 32)
    compute_advantages(policy, batch, cfg.algorithm)
    before = {k: v.clone() for k, v in policy.state_dict().items()}
    optimizer = torch.optim.Adam(policy.parameters(), lr=1e-3)
    metrics = ppo_update(policy, optimizer, batch, cfg.algorithm, cfg.actor, gen)
    assert metrics["train/minibatch_updates"] == 2 and np.isfinite(metrics["train/policy_loss"])
    changed = [k for k, v in policy.state_dict().items() if not torch.equal(v, before[k])]
    assert any(k.startswith("backbone.") for k in changed) and "action_queries" in changed
