"""Token log-probabilities and entropy from logits split over tensor-parallel ranks.

Each rank holds the logits of one contiguous slice of the (padded) vocabulary. Softmax
statistics are combined across the ranks with megatron's tensor-parallel reduction (a sum
forward, the identity backward: every rank computes the same loss from the reduced
values), so no rank gathers the whole vocabulary. Vocabulary padding never gets
probability mass.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist


def _sum_over_ranks(t: torch.Tensor, group: Any) -> torch.Tensor:
    if group is None or dist.get_world_size(group) == 1:
        return t
    from megatron.core.tensor_parallel.mappings import reduce_from_tensor_model_parallel_region

    return reduce_from_tensor_model_parallel_region(t, group)


def vocab_parallel_logprobs(
    logits: torch.Tensor,
    targets: torch.Tensor,
    vocab_start: int,
    vocab_size: int,
    group: Any = None,
    temperature: float = 1.0,
    entropy: bool = False,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """``log softmax(logits / temperature)[target]`` (and the entropy) over the whole vocab.

    Args:
        logits: ``[..., W]``: this rank's slice, vocabulary ids ``vocab_start …
            vocab_start + W − 1``.
        targets: ``[...]`` token ids (anywhere in the vocabulary).
        vocab_start: First vocabulary id of this rank's slice.
        vocab_size: The real vocabulary size; ids from it on are padding (masked out).
        group: The tensor-parallel process group (None: one rank).
        temperature: Sampling temperature the tokens were drawn with.
        entropy: Also return the entropy.

    Returns:
        ``(logprobs, entropy or None)``, each ``[...]``, equal on every rank.
    """
    scaled = logits.float() / temperature
    width = scaled.shape[-1]
    real = vocab_size - vocab_start
    if real < width:  # padding ids: a very negative logit (finite, so 0 · logit stays 0)
        pad = torch.arange(width, device=scaled.device) >= real
        scaled = scaled.masked_fill(pad, torch.finfo(scaled.dtype).min)
    top = scaled.detach().amax(dim=-1)
    if group is not None and dist.get_world_size(group) > 1:
        dist.all_reduce(top, op=dist.ReduceOp.MAX, group=group)
    shifted = scaled - top.unsqueeze(-1)
    exp = shifted.exp()
    sum_exp = _sum_over_ranks(exp.sum(dim=-1), group)
    lse = sum_exp.log()
    local = targets - vocab_start
    inside = (local >= 0) & (local < width)
    picked = shifted.gather(-1, local.clamp(0, width - 1).unsqueeze(-1)).squeeze(-1)
    picked = _sum_over_ranks(picked * inside, group)
    ent = None
    if entropy:
        ent = lse - _sum_over_ranks((exp * shifted).sum(dim=-1), group) / sum_exp
    return picked - lse, ent
