"""LoRA adapters of the vLLM rollout engine: one folder and one ``LoRARequest`` per version.

vLLM applies LoRA adapters per request (``LoRARequest``) and loads each from a folder in
PEFT's format. A weight sync of a LoRA run carries the adapters alone (PEFT's in-memory
names, ``...q_proj.lora_A.default.weight``); :class:`VLLMAdapters` writes them as a PEFT
folder (``adapter_model.safetensors`` with the saved names, ``...q_proj.lora_A.weight``,
and ``adapter_config.json``) and hands out the request of the loaded version. The last few
versions stay available, so a rollout worker in async mode can generate with the version
an in-flight batch was launched with.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from collections import OrderedDict
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import save_file

from rl_core.models.lora import is_adapter_name

#: vLLM's accepted ``max_lora_rank`` values (an adapter of a lower rank fits a larger one).
VLLM_LORA_RANKS = (8, 16, 32, 64, 128, 256, 320, 512)
#: PEFT's in-memory adapter name, dropped in saved adapter files.
_ADAPTER_NAME = ".default"


def engine_lora_kwargs(lora_cfg: Any, versions_kept: int) -> dict[str, Any]:
    """Keyword arguments of ``vllm.LLM`` that turn LoRA on for ``actor.lora``.

    Raises:
        ValueError: The rank is above what vLLM serves.
    """
    rank = int(lora_cfg.rank)
    fitting = [r for r in VLLM_LORA_RANKS if r >= rank]
    if not fitting:
        raise ValueError(
            f"actor.lora.rank = {rank}: vLLM serves LoRA adapters up to rank "
            f"{VLLM_LORA_RANKS[-1]} (allowed: 1 to {VLLM_LORA_RANKS[-1]} with rollout.engine: "
            "vllm)"
        )
    return {
        "enable_lora": True,
        "max_lora_rank": fitting[0],
        "max_loras": 1,  # one adapter per generate call
        "max_cpu_loras": max(2, versions_kept),
    }


def saved_name(name: str) -> str:
    """A PEFT adapter tensor's name as PEFT saves it (the adapter's own name dropped)."""
    return name.replace(f"{_ADAPTER_NAME}.weight", ".weight")


def target_modules(names: Iterable[str]) -> list[str]:
    """The adapted modules' last name parts (``q_proj``, ...) from adapter tensor names."""
    return sorted({n.split(".lora_")[0].rsplit(".", 1)[-1] for n in names if is_adapter_name(n)})


class VLLMAdapters:
    """The adapter versions a vLLM engine can generate with.

    Args:
        lora_cfg: The ``actor.lora`` section.
        base_path: The base model's folder (recorded in each adapter's config).
        request_class: ``vllm.lora.request.LoRARequest``.
        keep: Versions kept loadable (older folders are removed).
    """

    def __init__(self, lora_cfg: Any, base_path: str, request_class: Any, keep: int = 2) -> None:
        self.cfg, self.base_path, self.request_class = lora_cfg, base_path, request_class
        self.keep = max(1, keep)
        self.root = Path(tempfile.mkdtemp(prefix="rlpipe-vllm-lora-"))
        self.requests: OrderedDict[int, Any] = OrderedDict()
        self.current: Any = None

    def load(self, named: Iterable[tuple[str, torch.Tensor]], version: int) -> None:
        """Make ``version``'s adapters current (written to a folder the first time).

        Raises:
            ValueError: ``named`` holds no adapter tensor (not a LoRA sync).
        """
        if version in self.requests:
            self.requests.move_to_end(version)
            self.current = self.requests[version]
            return
        tensors = {
            saved_name(n): t.detach().cpu().contiguous() for n, t in named if is_adapter_name(n)
        }
        if not tensors:
            raise ValueError(
                f"weight version {version} carries no LoRA adapter tensors; the trainer "
                "and the vLLM engine disagree about actor.lora"
            )
        folder = self.root / f"v{version}"
        folder.mkdir()
        save_file(tensors, str(folder / "adapter_model.safetensors"))
        (folder / "adapter_config.json").write_text(json.dumps(self._config(tensors)))
        # vLLM caches adapters by id: every version gets its own (ids must be positive)
        request = self.request_class(f"rlpipe-v{version}", version + 1, str(folder))
        self.requests[version] = self.current = request
        while len(self.requests) > self.keep:
            old, _ = self.requests.popitem(last=False)
            shutil.rmtree(self.root / f"v{old}", ignore_errors=True)

    def _config(self, tensors: dict[str, torch.Tensor]) -> dict[str, Any]:
        return {
            "peft_type": "LORA",
            "task_type": "CAUSAL_LM",
            "base_model_name_or_path": self.base_path,
            "r": int(self.cfg.rank),
            "lora_alpha": float(self.cfg.alpha),
            "lora_dropout": 0.0,
            "target_modules": target_modules(tensors),
            "bias": "none",
            "fan_in_fan_out": False,
            "modules_to_save": None,
        }

    def close(self) -> None:
        """Remove the adapter folders."""
        shutil.rmtree(self.root, ignore_errors=True)
