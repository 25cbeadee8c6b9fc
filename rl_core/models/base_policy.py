"""The policy contract shared by rollout and training (RLinf's ``BasePolicy``).

Rollout calls :meth:`BasePolicy.predict_action_batch` with env observations and gets back
actions the env can execute as they are, plus what training needs later
(``prev_logprobs``, ``prev_values``, ``forward_inputs``). Training calls
``forward(forward_type="default_forward", forward_inputs=...)`` to recompute log-probs,
values and entropy from the cached ``forward_inputs``.

Observation keys (``env_obs``): ``states`` [B, D] float32, ``main_images`` [B, H, W, C]
uint8, ``wrist_images`` [B, H, W, C] uint8, ``extra_view_images`` [B, V, H, W, C] uint8,
``task_descriptions`` list[str] of length B. A policy reads the keys it needs; envs with a
``Dict`` observation space pass their own keys through unchanged. ``docs/extending.md``
has the whole contract.

Devices: a worker moves its policy to the device Ray assigned it (a GPU, or the CPU) with
``policy.to(device)`` before it builds optimizers; the policy's parameters say where it
runs (:func:`policy_device`). Around that:

- ``env_obs`` arrives as numpy arrays (or CPU tensors) in :meth:`BasePolicy.predict_action_batch`
  and :meth:`BasePolicy.value_forward`: the policy puts what it reads on its own device,
  once, where it reads it (:func:`flat_states` for ``states``, :func:`obs_tensor` for any
  other key, both given ``policy_device(self)``);
- the actions it returns are CPU numpy arrays (``.cpu().numpy()``); ``result`` tensors may
  stay on the device (workers convert them with ``to_numpy_tree``);
- ``forward_inputs`` reach :meth:`BasePolicy.default_forward` (and the tensors of other
  forward types reach them) already on the policy's device: the trainers move batches;
- the ``generator`` workers pass is a CPU ``torch.Generator``: draw on its device and move
  the result (:mod:`rl_core.models.sampling_noise`), so a run's actions depend on its
  seed, not on where the policy runs.

Nothing outside the policy branches on the model type: workers only call these methods.
"""

from __future__ import annotations

import abc
from typing import Any, ClassVar

import numpy as np
import torch
from torch import nn


