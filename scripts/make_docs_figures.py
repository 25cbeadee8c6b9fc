"""Run the documented runs once and write their numbers and plots into the docs.

    .venv/bin/python scripts/make_docs_figures.py [--skip-sft] [--skip-rl]

Runs, each fresh in a temporary folder with its own Prefect home (no local stack, no
``PREFECT_API_URL``), exactly the commands a user types:

- ``python flows/train.py`` (the default preset, ``ppo_cartpole``);
- ``python flows/sft.py`` (the ``sft_arith`` preset);
- ``python flows/train.py --config PRESET`` for each RL preset on arithmetic
  (:data:`docs_figure_text.RL_PRESETS`), in the same folder, so each warm-starts from the
  export of the ``sft_arith`` run just made (about 15 minutes on 2 cores).

It reads each run's summary (the command's output) and metrics (its MLflow store), then
rewrites the marked blocks (``<!-- figures:NAME -->`` ... ``<!-- /figures:NAME -->``) listed
in :data:`DOC_BLOCKS`, and copies the learning curves the runs logged to MLflow
(``plots/learning_curve.png``) and the UI screenshots the browser tests saved
(``outputs/ui-screenshots/``, when present) to ``docs/images/``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(1, str(Path(__file__).resolve().parents[1]))

import docs_figure_text as text  # noqa: E402
from docs_blocks import rewrite_file  # noqa: E402

from infra.provenance import short_commit  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
IMAGES = ROOT / "docs" / "images"
SCREENSHOTS = ROOT / "outputs" / "ui-screenshots"
#: Every figure block of the docs, by file (the unit tests check that each exists).
DOC_BLOCKS: dict[str, tuple[str, ...]] = {
    "README.md": ("default-run",),
    "docs/quickstart.md": ("default-run-summary",),
    "docs/presets.md": ("default-run", "sft-arith", "rl-arith"),
    "docs/reasoning.md": ("grpo-arith-learning",),
    "docs/megatron.md": ("megatron-learning",),
}
#: Variables that would point a run at services other than its own.
FOREIGN_SERVICES = ("PREFECT_API_URL", "MLFLOW_TRACKING_URI", "RAY_ADDRESS")


@dataclass
class RunResult:
    """What one documented command printed and logged."""

    command: str
    commit: str
    seconds: float
    summary: dict[str, str]
    last_line: str
    summary_text: str
    output: str
    metrics: dict[str, list[tuple[int, float]]] = field(default_factory=dict)
    curve: Path | None = None


def run_command(script: str, workdir: Path, *args: str) -> RunResult:
    """Run ``python <script> [args] --fresh`` in ``workdir`` and read what it printed.

    Raises:
        RuntimeError: The command failed (its output is in the message).
    """
    env = {k: v for k, v in os.environ.items() if k not in FOREIGN_SERVICES}
    env.update(
        RLPIPE_STACK="off",
        PREFECT_HOME=str(workdir / "prefect-home"),
        PYTHONPATH=str(ROOT),
        COLUMNS="90",
        NO_COLOR="1",
    )
    started = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, str(ROOT / script), *args, "--fresh"],
        cwd=workdir,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,  # the terminal's lines and summary go to stderr
        text=True,
        check=False,
    )
    seconds = time.perf_counter() - started
    if proc.returncode != 0:
        raise RuntimeError(f"{script} exited {proc.returncode}:\n{proc.stdout}")
    output = proc.stdout.replace(str(workdir), "/…")
    print(output, file=sys.stderr)
    summary_text, summary = text.parse_summary(output)
    return RunResult(
        command=" ".join(("python", script, *args)),
        commit=short_commit(ROOT),
        seconds=seconds,
        summary=summary,
        last_line=text.last_iteration_line(output),
        summary_text=summary_text,
        output=output,
    )


def read_mlflow(result: RunResult, workdir: Path, keys: tuple[str, ...]) -> None:
    """Fill ``result.metrics`` (``keys``) and ``result.curve`` from the run's MLflow store."""
    from mlflow.tracking import MlflowClient

    uri = f"sqlite:///{workdir / 'outputs' / 'mlflow.db'}"
    client = MlflowClient(uri)
    run_id = result.summary["MLflow run id"]
    for key in keys:
        history = client.get_metric_history(run_id, key)
        result.metrics[key] = sorted((m.step, m.value) for m in history)
    curves = list((workdir / "outputs").rglob(f"{run_id}/artifacts/plots/learning_curve.png"))
    result.curve = curves[0] if curves else None


def copy_images(default: RunResult, sft: RunResult | None) -> None:
    """Copy the learning curves and the browser tests' UI screenshots to docs/images/."""
    IMAGES.mkdir(parents=True, exist_ok=True)
    for result, name in ((default, text.DEFAULT_CURVE), (sft, text.SFT_CURVE)):
        if result is not None and result.curve is not None:
            shutil.copyfile(result.curve, IMAGES / name)
    if SCREENSHOTS.is_dir():
        for shot in sorted(SCREENSHOTS.glob("*.png")):
            if not shot.name.startswith("failed-"):  # what a failing UI test saw
                shutil.copyfile(shot, IMAGES / shot.name)


def rl_runs(workdir: Path) -> dict[str, RunResult]:
    """Each RL preset on arithmetic, warm-started from the ``sft_arith`` export in ``workdir``."""
    results = {}
    for preset in text.RL_PRESETS:
        result = run_command("flows/train.py", workdir, "--config", preset)
        read_mlflow(result, workdir, ("time/iteration",))
        result.metrics["accuracy"] = text.iteration_values(result.output, "accuracy")
        results[preset] = result
    return results


def main(argv: list[str] | None = None) -> int:
    """Run the documented commands and rewrite the docs' figure blocks."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--skip-sft", action="store_true", help="leave the sft-arith and RL preset blocks"
    )
    parser.add_argument("--skip-rl", action="store_true", help="leave the RL preset blocks")
    args = parser.parse_args(argv)
    cores = os.cpu_count() or 1
    with tempfile.TemporaryDirectory(prefix="rlpipe-docs-") as tmp:
        workdir = Path(tmp)
        default = run_command("flows/train.py", workdir)
        read_mlflow(default, workdir, ("time/iteration",))
        sft = None
        if not args.skip_sft:
            sft = run_command("flows/sft.py", workdir)
            read_mlflow(sft, workdir, ("time/iteration",))
            sft.metrics["accuracy"] = text.iteration_values(sft.output, "accuracy")
        rl = {} if sft is None or args.skip_rl else rl_runs(workdir)
        copy_images(default, sft)
    blocks = {
        "README.md": {"default-run": text.default_run(default, cores, "docs/images/")},
        "docs/quickstart.md": {"default-run-summary": text.summary_block(default, cores)},
        "docs/presets.md": {"default-run": text.default_run_sentence(default, cores)},
    }
    if sft is not None:
        blocks["docs/presets.md"]["sft-arith"] = text.sft_arith(sft, cores, "images/")
    if rl:
        blocks["docs/presets.md"]["rl-arith"] = text.rl_arith(rl, sft, cores)
        blocks["docs/reasoning.md"] = {"grpo-arith-learning": text.grpo_arith_learning(rl, cores)}
        blocks["docs/megatron.md"] = {"megatron-learning": text.megatron_learning(rl, cores)}
    for name, file_blocks in blocks.items():
        changed = rewrite_file(ROOT / name, file_blocks)
        print(f"{name}: {'updated' if changed else 'unchanged'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
