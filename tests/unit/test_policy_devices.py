"""Control policies, their updates and their workers compute on the policy's device.

There is no GPU here: the ``meta`` device stands in for one. CPU inputs next to meta
weights give CPU results (or errors), so a check that ends on ``meta`` shows that the path
moved its inputs to the policy's parameters' device. Paths that need numbers (``.item()``)
stop at a spy once the tensors have been seen. The CPU numbers are checked by the other
tests (unchanged); ``scripts/gpu_checks/embodied_sampling.py`` compares CUDA with the CPU.
"""

from __future__ import annotations

import importlib.util
import inspect
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch
from torch.distributions import Distribution

import infra.cluster.worker_base as worker_base
from kinds.embodied.workers.actor_worker import ActorWorker
from kinds.embodied.workers.hybrid_worker import HybridActorWorker, HybridOffPolicyActorWorker
from kinds.embodied.workers.off_policy_trainer import OffPolicyActorWorker
from kinds.embodied.workers.rollout_worker import RolloutWorker
from rl_core.algorithms.actor_critic_family import actor_critic_spec
from rl_core.config import load_config
from rl_core.envs import EnvSpaces
from rl_core.models import get_model
from rl_core.models.base_policy import flat_states, obs_tensor, policy_device
from rl_core.training import ppo
from rl_core.training.sac_update import SACLearner, minibatches_from_arrays

META = torch.device("meta")
ROOT = Path(__file__).resolve().parents[2]
PENDULUM = gym.spaces.Box(-2.0, 2.0, (1,), np.float32)
#: preset -> (observation size, action space)
PRESETS = {
    "ppo_cartpole": (4, gym.spaces.Discrete(2)),
    "ppo_pendulum": (3, PENDULUM),
    "sac_pendulum": (3, PENDULUM),
}


class Seen(Exception):
    """Raised by a spy once it has recorded what it was given."""


def spaces(preset: str) -> EnvSpaces:
    size, action_space = PRESETS[preset]
    return EnvSpaces(gym.spaces.Box(-10.0, 10.0, (size,), np.float32), action_space)


def devices(tree: Any) -> set[torch.device]:
    if isinstance(tree, torch.Tensor):
        return {tree.device}
    if isinstance(tree, dict):
        return set().union(*(devices(v) for v in tree.values()))
    return set()


@pytest.fixture()
def no_validation() -> Iterator[None]:
    """Distributions check their arguments with ``.item()``, which meta tensors refuse."""
    before = Distribution._validate_args
    Distribution.set_default_validate_args(False)
    yield
    Distribution.set_default_validate_args(before)


def policy(preset: str, device: torch.device | None = None) -> torch.nn.Module:
    torch.manual_seed(0)
    model = get_model(load_config(preset).model, spaces(preset))
    return model if device is None else model.to(device)


# -- the policy's device and its observations -------------------------------------------------


def test_policy_device_is_where_the_parameters_are() -> None:
    assert policy_device(policy("ppo_cartpole")) == torch.device("cpu")
    assert policy_device(policy("sac_pendulum", META)) == META
    only_buffer = torch.nn.Module()
    only_buffer.register_buffer("scale", torch.ones(1, device=META))
    assert policy_device(only_buffer) == META
    assert policy_device(torch.nn.Module()) == torch.device("cpu")


def test_observations_become_tensors_on_the_given_device() -> None:
    states = np.arange(6, dtype=np.float64).reshape(2, 3)
    states.setflags(write=False)  # as they arrive from Ray's object store
    on_cpu = flat_states({"states": states})
    assert on_cpu.dtype == torch.float32 and on_cpu.device.type == "cpu"
    on_cpu[0, 0] = 1.0  # a writable copy
    assert states[0, 0] == 0.0
    assert flat_states({"states": states}, META).device == META
    tensor = torch.zeros(2, 3)
    assert flat_states({"states": tensor}) is tensor  # nothing to cast or move
    assert flat_states({"states": tensor}, META).device == META
    images = obs_tensor(np.zeros((1, 2, 2, 3), np.uint8), META, torch.uint8)
    assert images.device == META and images.dtype == torch.uint8


