"""GPU check of the reasoning path: a bf16 FSDP2 update over NCCL, generation on CUDA, and
the sharded trainer's log-probs against the generating engine's."""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any

import torch


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def check(device: torch.device) -> dict[str, Any]:
    """Run the check; returns its figures (``ok``: the update moved the weights, the loss
    is finite and the log-probs agree within bf16 rounding)."""
    from infra.llm import distributed as fsdp
    from infra.processes import free_port
    from rl_core.config import load_config
    from rl_core.llm import SamplingParams, hf_generate, pad_left, pad_right
    from rl_core.models.tiny_lm import create_tiny_lm
    from rl_core.training.llm_update import llm_update, minibatch_totals
    from tests.llm_batches import random_llm_batch

    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        path = create_tiny_lm(Path(tmp) / "tiny")
        cfg = load_config(
            overrides=[
                "model.model_type=hf_causal_lm",
                f"model.model_path={path}",
                "model.dtype=bfloat16",
                "algorithm.adv_type=grpo",
                "reward.reward_type=math_verify",
                "actor.micro_batch_size=16",
                "actor.num_minibatches=1",
                "actor.update_epochs=2",
            ]
        )
        from rl_core.models import get_model

        policy = get_model(cfg.model, None).to(device)
        out["param_dtype"] = str(next(policy.parameters()).dtype)
        fsdp.init_process_group("auto", 0, 1, f"127.0.0.1:{free_port()}", device)
        out["backend"] = torch.distributed.get_backend()
        out["fsdp_units"] = fsdp.shard_model(policy, cfg.actor.fsdp_config.wrap_policy)
        opt = torch.optim.AdamW(policy.parameters(), lr=1e-3)
        batch = {k: v.to(device) for k, v in random_llm_batch(64, seed=0).items()}
        before = {k: v.clone() for k, v in fsdp.full_state_dict(policy).items()}
        policy.train()
        _sync(device)
        start = time.perf_counter()
        metrics = llm_update(
            policy, opt, batch, minibatch_totals([batch], 1), cfg.algorithm, cfg.actor
        )
        _sync(device)
        out["update_seconds"] = round(time.perf_counter() - start, 3)
        after = fsdp.full_state_dict(policy)
        out["weights_moved"] = max(
            float((after[k].float() - before[k].float()).abs().max()) for k in after
        )
        out["policy_loss_finite"] = bool(torch.isfinite(torch.tensor(metrics["train/policy_loss"])))
        # a rollout copy (as the HF engine holds it) takes the gathered weights and samples
        # on CUDA; the sharded trainer recomputes the log-probs (both bf16)
        from transformers import AutoModelForCausalLM

        engine = AutoModelForCausalLM.from_pretrained(path, dtype=torch.bfloat16).to(device).eval()
        engine.load_state_dict(policy.rollout_weights(after))
        tok = policy.tokenizer
        prompts = [tok(f"{a}+{a + 3}=")["input_ids"] for a in range(16)]
        policy.eval()
        start = time.perf_counter()
        sampling = SamplingParams(max_new_tokens=8, stop_token_ids=(1,))
        gen = hf_generate(engine, prompts, sampling, 0, seed=0)
        out["generate_seconds"] = round(time.perf_counter() - start, 3)
        p_ids, p_mask = pad_left(prompts, 0)
        r_ids, r_mask = pad_right(gen.response_ids, 0)
        with torch.no_grad():
            res = policy(
                forward_type="default_forward",
                forward_inputs={
                    "prompt_ids": p_ids.to(device),
                    "prompt_mask": p_mask.to(device),
                    "response_ids": r_ids.to(device),
                    "response_mask": r_mask.to(device),
                },
            )
        diffs = [
            abs(a - b)
            for row, lps in enumerate(gen.logprobs)
            for a, b in zip(res["logprobs"][row, : len(lps)].tolist(), lps, strict=True)
        ]
        out["bf16_logprob_max_abs_diff"] = round(max(diffs), 4)
        fsdp.destroy()
    out["ok"] = (
        out["weights_moved"] > 0
        and out["policy_loss_finite"]
        and out["bf16_logprob_max_abs_diff"] < 0.1
    )
    return out
