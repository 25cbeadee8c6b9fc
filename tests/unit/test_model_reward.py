"""Model rewards: judge templates and parsers, reward plans, weights, config and source checks."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from kinds.reasoning.model_reward_step import ModelRewardScores, combine
from kinds.reasoning.reward_model_source import ModelRewardSourceError, check_model_source
from rl_core.config import ConfigError, load_config
from rl_core.rewards.model_reward import (
    JudgeParseError,
    RewardPlan,
    check_template,
    combine_scores,
    format_judge_prompt,
    parse_judge_reply,
    reward_plan,
)

RM = ["reward.reward_type=reward_model", "reward.model.uri=/nowhere/rm"]


def test_template_fills_prompt_and_response() -> None:
    text = format_judge_prompt("Q: {prompt} A: {response} {{ok}}", "1+2=", "3")
    assert text == "Q: 1+2= A: 3 {ok}"


@pytest.mark.parametrize(
    ("template", "message"),
    [
        ("Q: {prompt}", "missing {response}"),
        ("{prompt} {response} {other}", "does not format"),
    ],
)
def test_template_errors_name_what_is_wrong(template: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        check_template(template)


@pytest.mark.parametrize(
    ("parser", "reply", "score"),
    [
        ("number", "Score: 7/10", 7.0),
        ("number", " -2.5 points", -2.5),
        ("yes_no", "Yes, it is right", 1.0),
        ("yes_no", "no.", 0.0),
    ],
)
def test_parsers_read_scores(parser: str, reply: str, score: float) -> None:
    assert parse_judge_reply(parser, reply) == score


@pytest.mark.parametrize(("parser", "reply"), [("number", "::::"), ("yes_no", "maybe")])
def test_reply_without_a_score_is_a_clear_failure(parser: str, reply: str) -> None:
    with pytest.raises(JudgeParseError, match=f"{parser}.*found no score.*{reply}"):
        parse_judge_reply(parser, reply)


def test_plans_split_rule_and_model_rewards() -> None:
    alone = load_config("grpo_arith", RM).reward
    assert reward_plan(alone) == RewardPlan({}, 1.0, True)
    mixed = load_config(
        "grpo_arith",
        [
            "reward.reward_type=composite",
            "reward.components={math_verify: 0.5, format: 0.25, reward_model: 2.0}",
            "reward.model.uri=/nowhere/rm",
        ],
    ).reward
    assert reward_plan(mixed) == RewardPlan({"math_verify": 0.5, "format": 0.25}, 2.0, True)
    assert reward_plan(load_config("grpo_arith").reward) == RewardPlan({"math_verify": 1.0})


def test_weights_combine_and_model_failures_stay_unscored() -> None:
    plan = RewardPlan({"math_verify": 0.5}, 2.0, True)
    total = combine_scores(plan, {"math_verify": [1.0, 0.0, 1.0]}, [0.25, -1.0, math.nan])
    assert total[:2].tolist() == [1.0, -2.0]
    assert math.isnan(total[2])
    with pytest.raises(ValueError, match="no scores for the model reward"):
        combine_scores(plan, {"math_verify": [1.0]}, None)


def test_combine_reports_component_metrics() -> None:
    plan = RewardPlan({"math_verify": 1.0}, 1.0, True)
    model = ModelRewardScores(np.array([0.5, np.nan]), [None, "no score"])
    rewards, metrics = combine(plan, [{"math_verify": [1.0]}, {"math_verify": [0.0]}], model)
    assert rewards[0] == 1.5 and math.isnan(rewards[1])
    assert metrics == {
        "reward/rule_math_verify_mean": 0.5,
        "reward/rm_score_mean": 0.5,
        "reward/rm_failures": 1.0,
        "reward/rm_failure_fraction": 0.5,
    }


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["reward.reward_type=reward_model"], "needs reward.model"),
        ([*RM, "reward.model.preset=rm_arith"], "exactly one of uri"),
        (["reward.reward_type=reward_model", "reward.model.uri=models:/x"], "models:/<name>@"),
        ([*RM, "reward.model.kind=judge", "reward.model.template=Q {prompt}"], "{response}"),
        ([*RM, "reward.model.kind=judge", "reward.model.parser=regexx"], "regexx"),
        ([*RM, "reward.model.placement=far"], "collocated"),
    ],
)
def test_config_errors_name_field_and_allowed(overrides: list[str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load_config("grpo_arith", overrides)


def _hf_dir(path: Path, architecture: str) -> Path:
    path.mkdir()
    (path / "config.json").write_text(json.dumps({"architectures": [architecture]}))
    return path


def test_model_source_checks_the_directory(tmp_path: Path) -> None:
    section = load_config("grpo_arith", RM).reward.model
    with pytest.raises(ModelRewardSourceError, match="reward.model.uri=/nowhere/rm: no model"):
        check_model_source(section)
    lm = _hf_dir(tmp_path / "lm", "Qwen2ForCausalLM")
    with pytest.raises(ModelRewardSourceError, match="holds a 'hf_causal_lm' model"):
        check_model_source(section.model_copy(update={"uri": str(lm)}))
    assert check_model_source(section.model_copy(update={"uri": str(lm), "kind": "judge"})) == (
        "hf_causal_lm"
    )
    rm = _hf_dir(tmp_path / "rm", "Qwen2ForSequenceClassification")
    assert check_model_source(section.model_copy(update={"uri": str(rm)})) == "hf_reward_model"


def test_learning_curve_shows_model_score_next_to_accuracy() -> None:
    from infra.tracking.plots import select_panels

    keys = ["eval/accuracy", "eval/return_mean", "reward/rm_score_mean", "rollout/reward_mean"]
    panels = {title: keys for title, _, keys in select_panels(keys)}
    assert panels["Evaluation"] == ["eval/accuracy"]
    # the model's score of the held-out greedy answers beside that of the sampled ones
    assert panels["Reward model"] == ["reward/rm_score_mean", "eval/return_mean"]
    rule_rewarded = {t: k for t, _, k in select_panels(["eval/accuracy", "eval/return_mean"])}
    assert "Reward model" not in rule_rewarded
    online = {t: k for t, _, k in select_panels(["eval/accuracy", "online/acceptance_rate"])}
    assert online["Served feedback"] == ["online/acceptance_rate"]
