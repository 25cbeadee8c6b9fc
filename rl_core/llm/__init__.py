"""Language-model pieces of the reasoning path: padding, sampling, token log-probs.

The names below are imported on first use (PEP 562): importing a submodule of this
package, such as the registries of :mod:`rl_core.llm.implementations` that every config
validation reads, does not import transformers.
"""

from __future__ import annotations

import importlib
from typing import Any

#: Public name → submodule that defines it.
_EXPORTS = {
    "GenerationResult": "generation",
    "SamplingParams": "generation",
    "hf_generate": "generation",
    "entropy_from_logits": "logprobs",
    "logprobs_from_logits": "logprobs",
    "pad_left": "batching",
    "pad_loss_masks": "batching",
    "pad_right": "batching",
    "sequences_from_padded": "batching",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value  # later lookups skip this function
    return value
