"""The bare GRPO step of ``gpu_step.py``: a plain Hugging Face model and AdamW in this
process, the project's GRPO advantages and update (``rl_core``), no Ray, Prefect or MLflow.

One step: sample ``group_size`` responses per prompt (``model.generate``), score them,
recompute the trainer's log-probs, compute advantages, one optimizer step per minibatch.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from infra.llm.workers.llm_workers import forward_in_micro_batches
from rl_core.algorithms import consecutive_groups
from rl_core.llm import pad_left, pad_right
from rl_core.llm.prompting import encode_prompts, load_task_samples
from rl_core.models.causal_lm import CausalLMPolicy
from rl_core.training.llm_advantage import compute_llm_advantages
from rl_core.training.llm_update import llm_update, minibatch_totals
from rl_core.training.micro_batches import MicroBatching
from rl_core.training.optim import adam_eps


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


class BareStep:
    """A model, its optimizer and the run's prompts; :meth:`step` times one GRPO step.

    Args:
        model_dir: The model folder (:func:`_step_model.build_model_dir`).
        cfg: The run's config (``algorithm``, ``actor``, ``data``, ``rollout``).
        device: Where to compute.
        dtype: Weight dtype.
    """

    def __init__(self, model_dir: Path, cfg: Any, device: torch.device, dtype: torch.dtype):
        self.cfg, self.device = cfg, device
        model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=dtype).to(device)
        self.tokenizer = AutoTokenizer.from_pretrained(model_dir)
        self.policy = CausalLMPolicy(model, self.tokenizer)
        self.model = model
        actor = cfg.actor
        self.optimizer = torch.optim.AdamW(
            model.parameters(), lr=actor.lr, weight_decay=actor.weight_decay, eps=adam_eps(actor)
        )
        train, _ = load_task_samples(cfg.data)
        self.prompts = encode_prompts(train, cfg.data, self.tokenizer)
        self.rng = np.random.default_rng(0)

    def _generate(self, rows: list[list[int]]) -> list[list[int]]:
        pad, eos = self.tokenizer.pad_token_id, self.tokenizer.eos_token_id
        ids, mask = pad_left(rows, pad)
        with torch.no_grad():
            out = self.model.generate(
                input_ids=ids.to(self.device),
                attention_mask=mask.to(self.device),
                max_new_tokens=self.cfg.rollout.max_new_tokens,
                do_sample=True,
                temperature=self.cfg.rollout.temperature,
                top_p=1.0,
                top_k=0,
                eos_token_id=eos,
                pad_token_id=pad,
            )
        responses = []
        for tokens in out[:, ids.shape[1] :].tolist():
            end = tokens.index(eos) + 1 if eos in tokens else len(tokens)
            responses.append(tokens[:end])
        return responses

    def _logprobs(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        """The trainer's log-prob pass, cut as its ranks cut it (``actor.packing``, budget)."""
        out = forward_in_micro_batches(
            self.policy, batch, MicroBatching.of(self.cfg.actor), 1.0, values=False
        )
        return torch.from_numpy(out["logprobs"]).to(self.device)

    def step(self, index: int) -> dict[str, float]:
        """One GRPO step on the next prompts; seconds and token counts of its phases."""
        cfg, dev = self.cfg, self.device
        n, k = cfg.data.prompts_per_batch, cfg.algorithm.group_size
        picks = [self.prompts[(index * n + i) % len(self.prompts)] for i in range(n)]
        rows = [p for p in picks for _ in range(k)]
        _sync(dev)
        start = time.perf_counter()
        responses = self._generate(rows)
        _sync(dev)
        generated = time.perf_counter()
        # a random-weight model answers nothing right: random scores keep advantages non-zero
        scores = torch.from_numpy(self.rng.integers(0, 2, len(rows)).astype(np.float32))
        p_ids, p_mask = pad_left(rows, self.tokenizer.pad_token_id)
        r_ids, r_mask = pad_right(responses, self.tokenizer.pad_token_id)
        batch = {"prompt_ids": p_ids, "prompt_mask": p_mask}
        batch |= {"response_ids": r_ids, "response_mask": r_mask}
        batch = {key: value.to(dev) for key, value in batch.items()}
        old = self._logprobs(batch)
        groups = consecutive_groups(n, k)
        adv = compute_llm_advantages(
            scores, r_mask, old.cpu(), cfg.algorithm, group_index=groups
        ).advantages
        batch |= {"old_logprobs": old, "advantages": adv.float().to(dev)}
        _sync(dev)
        scored = time.perf_counter()
        totals = minibatch_totals([batch], cfg.actor.num_minibatches)
        self.model.train()
        llm_update(self.policy, self.optimizer, batch, totals, cfg.algorithm, cfg.actor)
        self.model.eval()
        _sync(dev)
        end = time.perf_counter()
        return {
            "generate_s": generated - start,
            "logprob_s": scored - generated,
            "update_s": end - scored,
            "step_s": end - start,
            "response_tokens": float(r_mask.sum()),
            "update_tokens": float(p_mask.sum() + r_mask.sum()) * cfg.actor.update_epochs,
        }

    def close(self) -> None:
        """Free the GPU memory this holds (the train flow's workers need it next)."""
        del self.model, self.policy, self.optimizer
        if self.device.type == "cuda":
            torch.cuda.empty_cache()
