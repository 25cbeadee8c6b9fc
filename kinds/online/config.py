"""The configuration class of the online kind."""

from __future__ import annotations

from pydantic import Field, model_validator

from kinds.online.section import OnlineSection
from kinds.reasoning.config import ReasoningConfig


class OnlineConfig(ReasoningConfig):
    """The configuration of an online run: a reasoning run with its ``online`` section."""

    kind_name = "online"
    model_category = "reasoning"

    online: OnlineSection = Field(default_factory=OnlineSection)

    @model_validator(mode="after")
    def _online_fits(self) -> OnlineConfig:
        if not self.online.enabled:
            return self
        problems = []
        if self.algorithm.group_size != 1:
            problems.append(
                f"algorithm.group_size = {self.algorithm.group_size} (allowed: 1, one served "
                "response per prompt)"
            )
        if self.algorithm.adv_type.lower() not in ("outcome", "reinforce_plus_plus"):
            problems.append(
                f"algorithm.adv_type = {self.algorithm.adv_type!r} (allowed: 'outcome', "
                "'reinforce_plus_plus': estimators of single responses)"
            )
        if self.run.mode != "sync":
            problems.append(f"run.mode = {self.run.mode!r} (allowed: 'sync'; serving overlaps)")
        if self.agent.multi_turn:
            problems.append(f"agent.loop = {self.agent.loop!r} (allowed: 'single_turn')")
        if self.algorithm.dynamic_sampling:
            problems.append("algorithm.dynamic_sampling = true (allowed: false)")
        if self.actor.lora.enabled:
            problems.append(
                f"actor.lora.rank = {self.actor.lora.rank} (allowed: 0; each served version "
                "is a full model)"
            )
        if problems:
            raise ValueError(
                "online.enabled = true trains on served responses: " + "; ".join(problems)
            )
        return self
