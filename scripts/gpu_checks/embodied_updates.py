"""Embodied training on a device against the CPU, for ``embodied_sampling``.

One PPO update (``ppo_cartpole``: advantages, then every epoch and minibatch of the preset)
and one SAC update (``sac_pendulum``: a few replay minibatches) run from the same initial
weights, batch and seeds with the policy on the CPU and on the device; the largest weight
difference says whether the device computes the same update (float32 rounding only: the
seeded draws stay on CPU generators). The policy trained on the device then goes through
a checkpoint written with the project's serializer and is loaded back onto the device.
"""

from __future__ import annotations

import copy
import io
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from safetensors.torch import load as safetensors_load

from infra.checkpoint.serialize import (
    bytes_to_object,
    bytes_to_tensors,
    object_to_bytes,
    tensors_to_bytes,
)
from rl_core.algorithms.actor_critic_family import actor_critic_spec
from rl_core.config import load_config
from rl_core.envs.registry import EnvSpaces
from rl_core.models import get_model
from rl_core.models.base_policy import policy_device
from rl_core.training.optim import build_optimizer
from rl_core.training.ppo import compute_advantages, ppo_update
from rl_core.training.sac_update import SACLearner, minibatches_from_arrays

CPU = torch.device("cpu")
#: Replay minibatches of the SAC update.
SAC_MINIBATCHES = 8


def _spaces(obs_size: int, action_space: gym.Space) -> EnvSpaces:
    return EnvSpaces(gym.spaces.Box(-10.0, 10.0, (obs_size,), np.float32), action_space)


def _devices(tree: Any) -> set[str]:
    if isinstance(tree, torch.Tensor):
        return {tree.device.type}
    if isinstance(tree, dict):
        return set().union(*(_devices(v) for v in tree.values()))
    if isinstance(tree, (list, tuple)):
        return set().union(*(_devices(v) for v in tree))
    return set()


def _max_difference(first: dict[str, torch.Tensor], second: dict[str, torch.Tensor]) -> float:
    return max(
        float((first[name].double().cpu() - second[name].double().cpu()).abs().max())
        for name in first
        if first[name].is_floating_point()
    )


def _equal(first: Any, second: Any) -> bool:
    """Whether two state trees hold the same values (tensors compared on the CPU)."""
    if isinstance(first, torch.Tensor):
        return torch.equal(first.cpu(), second.cpu())
    if isinstance(first, dict):
        return first.keys() == second.keys() and all(_equal(first[k], second[k]) for k in first)
    if isinstance(first, (list, tuple)):
        return len(first) == len(second) and all(map(_equal, first, second))
    return first == second


