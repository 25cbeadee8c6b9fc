"""The reward step with a model reward: rule and model components, added up with weights.

Rule components are scored by the scoring tasks, the model's by the reward-model workers.

Outcomes of a row: a score; a model failure (the judge's reply held no score: counted in
``reward/rm_failures``, its reward NaN, so the row is left out of training, never scored a
constant); an infrastructure failure (a reward-model worker raised, died or missed its
deadline: the step fails, the dead worker is respawned and the step runs again on the same
responses, so the scores, and the run, are those of a run without the failure).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from infra.cluster.worker_group import WorkerGroup
from infra.driver.step_runtime import FanoutJob
from kinds.reasoning.responses import ResponseBatch, reward_chunk
from kinds.reasoning.sections import ReasoningRewardConfig
from rl_core.rewards import build_reward
from rl_core.rewards.model_reward import RewardPlan, combine_scores, model_scores

logger = logging.getLogger(__name__)
#: Model failures quoted in the log per step (the count is a metric).
_QUOTED_FAILURES = 2


def score_rule_components(
    reward_cfg: dict[str, Any], rules: dict[str, float], chunk: dict[str, list[Any]]
) -> dict[str, list[float]]:
    """Each rule component's scores of one chunk (runs in any process, like ``score_chunk``).

    Args:
        reward_cfg: The ``reward`` section as a plain dict.
        rules: The rule components (name → weight) of the reward's plan.
        chunk: ``prompts``, ``completions``, ``answers``, ``fields``.
    """
    from infra.extensions import load_extension_modules

    load_extension_modules()
    cfg = ReasoningRewardConfig.model_validate(reward_cfg)
    out: dict[str, list[float]] = {}
    for name in rules:
        fn = build_reward(cfg.model_copy(update={"reward_type": name, "components": {}}))
        scores = np.asarray(fn(scale=cfg.scale, **chunk), dtype=np.float32)
        if scores.shape != (len(chunk["completions"]),):
            raise ValueError(
                f"reward {name!r} returned {scores.shape} scores for "
                f"{len(chunk['completions'])} responses"
            )
        out[name] = scores.tolist()
    return out


def rule_jobs(
    batch: ResponseBatch,
    tokenizer: Any,
    reward_cfg: dict[str, Any],
    plan: RewardPlan,
    num_tasks: int,
) -> list[FanoutJob]:
    """Fan-out jobs scoring the plan's rule components (none when the model is alone)."""
    if not plan.rules:
        return []
    parts = np.array_split(np.arange(len(batch)), num_tasks)
    return [
        FanoutJob(
            "score_rewards",
            score_rule_components,
            {
                "reward_cfg": reward_cfg,
                "rules": plan.rules,
                "chunk": reward_chunk(tokenizer, batch, p.tolist()),
            },
        )
        for p in parts
        if len(p)
    ]


@dataclass
class ModelRewardScores:
    """What the reward-model workers made of a batch.

    Attributes:
        scores: Reward per row (scaled and offset; NaN for a model failure).
        failures: Per row, why the model gave no score, or None.
        seconds: The longest worker's compute time.
    """

    scores: np.ndarray
    failures: list[str | None] = field(default_factory=list)
    seconds: float = 0.0


class ModelRewardScorer:
    """The driver's side of the reward-model workers.

    Args:
        group: The reward-model worker group.
        section: The ``reward.model`` section.
    """

    def __init__(self, group: WorkerGroup, section: Any) -> None:
        self.group = group
        self.section = section

    def score(
        self, prompts: list[str], responses: list[str], seed: int, timeout: float
    ) -> ModelRewardScores:
        """Score the rows, split across the workers, within the ``reward`` step's deadline.

        Raises:
            StepTimeout: A worker missed the deadline or stopped answering (killed).
            Exception: What a worker raised (its death: ``RayActorError``).
        """
        outs = self.group.score(prompts, responses, seed, within=("reward", timeout))
        return scores_of(outs, self.section)


