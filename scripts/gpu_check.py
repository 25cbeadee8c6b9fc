"""GPU check of the reasoning path's CUDA code: bf16 FSDP2 over NCCL, generation on CUDA.

Usage (on a machine with a GPU): ``python scripts/gpu_check.py``. Prints one JSON line with
timings and checks; exits 0 without a GPU (nothing to check).
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402


def main() -> int:
    """Run the checks and print the results."""
    if not torch.cuda.is_available():
        print(json.dumps({"cuda": False}))
        return 0
    from infra.llm import distributed as fsdp
    from infra.ops.processes import free_port
    from rl_core.config import load_config
    from rl_core.llm import SamplingParams, hf_generate, pad_left, pad_right
    from rl_core.models.tiny_lm import create_tiny_lm
    from rl_core.training.llm_update import llm_update, minibatch_totals
    from tests.llm_batches import random_llm_batch

    out: dict = {"cuda": True, "device": torch.cuda.get_device_name(0)}
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

        policy = get_model(cfg.model, None).to("cuda")
        out["param_dtype"] = str(next(policy.parameters()).dtype)
        fsdp.init_process_group("auto", 0, 1, free_port())
        out["backend"] = torch.distributed.get_backend()
        out["fsdp_units"] = fsdp.shard_model(policy, cfg.actor.fsdp_config.wrap_policy)
        opt = torch.optim.AdamW(policy.parameters(), lr=1e-3)
        batch = {k: v.cuda() for k, v in random_llm_batch(64, seed=0).items()}
        before = {k: v.clone() for k, v in fsdp.full_state_dict(policy).items()}
        policy.train()
        torch.cuda.synchronize()
        start = time.perf_counter()
        metrics = llm_update(
            policy, opt, batch, minibatch_totals([batch], 1), cfg.algorithm, cfg.actor
        )
        torch.cuda.synchronize()
        out["update_seconds"] = round(time.perf_counter() - start, 3)
        after = fsdp.full_state_dict(policy)
        out["weights_moved"] = max(
            float((after[k].float() - before[k].float()).abs().max()) for k in after
        )
        out["policy_loss_finite"] = bool(torch.isfinite(torch.tensor(metrics["train/policy_loss"])))
        # a rollout copy (as the HF engine holds it) takes the gathered weights and samples
        # on CUDA; the sharded trainer recomputes the log-probs (both bf16)
        from transformers import AutoModelForCausalLM

        engine = AutoModelForCausalLM.from_pretrained(path, dtype=torch.bfloat16).cuda().eval()
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
                    "prompt_ids": p_ids.cuda(),
                    "prompt_mask": p_mask.cuda(),
                    "response_ids": r_ids.cuda(),
                    "response_mask": r_mask.cuda(),
                },
            )
        diffs = [
            abs(a - b)
            for row, lps in enumerate(gen.logprobs)
            for a, b in zip(res["logprobs"][row, : len(lps)].tolist(), lps, strict=True)
        ]
        out["bf16_logprob_max_abs_diff"] = round(max(diffs), 4)
        fsdp.destroy()
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
