"""A megatron-core ``GPTModel`` shard as the trainer's causal LM policy.

It answers the trainer's one call, ``policy(forward_type="default_forward",
forward_inputs=…)``, with the same log-probs and entropy as the Hugging Face policy
(``rl_core.models.causal_lm``) of the same weights, from padded rows or from the rows
packed into one sequence (:mod:`.sequences`).
"""

from __future__ import annotations

import logging
import math
from typing import Any

import torch
import torch.distributed as dist
from torch import nn
from torch._utils import _flatten_dense_tensors, _unflatten_dense_tensors

from rl_core.llm.packing import pack_rows
from rl_core.models.megatron.config import HFShape, kv_copies
from rl_core.models.megatron.sequences import (
    accepts_packed_sequences,
    packed_logits,
    padded_logits,
)
from rl_core.models.megatron.vocab_parallel import vocab_parallel_logprobs
from rl_core.models.megatron.weights import megatron_to_hf, qkv_layout

logger = logging.getLogger(__name__)
#: The ``forward_inputs`` of :meth:`MegatronCausalLM.default_forward`, in packing order.
FORWARD_INPUT_KEYS = ("prompt_ids", "prompt_mask", "response_ids", "response_mask")


def kv_copy_group(tp: int, copies: int) -> Any:
    """The process group of the ranks holding copies of this rank's key/value heads.

    Collective: every rank creates every group (blocks of ``copies`` neighbouring ranks,
    which lie inside one tensor-parallel group as ranks are ordered tensor-parallel first).

    Args:
        tp: Tensor-parallel size.
        copies: Copies of each key/value head (:func:`~.config.kv_copies`); 1: no group.
    """
    if copies == 1:
        return None
    if tp % copies:
        raise ValueError(f"{copies} key/value copies do not fit {tp} tensor-parallel ranks")
    mine = None
    for start in range(0, dist.get_world_size(), copies):
        ranks = list(range(start, start + copies))
        group = dist.new_group(ranks)
        if dist.get_rank() in ranks:
            mine = group
    return mine


