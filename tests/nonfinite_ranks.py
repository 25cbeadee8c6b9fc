"""Two data-parallel ranks (gloo, unsharded models) running ``llm_update`` for tests.

Kept apart from the test modules so that spawned ranks import only torch and rl_core.
"""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path

import torch
import torch.distributed as dist
from torch import nn

from rl_core.config import load_config
from rl_core.training.llm_update import llm_update, minibatch_totals
from tests.llm_batches import llm_actor, llm_algorithm, random_llm_batch


class TinyTokenPolicy(nn.Module):
    """Log-probs and entropy of response tokens from an embedding and a linear head."""

    def __init__(self, vocab: int = 260, width: int = 8) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, width)
        self.head = nn.Linear(width, vocab)

    def forward(
        self, forward_type: str, forward_inputs: dict, temperature: float = 1.0, **_: object
    ) -> dict[str, torch.Tensor]:
        ids = forward_inputs["response_ids"]
        logp = torch.log_softmax(self.head(self.embed(ids)) / temperature, dim=-1)
        return {
            "logprobs": logp.gather(-1, ids[..., None]).squeeze(-1),
            "entropy": -(logp.exp() * logp).sum(-1),
        }


def rank_update_with_nan_on_rank_zero(rank: int, out_dir: str) -> None:
    """Rank 0's rows hold a NaN advantage; each rank writes ``rank<r>.json`` with its result.

    The ranks meet through a file in ``out_dir`` (no port to pick, so none to lose to
    another process between picking and binding it).
    """
    torch.set_num_threads(1)
    store = f"file://{Path(out_dir) / 'rendezvous'}"
    dist.init_process_group("gloo", init_method=store, rank=rank, world_size=2)
    try:
        torch.manual_seed(0)
        policy = TinyTokenPolicy()
        optimizer = torch.optim.AdamW(policy.parameters(), lr=1e-2)
        cfg = load_config(overrides=["algorithm.adv_type=gae"])
        actor = llm_actor(cfg.actor).model_copy(update={"update_epochs": 1})
        batch = random_llm_batch(8, seed=1)
        batch["advantages"][0, 0] = math.nan
        shards = [{k: v[:4] for k, v in batch.items()}, {k: v[4:] for k, v in batch.items()}]
        totals = minibatch_totals(shards, 1)
        before = copy.deepcopy(policy.state_dict())
        metrics = llm_update(
            policy,
            optimizer,
            shards[rank],
            totals,
            llm_algorithm(cfg.algorithm),
            actor,
            world_size=2,
        )
        unchanged = all(torch.equal(v, before[k]) for k, v in policy.state_dict().items())
        result = {"skipped": metrics["train/skipped_updates"], "unchanged": unchanged}
        (Path(out_dir) / f"rank{rank}.json").write_text(json.dumps(result))
        # neither rank tears gloo down while the other still talks to it (a peer closing
        # its connection early aborts the other process)
        dist.barrier()
    finally:
        dist.destroy_process_group()
