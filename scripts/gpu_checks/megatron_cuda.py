"""GPU check of the megatron trainer backend: one rank (tensor parallel 1) joins an NCCL
group, builds its megatron model shards on CUDA (megatron's CUDA RNG tracker seeded from the
run seed) and computes the same log-probs as the Hugging Face model it was converted from."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import torch


def check(device: torch.device) -> dict[str, Any]:
    """Build the backend on CUDA and compare its log-probs with the HF model's (float32);
    returns the backend's description and the largest difference (``ok``: below 1e-3)."""
    from infra.llm import distributed
    from infra.llm.megatron_backend import MegatronBackend
    from infra.processes import free_port
    from rl_core.config import load_config
    from rl_core.llm import pad_left, pad_right
    from rl_core.models import get_model
    from rl_core.models.tiny_lm import create_tiny_lm

    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        path = create_tiny_lm(Path(tmp) / "tiny")
        cfg = load_config(
            "grpo_arith_megatron",
            overrides=[
                "run.warm_start=null",
                f"model.model_path={path}",
                "actor.num_workers=1",
                "rollout.num_workers=1",
                "actor.megatron.tensor_model_parallel_size=1",
            ],
        )
        backend = MegatronBackend(cfg, 0, 1, device)
        out["setup"] = backend.setup(f"127.0.0.1:{free_port()}")
        out["backend"] = torch.distributed.get_backend()
        reference = get_model(cfg.model, None).to(device).eval()
        tok = reference.tokenizer
        prompts = [tok(f"{a}+{a + 3}=")["input_ids"] for a in range(8)]
        responses = [tok(str(2 * a + 3))["input_ids"] for a in range(8)]
        p_ids, p_mask = pad_left(prompts, 0)
        r_ids, r_mask = pad_right(responses, 0)
        inputs = {
            "prompt_ids": p_ids.to(device),
            "prompt_mask": p_mask.to(device),
            "response_ids": r_ids.to(device),
            "response_mask": r_mask.to(device),
        }
        with torch.no_grad():
            theirs = reference(forward_type="default_forward", forward_inputs=inputs)
            ours = backend.policy.eval()(forward_type="default_forward", forward_inputs=inputs)
        mask = inputs["response_mask"].bool()
        diff = (ours["logprobs"] - theirs["logprobs"]).abs()[mask].max()
        out["logprob_max_abs_diff"] = float(diff)
        distributed.destroy()
    out["ok"] = out["logprob_max_abs_diff"] < 1e-3
    return out
