"""IQL: its losses on hand-computed values, the mlp_iql model, the learner (a bandit it
solves where behaviour cloning cannot, a state that round-trips), the dataset's transitions,
the config rules, and a short offline run on Meta-World reach that trains, resumes bit for
bit and evaluates."""

from __future__ import annotations

import math
import os
from pathlib import Path

os.environ.setdefault("MUJOCO_GL", "egl")

import gymnasium as gym  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

from kinds.embodied.off_policy_sections import IQLConfig, OffPolicyConfig  # noqa: E402
from rl_core.algorithms.actor_critic_family import actor_critic_spec  # noqa: E402
from rl_core.algorithms.iql import (  # noqa: E402
    awr_actor_loss,
    awr_weights,
    expectile_loss,
    iql_q_loss,
    iql_td_target,
    iql_value_loss,
)
from rl_core.algorithms.target_networks import polyak_update  # noqa: E402
from rl_core.config import ConfigError, load_config  # noqa: E402
from rl_core.config.training_sections import ActorConfig  # noqa: E402
from rl_core.data import demos as fmt  # noqa: E402
from rl_core.data import expert_play  # noqa: E402
from rl_core.models.iql_policy import MLPIQLPolicy  # noqa: E402
from rl_core.models.mlp_actor_critic import MLPActorCritic  # noqa: E402
from rl_core.training.iql_update import IQLLearner, dataset_tensors  # noqa: E402

BOX = gym.spaces.Box(low=np.array([-2.0, 0.0], np.float32), high=np.array([2.0, 1.0], np.float32))


# -- losses ---------------------------------------------------------------------------------
def test_expectile_loss_weighs_positive_residuals_tau_and_negative_ones_one_minus_tau() -> None:
    out = expectile_loss(torch.tensor([2.0, -1.0, 0.5, 0.0]), 0.7)
    torch.testing.assert_close(out, torch.tensor([0.7 * 4, 0.3 * 1, 0.7 * 0.25, 0.0]))
    with pytest.raises(ValueError, match=r"expectile must be in \(0, 1\)"):
        expectile_loss(torch.zeros(1), 1.0)


def test_value_loss_regresses_v_towards_the_smallest_target_q_without_moving_q() -> None:
    target_q = torch.tensor([[1.0, 4.0], [3.0, 2.0]], requires_grad=True)  # min: [1, 2]
    values = torch.tensor([0.0, 3.0], requires_grad=True)  # residuals 1 and -1
    loss = iql_value_loss(target_q, values, 0.8)
    assert float(loss.detach()) == pytest.approx((0.8 * 1 + 0.2 * 1) / 2)
    loss.backward()
    torch.testing.assert_close(values.grad, torch.tensor([-0.8, 0.2]))  # d/dv of w*(q-v)^2 / 2
    assert target_q.grad is None


def test_q_loss_sums_each_critics_mean_squared_error_to_r_plus_gamma_v_next() -> None:
    target = iql_td_target(
        torch.tensor([1.0, 2.0]), torch.tensor([0.0, 1.0]), torch.tensor([10.0, 10.0]), 0.9
    )
    torch.testing.assert_close(target, torch.tensor([10.0, 2.0]))  # the terminal one: r only
    q = torch.tensor([[9.0, 2.0], [11.0, 4.0]])
    # critic 0: (1 + 0) / 2; critic 1: (1 + 4) / 2
    assert float(iql_q_loss(q, target)) == pytest.approx(0.5 + 2.5)


def test_advantage_weights_are_exp_beta_a_clipped_and_the_actor_loss_weighs_log_probs() -> None:
    weights = awr_weights(torch.tensor([0.0, 1.0, 2.0, -1.0]), 2.0, 10.0)
    torch.testing.assert_close(weights, torch.tensor([1.0, math.exp(2.0), 10.0, math.exp(-2.0)]))
    torch.testing.assert_close(awr_weights(torch.tensor([5.0, -5.0]), 0.0, 100.0), torch.ones(2))
    logprobs = torch.tensor([-1.0, -2.0], requires_grad=True)
    loss = awr_actor_loss(logprobs, torch.tensor([1.0, 3.0]))
    assert float(loss.detach()) == pytest.approx(-(-1.0 * 1 + -2.0 * 3) / 2)
    loss.backward()
    torch.testing.assert_close(logprobs.grad, torch.tensor([-0.5, -1.5]))


