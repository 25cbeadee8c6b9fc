"""Trainer ranks (FSDP2 or megatron) as Ray actors, for integration tests of the trainer."""

from __future__ import annotations

import ray
import torch

from infra.llm.workers.llm_workers import LLMActorWorker
from kinds.reasoning.workers.llm_rollout_worker import LLMRolloutWorker
from rl_core.config import load_config
from rl_core.training.llm_update import minibatch_totals, rank_rows
from rl_core.training.parallel_layout import ParallelLayout
from tests.llm_batches import random_llm_batch


def config(tiny_dir, *extra):
    return load_config(
        overrides=[
            "model.model_type=hf_causal_lm",
            f"model.model_path={tiny_dir}",
            "algorithm.adv_type=grpo",
            "reward.reward_type=math_verify",
            "algorithm.kl_coef=0.0",
            "actor.micro_batch_size=3",
            "actor.update_epochs=2",
            "actor.num_minibatches=2",
            "actor.lr=1e-3",
            *extra,
        ]
    ).model_dump(mode="json")


def batch(n=8, seed=0):
    data = random_llm_batch(n, seed)
    data.pop("ref_logprobs")
    return {k: v.numpy() for k, v in data.items()}


def trainer(cfg, world, options=None):
    """``world`` trainer ranks (``cfg``'s backend) meeting at rank 0's rendezvous address.

    ``options(rank)`` gives each rank's Ray actor options (default: 0.3 CPU).
    """
    cls = ray.remote(LLMActorWorker)
    options = options or (lambda rank: {"num_cpus": 0.3})
    ranks = [cls.options(**options(r)).remote(cfg, r, (), world) for r in range(world)]
    address = ray.get(ranks[0].rendezvous_address.remote())
    ray.get([h.setup.remote(address) for h in ranks])
    return ranks


def update(ranks, data, iteration=0, tp=1):
    """One update of ``ranks`` (tensor-parallel peers of size ``tp`` share rows); the
    metrics of each data-parallel replica."""
    layout = ParallelLayout(len(ranks), tp)
    rows = rank_rows(len(data["response_ids"]), 2, layout.replicas)
    shards = [{k: v[r] for k, v in data.items()} for r in rows]
    totals = minibatch_totals([{k: torch.from_numpy(v) for k, v in s.items()} for s in shards], 2)
    outs = ray.get(
        [
            h.update.remote(s, [(t.tokens, t.seqs) for t in totals], iteration)
            for h, s in zip(ranks, layout.per_rank(shards), strict=True)
        ]
    )
    return layout.per_replica(outs)


def full_state(ranks):
    return ray.get([h.full_state.remote() for h in ranks])[0]


def rollout_worker(cfg):
    """A rollout worker (HF engine unless ``cfg`` says otherwise) as a Ray actor."""
    return ray.remote(LLMRolloutWorker).options(num_cpus=0.3).remote(cfg, 0, ())


def sync(ranks, rollout):
    """One weight sync from the trainer ranks to ``rollout``; returns its meta (rank 0's)."""
    pairs = [h.sync_payload.options(num_returns=2).remote() for h in ranks]
    meta = ray.get(pairs[0][0])
    assert ray.get([p[0] for p in pairs[1:]]) == [None] * (len(ranks) - 1)
    assert ray.get(rollout.load_weights.remote(pairs[0][1])) == meta["version"]
    return meta
