"""The off-policy family's pure parts: ensemble layers, the mlp_sac policy, transitions,
the replay buffer and its files, SAC / CrossQ / RLPD updates and their config checks."""

from __future__ import annotations

from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch

from kinds.embodied.off_policy_sections import OffPolicyConfig
from rl_core.algorithms.actor_critic_family import actor_critic_spec
from rl_core.config import ConfigError, load_config
from rl_core.config.training_sections import ActorConfig
from rl_core.data.replay_buffer import (
    ReplayBuffer,
    TransitionFileError,
    load_transitions,
    save_transitions,
    transitions_from_batch,
)
from rl_core.models.ensemble_layers import EnsembleBatchRenorm, EnsembleLinear, ensemble_mlp
from rl_core.models.sac_policy import MLPSACPolicy
from rl_core.training.sac_update import SACLearner, minibatches_from_arrays

BOX = gym.spaces.Box(low=np.array([-2.0, 0.0], np.float32), high=np.array([2.0, 1.0], np.float32))


def policy(norm: str = "none", critics: int = 2, seed: int = 0) -> MLPSACPolicy:
    torch.manual_seed(seed)
    return MLPSACPolicy(3, BOX, [16], [16], num_critics=critics, critic_norm=norm)


def random_rows(rows: int, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {
        "states": rng.normal(size=(rows, 3)).astype(np.float32),
        "actions": rng.uniform(-1, 1, size=(rows, 2)).astype(np.float32),
        "rewards": rng.normal(size=rows).astype(np.float32),
        "next_states": rng.normal(size=(rows, 3)).astype(np.float32),
        "terminated": (rng.random(rows) < 0.1).astype(np.float32),
    }


# -- layers ---------------------------------------------------------------------------------
def test_ensemble_linear_applies_each_member_its_own_weights() -> None:
    layer = EnsembleLinear(3, 4, 5)
    x = torch.randn(3, 7, 4)
    out = layer(x)
    for m in range(3):
        expected = x[m] @ layer.weight[m] + layer.bias[m]
        torch.testing.assert_close(out[m], expected)


def test_batch_renorm_is_batch_norm_during_warmup_then_corrects_towards_running_stats() -> None:
    norm = EnsembleBatchRenorm(1, 2, momentum=0.5, warmup_steps=1, r_max=1.5, d_max=0.5)
    x = torch.tensor([[[1.0, 10.0], [3.0, 30.0]]])  # mean (2, 20), var (1, 100)
    out = norm(x)  # warmup: plain batch norm
    expected = (x - x.mean(1, keepdim=True)) / torch.sqrt(
        x.var(1, unbiased=False, keepdim=True) + 1e-3
    )
    torch.testing.assert_close(out, expected)
    torch.testing.assert_close(norm.running_mean, torch.tensor([[[1.0, 10.0]]]))  # lerp 0.5 from 0
    torch.testing.assert_close(norm.running_var, torch.tensor([[[1.0, 50.5]]]))
    out = norm(x)  # after warmup: r = std / running std (clipped), d = shift (clipped)
    std = torch.sqrt(torch.tensor([1.0, 100.0]) + 1e-3)
    running_std = torch.sqrt(torch.tensor([1.0, 50.5]) + 1e-3)
    r = (std / running_std).clamp(1 / 1.5, 1.5)
    d = ((torch.tensor([2.0, 20.0]) - torch.tensor([1.0, 10.0])) / running_std).clamp(-0.5, 0.5)
    torch.testing.assert_close(out, expected * r + d)
    norm.eval()
    torch.testing.assert_close(
        norm(x), (x - norm.running_mean) / torch.sqrt(norm.running_var + 1e-3)
    )


def test_critic_norms_are_placed_after_hidden_layers() -> None:
    kinds = [type(m).__name__ for m in ensemble_mlp(2, [4, 8, 8, 1], "layer_norm")]
    assert kinds == [
        "EnsembleLinear", "EnsembleLayerNorm", "ReLU",
        "EnsembleLinear", "EnsembleLayerNorm", "ReLU",
        "EnsembleLinear",
    ]  # fmt: skip
    assert type(ensemble_mlp(2, [4, 8, 1], "batch_renorm")[0]).__name__ == "EnsembleBatchRenorm"


# -- policy ---------------------------------------------------------------------------------
def test_squashed_log_prob_matches_torch_transformed_distribution() -> None:
    pol = policy()
    states = torch.randn(5, 3)
    out = pol.sac_forward(states, generator=torch.Generator().manual_seed(1))
    mean, log_std = pol._mean_log_std(states)
    dist = torch.distributions.TransformedDistribution(
        torch.distributions.Normal(mean, log_std.exp()), [torch.distributions.TanhTransform()]
    )
    actions = out["actions"].detach().clamp(-1 + 1e-6, 1 - 1e-6)
    torch.testing.assert_close(
        out["logprobs"].detach(), dist.log_prob(actions).sum(-1), atol=2e-3, rtol=1e-4
    )
    again = pol.default_forward({"states": states, "actions": out["actions"].detach()})
    torch.testing.assert_close(again["logprobs"], out["logprobs"].detach(), atol=2e-3, rtol=1e-4)


def test_env_actions_stay_within_bounds_and_the_cache_holds_unit_actions() -> None:
    pol = policy()
    obs = {"states": np.random.default_rng(0).normal(size=(64, 3)).astype(np.float32) * 10}
    actions, result = pol.predict_action_batch(obs, generator=torch.Generator().manual_seed(0))
    assert actions.shape == (64, 2)
    assert (actions >= BOX.low - 1e-6).all() and (actions <= BOX.high + 1e-6).all()
    unit = result["forward_inputs"]["actions"]
    np.testing.assert_allclose(actions, unit.numpy() * [2.0, 0.5] + [0.0, 0.5], atol=1e-6)
    assert result["prev_values"].shape == (64,)
    greedy, _ = pol.predict_action_batch(obs, mode="eval")
    np.testing.assert_array_equal(greedy, pol.predict_action_batch(obs, mode="eval")[0])


def test_policy_refuses_discrete_or_unbounded_actions() -> None:
    with pytest.raises(ValueError, match="1-D Box"):
        MLPSACPolicy(3, gym.spaces.Discrete(2), [8], [8])
    with pytest.raises(ValueError, match="finite action bounds"):
        MLPSACPolicy(3, gym.spaces.Box(-np.inf, np.inf, (1,)), [8], [8])


# -- transitions ----------------------------------------------------------------------------
def test_transitions_bootstrap_from_the_next_step_the_final_obs_or_the_last_obs() -> None:
    states = np.arange(3 * 2, dtype=np.float32).reshape(3, 2, 1)  # [T=3, N=2, D=1]
    batch = {
        "forward_inputs": {"states": states, "actions": np.zeros((3, 2, 1), np.float32)},
        "rewards": np.ones((3, 2), np.float32),
        "terminated": np.array([[0, 1], [0, 0], [0, 0]], bool),
        "truncated": np.array([[0, 0], [1, 0], [0, 0]], bool),
        "trunc_index": np.array([[1, 0]]),
        "trunc_obs": {"states": np.array([[99.0]], np.float32)},
        "next_obs": {"states": np.array([[-1.0], [-2.0]], np.float32)},
    }
    out = transitions_from_batch(batch)
    # rows are (t, n) in order: t0n0 t0n1 t1n0 t1n1 t2n0 t2n1
    assert out["next_states"].ravel().tolist() == [2.0, 3.0, 99.0, 5.0, -1.0, -2.0]
    assert out["terminated"].tolist() == [0.0, 1.0, 0.0, 0.0, 0.0, 0.0]
    with pytest.raises(ValueError, match="mlp_sac"):
        transitions_from_batch({**batch, "forward_inputs": {"states": states}})


def test_transition_files_round_trip_and_bad_files_are_named(tmp_path) -> None:
    data = random_rows(10)
    path = save_transitions(data, tmp_path / "offline.safetensors")
    loaded = load_transitions(path)
    for key, value in data.items():
        np.testing.assert_array_equal(loaded[key], value)
    with pytest.raises(TransitionFileError, match="does not exist"):
        load_transitions(tmp_path / "missing.safetensors")
    (tmp_path / "bad.safetensors").write_bytes(b"not a file")
    with pytest.raises(TransitionFileError, match="not a safetensors"):
        load_transitions(tmp_path / "bad.safetensors")
    with pytest.raises(TransitionFileError, match="same number"):
        save_transitions({**data, "rewards": data["rewards"][:3]}, tmp_path / "x.safetensors")
    data["rewards"][0] = np.nan
    with pytest.raises(TransitionFileError, match="rewards holds inf or NaN"):
        save_transitions(data, tmp_path / "y.safetensors")


# -- replay buffer --------------------------------------------------------------------------
def test_replay_buffer_wraps_around_and_samples_reproducibly() -> None:
    buffer = ReplayBuffer(capacity=5, seed=3)
    rows = random_rows(7)
    buffer.add({k: v[:3] for k, v in rows.items()})
    assert len(buffer) == 3 and buffer.pos == 3
    buffer.add({k: v[3:] for k, v in rows.items()})  # 4 more: rows 5, 6 overwrite 0, 1
    assert len(buffer) == 5 and buffer.pos == 2
    np.testing.assert_array_equal(buffer.arrays["rewards"], rows["rewards"][[5, 6, 2, 3, 4]])
    first = buffer.sample_indices(20)
    again = ReplayBuffer(capacity=5, seed=3)
    again.add(rows)  # 7 rows at once: only the newest 5 fit
    assert sorted(again.arrays["rewards"].tolist()) == sorted(rows["rewards"][2:].tolist())
    np.testing.assert_array_equal(first, again.sample_indices(20))


def test_replay_buffer_state_round_trips_contents_and_sampling() -> None:
    buffer = ReplayBuffer(capacity=8, seed=1)
    buffer.add(random_rows(6))
    buffer.sample_indices(4)
    state = buffer.state_dict()
    restored = ReplayBuffer(capacity=8, seed=999)
    restored.load_state_dict(state)
    for key in buffer.arrays:
        np.testing.assert_array_equal(restored.arrays[key], buffer.arrays[key])
    np.testing.assert_array_equal(restored.sample_indices(16), buffer.sample_indices(16))
    with pytest.raises(ValueError, match="replay.capacity"):
        ReplayBuffer(capacity=9, seed=0).load_state_dict(state)


# -- updates --------------------------------------------------------------------------------
def settings(**changes) -> OffPolicyConfig:
    return OffPolicyConfig(**changes)


def learner(pol: MLPSACPolicy, loss: str = "sac", **changes) -> SACLearner:
    actor = ActorConfig(lr=1e-3, max_grad_norm=None)
    return SACLearner(pol, actor_critic_spec(loss), settings(**changes), actor, 0.9, 0)


def test_td_target_takes_the_smallest_target_q_minus_alpha_log_prob() -> None:
    pol = policy()
    learn = learner(pol, init_alpha=0.5)
    batch = minibatches_from_arrays(random_rows(8), 1)[0]
    q, target = learn._td_target(batch, torch.tensor(0.5))
    generator = torch.Generator().manual_seed(0)  # the learner's seed: the same noise
    following = pol.sac_forward(batch["next_states"], generator=generator)
    q_next = pol.q_forward(batch["next_states"], following["actions"], critics=learn.target_critics)
    soft = q_next.min(0).values - 0.5 * following["logprobs"]
    expected = batch["rewards"] + 0.9 * (1 - batch["terminated"]) * soft
    torch.testing.assert_close(target, expected.detach())
    torch.testing.assert_close(q, pol.q_forward(batch["states"], batch["actions"]))


def test_target_critics_follow_by_polyak_averaging_and_crossq_keeps_none() -> None:
    pol = policy()
    learn = learner(pol, tau=0.25)
    before = [p.clone() for p in learn.target_critics.parameters()]
    learn.update(minibatches_from_arrays(random_rows(16), 1))
    for old, target, online in zip(
        before, learn.target_critics.parameters(), pol.critics.parameters(), strict=True
    ):
        torch.testing.assert_close(target, 0.75 * old + 0.25 * online.detach())
    assert learner(policy("batch_renorm"), "crossq").target_critics is None


def test_actor_and_temperature_step_every_actor_update_interval_critic_steps() -> None:
    pol = policy()
    learn = learner(pol, actor_update_interval=3)
    actor_before = [p.clone() for p in pol.actor_parameters()]
    alpha_before = float(learn.log_alpha.detach())
    metrics = learn.update(minibatches_from_arrays(random_rows(32), 2))
    assert "train/actor_loss" not in metrics  # 2 critic steps, no actor step yet
    assert all(torch.equal(a, b) for a, b in zip(actor_before, pol.actor_parameters(), strict=True))
    assert float(learn.log_alpha.detach()) == alpha_before
    metrics = learn.update(minibatches_from_arrays(random_rows(16, seed=1), 1))
    assert "train/actor_loss" in metrics and float(learn.log_alpha.detach()) != alpha_before


def test_the_temperature_moves_towards_the_target_entropy() -> None:
    pol = policy()
    high = learner(pol, target_entropy=50.0)  # wants far more entropy: alpha grows
    high.update(minibatches_from_arrays(random_rows(64), 4))
    assert float(high.log_alpha.detach().exp()) > 1.0
    low = learner(policy(), target_entropy=-50.0)
    low.update(minibatches_from_arrays(random_rows(64), 4))
    assert float(low.log_alpha.detach().exp()) < 1.0


def test_rlpd_target_is_the_minimum_over_a_random_subset_of_the_ensemble() -> None:
    pol = policy("layer_norm", critics=6)
    learn = learner(pol, "rlpd", critic_subset=2)
    batch = minibatches_from_arrays(random_rows(8), 1)[0]
    _, target = learn._td_target(batch, torch.tensor(0.0))
    generator = torch.Generator().manual_seed(0)
    following = pol.sac_forward(batch["next_states"], generator=generator)
    pick = torch.randperm(6, generator=generator)[:2]
    q_next = pol.q_forward(batch["next_states"], following["actions"], critics=learn.target_critics)
    expected = batch["rewards"] + 0.9 * (1 - batch["terminated"]) * q_next[pick].min(0).values
    torch.testing.assert_close(target, expected.detach())


@pytest.mark.parametrize("loss,norm", [("sac", "none"), ("crossq", "batch_renorm")])
def test_learner_state_round_trip_continues_bit_for_bit(loss: str, norm: str) -> None:
    data = [minibatches_from_arrays(random_rows(32, seed=s), 2) for s in range(4)]
    straight_policy = policy(norm)
    straight = learner(straight_policy, loss)
    for part in data:
        straight.update(part)
    first_policy = policy(norm)
    first = learner(first_policy, loss)
    for part in data[:2]:
        first.update(part)
    resumed_policy = policy(norm, seed=5)
    resumed_policy.load_state_dict(first_policy.state_dict())
    resumed = learner(resumed_policy, loss)
    resumed.load_state_dict(first.state_dict())
    for part in data[2:]:
        resumed.update(part)
    for (name, a), b in zip(
        straight_policy.state_dict().items(), resumed_policy.state_dict().values(), strict=True
    ):
        assert torch.equal(a, b), name


def test_sac_learns_a_one_step_bandit() -> None:
    """Reward -(a - 0.5)^2 in one-step episodes: the greedy action goes to 0.5."""
    torch.manual_seed(0)
    pol = MLPSACPolicy(1, gym.spaces.Box(-1.0, 1.0, (1,)), [32], [32])
    actor = ActorConfig(lr=3e-3, max_grad_norm=None)
    learn = SACLearner(pol, actor_critic_spec("sac"), settings(init_alpha=0.05), actor, 0.0, 0)
    rng = np.random.default_rng(0)
    for _ in range(300):
        actions = rng.uniform(-1, 1, size=(64, 1)).astype(np.float32)
        rows = {
            "states": np.zeros((64, 1), np.float32),
            "actions": actions,
            "rewards": -((actions[:, 0] - 0.5) ** 2),
            "next_states": np.zeros((64, 1), np.float32),
            "terminated": np.ones(64, np.float32),
        }
        learn.update(minibatches_from_arrays(rows, 1))
    greedy, _ = pol.predict_action_batch({"states": np.zeros((1, 1), np.float32)}, mode="eval")
    assert abs(float(greedy[0, 0]) - 0.5) < 0.1


# -- config ---------------------------------------------------------------------------------
PENDULUM = ["env.env_id=Pendulum-v1", "model.model_type=mlp_sac"]


@pytest.mark.parametrize(
    "overrides,message",
    [
        (["algorithm.loss_type=crossq"], "model.critic_norm = 'none'; crossq needs 'batch_renorm'"),
        (["algorithm.loss_type=rlpd", "model.critic_norm=layer_norm"], "replay.offline_data is not set"),
        (["algorithm.loss_type=ppo"], "'mlp_sac' is trained by an off-policy algorithm"),
        (["algorithm.loss_type=sac", "model.model_type=mlp_actor_critic"], "no sac_forward/q_forward"),
        (["algorithm.loss_type=sac", "algorithm.off_policy.critic_subset=3"], "exceeds model.num_critics"),
        (["algorithm.loss_type=sac", "replay.offline_data=x.safetensors"], "does not read offline data"),
        (["algorithm.loss_type=sac", "run.mode=async"], "run.mode = 'async' is for on-policy PPO"),
        (["algorithm.loss_type=sacq"], "Off-policy algorithms: crossq, iql, rlpd, sac"),
    ],
)  # fmt: skip
def test_bad_off_policy_configs_name_the_field(overrides: list[str], message: str) -> None:
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        load_config("ppo_cartpole", [*PENDULUM, *overrides])


def test_off_policy_presets_validate() -> None:
    for preset in ("sac_pendulum", "crossq_pendulum", "rlpd_pendulum", "sac_inverted_pendulum"):
        cfg = load_config(preset, [])
        assert actor_critic_spec(cfg.algorithm.loss_type) is not None


def test_offline_data_script_reports_a_missing_checkpoint(tmp_path, capsys) -> None:
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "make_offline_data", Path(__file__).resolve().parents[2] / "scripts/make_offline_data.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    out = tmp_path / "data.safetensors"
    assert module.main([str(tmp_path / "nothing"), str(out)]) == 2
    assert "error: " in capsys.readouterr().err
    assert not out.exists()
