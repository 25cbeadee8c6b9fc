"""A kind of training of its own: a softmax policy over the arms of a Bernoulli bandit.

This module is all it takes to add a kind to rlpipe: one :func:`register_kind` call names
the kind's config class (the shared sections plus its own ``env`` section), its model type,
its runtime, how its runs are named and what its evaluation protocol is. Load it with
``RLPIPE_EXT_MODULE=bandit_category`` (with this folder on ``PYTHONPATH``) and train with
``python flows/train.py --config examples/bandit_category/bandit.yaml``.

The runtime has no Ray workers: the policy, its optimizer and the bandit live in the
driver. Each iteration pulls ``env.num_envs`` arms, scores them, and takes one REINFORCE
step with a mean-reward baseline.
"""

from __future__ import annotations

import copy
import time
from typing import Any

import numpy as np
import torch
from pydantic import Field

from infra.checkpoint.layout import (
    ACTOR_OPTIMIZER,
    JSON,
    POLICY_WEIGHTS,
    SAFETENSORS,
    TORCH,
    StatePart,
)
from infra.driver.step_runtime import Evaluation, StepResult, StepRuntime
from rl_core.api import BasePolicy
from rl_core.config.schema import RLPipeConfig
from rl_core.config.sections import Section
from rl_core.kind import Kind, register_kind

#: The bandit's own file in a checkpoint folder.
BANDIT_STATE = "bandit_state.json"
#: Success probability of each arm.
ARMS = (0.2, 0.5, 0.8)


class BanditEnv(Section):
    """The bandit's only setting."""

    num_envs: int = Field(64, ge=1, le=100_000, description="Arms pulled per iteration.")


class BanditConfig(RLPipeConfig):
    """The shared sections plus the bandit's ``env``."""

    kind_name = "bandit"

    env: BanditEnv = Field(default_factory=BanditEnv)


class SoftmaxArms(BasePolicy):
    """Logits over the arms (the whole policy)."""

    def __init__(self, model_cfg: Any, spaces: Any) -> None:
        super().__init__()
        self.logits = torch.nn.Parameter(torch.zeros(len(ARMS)))

    def default_forward(self, **kwargs: Any) -> torch.Tensor:
        """Log-probabilities of the arms."""
        return torch.log_softmax(self.logits, dim=0)

    def predict_action_batch(self, env_obs: Any, mode: str = "train", **kwargs: Any) -> Any:
        """Greedy arm (the bandit has no observations)."""
        return int(self.logits.argmax()), {}


