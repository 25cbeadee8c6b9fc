"""The ``env.manipulation`` section: settings of robot manipulation simulators.

Read by the env types that simulate a robot arm (``metaworld``, ``maniskill``, ``libero``):
which tasks to play, what the policy observes, the reward and action chunking. Which names
are valid (tasks, cameras) depends on the simulator: its env type checks them when the
config is validated (:func:`rl_core.envs.registry.check_env_config`).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from rl_core.config.sections import Section

#: Largest square camera image (pixels per side) and action chunk.
MAX_IMAGE_SIZE = 1024
MAX_ACTION_CHUNK = 256


class ManipulationConfig(Section):
    """Robot manipulation simulators (env types metaworld, maniskill, libero): tasks, observations."""

    suite: str | None = Field(
        None,
        description="LIBERO's task suite (`env_type: libero` only): `libero_spatial`, "
        "`libero_object`, `libero_goal`, `libero_10` or `libero_90`; None: `libero_spatial`.",
    )
    tasks: list[str] = Field(
        default_factory=lambda: ["reach-v3"],
        min_length=1,
        description="Tasks played by every env (Meta-World names such as `reach-v3`, "
        "`push-v3`, `pick-place-v3`; a reset with seed `s` plays `tasks[s % len(tasks)]`), "
        "or the one ManiSkill3 task (`PushCube-v1`, `PickCube-v1`...), or tasks of the "
        "LIBERO `suite`: their names or indices (`[0, 1, 2]`; seed `s` plays "
        "`tasks[s % n]` from the suite's fixed initial state `(s // n) % 50`).",
    )
    obs_mode: Literal["state", "rgb", "rgb+state"] = Field(
        "state",
        description="`state`: proprioception and object poses (`states`); `rgb`: a camera "
        "image (`main_images`) and the instruction (`task_descriptions`); `rgb+state`: both.",
    )
    image_size: int = Field(
        64, ge=8, le=MAX_IMAGE_SIZE, description="Side of the square camera images (pixels)."
    )
    camera: str | None = Field(
        None,
        description="Camera of the images; None: the simulator's default (Meta-World "
        "`corner2`, ManiSkill3 `base_camera`, LIBERO `agentview`; LIBERO's other: "
        "`robot0_eye_in_hand`).",
    )
    control_mode: str | None = Field(
        None,
        description="ManiSkill3's controller (`pd_ee_delta_pos`, `pd_joint_delta_pos`...); "
        "None: `pd_ee_delta_pos`. Meta-World and LIBERO have one each: leave None.",
    )
    render_size: int | None = Field(
        None,
        ge=8,
        le=MAX_IMAGE_SIZE,
        description="Side of the frames `render()` returns (evaluation videos); None: "
        "`image_size`.",
    )
    fast_render: bool = Field(
        True,
        description="Render without shadows, reflections and anti-aliasing (about 3x faster "
        "on a CPU renderer; Meta-World).",
    )
    reward: Literal["dense", "success"] | None = Field(
        None,
        description="`dense`: the simulator's shaped reward; `success`: 1.0 on the step the "
        "task first succeeds in an episode, else 0. None: `dense` (Meta-World, ManiSkill3), "
        "`success` (LIBERO, which has no shaped reward).",
    )
    terminate_on_success: bool = Field(
        False, description="End the episode (terminated) on the step the task succeeds."
    )
    reset_on_success: bool = Field(
        False,
        description="End the episode on the step the task succeeds as a time limit ends it "
        "(truncated: the value bootstraps from its final observation), and start the next "
        "one: envs reset more often, and the critic does not learn that success ends the "
        "reward (ManiSkill's PPO baselines reset envs on success this way). Not with "
        "`terminate_on_success`.",
    )
    action_chunk: int = Field(
        1,
        ge=1,
        le=MAX_ACTION_CHUNK,
        description="Actions the policy emits at once: the action space is a flat Box of "
        "`action_chunk` x the simulator's action; the env plays them in sequence (rewards "
        "summed, stopping early when the episode ends).",
    )

    @field_validator("tasks", mode="before")
    @classmethod
    def _indices_as_names(cls, value: Any) -> Any:
        # LIBERO's tasks may be given by index: `tasks: [0, 3]` reads as ["0", "3"]
        if isinstance(value, list):
            return [str(v) if isinstance(v, int) and not isinstance(v, bool) else v for v in value]
        return value

    @field_validator("tasks")
    @classmethod
    def _distinct_names(cls, value: list[str]) -> list[str]:
        names = [name.strip() for name in value]
        if any(not name for name in names):
            raise ValueError("task names must be non-empty")
        repeated = sorted({name for name in names if names.count(name) > 1})
        if repeated:
            raise ValueError(f"tasks are listed more than once: {', '.join(repeated)}")
        return names

    @model_validator(mode="after")
    def _one_end_on_success(self) -> ManipulationConfig:
        if self.terminate_on_success and self.reset_on_success:
            raise ValueError(
                "env.manipulation.terminate_on_success and env.manipulation.reset_on_success "
                "are both true: a successful step ends its episode one way, set one to false"
            )
        return self
