"""The instructions of Meta-World's 50 V3 tasks: the ``task_descriptions`` of pixel observations.

Plain data: importing this module does not import Meta-World.
"""

from __future__ import annotations

import difflib

from rl_core.envs.manipulation_obs import INSTRUCTION_CHARSET, MAX_INSTRUCTION_LENGTH

__all__ = ["INSTRUCTIONS", "INSTRUCTION_CHARSET", "MAX_INSTRUCTION_LENGTH"]

#: Short English instructions of the 50 Meta-World V3 tasks.
INSTRUCTIONS: dict[str, str] = {
    "assembly-v3": "pick up the nut and place it onto the peg",
    "basketball-v3": "pick up the ball and dunk it into the basket",
    "bin-picking-v3": "pick up the puck from one bin and place it into the other bin",
    "box-close-v3": "pick up the lid and close the box with it",
    "button-press-topdown-v3": "press the button from the top",
    "button-press-topdown-wall-v3": "reach past the wall and press the button from the top",
    "button-press-v3": "press the button from the side",
    "button-press-wall-v3": "reach past the wall and press the button from the side",
    "coffee-button-v3": "push the button on the coffee machine",
    "coffee-pull-v3": "pull the mug out from under the coffee machine",
    "coffee-push-v3": "push the mug under the coffee machine",
    "dial-turn-v3": "rotate the dial 180 degrees",
    "disassemble-v3": "pick the nut up off the peg",
    "door-close-v3": "close the door",
    "door-lock-v3": "lock the door by turning the lock clockwise",
    "door-open-v3": "open the door",
    "door-unlock-v3": "unlock the door by turning the lock counter-clockwise",
    "hand-insert-v3": "insert the gripper into the hole",
    "drawer-close-v3": "push the drawer closed",
    "drawer-open-v3": "pull the drawer open",
    "faucet-open-v3": "turn the faucet handle counter-clockwise to open it",
    "faucet-close-v3": "turn the faucet handle clockwise to close it",
    "hammer-v3": "pick up the hammer and hammer the nail into the wall",
    "handle-press-side-v3": "press the handle down from the side",
    "handle-press-v3": "press the handle down",
    "handle-pull-side-v3": "pull the handle up from the side",
    "handle-pull-v3": "pull the handle up",
    "lever-pull-v3": "pull the lever up",
    "pick-place-wall-v3": "pick up the puck, move it past the wall and place it at the goal",
    "pick-out-of-hole-v3": "pick the puck up out of the hole",
    "pick-place-v3": "pick up the puck and place it at the goal",
    "plate-slide-v3": "slide the plate into the cabinet",
    "plate-slide-side-v3": "slide the plate into the cabinet from the side",
    "plate-slide-back-v3": "slide the plate out of the cabinet",
    "plate-slide-back-side-v3": "slide the plate out of the cabinet to the side",
    "peg-insert-side-v3": "pick up the peg and insert it sideways into the hole",
    "peg-unplug-side-v3": "pull the peg out of the hole sideways",
    "soccer-v3": "push the soccer ball into the goal",
    "stick-push-v3": "pick up the stick and push the bottle to the goal with it",
    "stick-pull-v3": "pick up the stick and pull the bottle to the goal with it",
    "push-v3": "push the puck to the goal",
    "push-wall-v3": "push the puck past the wall to the goal",
    "push-back-v3": "pull the puck back to the goal",
    "reach-v3": "reach the goal position with the gripper",
    "reach-wall-v3": "reach past the wall to the goal position",
    "shelf-place-v3": "pick up the puck and place it on the shelf",
    "sweep-into-v3": "sweep the puck into the hole",
    "sweep-v3": "sweep the puck off the edge of the table",
    "window-open-v3": "slide the window open",
    "window-close-v3": "slide the window closed",
}


def metaworld_instruction(task: str) -> str:
    """The English instruction of a Meta-World task (``pick-place-v3`` → ``pick up ...``).

    Args:
        task: A Meta-World V3 task name.

    Returns:
        The task's instruction from :data:`INSTRUCTIONS`.

    Raises:
        KeyError: Not one of the 50 V3 tasks.
    """
    try:
        return INSTRUCTIONS[task]
    except KeyError:
        raise KeyError(unknown_task_message(task, list(INSTRUCTIONS))) from None


def unknown_task_message(task: str, known: list[str]) -> str:
    """The error message of an unknown task name, with the closest known names.

    Args:
        task: The name that is not a task.
        known: The task names there are.

    Returns:
        A message naming ``task``, its close matches in ``known`` and how tasks are named.
    """
    close = difflib.get_close_matches(task, known, n=3, cutoff=0.6)
    hint = f"; did you mean {', '.join(repr(c) for c in close)}?" if close else ""
    return (
        f"unknown Meta-World task {task!r}{hint} (the {len(known)} V3 tasks are named like "
        "reach-v3, push-v3, pick-place-v3)"
    )
