"""Random LLM training batches for tests (prompt/response token ids, masks, log-probs)."""

from __future__ import annotations

import torch

from rl_core.llm import pad_left, pad_right


def random_llm_batch(
    n: int = 6,
    seed: int = 0,
    vocab: int = 260,
    group_size: int = 2,
    prompt_lengths: tuple[int, int] = (2, 6),
    response_lengths: tuple[int, int] = (1, 5),
) -> dict[str, torch.Tensor]:
    """``n`` rows of random prompts (2-5 tokens) and responses (1-4 tokens) with targets
    (old, reference and rollout log-probs, advantages) and the group index of the rows
    (``group_size`` consecutive rows per group, as a rollout lays them out).

    ``prompt_lengths`` and ``response_lengths`` are ``[low, high)`` ranges of lengths."""
    g = torch.Generator().manual_seed(seed)

    def seq(low: int, high: int) -> list[int]:
        length = int(torch.randint(low, high, (1,), generator=g))
        return torch.randint(4, vocab, (length,), generator=g).tolist()

    prompts = [seq(*prompt_lengths) for _ in range(n)]
    responses = [seq(*response_lengths) for _ in range(n)]
    p_ids, p_mask = pad_left(prompts, 0)
    r_ids, r_mask = pad_right(responses, 0)
    shape = r_ids.shape
    batch = {
        "prompt_ids": p_ids,
        "prompt_mask": p_mask,
        "response_ids": r_ids,
        "response_mask": r_mask,
        "old_logprobs": -torch.rand(shape, generator=g) * 3,
        "advantages": torch.randn(shape, generator=g),
        "ref_logprobs": -torch.rand(shape, generator=g) * 3,
        "group_index": torch.arange(n) // group_size,
    }
    # the rollout engine's log-probs: the trainer's, slightly off (as a sampler's are)
    batch["rollout_logprobs"] = batch["old_logprobs"] + 0.1 * torch.randn(shape, generator=g)
    return batch


def llm_algorithm(algorithm):
    """An embodied ``algorithm`` section's shared values as a reasoning one (its defaults)."""
    from kinds.reasoning.sections import ReasoningAlgorithmConfig

    embodied_only = set(type(algorithm).model_fields) - set(ReasoningAlgorithmConfig.model_fields)
    return ReasoningAlgorithmConfig(**algorithm.model_dump(exclude=embodied_only))


def llm_actor(actor):
    """An embodied ``actor`` section's values as a reasoning one."""
    from kinds.reasoning.sections import ReasoningActorConfig

    return ReasoningActorConfig(**actor.model_dump())
