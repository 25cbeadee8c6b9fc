"""The rollout worker of a reasoning run: a rollout engine that generates responses.

It takes weight-sync payloads from the trainer (full or patch) and, in async mode, keeps
the weights of the last versions, generates with a pinned version and continues partial
rollouts (:mod:`kinds.reasoning.pipelined_generation`).
"""

from __future__ import annotations

import contextlib
import time
from collections import OrderedDict
from collections.abc import Iterator
from typing import Any

import numpy as np
import torch

from infra.cluster.dispatch import Split, worker_method
from infra.cluster.worker_base import Stopwatch, WorkerBase, step_method
from infra.llm.engines import make_engine
from infra.weight_sync import StaleWeightsError, buckets_to_state_dict, from_wire
from kinds.reasoning.agent_rollout import run_agents
from kinds.reasoning.config import ReasoningConfig
from rl_core.llm.generation import SamplingParams

#: Per-response lists a partial rollout extends, segment by segment.
SEGMENT_KEYS = ("response_ids", "logprobs", "finished", "versions")


def generate_responses(
    engine: Any, prompt_ids: list[list[int]], sampling: dict[str, Any], seed: int | None
) -> dict[str, Any]:
    """``engine``'s responses, token log-probs and finished flags, with the seconds taken."""
    watch, started = Stopwatch(), time.time()
    out = engine.generate(prompt_ids, SamplingParams(**sampling), seed)
    return {
        "response_ids": out.response_ids,
        "logprobs": out.logprobs,
        "finished": out.finished,
        "seconds": watch.elapsed(),
        "started_at": started,
        "finished_at": time.time(),
    }


