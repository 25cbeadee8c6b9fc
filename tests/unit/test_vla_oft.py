"""The VLA (``vla_oft``): chunked actions, exact log-probs, padding, dtypes, a PPO update."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from tests.pixel_policies import (
    CHUNK,
    CHUNK_BOX,
    STEP_DIM,
    eval_mean,
    kick,
    observations,
    vla_policy,
)
from tests.policy_checks import (
    assert_eval_actions_ignore_the_generator,
    assert_training_recomputes_the_rollout,
)


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
    assert_training_recomputes_the_rollout(policy, obs, result)
    again, _ = policy.predict_action_batch(obs, generator=torch.Generator().manual_seed(3))
    np.testing.assert_array_equal(actions, again)
    assert_eval_actions_ignore_the_generator(policy, obs)
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