def test_polyak_update_moves_the_target_by_tau_and_copies_buffers() -> None:
    online, target = torch.nn.BatchNorm1d(2), torch.nn.BatchNorm1d(2)
    with torch.no_grad():
        online.weight.fill_(2.0)
        online.running_mean.fill_(5.0)
    polyak_update(target, online, 0.25)
    torch.testing.assert_close(target.weight, torch.full((2,), 0.75 * 1.0 + 0.25 * 2.0))
    torch.testing.assert_close(target.running_mean, torch.full((2,), 5.0))


# -- model ----------------------------------------------------------------------------------
def policy(seed: int = 0, obs: int = 3, space: gym.Space = BOX) -> MLPIQLPolicy:
    torch.manual_seed(seed)
    return MLPIQLPolicy(obs, space, [16], [16])


def test_mlp_iql_is_the_bc_actor_plus_v_and_q_critics_on_unit_actions() -> None:
    pol = policy()
    bc = MLPActorCritic(3, BOX, [16], activation="relu")
    assert {k for k in pol.state_dict() if k.startswith("actor.")} == {
        k for k in bc.state_dict() if k.startswith("actor.")
    }
    states = torch.randn(5, 3)
    low, high = torch.tensor([-2.0, 0.0]), torch.tensor([2.0, 1.0])
    q = pol.q_forward(states, high.expand(5, 2))
    unit = torch.cat([states, torch.ones(5, 2)], dim=-1).expand(2, -1, -1)
    torch.testing.assert_close(q, pol.critics(unit).squeeze(-1))  # bounds -> [-1, 1]
    assert pol.q_forward(states, low.expand(5, 2)).shape == (2, 5)
    torch.testing.assert_close(pol.v_forward(states), pol.critic(states).squeeze(-1))
    parts = [pol.actor_parameters(), pol.value_parameters(), pol.critic_parameters()]
    assert sum(len(p) for p in parts) == len(list(pol.parameters()))
    with pytest.raises(ValueError, match="1-D Box"):
        MLPIQLPolicy(3, gym.spaces.Discrete(2), [8], [8])


# -- learner --------------------------------------------------------------------------------
def learner(pol: MLPIQLPolicy, **iql: float) -> IQLLearner:
    actor = ActorConfig(lr=3e-3, max_grad_norm=None)
    settings, spec = OffPolicyConfig(), actor_critic_spec("iql")
    return IQLLearner(pol, spec, settings, IQLConfig(**iql), actor, 0.0, seed=0)


def bandit(rows: int = 2048) -> dict[str, torch.Tensor]:
    """One-step episodes from uniformly random actions; reward -(a - 0.5)^2."""
    actions = np.random.default_rng(0).uniform(-1, 1, size=(rows, 1)).astype(np.float32)
    zeros = np.zeros((rows, 1), np.float32)
    return dataset_tensors(
        {
            "states": zeros,
            "actions": actions,
            "rewards": -((actions[:, 0] - 0.5) ** 2),
            "next_states": zeros,
            "terminated": np.ones(rows, np.float32),
        }
    )


def greedy_after(temperature: float, steps: int = 300) -> float:
    pol = policy(obs=1, space=gym.spaces.Box(-1.0, 1.0, (1,)))
    learn = learner(pol, expectile=0.9, temperature=temperature)
    data = bandit()
    for _ in range(steps):
        learn.update(learn.draw_minibatches(data, 1, 64))
    action, _ = pol.predict_action_batch({"states": np.zeros((1, 1), np.float32)}, mode="eval")
    return float(action[0, 0])


def test_iql_learns_the_best_action_of_random_data_where_behaviour_cloning_learns_their_mean():
    assert abs(greedy_after(10.0) - 0.5) < 0.15
    assert abs(greedy_after(0.0)) < 0.15  # temperature 0: every action weighs 1 (BC)


