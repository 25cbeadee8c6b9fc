"""Which trainer ranks share rows: tensor-parallel peers are one data-parallel replica.

Ranks are ordered tensor-parallel first (megatron's order): rank ``r`` is tensor-parallel
rank ``r % tp`` of replica ``r // tp``. Every rank of a replica gets the same rows and
returns the same results, so a driver sends one shard per replica and reads one answer.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeVar

T = TypeVar("T")


@dataclass(frozen=True)
class ParallelLayout:
    """``world`` trainer ranks split into replicas of ``tensor_parallel`` ranks.

    Attributes:
        world: Trainer ranks.
        tensor_parallel: Ranks per replica (1: plain data parallelism).
    """

    world: int
    tensor_parallel: int = 1

    def __post_init__(self) -> None:
        if self.tensor_parallel < 1 or self.world % self.tensor_parallel:
            raise ValueError(
                f"{self.world} trainer ranks do not split into replicas of "
                f"{self.tensor_parallel} tensor-parallel ranks"
            )

    @property
    def replicas(self) -> int:
        """Data-parallel size."""
        return self.world // self.tensor_parallel

    def replica_of(self, rank: int) -> int:
        """The data-parallel rank of trainer rank ``rank``."""
        return rank // self.tensor_parallel

    def per_rank(self, per_replica: Sequence[T]) -> list[T]:
        """One item per rank from one per replica (tensor-parallel peers share it)."""
        if len(per_replica) != self.replicas:
            raise ValueError(f"got {len(per_replica)} items for {self.replicas} replicas")
        return [per_replica[self.replica_of(r)] for r in range(self.world)]

    def per_replica(self, per_rank: Sequence[T]) -> list[T]:
        """The first rank's item of each replica (the answers of its peers are the same)."""
        if len(per_rank) != self.world:
            raise ValueError(f"got {len(per_rank)} items for {self.world} ranks")
        return list(per_rank[:: self.tensor_parallel])
