"""Sequence packing: a micro-batch's rows as one sequence without padding.

The trainer's batch layout pads every row (:mod:`rl_core.llm.batching`): prompts on the
left to ``P`` columns, responses on the right to ``R``. At reasoning lengths most of that is
padding: a batch whose responses run from 100 to 4,000 tokens computes ``N * (P + R)``
positions for a few of them that are real. :func:`pack_rows` concatenates the real tokens
of every row into one sequence ``[1, T]`` instead, with position ids restarting at 0 in
each row and the row boundaries (``cu_seqlens``, as flash attention's varlen kernels take
them), so attention never crosses rows and every token sees exactly what it saw padded:
the same log-probabilities, entropies and gradients, up to float rounding.

:func:`trim_padding` is the unpacked alternative: the micro-batch padded to its own longest
prompt and response rather than the whole batch's.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

#: Batch keys shaped ``[N, R]`` like the responses (cut with them by :func:`trim_padding`).
PROMPT_KEYS = ("prompt_ids", "prompt_mask")


@dataclass(frozen=True)
class PackedRows:
    """Rows of a micro-batch concatenated without padding.

    Attributes:
        input_ids: ``[1, T]`` the real tokens of every row, row after row.
        position_ids: ``[1, T]`` each token's position in its row (0 at each row's start).
        cu_seqlens: ``[N + 1]`` int32 row boundaries in the packed sequence (``0, len0,
            len0 + len1, …``): flash attention's ``cu_seq_lens``.
        max_length: The longest row (tokens).
        logit_positions: ``[K]`` packed positions whose logits predict a response token
            (the token before it in its row), one per real response token.
        targets: ``[K]`` the response tokens they predict.
        rows: ``[K]`` each response token's row in the padded ``[N, R]`` layout.
        cols: ``[K]`` its column there.
        shape: ``(N, R)`` of the padded response layout.
    """

    input_ids: torch.Tensor
    position_ids: torch.Tensor
    cu_seqlens: torch.Tensor
    max_length: int
    logit_positions: torch.Tensor
    targets: torch.Tensor
    rows: torch.Tensor
    cols: torch.Tensor
    shape: tuple[int, int]

    @property
    def num_tokens(self) -> int:
        """Tokens of the packed sequence (``T``)."""
        return int(self.input_ids.shape[1])

    def unpack(self, values: torch.Tensor) -> torch.Tensor:
        """Per-response-token ``values`` (``[K]`` or ``[1, K]``) in the ``[N, R]`` layout.

        Padding columns hold 0; the result keeps the gradient of ``values``.
        """
        flat = values.reshape(-1)
        out = torch.zeros(self.shape, dtype=flat.dtype, device=flat.device)
        return out.index_put((self.rows, self.cols), flat)


def pack_rows(
    prompt_ids: torch.Tensor,
    prompt_mask: torch.Tensor,
    response_ids: torch.Tensor,
    response_mask: torch.Tensor,
) -> PackedRows:
    """Pack padded rows (see :class:`PackedRows`).

    A row's real tokens are its masked-in prompt tokens followed by its masked-in response
    tokens, in column order, exactly the tokens the padded forward pass attends to; a
    response token is predicted by the real token before it.

    Args:
        prompt_ids: ``[N, P]`` left-padded prompts.
        prompt_mask: ``[N, P]`` 1 on real prompt tokens.
        response_ids: ``[N, R]`` right-padded responses.
        response_mask: ``[N, R]`` 1 on real response tokens (tool output included).

    Raises:
        ValueError: A row with response tokens but no prompt token (nothing predicts its
            first token), or shapes that do not match.
    """
    if prompt_ids.shape != prompt_mask.shape or response_ids.shape != response_mask.shape:
        raise ValueError(
            f"ids and masks differ in shape: prompt {tuple(prompt_ids.shape)} vs "
            f"{tuple(prompt_mask.shape)}, response {tuple(response_ids.shape)} vs "
            f"{tuple(response_mask.shape)}"
        )
    has_prompt = prompt_mask.bool().any(dim=1)
    has_response = response_mask.bool().any(dim=1)
    orphan = (has_response & ~has_prompt).nonzero()
    if orphan.numel():
        raise ValueError(f"row {int(orphan[0])} has response tokens but an empty prompt")
    mask = torch.cat([prompt_mask, response_mask], dim=1).bool()
    ids = torch.cat([prompt_ids, response_ids], dim=1)
    lengths = mask.sum(dim=1)
    # index of each real (row, column) in the packed sequence: rows are packed in order
    packed_index = mask.reshape(-1).cumsum(0).view(mask.shape) - 1
    rows, cols = response_mask.bool().nonzero(as_tuple=True)
    prompt_width = prompt_ids.shape[1]
    cu_seqlens = torch.zeros(len(lengths) + 1, dtype=torch.int32, device=ids.device)
    cu_seqlens[1:] = lengths.cumsum(0)
    return PackedRows(
        input_ids=ids[mask].unsqueeze(0),
        position_ids=((mask.cumsum(dim=1) - 1)[mask]).unsqueeze(0),
        cu_seqlens=cu_seqlens,
        max_length=int(lengths.max()) if len(lengths) else 0,
        logit_positions=packed_index[rows, prompt_width + cols] - 1,
        targets=response_ids[rows, cols],
        rows=rows,
        cols=cols,
        shape=(int(response_ids.shape[0]), int(response_ids.shape[1])),
    )


def real_lengths(batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """``[N]`` real tokens (prompt + response) of each row: what a packed row costs."""
    return batch["prompt_mask"].sum(dim=1) + batch["response_mask"].sum(dim=1)


def trim_padding(batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The rows padded to their own longest prompt and response (a view of the columns).

    Prompt keys lose the leading columns no row uses, every ``[N, R]`` key (response ids,
    masks, advantages, log-probs…) the trailing ones; other keys are kept as they are.
    The result computes exactly what the full width computes on the kept columns.
    """
    prompt_width = batch["prompt_ids"].shape[1]
    response_width = batch["response_ids"].shape[1]
    used_prompt = int(batch["prompt_mask"].sum(dim=1).max()) if prompt_width else 0
    response_used = batch["response_mask"].bool().any(dim=0).nonzero()
    used_response = int(response_used[-1]) + 1 if response_used.numel() else 0
    # keep at least one prompt column: the logits predicting response token 0 live there
    start = prompt_width - max(used_prompt, 1)
    if start > 0 and bool(batch["prompt_mask"][:, :start].any()):
        start = 0  # not left-padded: keep every column
    out = {}
    for key, value in batch.items():
        if key in PROMPT_KEYS:
            out[key] = value[:, start:]
        elif value.dim() == 2 and value.shape[1] == response_width:
            out[key] = value[:, :used_response]
        else:
            out[key] = value
    return out


