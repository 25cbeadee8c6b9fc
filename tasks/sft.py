"""export_model: the supervised warm start's policy as a standalone model directory.

(Its ``sft_update`` step is a step task, ``tasks/steps.py``.)
"""

from __future__ import annotations

from typing import Any

from prefect import task

from tasks.options import STEP_OPTIONS


@task(name="export_model", task_run_name="export_model-{run_name}", **STEP_OPTIONS)
def export_model(
    store_uri: str, out_dir: str, run_name: str, trust: bool = False, finished: bool = False
) -> dict[str, Any]:
    """Write the latest checkpoint's policy as a standalone (Hugging Face) model directory.

    Args:
        store_uri: The run's checkpoint store.
        out_dir: The model directory to write.
        run_name: The run (recorded in the directory's metadata).
        trust: The checkpoint's config may ask for the model's own code (see
            ``locate_checkpoint``).
        finished: The run finished (recorded as ``source.finished``: warm starts use only
            finished exports).
    """
    from infra.checkpoint.export import export_policy, policy_from_checkpoint
    from infra.checkpoint.reader import locate_checkpoint

    ref = locate_checkpoint(store_uri, trust=trust)
    policy, config, spaces = policy_from_checkpoint(ref)
    source = {
        "run_name": run_name,
        "step": ref.step,
        "checkpoint": ref.location,
        "finished": finished,
    }
    path = export_policy(policy, config["model"], spaces, out_dir, source=source, overwrite=True)
    return {"model_dir": str(path), "step": ref.step}