class LLMRolloutWorker(WorkerBase[ReasoningConfig]):
    """Holds a rollout engine; generates responses and takes weight-sync payloads.

    In async mode (``run.mode: async``) it also keeps the weights of the last
    ``algorithm.max_staleness + 1`` versions, so that a batch launched again after a failure
    is generated with the version it was first launched with.
    """

    group = "rollout"

    def __init__(self, config: dict[str, Any], rank: int, cpus: tuple[int, ...]) -> None:
        super().__init__(config, rank, cpus)
        self.engine = make_engine(
            self.cfg.rollout.engine,
            self.cfg.model,
            self.cfg.rollout,
            self.device,
            lora=self.cfg.lora_adapters(),
        )
        self.shadow: dict[str, torch.Tensor] = {}  # patch mode: the weights as synced
        self.version: int | None = None
        asynchronous = self.cfg.run.mode == "async"
        self.versions_kept = self.cfg.algorithm.max_staleness + 1 if asynchronous else 0
        self.kept: OrderedDict[int, dict[str, torch.Tensor]] = OrderedDict()

    def load_weights(self, payload: dict[str, Any]) -> int:
        """Apply a full or patch payload from the trainer; returns the new version."""
        named: dict[str, torch.Tensor] = {}
        if payload["mode"] == "full":
            named = buckets_to_state_dict(payload["buckets"])
            if self.cfg.rollout.weight_sync_mode == "patch":
                self.shadow = {k: v.clone() for k, v in named.items()}
            self.engine.update_weights(named.items(), payload["version"])
        else:
            if payload["base_version"] != self.version:
                raise StaleWeightsError(
                    f"patch based on version {payload['base_version']}, rollout worker "
                    f"{self.rank} holds {self.version}"
                )
            changed = []
            for bucket in payload["buckets"]:
                for name, entry in bucket.items():
                    flat = self.shadow[name].view(-1)
                    index = torch.from_numpy(np.array(entry["index"], copy=True))
                    flat[index] = from_wire(entry["values"]).to(flat.dtype)
                    changed.append(name)
            names = self.shadow if self.engine.full_updates_only else changed
            self.engine.update_weights(((n, self.shadow[n]) for n in names), payload["version"])
        self.version = int(payload["version"])
        if self.versions_kept:
            # a full payload's tensors are fresh copies; the patch shadow changes in place
            self._keep(self.version, named or {k: v.clone() for k, v in self.shadow.items()})
        return self.version

    def _keep(self, version: int, weights: dict[str, torch.Tensor]) -> None:
        self.kept[version] = weights
        self.kept.move_to_end(version)
        while len(self.kept) > self.versions_kept:
            self.kept.popitem(last=False)

    @worker_method(split=Split.ROWS)
    @step_method
    def generate(
        self,
        prompt_ids: list[list[int]],
        sampling: dict[str, Any],
        seed: int | None,
        version: int | None = None,
    ) -> dict[str, Any]:
        """Responses, token log-probs and finished flags for ``prompt_ids``.

        Args:
            prompt_ids: Token ids of each prompt.
            sampling: ``SamplingParams`` fields.
            seed: Sampling seed.
            version: Async mode: the weight version to generate with (one of the kept ones;
                None: the loaded weights).

        Returns:
            ``response_ids``, ``logprobs``, ``finished``, ``versions`` (the weight version of
            every token) and timings.

        Raises:
            StaleWeightsError: ``version`` is neither loaded nor kept.
        """
        out = self._generate_with(version, prompt_ids, sampling, seed)
        used = self.version if version is None else version
        out["versions"] = [[used] * len(r) for r in out["response_ids"]]
        return out

    @worker_method(split=Split.ROWS)
    @step_method
    def run_agents(
        self,
        prompt_ids: list[list[int]],
        sampling: dict[str, Any],
        seed: int | None,
        agent: dict[str, Any],
        version: int | None = None,
    ) -> dict[str, Any]:
        """One agent-loop trajectory per prompt (:func:`kinds.reasoning.agent_rollout.run_agents`).

        Args:
            prompt_ids: Token ids of each prompt.
            sampling: ``SamplingParams`` fields (``max_new_tokens``: one turn's limit).
            seed: Sampling seed of this shard.
            agent: The ``agent`` config section as a dict.
            version: Async mode: the weight version to generate with (None: as loaded).

        Raises:
            StaleWeightsError: ``version`` is neither loaded nor kept.
        """
        with self._weights(version):
            return run_agents(self.engine, prompt_ids, sampling, seed, agent)

    @step_method
    def continue_generation(
        self,
        prompt_ids: list[list[int]],
        previous: dict[str, Any],
        sampling: dict[str, Any],
        seed: int,
        version: int,
        budget: int | None,
    ) -> dict[str, Any]:
        """Continue the unfinished responses of ``previous`` under weight ``version``.

        A partial rollout (async mode): each response that neither ended with a stop token
        nor reached ``max_new_tokens`` continues for at most ``budget`` more tokens (None: up
        to ``max_new_tokens``), generated from its prompt and the tokens it has.

        Args:
            prompt_ids: Token ids of each prompt (as given to :meth:`generate`).
            previous: What :meth:`generate` or this method returned for them.
            sampling: ``SamplingParams`` fields (``max_new_tokens``: the whole response).
            seed: Sampling seed of this segment.
            version: The weight version to continue with (loaded or kept).
            budget: Most new tokens per response in this segment.

        Returns:
            ``previous`` extended (``versions`` names each token's weight version).
        """
        watch, total = Stopwatch(), int(sampling["max_new_tokens"])
        out = {
            k: [list(v) if isinstance(v, list) else v for v in previous[k]] for k in SEGMENT_KEYS
        }
        rows = [
            i
            for i, response in enumerate(out["response_ids"])
            if not out["finished"][i] and len(response) < total
        ]
        if rows:
            have = len(out["response_ids"][rows[0]])  # unfinished rows advance in lockstep
            room = total - have if budget is None else min(budget, total - have)
            prompts = [list(prompt_ids[i]) + out["response_ids"][i] for i in rows]
            more = self._generate_with(version, prompts, {**sampling, "max_new_tokens": room}, seed)
            for j, i in enumerate(rows):
                out["response_ids"][i] += more["response_ids"][j]
                out["logprobs"][i] += more["logprobs"][j]
                out["versions"][i] += [version] * len(more["response_ids"][j])
                out["finished"][i] = more["finished"][j]
        # a batch restored from a checkpoint has no timings
        out["seconds"] = previous.get("seconds", 0.0) + watch.elapsed()
        out["finished_at"] = time.time()
        if "started_at" in previous:
            out["started_at"] = previous["started_at"]
        return out

    def _generate_with(
        self,
        version: int | None,
        prompt_ids: list[list[int]],
        sampling: dict[str, Any],
        seed: int | None,
    ) -> dict[str, Any]:
        """Generate with weight ``version`` (None or the loaded one: as loaded)."""
        with self._weights(version):
            return generate_responses(self.engine, prompt_ids, sampling, seed)

    @contextlib.contextmanager
    def _weights(self, version: int | None) -> Iterator[None]:
        """The engine holds weight ``version`` inside (None or the loaded one: as loaded)."""
        if version is None or version == self.version:
            yield
            return
        if version not in self.kept or self.version not in self.kept:
            raise StaleWeightsError(
                f"rollout worker {self.rank} was asked for weight version {version} but holds "
                f"{self.version} and keeps {sorted(self.kept)}"
            )
        self.engine.update_weights(self.kept[version].items(), version)
        try:
            yield
        finally:
            self.engine.update_weights(self.kept[self.version].items(), self.version)

    def probe_logprobs(self, probe: dict[str, list[int]]) -> list[float] | None:
        """The engine's log-probs of the sync probe's response tokens (None: cannot score)."""
        return self.engine.logprobs_of(probe["prompt_ids"], probe["response_ids"])

    def weights(self) -> dict[str, np.ndarray]:
        """Current engine weights as numpy (tests)."""
        return {k: v.numpy() for k, v in self.engine.state_dict().items()}
