"""Online RL from served feedback: feedback validation, rewards and single-response baselines."""

from rl_core.online.baseline import BASELINES, RunningMeanBaseline, single_response_advantages
from rl_core.online.feedback import (
    REQUEST_ID,
    SIGNALS,
    Feedback,
    FeedbackError,
    feedback_reward,
    parse_feedback,
)

__all__ = [
    "BASELINES",
    "REQUEST_ID",
    "SIGNALS",
    "Feedback",
    "FeedbackError",
    "RunningMeanBaseline",
    "feedback_reward",
    "parse_feedback",
    "single_response_advantages",
]
