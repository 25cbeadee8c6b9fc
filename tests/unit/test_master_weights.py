"""A half-precision trainer keeps float32 master weights (FSDP2 mixed precision).

With ``model.dtype: bfloat16`` the trainer rank (FSDP2 over a one-rank gloo group, in this
process) stores its weights and AdamW state in float32 and computes in bf16: an update at
a small learning rate moves the weights, where bf16 weights would round most of it away.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch
import torch.distributed as dist

from infra.llm.workers.llm_workers import LLMActorWorker
from rl_core.models.tiny_lm import create_tiny_lm
from rl_core.training.llm_update import minibatch_totals
from tests.llm_trainers import batch, config


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory):
    return create_tiny_lm(tmp_path_factory.mktemp("lm") / "tiny", num_hidden_layers=1)


@pytest.fixture()
def process_group(tmp_path) -> Iterator[None]:
    dist.init_process_group(
        "gloo", init_method=f"file://{tmp_path / 'rendezvous'}", rank=0, world_size=1
    )
    try:
        yield
    finally:
        dist.destroy_process_group()


def trained_rank(tiny_dir, master: str) -> tuple[LLMActorWorker, float, set]:
    """A bf16 trainer rank after one update at lr 1e-6: the share of weights it moved and
    the dtypes its linear layers computed in."""
    overrides = ["model.dtype=bfloat16", "actor.lr=1e-6", "actor.update_epochs=1"]
    cfg = config(tiny_dir, *overrides, f"actor.fsdp_config.master_weights={master}")
    rank = LLMActorWorker(cfg, 0, (), 1)
    rank.setup("unused:0")  # (the process group exists already)
    seen = set()
    layer = next(m for m in rank.policy.modules() if isinstance(m, torch.nn.Linear))
    layer.register_forward_hook(lambda mod, args, out: seen.add(args[0].dtype))
    before = {k: v.float().clone() for k, v in rank.backend.policy_state().items()}
    data = batch()
    tensors = {k: torch.from_numpy(v) for k, v in data.items()}
    totals = [(t.tokens, t.seqs) for t in minibatch_totals([tensors], 2)]
    rank.compute_logprobs(data)
    rank.update(data, totals, 0)
    after = {k: v.float() for k, v in rank.backend.policy_state().items()}
    moved = [float((after[k] != before[k]).float().mean()) for k in before if before[k].numel() > 1]
    return rank, sum(moved) / len(moved), seen


def test_float32_master_weights_keep_small_updates(tiny_dir, process_group):
    rank, moved, seen = trained_rank(tiny_dir, "float32")
    local = [p.to_local() if hasattr(p, "to_local") else p for p in rank.policy.parameters()]
    assert {p.dtype for p in local} == {torch.float32}
    assert {v.dtype for s in rank.optimizer.state.values() for v in s.values() if v.dim()} == {
        torch.float32
    }
    assert seen == {torch.bfloat16}  # forward and backward in the model's dtype
    assert moved > 0.9, f"only {moved:.1%} of the weights moved"


def test_model_dtype_weights_round_small_updates_away(tiny_dir, process_group):
    rank, moved, seen = trained_rank(tiny_dir, "model")
    assert {p.dtype for p in rank.policy.parameters()} == {torch.bfloat16}
    assert moved < 0.5, f"{moved:.1%} of the weights moved"
