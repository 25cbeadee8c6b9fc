"""TRL's ``GRPOTrainer`` doing the trainer's two passes over one given batch.

The anchor of the trainer benchmarks at reasoning lengths: the same model, the same rows,
the same micro-batch size. TRL's trainer normally generates its own completions; here it
is handed the batch in its own layout (prompts left-padded, completions right-padded to
the batch's longest, as its generation step leaves them) and runs:

* its per-token log-prob pass (``_get_per_token_logps_and_entropies``, in micro-batches:
  what it computes as ``old_per_token_logps``),
* its loss (``compute_loss``: the DAPO token-mean GRPO loss, no KL) and backward over the
  micro-batches, gradient clipping and one AdamW step, as ``Trainer.training_step`` does.
"""

from __future__ import annotations

import time
from typing import Any

import torch


def build_trl_trainer(model: Any, tokenizer: Any, rows: int, micro: int, max_new: int) -> Any:
    """A ``GRPOTrainer`` around ``model`` set for batches of ``rows`` in ``micro``-row passes.

    Its dataset and reward are placeholders: nothing is generated or scored.
    """
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    args = GRPOConfig(
        output_dir="/tmp/rlpipe-trl-step",  # nothing is written: no saving, no logging
        per_device_train_batch_size=micro,
        gradient_accumulation_steps=rows // micro,
        num_generations=micro,
        max_completion_length=max_new,
        learning_rate=1e-6,
        optim="adamw_torch",
        max_grad_norm=1.0,
        beta=0.0,
        loss_type="dapo",
        use_cpu=not torch.cuda.is_available(),
        bf16=torch.cuda.is_available(),
        logging_strategy="no",
        save_strategy="no",
        report_to="none",
        disable_tqdm=True,
        dataloader_num_workers=0,
    )
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=[lambda completions, **_: [0.0] * len(completions)],
        args=args,
        train_dataset=Dataset.from_list([{"prompt": "1+1="}] * rows),
        processing_class=tokenizer,
    )
    trainer.create_optimizer()
    trainer.current_gradient_accumulation_steps = rows // micro
    return trainer


def _layout(batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The batch in TRL's names; one advantage per completion."""
    return {
        "prompt_ids": batch["prompt_ids"],
        "prompt_mask": batch["prompt_mask"],
        "completion_ids": batch["response_ids"],
        "completion_mask": batch["response_mask"],
        "advantages": batch["advantages"][:, 0].contiguous(),
        "num_items_in_batch": batch["response_mask"].sum().float(),
    }


def trl_step(trainer: Any, batch: dict[str, torch.Tensor], micro: int) -> dict[str, float]:
    """TRL's log-prob pass and one update on ``batch``: their seconds."""
    model = trainer.model
    inputs = _layout(batch)
    ids = torch.cat([inputs["prompt_ids"], inputs["completion_ids"]], dim=1)
    mask = torch.cat([inputs["prompt_mask"], inputs["completion_mask"]], dim=1)
    device = ids.device
    model.eval()
    _sync(device)
    start = time.perf_counter()
    with torch.no_grad():
        old, _, _ = trainer._get_per_token_logps_and_entropies(
            model, ids, mask, inputs["completion_ids"].shape[1], batch_size=micro
        )
    _sync(device)
    logprob_s = time.perf_counter() - start
    inputs["old_per_token_logps"] = old
    model.train()
    start = time.perf_counter()
    for first in range(0, len(ids), micro):
        part = {k: (v[first : first + micro] if v.dim() else v) for k, v in inputs.items()}
        loss = trainer.compute_loss(model, part)
        loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    trainer.optimizer.step()
    trainer.optimizer.zero_grad(set_to_none=True)
    _sync(device)
    update_s = time.perf_counter() - start
    return {"logprob_s": logprob_s, "update_s": update_s, "step_s": logprob_s + update_s}


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)
