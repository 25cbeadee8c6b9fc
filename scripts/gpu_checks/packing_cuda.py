"""GPU check of sequence packing: packed rows compute what padded rows compute, on CUDA.

A tiny model's trainer forward and backward on rows of widely different lengths, padded
and packed (:mod:`rl_core.llm.packing`), in float32 and bf16, with every attention
implementation this machine has among ``sdpa`` (rlpipe's packed attention) and
``flash_attention_2`` (flash attention's variable-length kernels, when ``flash-attn`` is
installed): the largest log-prob and gradient differences, and the speed-up of the packed
pass.
"""

from __future__ import annotations

import importlib.util
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

#: Largest allowed difference of log-probs (float32, bf16).
TOLERANCE = {torch.float32: 1e-3, torch.bfloat16: 0.1}


def _batch(device: torch.device) -> dict[str, torch.Tensor]:
    from rl_core.llm import pad_left, pad_right

    g = torch.Generator().manual_seed(0)

    def draw(low: int, high: int) -> list[int]:
        n = int(torch.randint(low, high, (1,), generator=g))
        return torch.randint(4, 250, (n,), generator=g).tolist()

    p_ids, p_mask = pad_left([draw(2, 40) for _ in range(16)], 0)
    r_ids, r_mask = pad_right([draw(4, 400) for _ in range(16)], 0)
    batch = {"prompt_ids": p_ids, "prompt_mask": p_mask}
    batch |= {"response_ids": r_ids, "response_mask": r_mask}
    return {k: v.to(device) for k, v in batch.items()}


def _pass(policy: Any, batch: dict[str, torch.Tensor], packed: bool) -> tuple[Any, Any, float]:
    """Log-probs, gradients of their masked sum, and seconds of the forward/backward."""
    policy.zero_grad(set_to_none=True)
    device = batch["response_ids"].device
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    start = time.perf_counter()
    out = policy(forward_inputs=batch, compute_entropy=False, packed=packed)
    (out["logprobs"].float() * batch["response_mask"]).sum().backward()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    seconds = time.perf_counter() - start
    grads = {n: p.grad.float().clone() for n, p in policy.named_parameters() if p.grad is not None}
    return out["logprobs"].detach().float(), grads, seconds


def check(device: torch.device) -> dict[str, Any]:
    """Compare packed and padded passes; ``ok`` when every difference is within tolerance."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from rl_core.models.causal_lm import CausalLMPolicy
    from rl_core.models.tiny_lm import create_tiny_lm

    attentions = ["sdpa"]
    if device.type == "cuda" and importlib.util.find_spec("flash_attn") is not None:
        attentions.append("flash_attention_2")
    out: dict[str, Any] = {"ok": True, "attentions": attentions}
    batch = _batch(device)
    mask = batch["response_mask"].bool()
    with tempfile.TemporaryDirectory() as tmp:
        path = create_tiny_lm(Path(tmp) / "tiny", max_position_embeddings=512)
        for dtype in (torch.float32, torch.bfloat16):
            for attention in attentions:
                if attention.startswith("flash") and dtype == torch.float32:
                    continue  # flash attention computes in half precision only
                model = AutoModelForCausalLM.from_pretrained(
                    path, dtype=dtype, attn_implementation=attention
                ).to(device)
                policy = CausalLMPolicy(model, AutoTokenizer.from_pretrained(path)).train()
                _pass(policy, batch, packed=True)  # warm-up (kernels, allocator)
                padded_lp, padded_grads, padded_s = _pass(policy, batch, packed=False)
                packed_lp, packed_grads, packed_s = _pass(policy, batch, packed=True)
                lp_diff = float((packed_lp - padded_lp)[mask].abs().max())
                grad_diff = max(
                    float((packed_grads[n] - g).abs().max() / g.abs().max().clamp(min=1e-12))
                    for n, g in padded_grads.items()
                )
                key = f"{attention}_{str(dtype).removeprefix('torch.')}"
                out[key] = {
                    "logprob_max_diff": lp_diff,
                    "grad_max_rel_diff": grad_diff,
                    "padded_s": round(padded_s, 4),
                    "packed_s": round(packed_s, 4),
                }
                out["ok"] &= lp_diff < TOLERANCE[dtype] and grad_diff < 50 * TOLERANCE[dtype]
                del policy, model
    return out
