"""The megatron-core trainer backend (``actor.backend: megatron``).

Each trainer rank holds its tensor-parallel shard of a megatron ``GPTModel`` built from the
Hugging Face model at ``model.model_path`` (:mod:`rl_core.models.megatron`). Ranks are
ordered tensor-parallel first: rank ``r`` is tensor-parallel rank ``r % TP`` of replica
``r // TP``.

Checkpoints are torch.distributed.checkpoint folders (signed metadata, see
:mod:`infra.checkpoint.signed_dcp`) holding every tensor-parallel rank's model and
optimizer shards under ``tp<rank>/…`` keys; data-parallel replicas hold the same shards and
DCP writes them once. A checkpoint written at another tensor-parallel size is resharded
exactly through the Hugging Face layout: the optimizer's moments follow their parameters.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import torch

from infra.checkpoint import signed_dcp
from infra.checkpoint.store import CheckpointError
from infra.llm import distributed
from infra.llm.trainer_backend_base import TrainerBackend
from rl_core.config import RLPipeConfig
from rl_core.models import get_model
from rl_core.models.megatron.config import (
    HFShape,
    MegatronBridgeError,
    kv_copies,
    padded_vocab_size,
    tensor_parallel_problems,
)
from rl_core.models.megatron.gpt import build_gpt_model
from rl_core.models.megatron.policy import MegatronCausalLM, kv_copy_group
from rl_core.models.megatron.weights import hf_to_megatron, reshard

logger = logging.getLogger(__name__)
Tensors = dict[str, torch.Tensor]
#: Optimizer state entries that are one number per parameter, not a tensor of its shape.
_SCALAR_STATE = ("step",)


class MegatronBackend(TrainerBackend):
    """Tensor × data parallelism with megatron-core (pipeline size 1).

    The Hugging Face weights are read when the worker starts; the megatron model is built
    in :meth:`setup`, once megatron's process groups exist.
    """

    name = "megatron"

    def __init__(self, cfg: RLPipeConfig, rank: int, world_size: int, device: torch.device) -> None:
        super().__init__(cfg, rank, world_size, device)
        hf = get_model(cfg.model, None).pretrained_model()
        self.shape = HFShape.from_hf(hf.config)
        self.tp = cfg.actor.megatron.tensor_model_parallel_size
        problems = tensor_parallel_problems(self.shape, self.tp)
        if problems:
            raise MegatronBridgeError(
                f"model.model_path = {cfg.model.model_path!r}: " + "; ".join(problems)
            )
        self._initial: Tensors | None = {k: v.detach() for k, v in hf.state_dict().items()}
        self.padded_vocab = padded_vocab_size(self.shape.vocab_size, self.tp)
        self.tp_rank = rank % self.tp

    def setup(self, address: str) -> str:
        """Join the process group, create megatron's groups, build the model shards.

        Raises:
            MegatronBridgeError: Sequence parallelism without CUDA.
        """
        from megatron.core import parallel_state

        mega = self.cfg.actor.megatron
        if mega.sequence_parallel and self.device.type != "cuda":
            raise MegatronBridgeError(
                "actor.megatron.sequence_parallel = true needs CUDA (megatron's sequence-"
                "parallel collectives allocate on the GPU); set it to false on CPU"
            )
        distributed.init_process_group("auto", self.rank, self.world_size, address, self.device)
        if not parallel_state.model_parallel_is_initialized():
            parallel_state.initialize_model_parallel(tensor_model_parallel_size=self.tp)
        if parallel_state.get_tensor_model_parallel_rank() != self.tp_rank:
            raise RuntimeError("megatron's rank order is not tensor-parallel first")
        if self.device.type == "cuda":
            # megatron builds its layers inside its CUDA RNG tracker's fork: seed it
            # (from the run seed, so every rank's initialisation is reproducible)
            from megatron.core.tensor_parallel import model_parallel_cuda_manual_seed

            model_parallel_cuda_manual_seed(int(self.cfg.run.seed))
        self.kv_group = kv_copy_group(self.tp, kv_copies(self.shape, self.tp))
        self.policy = self._build(self._initial)
        if self.cfg.algorithm.kl_coef > 0:  # the reference follows the trainer's layout
            self.reference = self._build(self._initial).eval().requires_grad_(False)
        self._initial = None
        return (
            f"{self.world_size} megatron rank(s): tensor parallel {self.tp} x data parallel "
            f"{self.data_parallel_size}"
        )

    def _build(self, hf_state: Tensors) -> MegatronCausalLM:
        from megatron.core import parallel_state

        mega = self.cfg.actor.megatron
        model = build_gpt_model(
            self.shape,
            self.tp,
            mega.sequence_parallel,
            mega.precision,
            cpu_attention=self.device.type != "cuda",
        )
        shard = hf_to_megatron(hf_state, self.shape, self.tp, self.tp_rank, self.padded_vocab)
        missing, unexpected = model.load_state_dict(shard, strict=False)
        missing = [k for k in missing if not k.endswith("_extra_state")]
        if missing or unexpected:
            raise MegatronBridgeError(
                f"the converted weights do not fit the megatron model (missing {missing[:3]}, "
                f"unexpected {unexpected[:3]})"
            )
        return MegatronCausalLM(
            model.to(self.device),
            self.shape,
            parallel_state.get_tensor_model_parallel_group(),
            self.tp_rank,
            parallel_state.get_data_parallel_group(),
            self.kv_group,
        )

    def rollout_state(self, every_rank: bool) -> Tensors:
        """The whole model under Hugging Face names (gathered over the tensor-parallel group)."""
        state = self.policy.hf_state_dict()
        return state if every_rank or self.rank == 0 else {}

    def policy_state(self) -> Tensors:
        """The Hugging Face policy's state dict (``model.`` + HF names) on rank 0."""
        state = self.policy.hf_state_dict()
        if self.rank != 0:
            return {}
        return {f"model.{k}": v.cpu() for k, v in state.items()}

    # -- checkpoints ---------------------------------------------------------------------
    def _shard_state(self) -> Tensors:
        return {
            k: v for k, v in self.policy.model.state_dict().items() if isinstance(v, torch.Tensor)
        }

    def _named_params(self) -> list[tuple[str, torch.nn.Parameter]]:
        return list(self.policy.model.named_parameters())

    def _moments(self, optimizer: torch.optim.Optimizer) -> dict[str, Tensors]:
        """Optimizer state as ``{entry: {parameter name: tensor}}`` (e.g. ``exp_avg``)."""
        out: dict[str, Tensors] = {}
        for name, param in self._named_params():
            for entry, value in optimizer.state.get(param, {}).items():
                if isinstance(value, torch.Tensor):
                    out.setdefault(entry, {})[name] = value
        return out

    def save_sharded(self, optimizer: torch.optim.Optimizer, path: Path) -> dict[str, Any]:
        """This rank's model and optimizer shards under ``tp<rank>/`` keys (collective)."""
        prefix = f"tp{self.tp_rank}"
        moments = self._moments(optimizer)
        state = {
            "model": {f"{prefix}/{k}": v for k, v in self._shard_state().items()},
            "optim": {
                f"{prefix}/{entry}/{name}": value
                for entry, named in moments.items()
                for name, value in named.items()
            },
        }
        signed_dcp.save(state, path)
        return {
            "backend": self.name,
            "tensor_parallel_size": self.tp,
            "optimizer_entries": sorted(moments),
        }

    def load_sharded(
        self, optimizer: torch.optim.Optimizer, path: Path, saved: dict[str, Any], trust: bool
    ) -> None:
        """Restore this rank's shards, resharding from another tensor-parallel size.

        Raises:
            CheckpointError: The checkpoint was written by another backend.
        """
        self.check_writer(saved)
        old_tp, entries = int(saved["tensor_parallel_size"]), list(saved["optimizer_entries"])
        ranks = [self.tp_rank] if old_tp == self.tp else list(range(old_tp))
        templates = self._templates(old_tp, ranks)
        names = self._param_names
        state = {
            "model": {f"tp{r}/{k}": v for r in ranks for k, v in templates[r].items()},
            "optim": {
                f"tp{r}/{entry}/{name}": _optimizer_template(entry, tensor)
                for r in ranks
                for entry in entries
                for name, tensor in templates[r].items()
                if name in names
            },
        }
        signed_dcp.load(state, path, trust)

        def per_rank(flat: Tensors, key: str = "") -> list[Tensors]:
            return [
                {k.split("/", 2)[-1]: v for k, v in flat.items() if k.startswith(f"tp{r}/{key}")}
                for r in ranks
            ]

        model = per_rank(state["model"])
        moments = {entry: per_rank(state["optim"], f"{entry}/") for entry in entries}
        if old_tp != self.tp:
            model = [self._reshard(model)]
            moments = {
                entry: [
                    self._reshard(parts) if entry not in _SCALAR_STATE else _scalars(parts, names)
                ]
                for entry, parts in moments.items()
            }
            logger.info("resharded the checkpoint from tensor parallel %d to %d", old_tp, self.tp)
        with torch.no_grad():
            own = self.policy.model.state_dict()
            for name, tensor in model[0].items():
                own[name].copy_(tensor)
        optimizer.state.clear()
        for name, param in self._named_params():
            optimizer.state[param] = {
                entry: parts[0][name].to(param.device)
                if entry not in _SCALAR_STATE
                else parts[0][name]
                for entry, parts in moments.items()
            }

    @property
    def _param_names(self) -> set[str]:
        return {name for name, _ in self._named_params()}

    def _templates(self, old_tp: int, ranks: list[int]) -> dict[int, Tensors]:
        """Tensors shaped like the shards of ``ranks`` at tensor-parallel size ``old_tp``."""
        if old_tp == self.tp:
            return {self.tp_rank: {k: v.detach().clone() for k, v in self._shard_state().items()}}
        hf = self.policy.hf_state_dict()  # any values: only the shapes are read
        padded = padded_vocab_size(self.shape.vocab_size, old_tp)
        return {r: hf_to_megatron(hf, self.shape, old_tp, r, padded) for r in ranks}

    def _reshard(self, parts: list[Tensors]) -> Tensors:
        return reshard(parts, self.shape, self.tp, self.padded_vocab)[self.tp_rank]


def _optimizer_template(entry: str, like: torch.Tensor) -> torch.Tensor:
    if entry in _SCALAR_STATE:
        return torch.zeros((), dtype=torch.float32)
    return torch.zeros_like(like)


def _scalars(parts: list[Tensors], names: set[str]) -> Tensors:
    """Per-parameter scalars (Adam's step) after resharding: every parameter has the same."""
    values = {float(v) for part in parts for v in part.values()}
    if len(values) != 1:
        raise CheckpointError(f"optimizer steps differ across parameters ({sorted(values)})")
    value = next(iter(parts[0].values()))
    return {name: value.clone() for name in names}