class MegatronCausalLM(nn.Module):
    """The trainer's policy on one tensor-parallel rank.

    Args:
        model: This rank's ``GPTModel`` (:func:`~rl_core.models.megatron.gpt.build_gpt_model`).
        shape: The Hugging Face model's sizes.
        tp_group: The tensor-parallel process group (None: one rank).
        tp_rank: This rank's index in it.
        dp_group: The data-parallel process group (None: one replica).
        kv_group: The ranks holding copies of this rank's key/value heads
            (:func:`kv_copy_group`; None when heads are not copied).
    """

    forward_types = ("default_forward",)

    def __init__(
        self,
        model: nn.Module,
        shape: HFShape,
        tp_group: Any = None,
        tp_rank: int = 0,
        dp_group: Any = None,
        kv_group: Any = None,
    ) -> None:
        super().__init__()
        self.model = model
        self.shape = shape
        self.tp_group = tp_group
        self.tp_rank = tp_rank
        self.dp_group = dp_group
        self.kv_group = kv_group
        self.tp = 1 if tp_group is None else dist.get_world_size(tp_group)
        self.kv_copies = kv_copies(shape, self.tp)
        if self.kv_copies > 1 and kv_group is None:
            raise ValueError("copied key/value heads need their kv_group")
        #: :meth:`default_forward` computes packed rows (``packed=True``): the model's core
        #: attention takes megatron's ``thd`` packed sequences (Transformer Engine's on a
        #: GPU, SDPA on the CPU; megatron's local attention does not).
        self.supports_packing = accepts_packed_sequences(model)
        if not self.supports_packing:
            logger.info(
                "megatron's local attention takes no packed sequences: micro-batches are "
                "computed padded (packing needs Transformer Engine's attention on a GPU)"
            )
        config = getattr(model, "config", None)
        # sequence parallelism splits the packed sequence over the tensor-parallel ranks
        self._sequence_multiple = self.tp if getattr(config, "sequence_parallel", False) else 1

    def hf_state_dict(self) -> dict[str, torch.Tensor]:
        """The whole model's weights under Hugging Face names (collective over the TP group).

        Every tensor-parallel rank gets the full dict (for a weight sync, an export or a
        checkpoint); the vocabulary padding is dropped.
        """
        local = {
            k: v.detach()
            for k, v in self.model.state_dict().items()
            if not k.endswith("_extra_state")
        }
        tp = self.tp
        ranks: list[dict[str, torch.Tensor]] = [{} for _ in range(tp)]
        for name, tensor in local.items():
            parts = [tensor]
            if tp > 1:
                parts = [torch.empty_like(tensor) for _ in range(tp)]
                dist.all_gather(parts, tensor.contiguous(), group=self.tp_group)
            for rank, part in enumerate(parts):
                ranks[rank][name] = part
        return megatron_to_hf(ranks, self.shape)

    def _kv_rows(self, grad: torch.Tensor) -> torch.Tensor:
        """The key/value rows of a ``linear_qkv`` weight or bias gradient (a view)."""
        groups, per_group, dim = qkv_layout(self.shape, self.tp)
        local = grad.view(groups // self.tp, (per_group + 2) * dim, *grad.shape[1:])
        return local[:, per_group * dim :]

    def _is_qkv(self, name: str) -> bool:
        return self.kv_copies > 1 and ".linear_qkv." in name

    def reduce_gradients(self) -> None:
        """Average gradients over data-parallel replicas; sum those of key/value copies.

        The copies of a key/value head then each hold the gradient of the one Hugging Face
        head they stand for, and equal updates keep them equal.
        """
        named = [(n, p) for n, p in self.model.named_parameters() if p.grad is not None]
        replicas = 1 if self.dp_group is None else dist.get_world_size(self.dp_group)
        if replicas > 1 and named:
            grads = [p.grad for _, p in named]
            flat = _flatten_dense_tensors(grads)
            dist.all_reduce(flat, group=self.dp_group)
            flat /= replicas
            for grad, reduced in zip(grads, _unflatten_dense_tensors(flat, grads), strict=True):
                grad.copy_(reduced)
        for name, p in named:
            if self._is_qkv(name):
                rows = self._kv_rows(p.grad)
                summed = rows.contiguous()
                dist.all_reduce(summed, group=self.kv_group)
                rows.copy_(summed)

    def clip_grad_norm(self, max_norm: float | None) -> float:
        """Reduce gradients (:meth:`reduce_gradients`), then clip by the global norm.

        The norm covers the whole model: squares of tensor-parallel shards are summed over
        the tensor-parallel ranks, replicated tensors (norms) and key/value copies count
        once. Clipping follows ``torch.nn.utils.clip_grad_norm_`` (coefficient
        ``max_norm / (norm + 1e-6)``, at most 1).

        Returns:
            The gradient norm before clipping.
        """
        named = [(n, p) for n, p in self.model.named_parameters() if p.grad is not None]
        if not named:
            return 0.0
        self.reduce_gradients()
        sharded = torch.zeros((), dtype=torch.float64)
        replicated = torch.zeros((), dtype=torch.float64)
        for name, p in named:
            square = p.grad.detach().double().pow(2).sum().cpu()
            if self._is_qkv(name):  # every copy's rank adds these squares: count them once
                kv_square = self._kv_rows(p.grad).double().pow(2).sum().cpu()
                square -= kv_square * (1 - 1 / self.kv_copies)
            if getattr(p, "tensor_model_parallel", False):
                sharded += square
            else:
                replicated += square
        if self.tp > 1:
            dist.all_reduce(sharded, group=self.tp_group)
        norm = math.sqrt(float(sharded + replicated))
        limit = max_norm if max_norm else math.inf
        coef = min(limit / (norm + 1e-6), 1.0)
        if coef < 1.0:
            for _, p in named:
                p.grad.mul_(coef)
        return norm

    def forward(self, forward_type: str = "default_forward", **kwargs: Any) -> Any:
        """Dispatch to ``default_forward`` (the only branch a megatron trainer needs).

        Raises:
            ValueError: Another ``forward_type``.
        """
        if forward_type not in self.forward_types:
            raise ValueError(
                f"the megatron trainer has no forward_type {forward_type!r}; allowed: "
                + ", ".join(self.forward_types)
            )
        return self.default_forward(**kwargs)

    def default_forward(
        self,
        forward_inputs: dict[str, torch.Tensor],
        compute_values: bool = False,
        compute_entropy: bool = True,
        temperature: float = 1.0,
        packed: bool = False,
        **kwargs: Any,
    ) -> dict[str, torch.Tensor]:
        """Log-probs ``[N, R]`` of the response tokens (and entropy), as the HF policy's.

        Args:
            forward_inputs: ``prompt_ids``/``prompt_mask`` ``[N, P]`` (left-padded) and
                ``response_ids``/``response_mask`` ``[N, R]`` (right-padded).
            compute_values: Must be False (no value head).
            compute_entropy: Also return ``entropy`` ``[N, R]``.
            temperature: The sampling temperature the responses were drawn with.
            packed: Compute on the rows packed into one sequence without padding
                (:mod:`.sequences`): the same results on real tokens, 0 on padding.
            **kwargs: Ignored (callers may pass options other policies use).

        Raises:
            ValueError: ``compute_values``, or ``packed`` with an attention that takes no
                packed sequences (:attr:`supports_packing` False).
        """
        if compute_values:
            raise ValueError("the megatron trainer has no value head")
        if packed:
            if not self.supports_packing:
                raise ValueError(
                    "packed rows need a core attention that takes thd packed sequences "
                    "(Transformer Engine's, or SDPACoreAttention on the CPU)"
                )
            rows = pack_rows(*(forward_inputs[k] for k in FORWARD_INPUT_KEYS))
            logits = packed_logits(self.model, rows, self._sequence_multiple)  # [K, W]
            targets = rows.targets
        else:
            logits = padded_logits(self.model, forward_inputs)  # [N, R, W]
            targets = forward_inputs["response_ids"]
        logprobs, entropy = vocab_parallel_logprobs(
            logits,
            targets,
            self.tp_rank * logits.shape[-1],
            self.shape.vocab_size,
            self.tp_group,
            temperature,
            entropy=compute_entropy,
        )
        out = {"logprobs": logprobs}
        if entropy is not None:
            out["entropy"] = entropy
        if packed:
            out = {k: rows.unpack(v) for k, v in out.items()}
        return out
