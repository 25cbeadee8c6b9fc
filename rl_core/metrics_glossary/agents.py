"""The ``agent/`` and ``eval/agent/`` metrics: statistics of agent trajectories."""

from __future__ import annotations

from rl_core.metrics_glossary.entries import MetricEntry

#: Metrics of the section, in the order of ``docs/metrics.md``.
AGENT_METRICS: tuple[MetricEntry, ...] = (
    MetricEntry(
        "agent/turns_mean",
        "count",
        "agent",
        "Model turns per trajectory of the batch.",
    ),
    MetricEntry(
        "agent/tool_calls_mean",
        "count",
        "agent",
        "Tool calls per trajectory.",
    ),
    MetricEntry(
        "agent/tool_call_rate",
        "fraction",
        "agent",
        "Share of trajectories with at least one tool call.",
    ),
    MetricEntry(
        "agent/tool_error_rate",
        "fraction",
        "agent",
        "Share of the tool calls that failed through the model's fault.",
    ),
    MetricEntry(
        "agent/tool_timeout_rate",
        "fraction",
        "agent",
        "Share of the tool calls stopped by the sandbox's wall-clock or CPU limit.",
    ),
    MetricEntry(
        "agent/tool_latency_mean",
        "seconds",
        "agent",
        "Mean latency of a tool call (0 without calls).",
    ),
    MetricEntry(
        "agent/infra_failure_rate",
        "fraction",
        "agent",
        "Share of trajectories that met an infrastructure failure of a tool.",
    ),
    MetricEntry(
        "agent/masked_token_fraction",
        "fraction",
        "agent",
        "Share of the trajectories' tokens that the model did not produce (tool output: "
        "loss mask 0).",
    ),
    MetricEntry(
        "agent/reward_with_tool",
        "reward",
        "agent",
        "Mean reward (before the overlong penalty and `agent.call_cost`) of the scored "
        "trajectories that called a tool; absent when none did.",
    ),
    MetricEntry(
        "agent/reward_without_tool",
        "reward",
        "agent",
        "The same for the trajectories that called no tool; absent when all did.",
    ),
    MetricEntry(
        "agent/<kind>/<trajectory_metric>",
        "as `agent/<trajectory_metric>`",
        "agent",
        "The trajectory statistic of the batch's rows of one kind.",
    ),
    MetricEntry(
        "agent/<kind>/reward_with_tool",
        "reward",
        "agent",
        "`agent/reward_with_tool` of the rows of one kind.",
    ),
    MetricEntry(
        "agent/<kind>/reward_without_tool",
        "reward",
        "agent",
        "`agent/reward_without_tool` of the rows of one kind.",
    ),
    MetricEntry(
        "agent/turn_rows",
        "count",
        "agent",
        "Rows trained on when `agent.context` rewrites contexts: one per model turn.",
    ),
    MetricEntry(
        "eval/agent/<trajectory_metric>",
        "as `agent/<trajectory_metric>`",
        "agent",
        "The trajectory statistic of the evaluation's greedy trajectories.",
    ),
    MetricEntry(
        "eval/agent/<kind>/<trajectory_metric>",
        "as `agent/<trajectory_metric>`",
        "agent",
        "The same for the held-out prompts of one kind.",
    ),
)