def scores_of(outs: list[dict[str, Any]], section: Any) -> ModelRewardScores:
    """Raw scorer outputs (in row order) as scaled rewards, NaN where a row has none.

    Args:
        outs: ``{"scores", "failures", "seconds"}`` of each part of the rows, in order.
        section: The ``reward.model`` section (``score_scale``, ``score_offset``).
    """
    raw = [s for out in outs for s in out["scores"]]
    failures = [f for out in outs for f in out["failures"]]
    scores = model_scores(raw, section.score_scale, section.score_offset)
    scores[[i for i, f in enumerate(failures) if f is not None]] = np.nan
    seconds = max((float(out["seconds"]) for out in outs), default=0.0)
    return ModelRewardScores(scores, failures, seconds)


def score_now(owner: Any, batch: ResponseBatch, timeout: float | None) -> list[float]:
    """Rewards of ``batch`` by ``owner``'s reward, scored now, in this process and its model.

    ``owner`` is a runtime or a checkpoint evaluator: its ``reward_chunk``, ``config_dict``,
    ``reward_plan``, ``model_reward`` (None: rule rewards only) and ``cfg``. For dynamic
    sampling and evaluation; a model failure's reward is NaN.
    """
    from kinds.reasoning.reward_scoring import score_chunk

    chunk = owner.reward_chunk(batch, list(range(len(batch))))
    if owner.model_reward is None:
        return score_chunk(owner.config_dict["reward"], chunk)
    return score_all_components(
        owner.config_dict["reward"],
        owner.reward_plan,
        chunk,
        owner.model_reward,
        owner.cfg.run.seed,
        timeout,
    )


def score_all_components(
    reward_cfg: dict[str, Any],
    plan: RewardPlan,
    chunk: dict[str, list[Any]],
    model_reward: Any,
    seed: int,
    timeout: float | None,
) -> list[float]:
    """The combined rewards of ``chunk``, every component scored now (no fan-out).

    For dynamic sampling and evaluation. A model failure's reward is NaN.

    Args:
        reward_cfg: The ``reward`` section as a plain dict.
        plan: The reward's plan (it uses a model).
        chunk: ``prompts``, ``completions``, ``answers``, ``fields``.
        model_reward: The model's scorer (a :class:`ModelRewardScorer` or one in this process).
        seed: Seed of the scoring call.
        timeout: Deadline of the model's scoring, in seconds.
    """
    rules = score_rule_components(reward_cfg, plan.rules, chunk)
    model = model_reward.score(chunk["prompts"], chunk["completions"], seed, timeout)
    return combine(plan, [rules], model)[0]


def combine(
    plan: RewardPlan,
    rule_results: list[dict[str, list[float]]] | None,
    model: ModelRewardScores | None,
) -> tuple[list[float], dict[str, float]]:
    """The rewards of a batch and the metrics of their components.

    Args:
        plan: The reward's plan.
        rule_results: Each rule job's component scores, in job order.
        model: The reward-model workers' scores (None without a model reward).

    Returns:
        ``(rewards, metrics)``: ``reward/rule_<name>_mean`` per rule component,
        ``reward/rm_score_mean`` (the scaled model score over the rows it scored),
        ``reward/rm_failures`` and ``reward/rm_failure_fraction`` (model failures).
    """
    rules: dict[str, list[float]] = {name: [] for name in plan.rules}
    for part in rule_results or []:
        for name in plan.rules:
            rules[name].extend(part[name])
    metrics = {
        f"reward/rule_{name}_mean": float(np.mean(values)) if values else 0.0
        for name, values in rules.items()
    }
    model_values = None
    if model is not None:
        model_values = model.scores
        failed = sum(f is not None for f in model.failures)
        scored = model.scores[np.isfinite(model.scores)]
        metrics["reward/rm_score_mean"] = float(scored.mean()) if scored.size else float("nan")
        metrics["reward/rm_failures"] = float(failed)
        metrics["reward/rm_failure_fraction"] = failed / max(len(model.failures), 1)
        if failed:
            quoted = [f for f in model.failures if f is not None][:_QUOTED_FAILURES]
            logger.warning(
                "reward model: %d of %d rows have no score (left out of training), e.g. %s",
                failed,
                len(model.failures),
                "; ".join(quoted),
            )
    total = combine_scores(plan, rules, model_values)
    return total.tolist(), {k: v for k, v in metrics.items() if np.isfinite(v)}
