"""Language-model pieces of the reasoning path: padding, sampling, token log-probs."""

from rl_core.llm.batching import pad_left, pad_loss_masks, pad_right, sequences_from_padded
from rl_core.llm.generation import GenerationResult, SamplingParams, hf_generate
from rl_core.llm.logprobs import entropy_from_logits, logprobs_from_logits

__all__ = [
    "GenerationResult",
    "SamplingParams",
    "entropy_from_logits",
    "hf_generate",
    "logprobs_from_logits",
    "pad_left",
    "pad_loss_masks",
    "pad_right",
    "sequences_from_padded",
]
