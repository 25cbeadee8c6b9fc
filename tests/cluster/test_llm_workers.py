"""Reasoning workers on a real local Ray cluster: the 2-rank FSDP2 trainer equals one rank,
and rollout engines hold exactly the trainer's weights after a sync in both modes."""

from __future__ import annotations

import numpy as np
import pytest
import ray
import torch

from rl_core.models.tiny_lm import create_tiny_lm
from rl_core.training.micro_batches import MicroBatching, micro_batch_rows
from tests.llm_trainers import (
    batch,
    config,
    full_state,
    rollout_worker,
    sync,
    trainer,
    update,
)

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory):
    return str(create_tiny_lm(tmp_path_factory.mktemp("lm") / "tiny", num_hidden_layers=2))


def test_two_fsdp_ranks_match_a_single_process_update(ray_local, tiny_dir):
    cfg = config(tiny_dir)
    data = batch()
    single, double = trainer(cfg, 1), trainer(cfg, 2)
    before = full_state(single)
    for it in range(2):
        update(single, data, it)
        update(double, data, it)
    a, b = full_state(single), full_state(double)
    assert set(a) == set(b)
    diff = max(float(np.abs(a[k] - b[k]).max()) for k in a)
    moved = max(float(np.abs(a[k] - before[k]).max()) for k in a)
    assert moved > 1e-3, "the update did not change the weights"
    assert diff < 1e-5, f"2-rank FSDP2 differs from 1 rank by {diff}"
    for h in single + double:
        ray.kill(h)


def test_two_fsdp_ranks_with_a_token_budget_match_one_rank(ray_local, tiny_dir):
    """Packed micro-batches filled up to a token budget: the ranks' shards need different
    numbers of micro-batches, so they agree on the largest (fillers on the other) and
    still train exactly as one rank does."""
    budget = ["data.max_prompt_length=5", "rollout.max_new_tokens=4"]
    cfg = config(tiny_dir, *budget, "actor.max_tokens_per_micro_batch=14")
    data = batch()
    # rank 0's rows of minibatch 0 are the longest: they need more micro-batches
    lengths = data["prompt_mask"].sum(1) + data["response_mask"].sum(1)
    data = {k: v[np.argsort(-lengths, kind="stable")] for k, v in data.items()}
    lengths = sorted(lengths.tolist(), reverse=True)
    cut = MicroBatching(rows=1, max_tokens=14)
    assert len(micro_batch_rows(lengths[0:2], cut)) > len(micro_batch_rows(lengths[2:4], cut))
    single = trainer(config(tiny_dir, *budget, "actor.packing=false"), 1)
    double = trainer(cfg, 2)
    for it in range(2):
        update(single, data, it)
        update(double, data, it)
    a, b = full_state(single), full_state(double)
    diff = max(float(np.abs(a[k] - b[k]).max()) for k in a)
    assert diff < 1e-5, f"2 packed ranks with a token budget differ from 1 rank by {diff}"
    for h in single + double:
        ray.kill(h)


@pytest.mark.parametrize("mode", ["bucket", "patch"])
def test_rollout_weights_equal_trainer_weights_after_each_sync(ray_local, tiny_dir, mode):
    cfg = config(tiny_dir, f"rollout.weight_sync_mode={mode}", "rollout.patch_full_sync_interval=3")
    ranks, rollout = trainer(cfg, 2), rollout_worker(cfg)
    sent = []
    for it in range(4):
        meta = sync(ranks, rollout)
        assert meta["version"] == it
        trainer_state = {
            k[len("model.") :]: v for k, v in full_state(ranks).items() if k.startswith("model.")
        }
        rollout_state = ray.get(rollout.weights.remote())
        for name, value in trainer_state.items():
            np.testing.assert_array_equal(rollout_state[name], value, err_msg=name)
        sent.append((meta["mode"], meta["nbytes"]))
        update(ranks, batch(seed=it), it)
    full = sent[0][1]
    if mode == "bucket":
        assert all(m == "full" and n == full for m, n in sent)
    else:
        assert [m for m, _ in sent] == ["full", "patch", "patch", "full"]
        assert all(0 < n for _, n in sent)
    for h in [*ranks, rollout]:
        ray.kill(h)


def test_fsdp_ranks_agree_to_skip_a_nonfinite_update_and_to_refuse_a_checkpoint(
    ray_local, tiny_dir, tmp_path
):
    cfg = config(tiny_dir, "actor.max_skipped_updates_in_a_row=10")
    ranks = trainer(cfg, 2)
    update(ranks, batch(), 0)  # a finite update first: the optimizer has state
    before = full_state(ranks)
    bad = batch(seed=1)
    # NaN only in rows of rank 0 (rank_rows gives it rows 0,1 and 4,5): rank 1's own loss
    # and gradients are finite, yet it must skip too
    bad["advantages"][[0, 4], 0] = np.nan
    outs = update(ranks, bad, 1)
    assert sum(o["train/skipped_updates"] for o in outs) == 4.0  # 2 epochs x 2 minibatches
    assert sum(o["train/optimizer_steps"] for o in outs) == 0.0
    after = full_state(ranks)
    for name, value in before.items():
        np.testing.assert_array_equal(after[name], value, err_msg=name)

    def poison_first_local_shard(worker) -> None:  # runs inside the worker (by value)
        with torch.no_grad():
            param = next(worker.policy.parameters())
            local = param.to_local() if hasattr(param, "to_local") else param
            local.view(-1)[0] = float("nan")

    store = tmp_path / "store"
    ray.get(ranks[1].__ray_call__.remote(poison_first_local_shard))
    refs = [h.save_checkpoint.remote(str(store), "step_000002") for h in ranks]
    for ref in refs:  # both ranks refuse (rank 0's own shards are finite)
        with pytest.raises(ray.exceptions.RayTaskError, match="refusing to checkpoint"):
            ray.get(ref, timeout=120)
    assert not store.exists() or not any(store.rglob("*")), "nothing may be written"
    for h in ranks:
        ray.kill(h)