def test_learner_state_round_trips_rows_and_weights_bit_for_bit() -> None:
    rng = np.random.default_rng(1)
    rows = {
        "states": rng.normal(size=(64, 3)).astype(np.float32),
        "actions": rng.uniform([-2, 0], [2, 1], size=(64, 2)).astype(np.float32),
        "rewards": rng.normal(size=64).astype(np.float32),
        "next_states": rng.normal(size=(64, 3)).astype(np.float32),
        "terminated": (rng.random(64) < 0.1).astype(np.float32),
    }
    data = dataset_tensors(rows)
    straight_policy = policy()
    straight = learner(straight_policy)
    for _ in range(4):
        metrics = straight.update(straight.draw_minibatches(data, 2, 16))
    assert metrics["train/gradient_steps"] == 2.0 and "train/awr_weight_mean" in metrics
    first_policy = policy()
    first = learner(first_policy)
    for _ in range(2):
        first.update(first.draw_minibatches(data, 2, 16))
    resumed_policy = policy(seed=5)
    resumed_policy.load_state_dict(first_policy.state_dict())
    resumed = learner(resumed_policy)
    resumed.load_state_dict(first.state_dict())
    for _ in range(2):
        resumed.update(resumed.draw_minibatches(data, 2, 16))
    for (name, a), b in zip(
        straight_policy.state_dict().items(), resumed_policy.state_dict().values(), strict=True
    ):
        assert torch.equal(a, b), name
    for a, b in zip(
        straight.target_critics.parameters(), resumed.target_critics.parameters(), strict=True
    ):
        assert torch.equal(a, b)


# -- the dataset's transitions ----------------------------------------------------------------
def episode(length: int, seed: int, success: bool, final: bool = True, terminated: bool = False):
    states = np.arange(length, dtype=np.float32)[:, None] + 100 * seed
    return fmt.Episode(
        observations={"states": states},
        actions=np.full((length, 2), seed, np.float32),
        rewards=np.arange(length, dtype=np.float32),
        seed=seed,
        success=success,
        final_observation={"states": np.array([-1.0 - seed], np.float32)} if final else None,
        terminated=terminated,
        action_noise=0.5 * seed,
    )


def test_transitions_bootstrap_from_the_next_step_then_the_final_observation(tmp_path) -> None:
    shard = fmt.write_shard(tmp_path, 0, [episode(3, 0, True), episode(2, 1, False, True, True)])
    manifest = fmt.write_manifest(tmp_path, [shard], {"env_type": "toy"}, "test")
    assert manifest["action_noise"] == [
        {"std": 0.0, "episodes": 1, "successes": 1, "return_mean": 3.0},
        {"std": 0.5, "episodes": 1, "successes": 0, "return_mean": 1.0},
    ]
    out = fmt.demo_transitions(tmp_path)
    assert out["states"].ravel().tolist() == [0, 1, 2, 100, 101]
    assert out["next_states"].ravel().tolist() == [1, 2, -1, 101, -2]
    assert out["terminated"].tolist() == [0, 0, 0, 0, 1]
    assert out["rewards"].tolist() == [0, 1, 2, 0, 1]
    assert fmt.demo_transitions(tmp_path, successful_only=True)["states"].ravel().tolist() == [
        0,
        1,
        2,
    ]
    assert len(fmt.load_demos(tmp_path)) == 5  # behaviour cloning reads the same steps


def test_a_dataset_without_final_observations_leaves_each_last_step_out(tmp_path) -> None:
    shard = fmt.write_shard(tmp_path, 0, [episode(3, 0, True, final=False), episode(2, 1, True)])
    fmt.write_manifest(tmp_path, [shard], {"env_type": "toy"}, "test")
    out = fmt.demo_transitions(tmp_path)
    assert out["states"].ravel().tolist() == [0, 1, 100]
    assert out["next_states"].ravel().tolist() == [1, 2, 101]


def test_noise_levels_take_the_list_in_turn() -> None:
    assert expert_play.noise_levels(0.3, 3) == [0.3, 0.3, 0.3]
    assert expert_play.noise_levels([0.0, 1.0], 5) == [0.0, 1.0, 0.0, 1.0, 0.0]


# -- config ---------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "overrides,message",
    [
        (["model.model_type=mlp_sac"], "'mlp_sac' has no v_forward branch (use 'mlp_iql')"),
        (["algorithm.loss_type=ppo"], "'mlp_iql' is trained by an off-policy algorithm; algorithm.loss_type = 'ppo' (allowed: iql)"),
        (["algorithm.iql.expectile=1.0"], "algorithm.iql.expectile"),
        (["demos.action_noise=[0.0,11.0]"], "demos.action_noise"),
        (["run.mode=async"], "run.mode = 'async' is for on-policy PPO"),
    ],
)  # fmt: skip
def test_bad_iql_configs_name_the_field(overrides: list[str], message: str) -> None:
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        load_config("iql_metaworld", overrides)


