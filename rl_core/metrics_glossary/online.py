"""Metrics of online runs (``online.enabled``): the feedback batches and the served policy."""

from __future__ import annotations

from rl_core.metrics_glossary.entries import MetricEntry

ONLINE_METRICS: tuple[MetricEntry, ...] = (
    MetricEntry(
        "online/reward_mean",
        "reward",
        "online",
        "Mean reward of the iteration's feedback records (accepted 1, rejected 0, a score, or "
        "how much of an edited completion was kept), before the baseline.",
    ),
    MetricEntry(
        "online/acceptance_rate",
        "fraction",
        "online",
        "Share of the batch's accept/reject verdicts that accepted the completion.",
    ),
    MetricEntry(
        "online/baseline",
        "reward",
        "online",
        "The running mean subtracted from the batch's rewards (`online.baseline: "
        "running_mean`; the first batch uses its own mean).",
    ),
    MetricEntry("online/records", "count", "online", "Feedback records the iteration trained on."),
    MetricEntry(
        "online/staleness_mean",
        "weight versions",
        "online",
        "How many weight versions older than the trainer's the policy that served the "
        "batch's completions was, on average (0 in lockstep).",
    ),
    MetricEntry(
        "online/pending",
        "count",
        "online",
        "Feedback records stored but not yet in a batch, after the iteration's batch was claimed.",
    ),
    MetricEntry(
        "online/serve_sync_seconds",
        "seconds",
        "online",
        "Time the weight sync spent exporting the new weights as a served version and "
        "publishing them to the policy server.",
    ),
    MetricEntry(
        "online/ab_main_version",
        "weight version",
        "online",
        "Gated promotion: the version served as main (promoted by rlpipe promote-served).",
    ),
    MetricEntry(
        "online/ab_main_acceptance",
        "fraction",
        "online",
        "Gated promotion: share of the main version's judged answers users accepted, all its "
        "feedback so far.",
    ),
    MetricEntry(
        "online/ab_main_judged",
        "count",
        "online",
        "Gated promotion: accept/reject verdicts on the main version's answers so far.",
    ),
    MetricEntry(
        "online/ab_candidate_version",
        "weight version",
        "online",
        "Gated promotion: the newest trained version, served as the A/B candidate to "
        "online.candidate_share of the requests.",
    ),
    MetricEntry(
        "online/ab_candidate_acceptance",
        "fraction",
        "online",
        "Gated promotion: share of the candidate's judged answers users accepted so far.",
    ),
    MetricEntry(
        "online/ab_candidate_judged",
        "count",
        "online",
        "Gated promotion: accept/reject verdicts on the candidate's answers so far.",
    ),
)