class BanditRuntime(StepRuntime):
    """Trains :class:`SoftmaxArms` on the bandit, in the driver."""

    def __init__(self, cfg: Any) -> None:
        super().__init__(cfg)
        torch.manual_seed(cfg.run.seed)
        self.policy = SoftmaxArms(cfg.model, None)
        self.optimizer = torch.optim.Adam(self.policy.parameters(), lr=cfg.actor.lr)
        self.rng = np.random.default_rng(cfg.run.seed)
        self.batch: dict[str, np.ndarray] = {}
        self.version = 0

    def weight_sync(self, iteration: int) -> StepResult:
        """Nothing to sync: acting and training share the policy."""
        return StepResult(0.0, info={"version": self.version})

    def rollout(self, iteration: int) -> StepResult:
        """Pull ``env.num_envs`` arms sampled from the policy."""
        start = time.perf_counter()
        with torch.no_grad():
            probs = torch.softmax(self.policy.logits, dim=0).double().numpy()
        arms = self.rng.choice(len(ARMS), size=self.cfg.env.num_envs, p=probs / probs.sum())
        wins = self.rng.random(len(arms)) < np.asarray(ARMS)[arms]
        self.batch = {"arms": arms, "rewards": wins.astype(np.float32)}
        return StepResult(
            time.perf_counter() - start,
            {"env/episode_return_mean": float(wins.mean())},
            env_steps=len(arms),
        )

    def reward(self, iteration: int, results: list[Any] | None) -> StepResult:
        """The bandit's wins are the rewards."""
        return StepResult(0.0, {"rollout/reward_mean": float(self.batch["rewards"].mean())})

    def advantage(self, iteration: int) -> StepResult:
        """Reward minus the batch mean."""
        rewards = self.batch["rewards"]
        self.batch["advantages"] = rewards - rewards.mean()
        return StepResult(0.0, {"train/advantage_mean": 0.0})

    def update(self, iteration: int) -> StepResult:
        """One REINFORCE step."""
        start = time.perf_counter()
        logp = self.policy()[torch.from_numpy(self.batch["arms"])]
        loss = -(torch.from_numpy(self.batch["advantages"]) * logp).mean()
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        self.version += 1
        return StepResult(time.perf_counter() - start, {"train/loss": float(loss)})

    def evaluate(self, iteration: int, results: list[Any] | None) -> Evaluation:
        """Expected reward of the greedy arm."""
        arm, _ = self.policy.predict_action_batch(None)
        return Evaluation({"eval/return_mean": ARMS[arm], "eval/arm": float(arm)})

    @classmethod
    def evaluate_checkpoint(
        cls, store_uri: str, checkpoint: dict[str, Any], episodes: int
    ) -> tuple[dict[str, Any], list[dict[str, Any]], str]:
        """Expected reward of the checkpoint's greedy arm."""
        arm = int(torch.as_tensor(checkpoint["weights"]["logits"]).argmax())
        return {"eval/return_mean": ARMS[arm]}, [], f"greedy arm {arm} ({ARMS[arm]:.0%})"

    def checkpoint_parts(self) -> list[StatePart]:
        """Policy weights, optimizer state, bandit RNG and update count (driver files)."""
        return [
            StatePart(POLICY_WEIGHTS, SAFETENSORS, self.policy.state_dict, self._put_weights),
            StatePart(ACTOR_OPTIMIZER, TORCH, self.optimizer.state_dict, self._put_optimizer),
            StatePart(BANDIT_STATE, JSON, self._bandit_state, self._put_bandit_state),
        ]

    def _put_weights(self, weights: dict[str, torch.Tensor], step: int) -> None:
        self.policy.load_state_dict(weights)

    def _put_optimizer(self, state: dict[str, Any], step: int) -> None:
        self.optimizer.load_state_dict(state)

    def _bandit_state(self) -> dict[str, Any]:
        return {"rng": self.rng.bit_generator.state, "version": self.version}

    def _put_bandit_state(self, state: dict[str, Any], step: int) -> None:
        self.rng.bit_generator.state = state["rng"]
        self.version = int(state["version"])

    def snapshot(self, step: str) -> None:
        """Everything a rollout or an update changes."""
        self._snapshot = copy.deepcopy(
            (
                self.policy.state_dict(),
                self.optimizer.state_dict(),
                self.rng.bit_generator.state,
                self.batch,
                self.version,
            )
        )

    def restore(self, step: str) -> None:
        """Put back what :meth:`snapshot` kept."""
        model, optimizer, rng, batch, version = copy.deepcopy(self._snapshot)
        self.policy.load_state_dict(model)
        self.optimizer.load_state_dict(optimizer)
        self.rng.bit_generator.state = rng
        self.batch, self.version = batch, version

    def repair(self) -> dict[str, list[int]]:
        """No workers, nothing to repair."""
        return {}


def register() -> None:
    """Called by rlpipe when the module is loaded (``RLPIPE_EXT_MODULE``)."""
    register_kind(
        Kind(
            name="bandit",
            config=BanditConfig,
            runtime=BanditRuntime,
            score_metric="eval/return_mean",
            task_name=lambda cfg: f"bandit-{len(ARMS)}-arms",
            protocol=lambda cfg: {"arms": list(ARMS)},
            data_fingerprint=lambda cfg, digest: digest.update(repr(ARMS).encode()),
            models={"bandit_softmax": SoftmaxArms},
        ),
        force=True,
    )
