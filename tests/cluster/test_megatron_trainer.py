"""The megatron trainer as Ray workers over gloo: its updates equal the FSDP2 trainer's at
TP 2 × DP 1 and TP 1 × DP 2, rollout engines hold its weights after bucket and patch syncs
(their log-probs then equal the trainer's), and its sharded checkpoints resume exactly at
the same tensor-parallel size and after resharding TP 2 → 1."""

from __future__ import annotations

import numpy as np
import pytest
import ray
from safetensors.torch import load_file
from transformers import AutoModelForCausalLM

from infra.checkpoint.store import CheckpointError
from rl_core.models.tiny_lm import create_tiny_lm
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


def megatron(tiny_dir, tp, world, *extra):
    return config(
        tiny_dir,
        "actor.backend=megatron",
        f"actor.megatron.tensor_model_parallel_size={tp}",
        f"actor.num_workers={world}",
        *extra,
    )


def max_diff(a, b):
    assert sorted(a) == sorted(b)
    return max(float(np.abs(a[k] - b[k]).max()) for k in a)


def kill(*groups):
    for group in groups:
        for h in group:
            ray.kill(h)


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory):
    # the default tiny model: its one key/value head is copied to both ranks at TP 2 (the
    # bridge's parity tests and the multinode test cover a model with one head per rank)
    return str(create_tiny_lm(tmp_path_factory.mktemp("lm") / "tiny", num_hidden_layers=2))


UPDATES = 2


@pytest.fixture(scope="module")
def fsdp_reference(ray_local, tiny_dir) -> dict:
    """One FSDP2 rank's weights before and after :data:`UPDATES` updates on :func:`batch`,
    and each update's metrics: what every megatron layout must reproduce."""
    data = batch()
    reference = trainer(config(tiny_dir), 1)
    before = full_state(reference)
    metrics = [update(reference, data, it)[0] for it in range(UPDATES)]
    after = full_state(reference)
    kill(reference)
    assert max_diff(after, before) > 1e-3, "the update did not change the weights"
    return {"data": data, "before": before, "metrics": metrics, "after": after}


#: Packed micro-batches filled up to a token budget (rows: 3 to 9 tokens).
TOKEN_BUDGET = (
    "actor.max_tokens_per_micro_batch=12",
    "data.max_prompt_length=5",
    "rollout.max_new_tokens=4",
)


@pytest.mark.parametrize(
    ("tp", "world", "batching"),
    [(2, 2, TOKEN_BUDGET), (1, 2, ("actor.packing=false",))],
    ids=["tp2-packed-token-budget", "tp1-dp2-padded"],
)
def test_megatron_update_equals_the_fsdp_update(
    ray_local, tiny_dir, fsdp_reference, tp, world, batching
):
    """The FSDP2 reference packs micro-batches of rows; the megatron ranks pack theirs by
    a token budget, or pad them: the same updates either way."""
    ranks = trainer(megatron(tiny_dir, tp, world, *batching), world)
    # the bridge loads the HF weights
    assert max_diff(full_state(ranks), fsdp_reference["before"]) == 0.0
    for it, want in enumerate(fsdp_reference["metrics"]):
        got = update(ranks, fsdp_reference["data"], it, tp)
        for key in ("train/policy_loss", "train/grad_norm", "train/optimizer_steps"):
            total = sum(o[key] for o in got)
            assert abs(total - want[key]) < 1e-5, (key, total, want[key])
    assert max_diff(fsdp_reference["after"], full_state(ranks)) < 1e-5
    kill(ranks)


def test_rollout_engine_holds_the_megatron_weights_after_each_sync(ray_local, tiny_dir):
    """Patch mode sends full syncs (iterations 0 and 3) and patches (1 and 2): both payloads
    from the gathered TP shards. Bucket mode sends the same full payload every time; the
    FSDP trainer's sync test runs it (tests/cluster/test_llm_workers.py)."""
    cfg = megatron(
        tiny_dir, 2, 2, "rollout.weight_sync_mode=patch", "rollout.patch_full_sync_interval=3"
    )
    ranks, rollout = trainer(cfg, 2), rollout_worker(cfg)
    sent = []
    for it in range(4):
        meta = sync(ranks, rollout)
        assert meta["version"] == it
        trainer_state = {k[len("model.") :]: v for k, v in full_state(ranks).items()}
        rollout_state = ray.get(rollout.weights.remote())
        for name, value in trainer_state.items():
            np.testing.assert_array_equal(rollout_state[name], value, err_msg=name)
        sent.append(meta["mode"])
        # the engine samples; the trainer scores the same tokens with the same weights
        prompts = [[5, 9, 12], [7, 8]]
        sampling = {"max_new_tokens": 4, "temperature": 1.0, "stop_token_ids": []}
        out = ray.get(rollout.generate.remote(prompts, sampling, it))
        rows = rollout_rows(prompts, out["response_ids"])
        scored = ray.get([h.compute_logprobs.remote(rows) for h in ranks])
        assert np.array_equal(scored[0]["logprobs"], scored[1]["logprobs"])
        for i, logprobs in enumerate(out["logprobs"]):
            mismatch = np.abs(scored[0]["logprobs"][i, : len(logprobs)] - logprobs).max()
            assert mismatch < 1e-5, (it, i, mismatch)
        update(ranks, batch(seed=it), it, tp=2)
    assert sent == ["full", "patch", "patch", "full"]
    kill(ranks, [rollout])


def rollout_rows(prompts, responses):
    from rl_core.llm import pad_left, pad_right

    p_ids, p_mask = pad_left(prompts, 0)
    r_ids, r_mask = pad_right(responses, 0)
    return {
        "prompt_ids": p_ids.numpy(),
        "prompt_mask": p_mask.numpy(),
        "response_ids": r_ids.numpy(),
        "response_mask": r_mask.numpy(),
    }


def test_checkpoints_resume_exactly_and_reshard_from_tp2_to_tp1(ray_local, tiny_dir, tmp_path):
    store, folder = str(tmp_path), "step_00000002"
    cfg2 = megatron(tiny_dir, 2, 2)
    ranks = trainer(cfg2, 2)
    for it in range(2):
        update(ranks, batch(seed=it), it, tp=2)
    ray.get([h.save_checkpoint.remote(store, folder) for h in ranks])
    update(ranks, batch(seed=2), 2, tp=2)
    straight = full_state(ranks)
    kill(ranks)

    resumed = trainer(cfg2, 2)
    ray.get([h.load_checkpoint.remote(store, folder) for h in resumed])
    update(resumed, batch(seed=2), 2, tp=2)
    assert max_diff(full_state(resumed), straight) == 0.0  # bit-identical at TP 2
    kill(resumed)

    single = trainer(megatron(tiny_dir, 1, 1), 1)
    ray.get(single[0].load_checkpoint.remote(store, folder))
    update(single, batch(seed=2), 2)
    assert max_diff(full_state(single), straight) < 1e-6  # the optimizer moments followed
    kill(single)

    fsdp = trainer(config(tiny_dir), 1)
    with pytest.raises(CheckpointError, match="megatron"):
        ray.get(fsdp[0].load_checkpoint.remote(store, folder))
    kill(fsdp)

    exported = load_file(str(tmp_path / folder / "actor_0" / "model.safetensors"))
    model = AutoModelForCausalLM.from_pretrained(tiny_dir)
    model.load_state_dict({k[len("model.") :]: v for k, v in exported.items()})