@pytest.mark.parametrize("preset", sorted(PRESETS))
def test_numpy_observations_go_to_the_policy_device(preset: str) -> None:
    model = policy(preset, META)
    size = PRESETS[preset][0]
    values = model.value_forward({"states": np.zeros((5, size), np.float32)})
    assert values.device == META and values.shape == (5,)


def test_an_extension_policy_reads_its_images_on_its_device() -> None:
    path = ROOT / "examples" / "ext_policy" / "ext_policy" / "cnn_policy.py"
    spec = importlib.util.spec_from_file_location("example_cnn_policy", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    CNNActorCritic = module.CNNActorCritic  # noqa: N806 - a class
    model = CNNActorCritic((4, 4, 3), num_actions=2).to(META)
    images = np.zeros((3, 4, 4, 3), np.uint8)
    assert model.value_forward({"main_images": images}).device == META


# -- PPO ---------------------------------------------------------------------------------------

T, N = 4, 2


def ppo_batch(preset: str) -> dict[str, Any]:
    """A rollout batch as the trainer receives it (numpy), sampled on the CPU."""
    size = PRESETS[preset][0]
    g = torch.Generator().manual_seed(0)
    states = torch.randn(T, N, size, generator=g).numpy()
    _, result = policy(preset).predict_action_batch(
        {"states": states.reshape(T * N, size)}, generator=g
    )
    action = result["forward_inputs"]["model_action"].numpy()
    return {
        "forward_inputs": {
            "states": states,
            "model_action": action.reshape(T, N, *action.shape[1:]),
        },
        "prev_logprobs": result["prev_logprobs"].numpy().reshape(T, N),
        "prev_values": result["prev_values"].numpy().reshape(T, N),
        "rewards": np.ones((T, N), np.float32),
        "terminated": np.zeros((T, N), bool),
        "truncated": np.eye(T, N, dtype=bool),
        "trunc_index": np.array([[0, 0], [1, 1]], np.int64),
        "trunc_obs": {"states": states[0]},
        "next_obs": {"states": states[-1]},
        "advantages": np.ones((T, N), np.float32),
        "returns": np.ones((T, N), np.float32),
    }


@pytest.mark.parametrize("preset", ["ppo_cartpole", "ppo_pendulum"])
def test_advantages_are_computed_on_the_policy_device(preset, monkeypatch, no_validation) -> None:
    seen: dict[str, Any] = {}

    def estimator(**kwargs: Any) -> None:
        seen.update(kwargs)
        raise Seen

    monkeypatch.setattr(ppo, "get_advantage", lambda name: estimator)
    with pytest.raises(Seen):
        ppo.compute_advantages(
            policy(preset, META), ppo_batch(preset), load_config(preset).algorithm
        )
    tensors = {k: v for k, v in seen.items() if isinstance(v, torch.Tensor)}
    assert set(tensors) == {
        "rewards",
        "values",
        "terminated",
        "truncated",
        "next_values",
        "final_values",
    }
    assert devices(tensors) == {META}


@pytest.mark.parametrize("loss_type", ["ppo", "decoupled_ppo"])
def test_the_ppo_update_moves_the_batch_and_shuffles_on_the_cpu(
    loss_type, monkeypatch, no_validation
) -> None:
    cfg = load_config("ppo_cartpole", overrides=[f"algorithm.loss_type={loss_type}"])
    model = policy("ppo_cartpole", META)
    optimizer = torch.optim.Adam(model.parameters(), lr=cfg.actor.lr)
    seen: dict[str, Any] = {}

    def loss(**kwargs: Any) -> None:
        seen.update(kwargs)
        raise Seen

    loss.__signature__ = inspect.signature(ppo.get_policy_loss(loss_type))
    monkeypatch.setattr(ppo, "get_policy_loss", lambda name: loss)
    generator = torch.Generator().manual_seed(3)
    with pytest.raises(Seen):
        ppo.ppo_update(
            model, optimizer, ppo_batch("ppo_cartpole"), cfg.algorithm, cfg.actor, generator
        )
    names = {"logprobs", "old_logprobs", "advantages"}
    if loss_type == "decoupled_ppo":
        names.add("behaviour_logprobs")
    assert names <= {k for k, v in seen.items() if isinstance(v, torch.Tensor)}
    assert devices({k: seen[k] for k in names}) == {META}
    # the minibatch order came from the CPU generator: one permutation of the batch drawn
    expected = torch.Generator().manual_seed(3)
    torch.randperm(T * N, generator=expected)
    assert generator.device.type == "cpu"
    assert torch.equal(generator.get_state(), expected.get_state())


# -- SAC, CrossQ, RLPD -------------------------------------------------------------------------


def replay_sample(rows: int) -> dict[str, np.ndarray]:
    g = torch.Generator().manual_seed(1)
    sample = {
        "states": torch.randn(rows, 3, generator=g).numpy(),
        "actions": torch.rand(rows, 1, generator=g).numpy(),
        "rewards": torch.randn(rows, generator=g).numpy(),
        "next_states": torch.randn(rows, 3, generator=g).numpy(),
        "terminated": np.zeros(rows, np.float32),
    }
    for array in sample.values():
        array.setflags(write=False)
    return sample


def test_replay_minibatches_go_to_the_given_device() -> None:
    on_meta = minibatches_from_arrays(replay_sample(8), 2, META)
    assert len(on_meta) == 2 and devices(on_meta[0]) == devices(on_meta[1]) == {META}
    on_cpu = minibatches_from_arrays(replay_sample(8), 2)
    assert devices(on_cpu[0]) == {torch.device("cpu")}
    np.testing.assert_array_equal(on_cpu[1]["states"].numpy(), replay_sample(8)["states"][4:])


@pytest.mark.parametrize(
    ("loss", "norm", "overrides"),
    [
        ("sac", "none", []),
        ("crossq", "batch_renorm", []),
        ("sac", "layer_norm", ["model.num_critics=4", "algorithm.off_policy.critic_subset=2"]),
    ],
)
def test_the_learner_lives_and_computes_on_the_policy_device(loss, norm, overrides) -> None:
    cfg = load_config("sac_pendulum", overrides=[f"model.critic_norm={norm}", *overrides])
    model = get_model(cfg.model, spaces("sac_pendulum")).to(META)
    actor = cfg.actor.model_copy(update={"lr": 1e-3, "max_grad_norm": None})
    learner = SACLearner(model, actor_critic_spec(loss), cfg.algorithm.off_policy, actor, 0.99, 5)
    assert learner.log_alpha.device == META
    if learner.target_critics is not None:
        assert policy_device(learner.target_critics) == META
    batch = minibatches_from_arrays(replay_sample(8), 1, META)[0]
    q, target = learner._td_target(batch, learner.log_alpha.detach().exp())
    assert q.device == target.device == META
    assert learner.generator.device.type == "cpu"  # the noise is drawn on the CPU


# -- workers -----------------------------------------------------------------------------------


@pytest.fixture()
def meta_workers(monkeypatch) -> None:
    """Workers are assigned the meta device (as if Ray had given them a GPU)."""
    monkeypatch.setattr(worker_base, "assigned_device", lambda what="": META)


def config(preset: str) -> dict[str, Any]:
    return load_config(preset).model_dump(mode="json")


@pytest.mark.parametrize("cls", [ActorWorker, HybridActorWorker])
def test_the_ppo_trainer_puts_its_policy_on_its_device(cls, meta_workers) -> None:
    worker = cls(config("ppo_cartpole"), 0, (), spaces("ppo_cartpole"))
    assert worker.device == META and policy_device(worker.policy) == META
    params = {p for group in worker.optimizer.param_groups for p in group["params"]}
    assert params == set(worker.policy.parameters())
    assert worker.generator.device.type == "cpu"
    if cls is HybridActorWorker:
        assert policy_device(worker.sampling.policy) == META


@pytest.mark.parametrize("cls", [OffPolicyActorWorker, HybridOffPolicyActorWorker])
def test_the_off_policy_trainer_updates_on_its_device(cls, meta_workers) -> None:
    worker = cls(config("sac_pendulum"), 0, (), spaces("sac_pendulum"))
    assert policy_device(worker.policy) == META
    assert worker.learner.log_alpha.device == META
    seen: list[dict[str, torch.Tensor]] = []

    def update(minibatches: list[dict[str, torch.Tensor]]) -> dict[str, float]:
        seen.extend(minibatches)
        return {}

    worker.learner.update = update
    batch_size = worker.cfg.replay.batch_size
    worker.update(0, replay_sample(2 * batch_size))
    assert len(seen) == 2 and devices(seen[0]) == {META}


def test_the_rollout_worker_puts_its_policy_on_its_device(meta_workers) -> None:
    worker = RolloutWorker(config("ppo_cartpole"), 0, (), spaces("ppo_cartpole"))
    assert policy_device(worker.sampling.policy) == META
    assert worker.sampling._generator(0).device.type == "cpu"


# -- checkpoints -------------------------------------------------------------------------------


def optimizer_devices(optimizer: torch.optim.Optimizer) -> set[torch.device]:
    return set().union(*(devices(state) for state in optimizer.state.values()))


#: Copying into meta parameters does nothing (and says so); the devices are what is checked.
QUIET_META_COPIES = pytest.mark.filterwarnings("ignore:.*non-meta parameter:UserWarning")


@QUIET_META_COPIES
def test_a_ppo_checkpoint_loads_onto_the_worker_device(tmp_path, monkeypatch) -> None:
    saved = ActorWorker(config("ppo_cartpole"), 0, (), spaces("ppo_cartpole"))
    saved.batch = ppo_batch("ppo_cartpole")
    saved.update(0)
    saved.save_checkpoint(str(tmp_path), "step_000001")
    monkeypatch.setattr(worker_base, "assigned_device", lambda what="": META)
    loaded = ActorWorker(config("ppo_cartpole"), 0, (), spaces("ppo_cartpole"))
    loaded.load_checkpoint(str(tmp_path), "step_000001")
    assert policy_device(loaded.policy) == META and loaded.version == 1
    # Adam's state goes to its parameters' device; its step counter stays on the CPU
    assert optimizer_devices(loaded.optimizer) == {META, torch.device("cpu")}
    assert all(state["exp_avg"].device == META for state in loaded.optimizer.state.values())
    assert torch.equal(loaded.generator.get_state(), saved.generator.get_state())


@QUIET_META_COPIES
def test_an_off_policy_checkpoint_loads_onto_the_worker_device(tmp_path, monkeypatch) -> None:
    saved = OffPolicyActorWorker(config("sac_pendulum"), 0, (), spaces("sac_pendulum"))
    saved.update(0, replay_sample(2 * saved.cfg.replay.batch_size))
    saved.save_checkpoint(str(tmp_path), "step_000001")
    monkeypatch.setattr(worker_base, "assigned_device", lambda what="": META)
    loaded = OffPolicyActorWorker(config("sac_pendulum"), 0, (), spaces("sac_pendulum"))
    loaded.load_checkpoint(str(tmp_path), "step_000001")
    learner = loaded.learner
    assert learner.log_alpha.device == META and policy_device(learner.target_critics) == META
    for optimizer in (learner.actor_optimizer, learner.critic_optimizer, learner.alpha_optimizer):
        assert optimizer_devices(optimizer) == {META}  # fused Adam keeps its step there too
    assert learner.generator.device.type == "cpu" and learner.updates == saved.learner.updates
