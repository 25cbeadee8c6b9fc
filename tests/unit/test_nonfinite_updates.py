"""Non-finite updates are skipped (weights and optimizer state untouched), a streak of them
stops the run, and a trainer refuses to checkpoint non-finite weights."""

from __future__ import annotations

import copy
import json
import math

import gymnasium as gym
import pytest
import torch
import torch.multiprocessing as mp
from transformers import AutoModelForCausalLM, AutoTokenizer

from infra.checkpoint.store import CheckpointError
from kinds.embodied.workers.actor_worker import ActorWorker
from rl_core.config import load_config
from rl_core.envs import EnvSpaces
from rl_core.models import get_model
from rl_core.models.causal_lm import CausalLMPolicy
from rl_core.models.tiny_lm import create_tiny_lm
from rl_core.training.llm_update import MinibatchTotals, llm_update, minibatch_totals
from rl_core.training.nonfinite import (
    SkippedUpdateGuard,
    SkippedUpdatesError,
    any_rank,
    nonfinite_tensors,
)
from rl_core.training.optim import build_optimizer
from rl_core.training.ppo import ppo_update
from rl_core.training.sft_update import sft_update
from tests.llm_batches import llm_actor, llm_algorithm, random_llm_batch
from tests.nonfinite_ranks import rank_update_with_nan_on_rank_zero

T, N = 8, 4  # steps x envs of the PPO batch


def cartpole_spaces() -> EnvSpaces:
    env = gym.make("CartPole-v1")
    try:
        return EnvSpaces(env.observation_space, env.action_space)
    finally:
        env.close()


def ppo_setup(*overrides: str):
    cfg = load_config(overrides=list(overrides))
    torch.manual_seed(0)
    policy = get_model(cfg.model, cartpole_spaces())
    optimizer = build_optimizer(policy.parameters(), cfg.actor)
    return cfg, policy, optimizer


def ppo_batch(policy, seed: int = 0, advantage: float | None = None) -> dict:
    """A rollout batch as the trainer holds it after compute_advantages."""
    g = torch.Generator().manual_seed(seed)
    states = torch.randn(T, N, 4, generator=g)
    _, result = policy.predict_action_batch({"states": states.reshape(T * N, 4)}, generator=g)
    advantages = torch.randn(T, N, generator=g)
    if advantage is not None:
        advantages[:] = advantage
    return {
        "rewards": torch.ones(T, N).numpy(),
        "forward_inputs": {
            "states": states,
            "model_action": result["forward_inputs"]["model_action"].reshape(T, N),
        },
        "prev_logprobs": result["prev_logprobs"].reshape(T, N),
        "prev_values": result["prev_values"].reshape(T, N),
        "advantages": advantages,
        "returns": torch.randn(T, N, generator=g),
    }


def snapshot(policy, optimizer) -> tuple[dict, dict]:
    return copy.deepcopy(policy.state_dict()), copy.deepcopy(optimizer.state_dict())


def assert_bit_identical(before: tuple[dict, dict], policy, optimizer) -> None:
    weights, opt_state = before
    for name, value in policy.state_dict().items():
        assert torch.equal(value, weights[name]), f"weight {name} changed"
    now = optimizer.state_dict()
    assert now["state"].keys() == opt_state["state"].keys()
    for index, state in opt_state["state"].items():
        for key, value in state.items():
            assert torch.equal(now["state"][index][key], value), f"optimizer {index}.{key} changed"
    assert all(p.grad is None for p in policy.parameters())


# -- the PPO trainer -------------------------------------------------------------------------


@pytest.mark.parametrize("bad", [math.nan, math.inf])
def test_ppo_nonfinite_loss_skips_the_update_bit_identically(bad):
    cfg, policy, optimizer = ppo_setup("actor.num_minibatches=2", "actor.update_epochs=1")
    gen = torch.Generator().manual_seed(0)
    first = ppo_update(policy, optimizer, ppo_batch(policy), cfg.algorithm, cfg.actor, gen)
    assert first["train/skipped_updates"] == 0.0 and first["train/minibatch_updates"] == 2.0
    before = snapshot(policy, optimizer)

    guard = SkippedUpdateGuard(cfg.actor.max_skipped_updates_in_a_row)
    batch = ppo_batch(policy, seed=1, advantage=bad)
    metrics = ppo_update(
        policy, optimizer, batch, cfg.algorithm, cfg.actor, gen, guard=guard, iteration=4
    )

    assert metrics["train/skipped_updates"] == 2.0
    assert metrics["train/minibatch_updates"] == 0.0
    assert guard.in_a_row == 2
    assert_bit_identical(before, policy, optimizer)


