"""The weight-sync parity probe: does the rollout engine sample from the trained weights?

After a weight sync, the trainer and every rollout engine compute the log-probs of the same
fixed text's last tokens. Equal weights give equal log-probs (up to the arithmetic of each
side); an engine that kept old weights, or ignored a LoRA adapter it was sent, gives
different ones. The check is cheap (one short sequence) and runs after every sync
(``rollout.sync_probe``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

#: The probe text: digits and words, so byte-level and subword tokenizers both give it
#: a few dozen tokens.
PROBE_TEXT = "Probe: 12+34=46, 7*8=56. The quick brown fox jumps over the lazy dog 9 times."
#: Tokens at the end of the probe whose log-probs are compared.
RESPONSE_TOKENS = 16
#: Tolerances (nats) when both sides compute in float32 with the same weights, and else.
EXACT_ATOL, LOOSE_ATOL = 1e-3, 0.1


class SyncProbeError(RuntimeError):
    """A rollout engine's log-probs of the probe differ from the trainer's after a sync."""


def probe_tokens(tokenizer: Any) -> dict[str, list[int]]:
    """``{"prompt_ids", "response_ids"}`` of the probe text under ``tokenizer``."""
    ids = list(tokenizer(PROBE_TEXT, add_special_tokens=False)["input_ids"])
    cut = max(1, len(ids) - RESPONSE_TOKENS)
    return {"prompt_ids": ids[:cut], "response_ids": ids[cut:]}


def probe_batch(probe: dict[str, list[int]]) -> dict[str, np.ndarray]:
    """The probe as a one-row training batch (``prompt_ids``/``response_ids`` and masks)."""
    prompt = np.asarray([probe["prompt_ids"]], dtype=np.int64)
    response = np.asarray([probe["response_ids"]], dtype=np.int64)
    return {
        "prompt_ids": prompt,
        "prompt_mask": np.ones_like(prompt),
        "response_ids": response,
        "response_mask": np.ones_like(response),
    }


def probe_atol(cfg: Any) -> float:
    """``rollout.sync_probe_atol``, or its default for how the run computes and syncs."""
    if cfg.rollout.sync_probe_atol is not None:
        return float(cfg.rollout.sync_probe_atol)
    exact = cfg.model.dtype == "float32" and cfg.rollout.weight_sync_dtype in (None, "float32")
    return EXACT_ATOL if exact and cfg.rollout.engine == "hf" else LOOSE_ATOL


def check_probe(
    trainer: Sequence[float],
    engines: Sequence[Sequence[float] | None],
    atol: float,
    version: int,
    adapters: bool = False,
) -> float:
    """The largest log-prob difference between the trainer and any engine (None: skipped).

    Raises:
        SyncProbeError: Some engine differs by more than ``atol``.
    """
    want = np.asarray(trainer, dtype=np.float64)
    worst = 0.0
    for rank, got in enumerate(engines):
        if got is None:
            continue
        diff = float(np.max(np.abs(np.asarray(got, dtype=np.float64) - want)))
        worst = max(worst, diff)
        if not diff <= atol:  # NaN fails too
            what = "the LoRA adapter was not applied, or " if adapters else ""
            raise SyncProbeError(
                f"weight sync of version {version}: rollout engine {rank}'s log-probs of the "
                f"probe text differ from the trainer's by {diff:.4g} (allowed "
                f"rollout.sync_probe_atol = {atol:g}): {what}the engine is not sampling "
                "from the trained weights"
            )
    return worst
