"""``online``: serve the policy, learn from users' feedback on what it served.

With ``online.enabled`` a reasoning run serves its policy behind an OpenAI-compatible
endpoint (Ray Serve on ``online.host:online.port``) and each training iteration takes the
next ``online.batch_size`` feedback records (stored tokens, serve-time log-probs and weight
version: nothing is generated or tokenized again) as its batch. The simulated user
(``online.user``) asks the endpoint arithmetic questions and accepts right answers: the
``online_arith`` preset. docs/online.md.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator, model_validator

from rl_core.config.limits import MAX_PROMPTS, MAX_STEPS
from rl_core.config.run_sections import check_storage_uri
from rl_core.config.sections import Section, check_registered_name

LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")


class SimulatedUserConfig(Section):
    """The scripted user of ``online_arith`` (tests, figures)."""

    enabled: bool = Field(
        False,
        description="online: a scripted user asks the endpoint the training prompts before "
        "each iteration (batch_size questions) and accepts the right answers.",
    )
    noise: float = Field(
        0.0, ge=0.0, lt=0.5, description="online.user: probability that a verdict is flipped."
    )


class OnlineSection(Section):
    """Serving the policy and training on feedback (docs/online.md)."""

    enabled: bool = Field(
        False,
        description="Serve the policy and train on feedback instead of sampled prompts: the run is "
        "of the online kind.",
    )
    server: Literal["run", "external"] = Field(
        "run",
        description="online: run: the run serves its policy itself and trains until "
        "run.max_iterations; external: an endpoint started apart (rlpipe serve, same run name "
        "and store) serves it, each start trains on the full batches of feedback waiting, "
        "publishes the new weights to the endpoint and stops (the feedback-ready automation "
        "starts it).",
    )
    host: str = Field(
        "127.0.0.1",
        min_length=1,
        description="online: the endpoint's bind address; beyond loopback it needs a token.",
    )
    port: int = Field(
        8000, ge=0, le=65535, description="online: the endpoint's port (0: a free one)."
    )
    token_env: str = Field(
        "RLPIPE_SERVE_TOKEN",
        min_length=1,
        description="online: environment variable holding the bearer token clients must send "
        "(unset: no token, loopback only).",
    )
    model_name: str | None = Field(
        None, description="online: the model name clients pass (None: the run name)."
    )
    batch_size: int = Field(
        64, ge=1, le=MAX_PROMPTS, description="online: feedback records per training iteration."
    )
    baseline: str = Field(
        "running_mean",
        description="online: advantage of a single response: its reward (none) or minus the "
        "running mean of earlier rewards (running_mean).",
    )
    baseline_momentum: float = Field(
        0.9, ge=0.0, lt=1.0, description="online: weight of the old mean in the running mean."
    )
    store: str | None = Field(
        None,
        description="online: the feedback database file (None: <output_dir>/<run name>/"
        "feedback.db).",
    )
    mirror: str | None = Field(
        None,
        min_length=1,
        description="online: also write every served generation, feedback record and batch "
        "claim to this s3://bucket/prefix (or folder) before answering; a lost feedback "
        "database is rebuilt from it (None: the local database only).",
    )
    wait_timeout_s: float | None = Field(
        None,
        gt=0,
        description="online: longest wait for a batch of feedback before the iteration fails "
        "(None: wait as long as it takes).",
    )
    candidate_share: float = Field(
        0.5,
        gt=0.0,
        lt=1.0,
        description="online, with tracking.promotion=gated: share of requests a newly trained "
        "version answers as the A/B candidate while the promoted main version answers the "
        "rest (rlpipe promote-served makes the candidate main).",
    )
    promotion_min_judged: int = Field(
        30,
        ge=1,
        le=MAX_STEPS,
        description="online: accept/reject answers each of main and candidate needs before "
        "rlpipe promote-served decides.",
    )
    user: SimulatedUserConfig = Field(default_factory=SimulatedUserConfig)

    @model_validator(mode="after")
    def _user_needs_own_server(self) -> OnlineSection:
        if self.user.enabled and self.server == "external":
            raise ValueError(
                "online.user.enabled = true needs online.server = run: the simulated user "
                "asks the run's own endpoint (an external endpoint's users are its clients)"
            )
        return self

    @field_validator("mirror")
    @classmethod
    def _mirror_supported(cls, value: str | None) -> str | None:
        return check_storage_uri(value, ("s3",))

    @field_validator("baseline")
    @classmethod
    def _known_baseline(cls, value: str) -> str:
        return check_registered_name("single_response_baseline", value)