def test_ppo_skipped_updates_in_a_row_stop_the_run_across_iterations():
    cfg, policy, optimizer = ppo_setup(
        "actor.num_minibatches=1", "actor.update_epochs=1", "actor.lr=0.5"
    )
    gen = torch.Generator().manual_seed(0)
    guard = SkippedUpdateGuard(cfg.actor.max_skipped_updates_in_a_row)
    assert guard.max_in_a_row == 3  # the schema's default
    bad = ppo_batch(policy, advantage=math.nan)
    for iteration in (1, 2):
        metrics = ppo_update(
            policy, optimizer, bad, cfg.algorithm, cfg.actor, gen, guard=guard, iteration=iteration
        )
        assert metrics["train/skipped_updates"] == 1.0
    with pytest.raises(SkippedUpdatesError) as info:
        ppo_update(policy, optimizer, bad, cfg.algorithm, cfg.actor, gen, guard=guard, iteration=3)
    message = str(info.value)
    assert "3 optimizer updates in a row" in message
    assert "iteration 3 (epoch 1, minibatch 1)" in message
    assert "lower actor.lr (now 0.5)" in message


def test_a_finite_update_resets_the_streak():
    cfg, policy, optimizer = ppo_setup("actor.num_minibatches=1", "actor.update_epochs=1")
    gen = torch.Generator().manual_seed(0)
    guard = SkippedUpdateGuard(2)

    def run(batch: dict) -> dict[str, float]:
        return ppo_update(
            policy, optimizer, batch, cfg.algorithm, cfg.actor, gen, guard=guard, iteration=0
        )

    assert run(ppo_batch(policy, advantage=math.nan))["train/skipped_updates"] == 1.0
    assert run(ppo_batch(policy))["train/minibatch_updates"] == 1.0
    assert guard.in_a_row == 0
    assert run(ppo_batch(policy, advantage=math.nan))["train/skipped_updates"] == 1.0
    with pytest.raises(SkippedUpdatesError):
        run(ppo_batch(policy, advantage=math.nan))


# -- the LLM trainer -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory):
    return create_tiny_lm(tmp_path_factory.mktemp("lm") / "tiny", num_hidden_layers=1)


def llm_setup(tiny_dir, max_in_a_row: int = 3):
    torch.manual_seed(0)
    policy = CausalLMPolicy(
        AutoModelForCausalLM.from_pretrained(tiny_dir), AutoTokenizer.from_pretrained(tiny_dir)
    ).train()
    optimizer = torch.optim.AdamW(policy.parameters(), lr=1e-3)
    cfg = load_config(overrides=["algorithm.adv_type=gae"])
    algo = llm_algorithm(cfg.algorithm).model_copy(update={"kl_coef": 0.1})
    actor = llm_actor(cfg.actor).model_copy(
        update={
            "update_epochs": 1,
            "micro_batch_size": 2,
            "max_skipped_updates_in_a_row": max_in_a_row,
        }
    )
    return policy, optimizer, algo, actor


def test_llm_nonfinite_loss_skips_the_update_bit_identically(tiny_dir):
    policy, optimizer, algo, actor = llm_setup(tiny_dir)
    batch = random_llm_batch(8, seed=0)
    first = llm_update(policy, optimizer, batch, minibatch_totals([batch], 2), algo, actor)
    assert first["train/skipped_updates"] == 0.0 and first["train/optimizer_steps"] == 2.0
    before = snapshot(policy, optimizer)

    bad = random_llm_batch(8, seed=1)
    bad["advantages"][0, 0] = math.nan  # only the first minibatch is affected
    guard = SkippedUpdateGuard(3)
    metrics = llm_update(
        policy, optimizer, bad, minibatch_totals([bad], 1), algo, actor, guard=guard, iteration=5
    )
    assert metrics["train/skipped_updates"] == 1.0
    assert metrics["train/optimizer_steps"] == 0.0
    assert all(math.isfinite(v) for v in metrics.values())  # the skip is not averaged in
    assert_bit_identical(before, policy, optimizer)

    # two minibatches: the NaN one is skipped, the clean one is applied and ends the streak
    metrics = llm_update(
        policy, optimizer, bad, minibatch_totals([bad], 2), algo, actor, guard=guard, iteration=6
    )
    assert metrics["train/skipped_updates"] == 1.0 and metrics["train/optimizer_steps"] == 1.0
    assert guard.in_a_row == 0
    assert any(not torch.equal(v, before[0][k]) for k, v in policy.state_dict().items())


