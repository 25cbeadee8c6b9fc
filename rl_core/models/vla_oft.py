"""A vision-language-action policy with an OpenVLA-OFT action head (``model_type: vla_oft``).

The backbone is any Hugging Face causal LM directory (``model.model_path``, loaded with
``AutoModelForCausalLM.from_pretrained``: local files and ``*.safetensors`` only, dtype
from ``model.dtype``, the model's own code only with ``model.trust_remote_code``); the
tiny test LM of ``scripts/build_tiny_lm.py`` and an OpenVLA-sized checkpoint go through the
same code. One forward pass of the backbone reads the sequence::

    [image tokens | state token | instruction tokens (padded) | action queries]

- image tokens: ``main_images`` through the small conv encoder
  (:class:`~rl_core.models.image_encoder.ImageEncoder`), projected to
  ``model.num_image_tokens`` embeddings of the backbone's hidden size;
- state token: ``states`` projected to one embedding (only when the observation space has
  ``states``; OFT's proprio token);
- instruction: ``task_descriptions`` tokenized with the backbone's tokenizer, padded (on
  the tokenizer's ``padding_side``) or truncated to ``model.max_instruction_tokens``, so
  the ``forward_inputs`` of every step have one shape and stack into rollout batches;
- action queries: ``model.action_chunk`` learned embeddings.

Pads are masked (``attention_mask``) and skipped by the position ids (the cumulative count
of real tokens), so a row's outputs do not depend on how much it was padded nor on the
padding side; the queries are always the last ``action_chunk`` positions. The final hidden
states at the queries go through an MLP to the per-step action means
(``[B, action_chunk, action_dim]``, flattened step-major into the env's ``Box`` of
``action_chunk * action_dim``: the env executes the chunk). The Gaussian's log-std is
learned and state-independent, and a log-prob is summed over the whole chunk. A value
head (MLP) on the mean of the final hidden states over the real tokens serves PPO.

Why continuous chunks (OpenVLA-OFT) rather than OpenVLA's 256-bin action tokens:

- parallel decoding: one forward pass gives every action of the chunk, where token
  decoding needs ``action_dim`` autoregressive passes per step (``action_dim *
  action_chunk`` per chunk); a chunk of ``k`` steps also needs one policy call per ``k``
  env steps;
- no discretisation error: 256 bins quantize each dimension, the MLP head does not;
- PPO: a Gaussian over continuous actions gives exact log-probs, entropies and
  ratios with a learned exploration scale (``log_std``), clipped or tanh-squashed to the
  bounds like the other built-in policies (:mod:`rl_core.models.action_heads`); a
  behaviour-cloned start is the same distribution PPO then trains.

``forward_inputs`` (tensors only, replayed by training): ``main_images`` (uint8),
``states`` (float32, when present), ``input_ids`` and ``attention_mask`` (int64,
``[B, max_instruction_tokens]``) and ``model_action``.

Exports use the ``hf_backbone`` weight format (``infra.checkpoint.export``): the directory
is the backbone's ``from_pretrained`` directory (config, weights, tokenizer), so the
policy is rebuilt from it without the original ``model_path`` or a network, plus the
policy's own weights (encoder, projections, queries, heads, log-std) beside it.
"""

from __future__ import annotations

import logging
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from rl_core.models.action_heads import ActionHeadMixin, mlp
from rl_core.models.base_policy import BasePolicy, policy_device
from rl_core.models.image_encoder import (
    IMAGE_KEY,
    STATE_KEY,
    ImageEncoder,
    PixelObservationSpec,
    pixel_inputs,
    pixel_observation_spec,
)
from rl_core.models.registry import register_model

logger = logging.getLogger(__name__)
MODEL_TYPE = "vla_oft"
#: The observation key of the instructions (a numpy str array or a list of B strings).
TEXT_KEY = "task_descriptions"


