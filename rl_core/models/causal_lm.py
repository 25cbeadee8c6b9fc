"""Hugging Face causal LM policy for the reasoning path (``model_type: hf_causal_lm``).

Training rows are ``[prompt (left-padded) | response (right-padded)]`` (see
:mod:`rl_core.llm.batching`); :meth:`CausalLMPolicy.default_forward` recomputes the
log-probabilities (and entropy, and values with ``model.value_head``) of the response
tokens. Sampling for rollouts happens in a rollout engine (``infra.rollout``), which holds
its own copy of the weights; :meth:`predict_action_batch` generates with this model, for
evaluation and tests.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from torch import nn
from transformers import AutoModelForCausalLM, AutoTokenizer

from rl_core.llm.batching import pad_left, pad_right
from rl_core.llm.generation import SamplingParams, hf_generate
from rl_core.llm.logprobs import entropy_from_logits, logprobs_from_logits
from rl_core.llm.packed_attention import packed_forward_kwargs, use_packed_attention
from rl_core.llm.packing import pack_rows
from rl_core.models.base_policy import BasePolicy
from rl_core.models.lora import adapter_tensors

#: The ``forward_inputs`` of :meth:`CausalLMPolicy.default_forward`, in packing order.
FORWARD_INPUT_KEYS = ("prompt_ids", "prompt_mask", "response_ids", "response_mask")
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


class CausalLMPolicy(BasePolicy):
    """A causal LM (plus an optional scalar value head on its last hidden state).

    Args:
        model: The Hugging Face ``PreTrainedModel``.
        tokenizer: Its tokenizer.
        value_head: Add a critic head (PPO with ``token_gae``).
    """

    export_format = "hf_pretrained"
    #: :meth:`default_forward` computes packed rows (``packed=True``).
    supports_packing = True

    def __init__(self, model: nn.Module, tokenizer: Any, value_head: bool = False) -> None:
        super().__init__()
        self.model = model
        self.tokenizer = tokenizer
        #: The model carries LoRA adapters (:func:`rl_core.models.lora.with_lora`): rollout
        #: engines get the adapters alone.
        self.adapter_only = False
        self.value_head = nn.Linear(model.config.hidden_size, 1) if value_head else None
        self._packing_ready = False
        if self.value_head is not None:
            nn.init.zeros_(self.value_head.weight)
            nn.init.zeros_(self.value_head.bias)

    def pretrained_model(self) -> nn.Module:
        """The wrapped Hugging Face model."""
        return self.model

    def pretrained_tokenizer(self) -> Any:
        """The tokenizer (saved next to the model by the converter)."""
        return self.tokenizer

    def rollout_weights(self, state_dict: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """The part of this policy's state dict a rollout engine loads (HF names).

        With LoRA adapters, the adapters alone (PEFT names, which the engine's own
        adapter-wrapped model shares).
        """
        named = {k[len("model.") :]: v for k, v in state_dict.items() if k.startswith("model.")}
        return adapter_tensors(named) if self.adapter_only else named

    def default_forward(
        self,
        forward_inputs: dict[str, torch.Tensor],
        compute_values: bool = False,
        compute_entropy: bool = True,
        temperature: float = 1.0,
        packed: bool = False,
        entropy_grad: bool = True,
        **kwargs: Any,
    ) -> dict[str, torch.Tensor]:
        """Log-probs ``[N, R]`` of the response tokens, and entropy / values if asked.

        Args:
            forward_inputs: ``prompt_ids``/``prompt_mask`` ``[N, P]`` (left-padded) and
                ``response_ids``/``response_mask`` ``[N, R]`` (right-padded). Attention
                sees every ``response_mask`` token, tool output included; which tokens are
                trained on (the loss mask) is the update's business.
            compute_values: Also return ``values`` ``[N, R]`` (needs the value head): the
                value of the state before each response token.
            compute_entropy: Also return ``entropy`` ``[N, R]``.
            temperature: The sampling temperature the responses were drawn with.
            packed: Compute on the rows packed into one sequence without padding
                (:mod:`rl_core.llm.packing`): the same results on real tokens, 0 on
                padding, and only the real tokens' work.
            entropy_grad: The entropy is differentiated (an entropy bonus). False: it is
                computed without a graph, a metric only, so its ``[tokens, vocabulary]``
                intermediates are not kept for the backward pass.
            **kwargs: Ignored (callers may pass options other policies use).
        """
        if compute_values and self.value_head is None:
            raise ValueError("values requested but the model has no value head")
        if packed:
            return self._packed_forward(
                forward_inputs, compute_values, compute_entropy, temperature, entropy_grad
            )
        prompt_ids, response_ids = forward_inputs["prompt_ids"], forward_inputs["response_ids"]
        mask = torch.cat([forward_inputs["prompt_mask"], forward_inputs["response_mask"]], dim=1)
        ids = torch.cat([prompt_ids, response_ids], dim=1)
        positions = (mask.cumsum(dim=1) - 1).clamp(min=0)
        out = self.model(
            input_ids=ids,
            attention_mask=mask,
            position_ids=positions,
            output_hidden_states=compute_values,
            use_cache=False,
            logits_to_keep=response_ids.shape[1] + 1,  # no vocabulary projection of prompts
        )
        logits = out.logits[:, :-1]
        result = {"logprobs": logprobs_from_logits(logits, response_ids, temperature)}
        if compute_entropy:
            result["entropy"] = _entropy(logits, temperature, entropy_grad)
        if compute_values:
            hidden = out.hidden_states[-1][:, prompt_ids.shape[1] - 1 : -1]
            result["values"] = self.value_head(hidden.float()).sum(dim=-1)  # not a view
        return result

    def _packed_forward(
        self,
        forward_inputs: dict[str, torch.Tensor],
        compute_values: bool,
        compute_entropy: bool,
        temperature: float,
        entropy_grad: bool,
    ) -> dict[str, torch.Tensor]:
        """:meth:`default_forward` on the rows packed into one sequence."""
        if not self._packing_ready:
            use_packed_attention(self.model)
            self._packing_ready = True
        packed = pack_rows(*(forward_inputs[k] for k in FORWARD_INPUT_KEYS))
        out = self.model(
            input_ids=packed.input_ids,
            position_ids=packed.position_ids,
            output_hidden_states=compute_values,
            use_cache=False,
            logits_to_keep=packed.logit_positions,
            **packed_forward_kwargs(self.model, packed.cu_seqlens, packed.max_length),
        )
        logits = out.logits[0]  # [K, V]: one row per response token
        result = {
            "logprobs": packed.unpack(logprobs_from_logits(logits, packed.targets, temperature))
        }
        if compute_entropy:
            result["entropy"] = packed.unpack(_entropy(logits, temperature, entropy_grad))
        if compute_values:
            hidden = out.hidden_states[-1][0, packed.logit_positions]
            result["values"] = packed.unpack(self.value_head(hidden.float()).sum(dim=-1))
        return result

    @torch.no_grad()
    def predict_action_batch(
        self,
        env_obs: dict[str, Any],
        mode: str = "train",
        compute_values: bool = False,
        sampling: SamplingParams | None = None,
        seed: int | None = None,
        **kwargs: Any,
    ) -> tuple[list[list[int]], dict[str, Any]]:
        """Generate responses to ``env_obs["prompt_ids"]`` (lists of token ids).

        ``mode="eval"`` decodes greedily. Returns the response token lists and
        ``prev_logprobs`` (lists), ``finished`` flags and the padded ``forward_inputs``.
        """
        sampling = sampling or SamplingParams(stop_token_ids=(self.tokenizer.eos_token_id,))
        if mode == "eval" and not sampling.greedy:
            sampling = SamplingParams(**{**sampling.__dict__, "greedy": True})
        prompts = [list(p) for p in env_obs["prompt_ids"]]
        gen = hf_generate(self.model, prompts, sampling, self.tokenizer.pad_token_id, seed)
        prompt_ids, prompt_mask = pad_left(prompts, self.tokenizer.pad_token_id)
        response_ids, response_mask = pad_right(gen.response_ids, self.tokenizer.pad_token_id)
        return gen.response_ids, {
            "prev_logprobs": gen.logprobs,
            "prev_values": None,
            "finished": gen.finished,
            "forward_inputs": {
                "prompt_ids": prompt_ids,
                "prompt_mask": prompt_mask,
                "response_ids": response_ids,
                "response_mask": response_mask,
            },
        }


def _entropy(logits: torch.Tensor, temperature: float, grad: bool) -> torch.Tensor:
    """Entropy per position; without a graph unless ``grad`` (and gradients are on)."""
    with torch.set_grad_enabled(grad and torch.is_grad_enabled()):
        return entropy_from_logits(logits, temperature)


def load_tokenizer(model_cfg: Any) -> Any:
    """The tokenizer of ``model_cfg.model_path`` (local files only); padding with EOS if unset."""
    tokenizer = AutoTokenizer.from_pretrained(
        model_cfg.model_path, trust_remote_code=model_cfg.trust_remote_code, local_files_only=True
    )
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


def load_causal_lm(model_cfg: Any) -> tuple[nn.Module, Any]:
    """Load model and tokenizer from ``model_cfg.model_path`` (a local directory only).

    Weights are read from ``*.safetensors`` files only (never pickled weights). A hub id
    in the config has been replaced by its folder in the local Hugging Face cache before
    any worker starts (:mod:`infra.hub_models`).

    Raises:
        ValueError: No ``model_path``, or it is not a directory holding a model.
    """
    path = getattr(model_cfg, "model_path", None)
    if not path:
        raise ValueError(
            f"model.model_path must name a local model directory for {model_cfg.model_type}"
        )
    if not (Path(path) / "config.json").is_file():
        raise ValueError(
            f"model.model_path {path!r} is not a local Hugging Face model directory (no "
            "config.json); build the tiny test model with scripts/build_tiny_lm.py"
        )
    dtype = DTYPES[model_cfg.dtype] if model_cfg.dtype != "auto" else "auto"
    model = AutoModelForCausalLM.from_pretrained(
        path,
        dtype=dtype,
        trust_remote_code=model_cfg.trust_remote_code,
        local_files_only=True,
        use_safetensors=True,
        # sections without the setting (a VLA's backbone) take transformers' default
        attn_implementation=getattr(model_cfg, "attn_implementation", None),
    )
    tokenizer = load_tokenizer(model_cfg)
    if getattr(model_cfg, "gradient_checkpointing", False):
        # transformers 5.23 renamed it (the old name warns on every load)
        enable = getattr(model, "activation_checkpointing_enable", None)
        (enable or model.gradient_checkpointing_enable)()
    return model, tokenizer


def build_causal_lm(model_cfg: Any, spaces: Any = None) -> CausalLMPolicy:
    """Model builder of ``hf_causal_lm`` (``spaces`` is unused; see ``hf_builder``)."""
    model, tokenizer = load_causal_lm(model_cfg)
    return CausalLMPolicy(model, tokenizer, value_head=model_cfg.value_head)
