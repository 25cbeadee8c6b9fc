"""Sampling with a Hugging Face causal LM: responses plus their per-token log-probs."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import torch

from rl_core.llm.batching import pad_left


@dataclass(frozen=True)
class SamplingParams:
    """How responses are sampled.

    Attributes:
        max_new_tokens: Longest response, in tokens.
        temperature: Softmax temperature (> 0); ignored when ``greedy``.
        top_p: Nucleus sampling mass (1.0 = off).
        top_k: Keep the k most likely tokens (0 = off).
        greedy: Take the most likely token (evaluation).
        stop_token_ids: Tokens that end a response (included in it).
    """

    max_new_tokens: int = 32
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    greedy: bool = False
    stop_token_ids: tuple[int, ...] = field(default_factory=tuple)

    def __post_init__(self) -> None:
        if self.max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be >= 1, got {self.max_new_tokens}")
        if self.temperature <= 0:
            raise ValueError(f"temperature must be > 0, got {self.temperature}")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}")


@dataclass
class GenerationResult:
    """Responses to a batch of prompts.

    Attributes:
        response_ids: One list of token ids per prompt (ending with the stop token when
            one was produced).
        logprobs: Per-token log-probabilities of those tokens under the sampling
            distribution's temperature (before top-p/top-k truncation).
        finished: Whether each response ended with a stop token (else it hit the limit).
    """

    response_ids: list[list[int]]
    logprobs: list[list[float]]
    finished: list[bool]


class ChosenTokenLogprobs:
    """A logits processor recording the log-prob of each sampled token, step by step.

    ``generate`` calls it with each step's raw logits (before temperature, top-k and top-p,
    which come after custom processors) and, at the next step, with the token that was
    drawn; it keeps one ``[B, V]`` log-softmax at a time instead of every step's logits
    (``output_logits`` holds ``B x steps x V`` floats: 80 GB in bf16 for 512 responses of
    512 tokens over a 152k vocabulary).

    Args:
        temperature: The sampling temperature (log-probs are those of ``logits / T``).
    """

    def __init__(self, temperature: float) -> None:
        self.temperature = temperature
        self.pending: torch.Tensor | None = None
        self.picked: list[torch.Tensor] = []

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        """Record the previous step's token; keep this step's log-softmax; pass scores on."""
        if self.pending is not None:
            self._pick(input_ids[:, -1])
        self.pending = torch.log_softmax(scores.float() / self.temperature, dim=-1)
        return scores

    def _pick(self, tokens: torch.Tensor) -> None:
        assert self.pending is not None
        self.picked.append(self.pending.gather(-1, tokens.unsqueeze(-1)).squeeze(-1))
        self.pending = None

    def finish(self, new_tokens: torch.Tensor) -> torch.Tensor:
        """``[B, steps]`` log-probs of ``new_tokens`` (the last step's token is picked here)."""
        if self.pending is not None:
            self._pick(new_tokens[:, len(self.picked)])
        if len(self.picked) != new_tokens.shape[1]:
            raise RuntimeError(
                f"recorded {len(self.picked)} steps for {new_tokens.shape[1]} new tokens"
            )
        return torch.stack(self.picked, dim=1)


@torch.no_grad()
def hf_generate(
    model: torch.nn.Module,
    prompt_ids: Sequence[Sequence[int]],
    sampling: SamplingParams,
    pad_id: int,
    seed: int | None = None,
) -> GenerationResult:
    """Generate one response per prompt with ``model.generate``.

    Args:
        model: A Hugging Face causal LM.
        prompt_ids: Token ids of each prompt (unpadded).
        sampling: Sampling parameters.
        pad_id: Padding token id.
        seed: Seeds torch's global generator first, so the same call samples the same
            responses (None leaves the generator alone).
    """
    if seed is not None:
        torch.manual_seed(seed)
    device = next(model.parameters()).device
    ids, mask = pad_left(prompt_ids, pad_id)
    stop = list(sampling.stop_token_ids)
    temperature = 1.0 if sampling.greedy else sampling.temperature
    recorder = ChosenTokenLogprobs(temperature)
    sequences = model.generate(
        input_ids=ids.to(device),
        attention_mask=mask.to(device),
        max_new_tokens=sampling.max_new_tokens,
        do_sample=not sampling.greedy,
        temperature=None if sampling.greedy else sampling.temperature,
        top_p=None if sampling.greedy else sampling.top_p,
        top_k=None if sampling.greedy else sampling.top_k,
        eos_token_id=stop or None,
        pad_token_id=pad_id,
        logits_processor=[recorder],
    )
    new_tokens = sequences[:, ids.shape[1] :]
    token_logprobs = recorder.finish(new_tokens).cpu()
    new_tokens = new_tokens.cpu()
    stop_set = set(stop)
    responses, logprobs, finished = [], [], []
    for row in range(new_tokens.shape[0]):
        tokens = new_tokens[row].tolist()
        end = next((i + 1 for i, tok in enumerate(tokens) if tok in stop_set), None)
        length = end if end is not None else len(tokens)
        responses.append(tokens[:length])
        logprobs.append(token_logprobs[row, :length].tolist())
        finished.append(end is not None)
    return GenerationResult(responses, logprobs, finished)
