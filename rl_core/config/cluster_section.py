"""The ``cluster`` config section: the Ray cluster and where each component runs.

``component_placement`` maps components to indices, RLinf's way (``actor,rollout: 0-7``):
the indices are GPUs when the run is placed on GPUs (``device: cuda``, or ``auto`` on a
cluster that has GPUs) and CPUs otherwise. GPU indices count across nodes: with
``num_gpus_per_node: 8``, index 9 is the second GPU of the second node.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator, model_validator

from rl_core.config.limits import MAX_CPUS, MAX_GPUS_PER_NODE, MAX_NODES
from rl_core.config.placement import (
    GPU_COMPONENTS,
    component_specs,
    parse_component_placement,
    parse_cpu_set,
)
from rl_core.config.sections import Section


class ClusterConfig(Section):
    """Ray connection, the cluster's shape and component placement."""

    address: str | None = Field(
        None, description="Ray address; None uses RAY_ADDRESS or starts a local cluster."
    )
    num_cpus: int | None = Field(
        None, ge=1, le=MAX_CPUS, description="CPUs of the local cluster (default: all)."
    )
    component_placement: dict[str, str | int] = Field(
        default_factory=lambda: {"env,rollout,actor": "all"},
        description="RLinf syntax: component list -> index set ('0-3', '0,2', '1', 'all'); "
        "indices are GPUs when the run is placed on GPUs (see device), CPUs otherwise. "
        "Components sharing a set are collocated, disjoint sets disaggregated.",
    )
    device: Literal["auto", "cuda", "cpu"] = Field(
        "auto",
        description="Where GPU-capable workers (trainer, rollout, reference) run and what "
        "placement indices mean: 'cuda' = GPUs (the cluster must have them), 'cpu' = CPUs "
        "(no GPU is reserved), 'auto' = GPUs when the Ray cluster has any.",
    )
    num_nodes: int = Field(
        1,
        ge=1,
        le=MAX_NODES,
        description="Nodes the placement spans (GPU placement); more than one needs a Ray "
        "cluster with that many GPU nodes (cluster.address).",
    )
    num_gpus_per_node: int | None = Field(
        None,
        ge=0,
        le=MAX_GPUS_PER_NODE,
        description="GPUs of each node; None: what Ray detects. A local cluster started by "
        "the run announces this many GPUs.",
    )
    gpus_per_worker: dict[str, float] = Field(
        default_factory=dict,
        description="GPU placement: GPUs each worker of a component reserves (0 to 1; "
        "fractions let processes share a GPU). Default: trainer, rollout and reference "
        "workers split each GPU evenly among the workers placed on it; env workers take none.",
    )

    hybrid_engine: Literal["auto", "on", "off"] = Field(
        "auto",
        description="Rollout engine (and reference model) inside the trainer workers' "
        "processes, weight sync in memory: 'auto' when rollout and actor share their "
        "placement set and worker count, 'on' requires it, 'off' keeps separate rollout workers.",
    )

    @field_validator("hybrid_engine", mode="before")
    @classmethod
    def _yaml_on_off(cls, value: object) -> object:
        # YAML reads a bare on/off as a boolean
        return {True: "on", False: "off"}.get(value, value) if isinstance(value, bool) else value

    @field_validator("component_placement")
    @classmethod
    def _placement_parses(cls, value: dict[str, str | int]) -> dict[str, str | int]:
        probe = {k: (0 if v == "all" else v) for k, v in value.items()}
        parse_component_placement(probe)
        return value

    @field_validator("gpus_per_worker")
    @classmethod
    def _gpu_shares(cls, value: dict[str, float]) -> dict[str, float]:
        for name, share in value.items():
            if name not in GPU_COMPONENTS:
                raise ValueError(
                    f"unknown component {name!r}; allowed: {', '.join(GPU_COMPONENTS)}"
                )
            if not 0.0 <= share <= 1.0:
                raise ValueError(
                    f"{name}: {share} GPUs per worker; allowed 0 to 1 (each worker uses one "
                    "device; fractions share a GPU)"
                )
        return value

    @model_validator(mode="after")
    def _gpu_indices_exist(self) -> ClusterConfig:
        per_node = self.num_gpus_per_node
        if self.device == "cuda" and per_node == 0:
            raise ValueError(
                "cluster.device = 'cuda' but cluster.num_gpus_per_node = 0 (allowed: a "
                "positive count, None to detect, or device 'cpu'/'auto')"
            )
        if self.device != "cuda" or per_node is None:
            return self
        total = self.num_nodes * per_node
        for name, spec in component_specs(self.component_placement).items():
            if spec == "all":
                continue
            bad = [i for i in parse_cpu_set(spec) if i >= total]
            if bad:
                raise ValueError(
                    f"cluster.component_placement.{name} uses GPU {bad[0]} but the cluster has "
                    f"{total} GPUs ({self.num_nodes} node(s) x {per_node}; allowed 0-{total - 1})"
                )
        return self
