"""Assertions about policies shared by the policy tests: exact recomputation, determinism."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from rl_core.models import BasePolicy


def assert_same_outputs(a: BasePolicy, b: BasePolicy, obs: dict[str, Any]) -> None:
    """Assert that two policies give the same actions, log-probs and values on ``obs``.

    Args:
        a: A policy.
        b: The policy to compare with ``a`` (e.g. ``a`` exported and loaded).
        obs: A batch of env observations.
    """
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


def assert_training_recomputes_the_rollout(
    policy: BasePolicy, obs: dict[str, Any], result: dict[str, Any]
) -> None:
    """Assert that ``default_forward`` and ``value_forward`` give the rollout's numbers.

    Args:
        policy: The policy that acted.
        obs: The env observations it acted on.
        result: The result of ``policy.predict_action_batch(obs)``.
    """
    out = policy.default_forward(result["forward_inputs"])
    torch.testing.assert_close(out["logprobs"], result["prev_logprobs"])
    torch.testing.assert_close(out["values"], result["prev_values"])
    torch.testing.assert_close(policy.value_forward(obs), result["prev_values"])
    batch_size = len(next(iter(obs.values())))
    assert out["entropy"].shape == (batch_size,)


def assert_eval_actions_ignore_the_generator(policy: BasePolicy, obs: dict[str, Any]) -> None:
    """Assert that eval-mode actions are the same whatever the generator's seed.

    Args:
        policy: The policy.
        obs: A batch of env observations.
    """
    a, _ = policy.predict_action_batch(obs, mode="eval", generator=torch.Generator().manual_seed(1))
    b, _ = policy.predict_action_batch(obs, mode="eval", generator=torch.Generator().manual_seed(2))
    np.testing.assert_array_equal(a, b)
