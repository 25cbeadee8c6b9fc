"""The ``eval/`` metrics (but ``eval/agent/``): the evaluate step."""

from __future__ import annotations

from rl_core.metrics_glossary.entries import MetricEntry

#: Metrics of the section, in the order of ``docs/metrics.md``.
EVALUATION_METRICS: tuple[MetricEntry, ...] = (
    MetricEntry(
        "eval/return_mean",
        "return",
        "all",
        "Embodied: mean return of the evaluation episodes; reasoning: mean reward of the "
        "greedy responses to the held-out prompts; reward models: `eval/pairwise_accuracy`. "
        "The score of embodied checkpoints; `run.stop_at_eval_return` compares it.",
    ),
    MetricEntry(
        "eval/pairwise_accuracy",
        "fraction",
        "reward_model",
        "Share of the held-out preference pairs whose chosen response gets a strictly "
        "higher reward than the rejected one; the score of reward-model checkpoints.",
    ),
    MetricEntry(
        "eval/reward_margin",
        "reward",
        "reward_model",
        "Mean reward of the chosen minus the rejected response over the held-out pairs.",
    ),
    MetricEntry(
        "eval/reward_chosen_mean",
        "reward",
        "reward_model",
        "Mean reward of the held-out pairs' chosen responses.",
    ),
    MetricEntry(
        "eval/reward_rejected_mean",
        "reward",
        "reward_model",
        "Mean reward of the held-out pairs' rejected responses.",
    ),
    MetricEntry(
        "eval/pairs",
        "count",
        "reward_model",
        "Held-out preference pairs evaluated (`data.eval_size`).",
    ),
    MetricEntry(
        "eval/success_rate",
        "fraction",
        "embodied",
        "Share of the evaluation episodes in which the task succeeded at some step (envs that "
        'report `info["success"]`, such as manipulation tasks).',
    ),
    MetricEntry(
        "eval/return_std",
        "return",
        "embodied",
        "Standard deviation of the evaluation episodes' returns.",
    ),
    MetricEntry(
        "eval/return_min",
        "return",
        "embodied",
        "Lowest return of the evaluation episodes.",
    ),
    MetricEntry(
        "eval/return_max",
        "return",
        "embodied",
        "Highest return of the evaluation episodes (evaluation runs of `flows/evaluate.py` only).",
    ),
    MetricEntry(
        "eval/length_mean",
        "env steps",
        "embodied",
        "Mean length of the evaluation episodes.",
    ),
    MetricEntry(
        "eval/episodes",
        "count",
        "embodied",
        "Evaluation episodes (`eval.num_episodes`; `--episodes` of `flows/evaluate.py`).",
    ),
    MetricEntry(
        "eval/accuracy",
        "fraction",
        "reasoning",
        "Share of greedy responses to the held-out prompts that the `eval.correct_when` "
        "reward scores in full; the score of reasoning checkpoints.",
    ),
    MetricEntry(
        "eval/accuracy/<kind>",
        "fraction",
        "reasoning",
        "`eval/accuracy` of the held-out prompts of one kind.",
    ),
    MetricEntry(
        "eval/pass_at_<k>",
        "fraction",
        "reasoning",
        "Unbiased pass@k estimate (the Codex paper's 1 - C(n-c,k)/C(n,k), averaged over the "
        "held-out prompts) from n = `eval.pass_k` responses sampled per prompt, c of them "
        "correct: for k = `eval.pass_k` the share of prompts with at least one correct "
        "sampled response, for k = 1 the mean share of correct sampled responses.",
    ),
    MetricEntry(
        "eval/response_length_mean",
        "tokens",
        "reasoning",
        "Mean length of the greedy responses.",
    ),
    MetricEntry(
        "eval/prompts",
        "count",
        "reasoning",
        "Held-out prompts evaluated.",
    ),
    MetricEntry(
        "eval/video_return",
        "return",
        "embodied",
        "Return of the rendered evaluation episode (the first evaluation seed), when a "
        "video was recorded (`eval.video`).",
    ),
)
