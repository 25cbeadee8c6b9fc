"""The local stack's CLI: ``up`` (foreground; Ctrl-C stops it), ``down``, ``status``, ``env``.

    bash scripts/stack.sh up                 # Prefect :4200, MLflow :5000, pool + worker
    eval "$(bash scripts/stack.sh env)"      # in another shell: PREFECT_API_URL, ...
    .venv/bin/prefect --no-prompt deploy --all
    .venv/bin/prefect deployment run train/train-ppo-cartpole
    bash scripts/stack.sh down

See docs/local-stack.md.
"""

from __future__ import annotations

import argparse
import json
import logging
import shlex
import signal
import sys
import threading
from pathlib import Path

from rich.console import Console

from infra.ops.stack import LocalStack, StackError, StackSettings, read_state, stop_running

ROOT = Path(__file__).resolve().parents[1]

console = Console()


def main(argv: list[str] | None = None, prog: str = "bash scripts/stack.sh") -> int:
    """Run the CLI; returns the exit code."""
    args = _parser(prog).parse_args(argv)
    home = Path(args.home).resolve()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    if args.command == "down":
        stopped = stop_running(home)
        console.print("stack stopped" if stopped else f"no stack running from {home}")
        return 0
    if args.command in ("status", "env"):
        state = read_state(home)
        if not state:
            console.print(f"[red]no stack running from {home}[/red]", highlight=False)
            return 1
        if args.command == "env":
            for key, value in state["env"].items():
                print(f"export {key}={shlex.quote(value)}")  # for eval "$(...)"
        else:
            console.print_json(json.dumps(state))
        return 0
    return _up(args, home)


def _up(args: argparse.Namespace, home: Path) -> int:
    settings = StackSettings(
        home=home,
        prefect_port=args.prefect_port,
        mlflow_port=args.mlflow_port,
        artifacts=args.artifacts,
        ray=args.ray,
    )
    stack = LocalStack(settings)
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    try:
        with console.status("starting Prefect server, MLflow server, work pool and worker"):
            state = stack.start()
    except StackError as exc:
        console.print(f"[red]error:[/red] {exc}", highlight=False)
        return 2
    _print_ready(state)
    try:
        while not stop.wait(1.0):
            dead = [
                n for n, p in _children(stack).items() if p is not None and p.poll() is not None
            ]
            if dead:
                console.print(f"[red]{', '.join(dead)} exited; see {home / 'logs'}[/red]")
                return 1
    finally:
        with console.status("stopping"):
            stack.stop()
        console.print("stack stopped")
    return 0


def _children(stack: LocalStack) -> dict:
    return {
        "prefect server": stack.prefect.process if stack.prefect else None,
        "mlflow server": stack.mlflow,
        "worker": stack.worker,
        "ray head": stack.ray.process if stack.ray else None,
    }


def _print_ready(state: dict) -> None:
    console.rule("rlpipe local stack")
    console.print(f"  Prefect UI   {state['prefect_ui']}", highlight=False)
    console.print(f"  MLflow UI    {state['mlflow_ui']}", highlight=False)
    console.print(f"  work pool    {state['pool']} (worker running)", highlight=False)
    if state["ray_address"]:
        console.print(f"  Ray head     {state['ray_address']}", highlight=False)
    console.print(f"  state, logs  {state['home']}", highlight=False)
    console.print("\nIn another shell:", highlight=False)
    console.print(f'  eval "$(bash scripts/stack.sh env --home {state["home"]})"', highlight=False)
    console.print("  .venv/bin/prefect --no-prompt deploy --all", highlight=False)
    console.print("  .venv/bin/prefect deployment run train/train-ppo-cartpole", highlight=False)
    console.print("\nCtrl-C (or `bash scripts/stack.sh down`) stops everything.", highlight=False)


def _parser(prog: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=prog, description=__doc__.splitlines()[0])
    parser.add_argument("command", nargs="?", default="up", choices=["up", "down", "status", "env"])
    parser.add_argument("--home", default=str(ROOT / ".stack"), help="state and logs folder")
    parser.add_argument("--prefect-port", type=int, default=4200)
    parser.add_argument("--mlflow-port", type=int, default=5000)
    parser.add_argument(
        "--artifacts",
        default=None,
        help="MLflow artifact destination: a folder or s3://bucket/prefix "
        "(default: <home>/mlflow/artifacts; S3 endpoint from MLFLOW_S3_ENDPOINT_URL)",
    )
    parser.add_argument("--ray", action="store_true", help="also start a Ray head for the runs")
    return parser


if __name__ == "__main__":
    sys.exit(main())
