"""A batch at reasoning lengths for the trainer benchmarks: lengths spread 10x and more.

Random token ids (a random-weight model does not care what they say), prompts and responses
of uniformly drawn lengths, GRPO-style advantages (one per response, on every token),
padded into the trainer's layout (:mod:`rl_core.llm.batching`).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from rl_core.llm import pad_left, pad_right


@dataclass(frozen=True)
class LongBatch:
    """The batch and what it holds.

    Attributes:
        tensors: ``prompt_*``/``response_*`` ids and masks, ``advantages`` ``[N, R]``.
        prompts: Token ids of each prompt.
        responses: Token ids of each response.
    """

    tensors: dict[str, torch.Tensor]
    prompts: list[list[int]]
    responses: list[list[int]]

    @property
    def real_tokens(self) -> int:
        """Prompt and response tokens, without padding."""
        return sum(map(len, self.prompts)) + sum(map(len, self.responses))

    @property
    def padded_tokens(self) -> int:
        """Positions of the padded layout (rows x (prompt width + response width))."""
        n = len(self.prompts)
        return n * (self.tensors["prompt_ids"].shape[1] + self.tensors["response_ids"].shape[1])

    def describe(self) -> str:
        """``32 rows, prompts 16-64, responses 32-512 tokens: 9,876 real of 18,432 padded``."""
        p, r = list(map(len, self.prompts)), list(map(len, self.responses))
        return (
            f"{len(p)} rows, prompts {min(p)}-{max(p)}, responses {min(r)}-{max(r)} tokens: "
            f"{self.real_tokens:,} real of {self.padded_tokens:,} padded positions"
        )


def long_batch(
    rows: int,
    prompt_range: tuple[int, int],
    response_range: tuple[int, int],
    vocab: int,
    pad_id: int,
    seed: int = 0,
) -> LongBatch:
    """``rows`` random rows with lengths drawn uniformly from the (inclusive) ranges.

    Args:
        rows: Responses in the batch.
        prompt_range: Shortest and longest prompt (tokens).
        response_range: Shortest and longest response (tokens).
        vocab: Token ids are drawn from ``[4, vocab)`` (0-3: special tokens).
        pad_id: The padding token.
        seed: Random seed.
    """
    g = torch.Generator().manual_seed(seed)

    def draw(low: int, high: int) -> list[int]:
        length = int(torch.randint(low, high + 1, (1,), generator=g))
        return torch.randint(4, vocab, (length,), generator=g).tolist()

    prompts = [draw(*prompt_range) for _ in range(rows)]
    responses = [draw(*response_range) for _ in range(rows)]
    p_ids, p_mask = pad_left(prompts, pad_id)
    r_ids, r_mask = pad_right(responses, pad_id)
    advantages = torch.randn(rows, 1, generator=g).expand_as(r_ids) * r_mask
    tensors = {
        "prompt_ids": p_ids,
        "prompt_mask": p_mask,
        "response_ids": r_ids,
        "response_mask": r_mask,
        "advantages": advantages.float().contiguous(),
    }
    return LongBatch(tensors, prompts, responses)
