"""Sampling with a Hugging Face causal LM: responses plus their per-token log-probs."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import torch
from transformers import GenerationConfig
from transformers.generation.stopping_criteria import StoppingCriteria, StopStringCriteria

from rl_core.llm.batching import pad_left

#: ``GenerationResult.finish_reasons``: a stop token, a stop string, the length limit.
FINISH_EOS, FINISH_STOP, FINISH_LENGTH = "eos", "stop", "length"


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
        finish_reasons: Why each response ended: ``"eos"`` (a stop token), ``"stop"`` (a
            stop string, its tokens included) or ``"length"`` (the row's token limit).
    """

    response_ids: list[list[int]]
    logprobs: list[list[float]]
    finished: list[bool]
    finish_reasons: list[str] = field(default_factory=list)


class EndRecorder(StoppingCriteria):
    """Ends each row at a stop token, a stop string or its own token limit, and says which.

    ``generate`` calls it after every step with the whole sequences; a row it reports done
    is padded from then on. It records, per row, how many new tokens the response has and
    why it ended (the first time only: padding after the end is not read).

    Args:
        prompt_width: Width of the (left-padded) prompt block.
        stop_token_ids: Tokens that end a response.
        row_limits: Most new tokens of each row.
        stop_strings: Texts that end a response (matched on the decoded tokens, as
            ``StopStringCriteria`` does; the token completing one is kept).
        tokenizer: Needed with ``stop_strings``.
    """

    def __init__(
        self,
        prompt_width: int,
        stop_token_ids: Sequence[int],
        row_limits: Sequence[int],
        stop_strings: Sequence[str] = (),
        tokenizer: Any = None,
    ) -> None:
        if stop_strings and tokenizer is None:
            raise ValueError("stop strings need the tokenizer")
        self.prompt_width = prompt_width
        self.stop_token_ids = torch.tensor(list(stop_token_ids) or [-1])
        self.limits = torch.tensor(list(row_limits))
        self.strings = StopStringCriteria(tokenizer, list(stop_strings)) if stop_strings else None
        self.lengths: list[int | None] = [None] * len(row_limits)
        self.reasons: list[str] = [FINISH_LENGTH] * len(row_limits)

    def __call__(self, input_ids: torch.Tensor, scores: Any, **kwargs: Any) -> torch.Tensor:
        """Rows that end at this step (or ended before)."""
        steps = input_ids.shape[1] - self.prompt_width
        last = input_ids[:, -1].cpu()
        eos = torch.isin(last, self.stop_token_ids)
        text = torch.zeros_like(eos)
        if self.strings is not None:
            text = self.strings(input_ids, scores).cpu()
        length = self.limits <= steps
        done = eos | text | length
        for row in torch.nonzero(done).flatten().tolist():
            if self.lengths[row] is None:
                self.lengths[row] = steps
                why = FINISH_EOS if eos[row] else FINISH_STOP if text[row] else FINISH_LENGTH
                self.reasons[row] = why
        return done.to(input_ids.device)


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
    row_limits: Sequence[int] | None = None,
    stop_strings: Sequence[str] = (),
    tokenizer: Any = None,
) -> GenerationResult:
    """Generate one response per prompt with ``model.generate``.

    Args:
        model: A Hugging Face causal LM.
        prompt_ids: Token ids of each prompt (unpadded).
        sampling: Sampling parameters.
        pad_id: Padding token id.
        seed: Seeds torch's global generator first, so the same call samples the same
            responses (None leaves the generator alone).
        row_limits: Most new tokens of each row (None: ``sampling.max_new_tokens`` for all).
        stop_strings: Texts that also end a response (agent loops stop at a tool call's end
            marker); the tokens that produced one stay in the response.
        tokenizer: The model's tokenizer (needed with ``stop_strings``).
    """
    if seed is not None:
        torch.manual_seed(seed)
    device = next(model.parameters()).device
    ids, mask = pad_left(prompt_ids, pad_id)
    stop = list(sampling.stop_token_ids)
    limits = list(row_limits) if row_limits is not None else [sampling.max_new_tokens] * len(ids)
    if len(limits) != len(ids) or min(limits, default=1) < 1:
        raise ValueError(f"row_limits needs one limit >= 1 per prompt, got {limits}")
    temperature = 1.0 if sampling.greedy else sampling.temperature
    recorder = ChosenTokenLogprobs(temperature)
    ends = EndRecorder(ids.shape[1], stop, limits, stop_strings, tokenizer)
    with without_sampling_defaults(model):
        sequences = model.generate(
            input_ids=ids.to(device),
            attention_mask=mask.to(device),
            max_new_tokens=max(limits),
            do_sample=not sampling.greedy,
            temperature=None if sampling.greedy else sampling.temperature,
            top_p=None if sampling.greedy else sampling.top_p,
            top_k=None if sampling.greedy else sampling.top_k,
            eos_token_id=stop or None,
            pad_token_id=pad_id,
            logits_processor=[recorder],
            stopping_criteria=[ends],
        )
    new_tokens = sequences[:, ids.shape[1] :]
    token_logprobs = recorder.finish(new_tokens).cpu()
    new_tokens = new_tokens.cpu()
    responses, logprobs, finished = [], [], []
    for row in range(new_tokens.shape[0]):
        length = ends.lengths[row]
        length = new_tokens.shape[1] if length is None else length
        responses.append(new_tokens[row, :length].tolist())
        logprobs.append(token_logprobs[row, :length].tolist())
        finished.append(ends.reasons[row] == FINISH_EOS)
    return GenerationResult(responses, logprobs, finished, list(ends.reasons))


@contextmanager
def without_sampling_defaults(model: torch.nn.Module) -> Iterator[None]:
    """Generate with ``model`` ignoring the sampling defaults of its ``generation_config``.

    A hub model's ``generation_config.json`` may set a repetition penalty, a temperature,
    top-k/top-p (Qwen2.5-Instruct sets all four), and ``generate`` applies whatever the
    call leaves unset. Rollouts must sample from the policy's own distribution at the run's
    ``rollout`` settings, which the trainer's recomputed log-probs assume: for the duration
    of the block the model (the one under any PEFT wrapper) has a generation config with
    nothing but its token ids. The model's own config is put back afterwards (exports keep
    it).
    """
    owner = model
    while hasattr(owner, "get_base_model") and owner.get_base_model() is not owner:
        owner = owner.get_base_model()
    saved = getattr(owner, "generation_config", None)
    if saved is None:
        yield
        return
    owner.generation_config = GenerationConfig(
        bos_token_id=saved.bos_token_id,
        eos_token_id=saved.eos_token_id,
        pad_token_id=saved.pad_token_id,
    )
    try:
        yield
    finally:
        owner.generation_config = saved
