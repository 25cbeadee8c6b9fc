"""``reward.model``: the reward model or LLM judge behind the reward ``reward_model``.

A classifier reward model (an export of a ``reward_model`` run, a registered version, or
any one-label sequence-classification directory) is scored with its scalar head; a judge
(a causal LM) reads ``template`` filled with the prompt and the response and replies, and
the registered ``parser`` reads the score from its reply. Where the model comes from is
checked before any worker starts (:mod:`kinds.reasoning.reward_model_source`).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator, Field, model_validator

from rl_core.config.limits import MAX_TOKENS, MAX_WORKERS
from rl_core.config.naming import MODEL_URI, MODEL_URI_FORMS
from rl_core.config.sections import Section, check_registered_name

DEFAULT_JUDGE_TEMPLATE = (
    "Is the answer correct? Reply yes or no.\nQuestion: {prompt}\nAnswer: {response}\nReply:"
)


def _model_source(value: str | None) -> str | None:
    if value is not None and value.startswith("models:") and not MODEL_URI.match(value):
        raise ValueError(f"{value!r} is not {MODEL_URI_FORMS} (or a model directory)")
    return value


def _judge_template(value: str) -> str:
    from rl_core.rewards.model_reward import check_template

    return check_template(value)


def _judge_parser(value: str) -> str:
    return check_registered_name("judge_parser", value)


class ModelRewardConfig(Section):
    """The reward model (``kind: classifier``) or LLM judge (``kind: judge``) of a run."""

    kind: Literal["classifier", "judge"] = Field(
        "classifier",
        description="classifier: a reward model's scalar head scores prompt + response; "
        "judge: a causal LM replies to template and parser reads the score.",
    )
    uri: Annotated[str | None, AfterValidator(_model_source)] = Field(
        None,
        min_length=1,
        description="The model: a registered version models:/<name>@<alias>, "
        "models:/<name>/<version> or models:/<name>/latest (downloaded before the workers "
        "start), or a model directory (an rlpipe export or a Hugging Face directory).",
    )
    preset: str | None = Field(
        None,
        min_length=1,
        description="Instead of uri: a reward_model preset (e.g. rm_arith) whose export "
        "<output_dir>/<its run name>/model is the model; trained first when missing.",
    )
    template: Annotated[str, AfterValidator(_judge_template)] = Field(
        DEFAULT_JUDGE_TEMPLATE,
        description="judge: the judge's input, with the placeholders {prompt} and {response} "
        "(literal braces doubled).",
    )
    parser: Annotated[str, AfterValidator(_judge_parser)] = Field(
        "yes_no",
        description="judge: the registered score parser of its replies (number, yes_no); a "
        "reply without a score is a model failure: counted, the row left out of training.",
    )
    max_new_tokens: int = Field(
        8, ge=1, le=MAX_TOKENS, description="judge: tokens of a reply (greedy)."
    )
    batch_size: int = Field(64, ge=1, le=4096, description="Texts per forward pass.")
    max_length: int | None = Field(
        None,
        ge=1,
        le=MAX_TOKENS,
        description="Keep the last this many tokens of a scored text (None: all).",
    )
    placement: Literal["collocated", "separate"] = Field(
        "collocated",
        description="collocated: the workers share the trainer's devices (moved off the "
        "GPU while the trainer updates); separate: they run where "
        "cluster.component_placement places 'reward' (default: the trainer's set too).",
    )
    num_workers: int = Field(
        1, ge=1, le=MAX_WORKERS, description="Reward-model workers; a batch is split across them."
    )
    score_scale: float = Field(1.0, description="reward = score_scale * model score + offset.")
    score_offset: float = Field(0.0, description="Added to each scaled model score.")

    @model_validator(mode="after")
    def _one_source(self) -> ModelRewardConfig:
        if bool(self.uri) == bool(self.preset):
            raise ValueError(
                "reward.model needs exactly one of uri (a registered model or a model "
                f"directory) and preset (a reward_model preset); got uri={self.uri!r}, "
                f"preset={self.preset!r}"
            )
        if self.preset and self.kind != "classifier":
            raise ValueError(
                "reward.model.preset trains a classifier reward model; a judge needs "
                "reward.model.uri (a causal LM)"
            )
        return self