def test_iql_runs_offline_on_the_demonstrations() -> None:
    from kinds.embodied.offline import OfflineRuntime
    from kinds.embodied.variants import runtime_for

    cfg = load_config("iql_metaworld")
    assert runtime_for(cfg) is OfflineRuntime
    assert cfg.demonstrations(supervised=False) == cfg.demos_path()
    ppo = load_config("ppo_metaworld")
    assert ppo.demonstrations(supervised=False) is None
    assert ppo.demonstrations(supervised=True) == ppo.demos_path()
    bc = load_config("sft_mlp_metaworld_mixed")
    assert bc.demos_path() == cfg.demos_path()  # the same dataset
    assert cfg.model_dump()["demos"]["action_noise"] == [0.0, 1.0, 3.0]


# -- a short offline run on Meta-World ------------------------------------------------------
def test_iql_trains_on_metaworld_demos_resumes_bit_for_bit_and_evaluates(tmp_path: Path) -> None:
    pytest.importorskip("metaworld")
    from kinds.embodied.episodes import run_episodes
    from kinds.embodied.workers.offline_trainer import OfflineActorWorker
    from rl_core.envs import EnvSpaces, VectorEnvAdapter
    from rl_core.envs.experts import expert_for

    cfg = load_config(
        "iql_metaworld",
        [
            "env.manipulation.tasks=[reach-v3]",
            "env.max_episode_steps=24",
            "model.hidden_sizes=[32,32]",
            "demos.batch_size=32",
            "demos.steps_per_iteration=4",
            f"demos.path={tmp_path / 'demos'}",
            "run.max_iterations=4",
            "eval.num_episodes=2",
            "eval.num_envs=2",
            f"run.output_dir={tmp_path}",
            "tracking.enabled=false",
        ],
    )
    noise = expert_play.noise_levels(cfg.demos.action_noise, 3)
    played = expert_play.play_expert_episodes(
        cfg.env, [100, 101, 102], expert_for("metaworld"), noise
    )
    shard = fmt.write_shard(cfg.demos.path, 0, played)
    fmt.write_manifest(cfg.demos.path, [shard], cfg.env.model_dump(mode="json"), "test")
    envs = VectorEnvAdapter(cfg.env, 1, seed=0, vectorization="sync")
    spaces = envs.spaces
    envs.close()
    config = cfg.model_dump(mode="json")

    def worker() -> OfflineActorWorker:
        return OfflineActorWorker(config, 0, (), spaces)

    straight = worker()
    before = {k: v.clone() for k, v in straight.policy.state_dict().items()}
    first = straight.update(0)
    assert first["samples"] == 4 * 32.0 and first["train/gradient_steps"] == 4.0
    assert np.isfinite(first["train/critic_loss"]) and first["train/awr_weight_mean"] > 0
    straight.update(1)
    straight.save_checkpoint(str(tmp_path / "ckpt"), "step_000002")
    straight.snapshot()
    straight.update(2)
    straight.restore_snapshot()  # a retried update draws the same rows: it applies once
    for it in (2, 3):
        straight.update(it)
    resumed = worker()
    resumed.load_checkpoint(str(tmp_path / "ckpt"), "step_000002")
    for it in (2, 3):
        resumed.update(it)
    weights = {k: v.detach().numpy() for k, v in straight.policy.state_dict().items()}
    for name, value in resumed.policy.state_dict().items():
        np.testing.assert_array_equal(value.numpy(), weights[name], err_msg=name)
    assert any(not torch.equal(before[k], straight.policy.state_dict()[k]) for k in before)
    played = run_episodes(config, weights, [7, 8])
    assert len(played["returns"]) == 2 and len(played["successes"]) == 2
    other_env = EnvSpaces(gym.spaces.Box(-1.0, 1.0, (5,), np.float32), spaces.action_space)
    with pytest.raises(fmt.DemosError, match="observations of size 39 .* the data is from"):
        OfflineActorWorker(config, 0, (), other_env).update(0)