class VLAOFTPolicy(ActionHeadMixin, BasePolicy):
    """Image + instruction -> continuous action chunk through a causal LM (see module doc).

    Args:
        backbone: The Hugging Face causal LM (``PreTrainedModel``).
        tokenizer: Its tokenizer.
        spec: Image shape and state size of the observations.
        action_space: The env's 1-D ``Box`` of ``action_chunk * action_dim`` actions.
        action_chunk: Env steps per chunk (action queries); must divide the Box size.
        cnn_channels: Output channels of the image encoder's conv layers.
        cnn_feature_dim: Size of the image encoder's feature vector.
        num_image_tokens: Visual token embeddings per image.
        max_instruction_tokens: Instruction length after padding/truncation.
        hidden_sizes: Hidden widths of the action and value MLPs.
        activation: ``tanh``, ``relu`` or ``gelu`` (of the MLPs).
        continuous_action: ``clip`` or ``tanh``.
        init_log_std: Initial log standard deviation of the Gaussian.

    Raises:
        ValueError: A non-Box action space, or ``action_chunk`` not dividing its size.
    """

    export_format = "hf_backbone"

    def __init__(
        self,
        backbone: nn.Module,
        tokenizer: Any,
        spec: PixelObservationSpec,
        action_space: gym.Space,
        action_chunk: int,
        cnn_channels: list[int],
        cnn_feature_dim: int,
        num_image_tokens: int,
        max_instruction_tokens: int,
        hidden_sizes: list[int],
        activation: str = "tanh",
        continuous_action: str = "clip",
        init_log_std: float = 0.0,
    ) -> None:
        super().__init__()
        out_dim = self._init_action_head(
            action_space, continuous_action, init_log_std, MODEL_TYPE, allow_discrete=False
        )
        if action_chunk < 1 or out_dim % action_chunk:
            raise ValueError(
                f"{MODEL_TYPE}: model.action_chunk = {action_chunk} must divide the size of the "
                f"action space ({out_dim} = action_chunk * per-step action size)"
            )
        self.action_chunk = action_chunk
        self.action_dim = out_dim // action_chunk
        self.spec = spec
        self.num_image_tokens = num_image_tokens
        self.max_instruction_tokens = max_instruction_tokens
        self.backbone = backbone
        self.tokenizer = tokenizer
        self._warned_truncation = False
        hidden = int(backbone.get_input_embeddings().embedding_dim)
        self.hidden_size = hidden
        self.encoder = ImageEncoder(spec.image_shape, cnn_channels, cnn_feature_dim)
        self.image_proj = nn.Linear(cnn_feature_dim, num_image_tokens * hidden)
        self.state_proj = nn.Linear(spec.state_dim, hidden) if spec.state_dim else None
        std = float(getattr(getattr(backbone, "config", None), "initializer_range", 0.02))
        self.action_queries = nn.Parameter(torch.randn(action_chunk, hidden) * std)
        self.action_head = mlp([hidden, *hidden_sizes, self.action_dim], activation, 0.01)
        self.value_head = mlp([hidden, *hidden_sizes, 1], activation, 1.0)

    # -- Hugging Face parts --------------------------------------------------------------
    def pretrained_model(self) -> nn.Module:
        """The backbone (saved with ``save_pretrained`` by the ``hf_backbone`` export)."""
        return self.backbone

    def pretrained_tokenizer(self) -> Any:
        """The backbone's tokenizer."""
        return self.tokenizer

    @property
    def prefix_tokens(self) -> int:
        """Embeddings before the instruction: image tokens and the state token."""
        return self.num_image_tokens + (1 if self.spec.state_dim else 0)

    @property
    def sequence_length(self) -> int:
        """Length of the backbone's input sequence."""
        return self.prefix_tokens + self.max_instruction_tokens + self.action_chunk

    # -- inputs --------------------------------------------------------------------------
    def tokenize(
        self, texts: Any, device: torch.device | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Instructions as ``input_ids`` and ``attention_mask`` ``[B, max_instruction_tokens]``.

        Padded on the tokenizer's ``padding_side``; longer instructions are cut on its
        ``truncation_side`` (with a warning, once).

        Args:
            texts: B instructions: a numpy str (or object) array, or a list of str.
            device: Where the tensors go (None: the policy's device).
        """
        rows = [str(t) for t in np.asarray(texts, dtype=object).reshape(-1).tolist()]
        length = self.max_instruction_tokens
        encoded = self.tokenizer(rows, add_special_tokens=True)["input_ids"]
        if any(len(ids) > length for ids in encoded) and not self._warned_truncation:
            self._warned_truncation = True
            logger.warning(
                "%s: instructions longer than model.max_instruction_tokens = %d tokens are "
                "truncated (longest: %d)",
                MODEL_TYPE,
                length,
                max(len(ids) for ids in encoded),
            )
        pad_id = self.tokenizer.pad_token_id
        if pad_id is None:
            pad_id = self.tokenizer.eos_token_id or 0
        left_pad = getattr(self.tokenizer, "padding_side", "right") == "left"
        cut_left = getattr(self.tokenizer, "truncation_side", "right") == "left"
        input_ids = torch.full((len(rows), length), int(pad_id), dtype=torch.long)
        attention_mask = torch.zeros((len(rows), length), dtype=torch.long)
        for row, ids in enumerate(encoded):
            ids = ids[-length:] if cut_left else ids[:length]
            if not ids:
                continue
            span = slice(length - len(ids), length) if left_pad else slice(0, len(ids))
            input_ids[row, span] = torch.tensor(ids, dtype=torch.long)
            attention_mask[row, span] = 1
        device = policy_device(self) if device is None else device
        return input_ids.to(device), attention_mask.to(device)

    def _obs_inputs(self, env_obs: dict[str, Any]) -> dict[str, torch.Tensor]:
        device = policy_device(self)
        inputs = pixel_inputs(env_obs, self.spec, device)
        if TEXT_KEY not in env_obs:
            raise KeyError(
                f"{MODEL_TYPE} reads the instructions from env_obs[{TEXT_KEY!r}]; the "
                f"observations have {sorted(env_obs)}"
            )
        inputs["input_ids"], inputs["attention_mask"] = self.tokenize(env_obs[TEXT_KEY], device)
        return inputs

    # -- the forward pass ----------------------------------------------------------------
    def _hidden_states(self, inputs: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        """Final hidden states ``[B, S, hidden]`` (float32) and the sequence's mask ``[B, S]``."""
        images = inputs[IMAGE_KEY]
        batch = images.shape[0]
        embed = self.backbone.get_input_embeddings()
        dtype = embed.weight.dtype
        prefix = self.image_proj(self.encoder(images)).view(batch, self.num_image_tokens, -1)
        if self.state_proj is not None:
            state = self.state_proj(inputs[STATE_KEY].to(prefix.dtype)).unsqueeze(1)
            prefix = torch.cat([prefix, state], dim=1)
        text_mask = inputs["attention_mask"].to(torch.long)
        queries = self.action_queries.unsqueeze(0).expand(batch, -1, -1)
        embeds = torch.cat([prefix.to(dtype), embed(inputs["input_ids"]), queries.to(dtype)], dim=1)
        mask = torch.cat(
            [
                text_mask.new_ones(batch, prefix.shape[1]),
                text_mask,
                text_mask.new_ones(batch, self.action_chunk),
            ],
            dim=1,
        )
        # pads take no position: a row's positions are the same however it is padded
        position_ids = (mask.cumsum(-1) - 1).clamp(min=0)
        out = self.backbone.base_model(
            inputs_embeds=embeds,
            attention_mask=mask,
            position_ids=position_ids,
            use_cache=False,
        )
        return out[0].float(), mask

    def _action_mean(self, hidden: torch.Tensor) -> torch.Tensor:
        """Action means ``[B, action_chunk * action_dim]`` from the query positions."""
        chunk = self.action_head(hidden[:, -self.action_chunk :])
        return chunk.reshape(hidden.shape[0], self.action_chunk * self.action_dim)

    def _values(self, hidden: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """Values [B] from the mean of the hidden states over the real tokens."""
        weights = mask.to(hidden.dtype).unsqueeze(-1)
        pooled = (hidden * weights).sum(1) / weights.sum(1).clamp(min=1.0)
        return self.value_head(pooled).squeeze(-1)

    # -- contract ------------------------------------------------------------------------
    @torch.no_grad()
    def predict_action_batch(
        self,
        env_obs: dict[str, Any],
        mode: str = "train",
        compute_values: bool = True,
        generator: torch.Generator | None = None,
        **kwargs: Any,
    ) -> tuple[np.ndarray, dict[str, Any]]:
        """See :meth:`BasePolicy.predict_action_batch`; ``generator`` drives sampling.

        Returns:
            Env actions ``[B, action_chunk * action_dim]`` and the result dict.
        """
        inputs = self._obs_inputs(env_obs)
        hidden, mask = self._hidden_states(inputs)
        return self._act(
            self._action_mean(hidden),
            mode,
            generator,
            inputs,
            lambda: self._values(hidden, mask),
            compute_values,
        )

    def default_forward(
        self,
        forward_inputs: dict[str, torch.Tensor],
        compute_values: bool = True,
        compute_entropy: bool = True,
        **kwargs: Any,
    ) -> dict[str, torch.Tensor]:
        """Recompute logprobs/values/entropy for cached images, tokens and model actions."""
        hidden, mask = self._hidden_states(forward_inputs)
        return self._score(
            self._action_mean(hidden),
            forward_inputs["model_action"],
            lambda: self._values(hidden, mask),
            compute_values,
            compute_entropy,
        )

    def value_forward(self, env_obs: dict[str, Any], **kwargs: Any) -> torch.Tensor:
        """Critic values [B] of raw observations (instructions tokenized here)."""
        hidden, mask = self._hidden_states(self._obs_inputs(env_obs))
        return self._values(hidden, mask)

    def demo_forward_inputs(self, env_obs: dict[str, Any], actions: Any) -> dict[str, torch.Tensor]:
        """The observations' inputs and the model action of the demonstrated env ``actions``.

        ``actions`` are the env's flat chunks ``[B, action_chunk * action_dim]``; see
        :meth:`BasePolicy.demo_forward_inputs`.
        """
        inputs = self._obs_inputs(env_obs)
        return {**inputs, "model_action": self._from_env_action(actions, policy_device(self))}


def load_backbone(model_cfg: Any) -> tuple[nn.Module, Any]:
    """The causal LM and tokenizer of ``model.model_path`` (local files only, no pickles).

    Raises:
        ValueError: No ``model_path``, or it is not a local Hugging Face model directory.
    """
    from rl_core.models.causal_lm import load_causal_lm

    return load_causal_lm(model_cfg)


def build_vla_oft(cfg: Any, spaces: Any) -> VLAOFTPolicy:
    """Builder registered as ``vla_oft`` (imports transformers only when called).

    Raises:
        ValueError: No usable ``model.model_path``, no ``main_images`` in the observation
            space, a non-Box action space, an ``action_chunk`` that does not divide it, or
            a sequence longer than the backbone's ``max_position_embeddings``.
    """
    spec = pixel_observation_spec(spaces.observation_space, MODEL_TYPE)
    backbone, tokenizer = load_backbone(cfg)
    policy = VLAOFTPolicy(
        backbone=backbone,
        tokenizer=tokenizer,
        spec=spec,
        action_space=spaces.action_space,
        action_chunk=int(cfg.action_chunk),
        cnn_channels=list(cfg.cnn_channels),
        cnn_feature_dim=int(cfg.cnn_feature_dim),
        num_image_tokens=int(cfg.num_image_tokens),
        max_instruction_tokens=int(cfg.max_instruction_tokens),
        hidden_sizes=list(cfg.hidden_sizes),
        activation=cfg.activation,
        continuous_action=cfg.continuous_action,
        init_log_std=cfg.init_log_std,
    )
    limit = getattr(backbone.config, "max_position_embeddings", None)
    if limit is not None and policy.sequence_length > int(limit):
        raise ValueError(
            f"{MODEL_TYPE}: the sequence of {policy.sequence_length} tokens (num_image_tokens, "
            "state token, max_instruction_tokens, action_chunk) is longer than the backbone's "
            f"max_position_embeddings ({limit})"
        )
    return policy


register_model(MODEL_TYPE, build_vla_oft, category="embodied")