def _ppo_batch(policy: torch.nn.Module, steps: int, envs: int) -> dict[str, Any]:
    """A rollout batch as a trainer receives it (numpy), sampled by ``policy`` on the CPU."""
    g = torch.Generator().manual_seed(1)
    states = torch.randn(steps, envs, 4, generator=g).numpy()
    _, result = policy.predict_action_batch({"states": states.reshape(-1, 4)}, generator=g)
    terminated = (torch.rand(steps, envs, generator=g) < 0.02).numpy()
    truncated = np.zeros((steps, envs), bool)
    truncated[steps // 2, :2] = True

    def reshape(t: torch.Tensor) -> np.ndarray:
        return t.numpy().reshape(steps, envs, *t.shape[1:])

    return {
        "forward_inputs": {k: reshape(v) for k, v in result["forward_inputs"].items()},
        "prev_logprobs": reshape(result["prev_logprobs"]),
        "prev_values": reshape(result["prev_values"]),
        "rewards": np.ones((steps, envs), np.float32),
        "terminated": terminated & ~truncated,
        "truncated": truncated,
        "trunc_index": np.array([[steps // 2, 0], [steps // 2, 1]], np.int64),
        "trunc_obs": {"states": states[-1, :2]},
        "next_obs": {"states": states[-1]},
    }


def ppo_on(device: torch.device) -> dict[str, Any]:
    """One ``ppo_cartpole`` update on the CPU and on ``device``; the device's results."""
    cfg = load_config("ppo_cartpole")
    torch.manual_seed(0)
    initial = get_model(cfg.model, _spaces(4, gym.spaces.Discrete(2)))
    batch = _ppo_batch(initial, cfg.rollout.num_steps, cfg.env.num_envs)
    trained = {}
    for where in (CPU, device):
        policy = copy.deepcopy(initial).to(where)
        optimizer = build_optimizer(policy.parameters(), cfg.actor)
        rollout = copy.deepcopy(batch)
        compute_advantages(policy, rollout, cfg.algorithm)
        metrics = ppo_update(
            policy, optimizer, rollout, cfg.algorithm, cfg.actor, torch.Generator().manual_seed(2)
        )
        trained[where] = policy, optimizer
    policy, optimizer = trained[device]
    return {
        "max_weight_diff": _max_difference(trained[CPU][0].state_dict(), policy.state_dict()),
        "minibatch_updates": metrics["train/minibatch_updates"],
        "policy": policy,
        "optimizer": optimizer,
        "rebuild": lambda: get_model(cfg.model, _spaces(4, gym.spaces.Discrete(2))),
    }


def sac_on(device: torch.device) -> dict[str, Any]:
    """One ``sac_pendulum`` update on the CPU and on ``device``; the device's results."""
    cfg = load_config("sac_pendulum")
    spaces = _spaces(3, gym.spaces.Box(-2.0, 2.0, (1,), np.float32))
    torch.manual_seed(0)
    initial = get_model(cfg.model, spaces)
    rows = SAC_MINIBATCHES * cfg.replay.batch_size
    g = torch.Generator().manual_seed(3)
    sample = {
        "states": torch.randn(rows, 3, generator=g).numpy(),
        "actions": (torch.rand(rows, 1, generator=g) * 2.0 - 1.0).numpy(),
        "rewards": torch.randn(rows, generator=g).numpy(),
        "next_states": torch.randn(rows, 3, generator=g).numpy(),
        "terminated": (torch.rand(rows, generator=g) < 0.05).float().numpy(),
    }

    def learner_for(policy: torch.nn.Module) -> SACLearner:
        spec = actor_critic_spec(cfg.algorithm.loss_type)
        settings = cfg.algorithm.off_policy
        return SACLearner(policy, spec, settings, cfg.actor, cfg.algorithm.gamma, seed=4)

    trained = {}
    for where in (CPU, device):
        learner = learner_for(copy.deepcopy(initial).to(where))
        learner.update(minibatches_from_arrays(sample, SAC_MINIBATCHES, where))
        trained[where] = learner
    learner = trained[device]
    weights = {**learner.policy.state_dict(), "log_alpha": learner.log_alpha.detach()}
    on_cpu = trained[CPU]
    expected = {**on_cpu.policy.state_dict(), "log_alpha": on_cpu.log_alpha.detach()}
    return {
        "max_weight_diff": _max_difference(expected, weights),
        "gradient_steps": learner.updates,
        "learner": learner,
        "rebuild": lambda: learner_for(get_model(cfg.model, spaces).to(device)),
    }


def checkpoint_round_trip(ppo: dict[str, Any], sac: dict[str, Any]) -> dict[str, bool]:
    """Write the device-trained PPO policy, its optimizer and the SAC learner as a trainer's
    checkpoint does, then load them into fresh copies on the same device."""
    policy, optimizer = ppo["policy"], ppo["optimizer"]
    device = policy_device(policy)
    model_file = tensors_to_bytes(policy.state_dict())
    optimizer_file = object_to_bytes(optimizer.state_dict())
    learner = sac["learner"]
    learner_file = object_to_bytes(learner.state_dict())
    # readable anywhere: the files hold CPU tensors (torch.load without a map_location)
    stored = [
        safetensors_load(model_file),
        *(torch.load(io.BytesIO(f), weights_only=True) for f in (optimizer_file, learner_file)),
    ]
    files_on_cpu = set().union(*(_devices(s) for s in stored)) == {"cpu"}
    restored = ppo["rebuild"]().to(device)
    restored_optimizer = torch.optim.Adam(restored.parameters())
    restored.load_state_dict(bytes_to_tensors(model_file, "model.safetensors"), strict=True)
    restored_optimizer.load_state_dict(bytes_to_object(optimizer_file, "optimizer.pt"))
    restored_learner = sac["rebuild"]()
    restored_learner.load_state_dict(bytes_to_object(learner_file, "optimizer.pt"))
    ppo_moments = [
        {k: v for k, v in state.items() if k != "step"}  # Adam counts steps on the CPU
        for state in restored_optimizer.state.values()
    ]
    sac_optimizers = [
        restored_learner.actor_optimizer,
        restored_learner.critic_optimizer,
        restored_learner.alpha_optimizer,
    ]
    targets = restored_learner.target_critics
    return {
        "files_on_cpu": files_on_cpu,
        "ppo_equal": _equal(restored.state_dict(), policy.state_dict())
        and _equal(restored_optimizer.state_dict()["state"], optimizer.state_dict()["state"]),
        "ppo_on_device": policy_device(restored) == device
        and _devices(ppo_moments) == {device.type},
        "sac_equal": _equal(restored_learner.state_dict(), learner.state_dict()),
        "sac_on_device": restored_learner.log_alpha.device == device
        and (targets is None or policy_device(targets) == device)
        and all(_devices(dict(o.state)) == {device.type} for o in sac_optimizers),
    }