#: Bucket rows so that padding adds at most this share to a bucket's positions.
BUCKET_WASTE = 0.2


@dataclass(frozen=True)
class LengthBucket:
    """Rows of a packed sequence computed together, right-padded to the longest.

    Attributes:
        index: ``[rows, width]`` packed position of each (row, column); padding slots
            repeat the row's last position.
        valid: ``[rows, width]`` True on real tokens.
        positions: ``[valid.sum()]`` packed positions of the real tokens, in ``valid``'s
            row-major order.
    """

    index: torch.Tensor
    valid: torch.Tensor
    positions: torch.Tensor


def length_buckets(cu_seqlens: torch.Tensor, waste: float = BUCKET_WASTE) -> list[LengthBucket]:
    """Rows grouped, longest first, while padding stays under ``waste`` of each group.

    Args:
        cu_seqlens: ``[N + 1]`` row boundaries of the packed sequence.
        waste: Largest share of padding positions a bucket may hold.
    """
    edges = cu_seqlens.tolist()
    lengths = [b - a for a, b in zip(edges[:-1], edges[1:], strict=True)]
    order = sorted((i for i in range(len(lengths)) if lengths[i]), key=lambda i: -lengths[i])
    groups: list[list[int]] = []
    for row in order:
        if groups:
            group = groups[-1]
            width = lengths[group[0]]
            real = sum(lengths[r] for r in group) + lengths[row]
            if width * (len(group) + 1) * (1.0 - waste) <= real:
                group.append(row)
                continue
        groups.append([row])
    device = cu_seqlens.device
    buckets = []
    for group in groups:
        width = lengths[group[0]]
        starts = torch.tensor([edges[r] for r in group], device=device).unsqueeze(1)
        ends = torch.tensor([edges[r + 1] for r in group], device=device).unsqueeze(1)
        index = starts + torch.arange(width, device=device).unsqueeze(0)
        valid = index < ends
        index = torch.minimum(index, ends - 1)
        buckets.append(LengthBucket(index, valid, index[valid]))
    return buckets