def test_llm_skipped_updates_in_a_row_stop_the_run(tiny_dir):
    policy, optimizer, algo, actor = llm_setup(tiny_dir, max_in_a_row=2)
    bad = random_llm_batch(8, seed=1)
    bad["advantages"][:] = math.inf
    with pytest.raises(SkippedUpdatesError) as info:
        llm_update(policy, optimizer, bad, minibatch_totals([bad], 2), algo, actor, iteration=9)
    assert "2 optimizer updates in a row" in str(info.value)
    assert "iteration 9 (epoch 1, minibatch 2)" in str(info.value)
    assert "lower actor.lr (now 0.001)" in str(info.value)


def test_sft_nonfinite_loss_skips_the_step_and_a_streak_stops(tiny_dir):
    policy, optimizer, _, _ = llm_setup(tiny_dir)
    batch = random_llm_batch(4, seed=0)
    good = MinibatchTotals(float(batch["response_mask"].sum()), 4)
    first = sft_update(policy, optimizer, batch, good, 2, 1.0)
    assert first["train/skipped_updates"] == 0.0 and math.isfinite(first["train/sft_loss"])
    before = snapshot(policy, optimizer)
    guard = SkippedUpdateGuard(2)
    # NaN logits (as from a diverged model), without touching the weights
    head = policy.model.get_output_embeddings()
    hook = head.register_forward_hook(lambda module, args, out: out * math.nan)
    try:
        metrics = sft_update(policy, optimizer, batch, good, 2, 1.0, guard=guard, iteration=3)
        assert metrics == {
            "train/sft_loss": 0.0,
            "train/grad_norm": 0.0,
            "train/skipped_updates": 1.0,
        }
        assert_bit_identical(before, policy, optimizer)
        with pytest.raises(SkippedUpdatesError, match="iteration 4 \\(supervised step\\)"):
            sft_update(policy, optimizer, batch, good, 2, 1.0, guard=guard, iteration=4)
    finally:
        hook.remove()


def test_data_parallel_ranks_agree_to_skip(tmp_path):
    """Rank 1's own loss and gradients are finite: without the all-reduce it would step."""
    mp.spawn(rank_update_with_nan_on_rank_zero, args=(str(tmp_path),), nprocs=2)
    results = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1)]
    # each rank reports its share (1 / world size) of the one skipped update
    assert results == [{"skipped": 0.5, "unchanged": True}] * 2


# -- guard and helpers -------------------------------------------------------------------------


def test_guard_needs_a_positive_limit():
    with pytest.raises(ValueError, match="max_in_a_row must be >= 1, got 0"):
        SkippedUpdateGuard(0)


def test_nonfinite_tensors_names_floating_tensors_with_inf_or_nan():
    named = {
        "ok": torch.ones(3),
        "nan": torch.tensor([1.0, math.nan]),
        "inf": torch.tensor([[-math.inf]]),
        "ints": torch.tensor([1, 2]),
    }
    assert nonfinite_tensors(named.items()) == ["nan", "inf"]


def test_any_rank_without_a_process_group_is_the_local_flag():
    assert any_rank(True, "cpu", world_size=2) is True
    assert any_rank(False, "cpu", world_size=2) is False


# -- checkpoints -----------------------------------------------------------------------------


def actor_worker() -> ActorWorker:
    return ActorWorker(load_config().model_dump(mode="json"), 0, (), cartpole_spaces())


def test_actor_worker_refuses_to_checkpoint_nonfinite_weights(tmp_path):
    worker = actor_worker()
    with torch.no_grad():
        next(worker.policy.parameters())[0] = math.nan
    store = tmp_path / "store"
    with pytest.raises(CheckpointError) as info:
        worker.save_checkpoint(str(store), "step_000001")
    message = str(info.value)
    assert "refusing to checkpoint weight version 0: non-finite values in" in message
    assert "lower actor.lr" in message
    assert not store.exists() or not any(store.rglob("*")), "nothing may be written"


def test_actor_worker_checkpoint_keeps_the_skip_streak(tmp_path):
    worker = actor_worker()
    worker.guard.in_a_row = 2
    worker.save_checkpoint(str(tmp_path), "step_000001")
    restored = actor_worker()
    restored.load_checkpoint(str(tmp_path), "step_000001")
    assert restored.guard.in_a_row == 2
    for name, value in worker.policy.state_dict().items():
        assert torch.equal(restored.policy.state_dict()[name], value)


def test_actor_worker_snapshot_restores_the_skip_streak():
    worker = actor_worker()
    worker.guard.in_a_row = 1
    worker.snapshot()
    worker.guard.in_a_row = 2  # a retried update that skipped again before failing
    worker.restore_snapshot()
    assert worker.guard.in_a_row == 1