class BasePolicy(nn.Module, abc.ABC):
    """Base class of every rlpipe policy."""

    #: Names accepted by :meth:`forward`'s ``forward_type``.
    forward_types: tuple[str, ...] = ("default_forward", "value_forward")

    #: How the checkpoint converter writes the weights of a standalone model directory:
    #: ``"state_dict"`` (``model.safetensors`` of :meth:`state_dict`) or ``"hf_pretrained"``
    #: (the Hugging Face model of :meth:`pretrained_model` saved with ``save_pretrained``,
    #: plus :meth:`pretrained_tokenizer`). Formats are registered in
    #: ``infra.checkpoint.export``.
    export_format: ClassVar[str] = "state_dict"

    def forward(self, forward_type: str = "default_forward", **kwargs: Any) -> Any:
        """Dispatch to the branch named by ``forward_type``.

        Args:
            forward_type: One of :attr:`forward_types` (``default_forward`` recomputes
                logprobs/values/entropy; ``value_forward`` returns values for
                observations).
            **kwargs: Passed to the branch.

        Raises:
            ValueError: ``forward_type`` is not one this policy offers.
        """
        if forward_type not in self.forward_types:
            raise ValueError(
                f"{type(self).__name__} has no forward_type {forward_type!r}; "
                f"allowed: {', '.join(self.forward_types)}"
            )
        return getattr(self, forward_type)(**kwargs)

    @abc.abstractmethod
    def default_forward(
        self,
        forward_inputs: dict[str, torch.Tensor],
        compute_values: bool = True,
        compute_entropy: bool = True,
        **kwargs: Any,
    ) -> dict[str, torch.Tensor]:
        """Recompute ``logprobs`` [B], ``values`` [B] and ``entropy`` [B] for cached inputs."""

    @abc.abstractmethod
    def predict_action_batch(
        self,
        env_obs: dict[str, Any],
        mode: str = "train",
        compute_values: bool = True,
        **kwargs: Any,
    ) -> tuple[Any, dict[str, Any]]:
        """Choose actions for a batch of observations.

        Args:
            env_obs: Observation dict (see module docstring).
            mode: ``"train"`` samples; ``"eval"`` acts deterministically.
            compute_values: Also return critic values.
            **kwargs: Policy-specific options (e.g. a ``generator`` for sampling).

        Returns:
            ``(actions, result)``: ``actions`` is a numpy array the env executes directly;
            ``result`` holds ``prev_logprobs`` [B], ``prev_values`` [B] (or None) and
            ``forward_inputs`` (dict of tensors with batch dim first).
        """

    def value_forward(self, env_obs: dict[str, Any], **kwargs: Any) -> torch.Tensor:
        """Critic values [B] for observations (policies without a critic raise)."""
        raise NotImplementedError(f"{type(self).__name__} has no value head")

    def demo_forward_inputs(self, env_obs: dict[str, Any], actions: Any) -> dict[str, torch.Tensor]:
        """The ``forward_inputs`` under which :meth:`default_forward` scores demonstrations.

        Optional; behaviour cloning needs it: ``default_forward(demo_forward_inputs(obs,
        actions))["logprobs"]`` is the log-probability of the demonstrated env ``actions``,
        so a BC loss is ``-logprobs.mean()`` (:mod:`rl_core.training.behaviour_cloning`).
        A policy maps env actions back to its own model actions (a Gaussian clipped to the
        bounds: the action itself; a tanh-squashed one: the inverse squash).

        Args:
            env_obs: Observations as :meth:`predict_action_batch` gets them (batch ``B``).
            actions: The demonstrated env actions ``[B, ...]`` (numpy or tensor).

        Returns:
            Tensors on the policy's device, with the keys of the ``forward_inputs`` that
            :meth:`predict_action_batch` returns.

        Raises:
            NotImplementedError: The policy cannot be trained from demonstrations.
        """
        raise NotImplementedError(
            f"{type(self).__name__} does not implement demo_forward_inputs, so it cannot be "
            "trained from demonstrations (behaviour cloning); implement "
            f"{type(self).__name__}.demo_forward_inputs(env_obs, actions) to return the "
            "forward_inputs under which default_forward gives the log-prob of the actions"
        )

    def pretrained_model(self) -> Any:
        """The wrapped Hugging Face ``PreTrainedModel`` (``export_format = "hf_pretrained"``)."""
        raise NotImplementedError(f"{type(self).__name__} wraps no Hugging Face model")

    def pretrained_tokenizer(self) -> Any:
        """The tokenizer saved next to :meth:`pretrained_model` (None if there is none)."""
        return None


def policy_device(module: nn.Module) -> torch.device:
    """The device a policy runs on: its first parameter's (or buffer's), else the CPU."""
    for tensor in module.parameters():
        return tensor.device
    for tensor in module.buffers():
        return tensor.device
    return torch.device("cpu")


def obs_tensor(
    value: Any, device: torch.device | None = None, dtype: torch.dtype | None = None
) -> torch.Tensor:
    """An observation (numpy array, nested list or tensor) as a tensor on ``device``.

    Arrays from Ray's object store are read-only; torch gets a writable copy (made on
    ``device`` directly). A tensor is cast and moved only where it differs.

    Args:
        value: The observation array.
        device: Where the tensor goes (None: the CPU for arrays, where it is for tensors).
        dtype: Cast to this dtype (None keeps it).
    """
    if isinstance(value, torch.Tensor):
        return value.to(device=device, dtype=dtype)
    return torch.tensor(np.asarray(value), dtype=dtype, device=device)


def flat_states(env_obs: dict[str, Any], device: torch.device | None = None) -> torch.Tensor:
    """``env_obs["states"]`` as a float32 tensor on ``device`` (see :func:`obs_tensor`).

    Args:
        env_obs: Observation dict with a ``states`` entry.
        device: The policy's device (``policy_device(self)``; None: the CPU for arrays).
    """
    return obs_tensor(env_obs["states"], device, torch.float32)
