"""Serve a run's policy: ``python flows/serve.py --config PRESET [--model URI] [overrides]``.

Starts the policy server of an online run (``online`` section: host, port, token, feedback
store) on a local Ray cluster and keeps it up until Ctrl-C, SIGTERM or ``--duration``:
OpenAI-compatible completions and chat completions, feedback, the feedback-ready event
(docs/online.md). What it serves, first found of:

1. ``--model``: a registered version (``models:/<name>@<alias>``) or a model directory;
2. the run's served version (``<run dir>/served/current.json``, kept current by training);
3. the run's latest committed checkpoint (exported as a served version);
4. the run's starting model (its warm start trained first when missing).

Feedback goes to the run's store, where the run's next training iterations take it.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
from pathlib import Path
from typing import Any

from prefect import flow

from flows import PROJECT_LOGGERS
from infra.checkpoint.export import export_policy, policy_from_checkpoint
from infra.checkpoint.location import run_store_uri
from infra.checkpoint.reader import locate_checkpoint
from infra.checkpoint.store import open_store
from infra.cluster import ray_cluster
from kinds.online.config import OnlineConfig
from kinds.online.deployment import Weights, read_weights, start_policy_server
from kinds.online.runtime import SERVED_DIR, WEIGHTS_FILE, server_settings, store_path
from kinds.online.store_mirror import restore_store
from rl_core.config import RLPipeConfig, load_config

logger = logging.getLogger("rlpipe.serve")


def served_weights(cfg: RLPipeConfig, model: str | None, tracking_uri: str | None) -> Weights:
    """What to serve (see the module docstring), as :class:`Weights`."""
    run_dir = Path(cfg.run.output_dir) / cfg.run.name
    if model:
        if model.startswith("models:/"):
            from infra.tracking.model_registry import download_registered_model

            local = download_registered_model(
                model, tracking_uri, run_dir / SERVED_DIR / "registered"
            )
            return Weights(0, str(Path(local).resolve()))
        return Weights(0, str(Path(model).resolve()))
    current = run_dir / SERVED_DIR / WEIGHTS_FILE
    if current.is_file():
        weights = read_weights(current)
        if Path(weights.model_dir).is_dir():
            return weights
    store_uri = run_store_uri(cfg.run.output_dir, cfg.run.name, cfg.run.checkpoint_uri)
    latest = open_store(store_uri).latest()
    if latest is not None:
        ref = locate_checkpoint(store_uri, None, cfg.run.trust_checkpoint)
        policy, config, _ = policy_from_checkpoint(ref)
        out = run_dir / SERVED_DIR / f"v{ref.step:06d}"
        source = {"run_name": cfg.run.name, "weight_version": ref.step}
        export_policy(policy, config["model"], None, out, source=source, overwrite=True)
        return Weights(ref.step, str(out.resolve()))
    from flows.train import prepare_model

    prepared = prepare_model(cfg)
    return Weights(0, str(Path(prepared.model.model_path).resolve()))


def trainer_overrides(cfg: RLPipeConfig, given: list[str]) -> list[str]:
    """The overrides of the run that trains on this endpoint's feedback (event payload).

    The served run's own, then: an external endpoint, no simulated user, and the output
    folder and store as absolute paths (the flow run may start in another folder).
    """
    return [
        *given,
        "online.server=external",
        "online.user.enabled=false",
        f"run.output_dir={Path(cfg.run.output_dir).resolve()}",
        f"online.store={store_path(cfg).resolve()}",
    ]


def serve(
    preset: str = "online_arith",
    overrides: list[str] | None = None,
    run_name: str | None = None,
    model: str | None = None,
    duration_s: float | None = None,
) -> dict[str, Any]:
    """Serve the policy of an online run until stopped (or for ``duration_s`` seconds).

    Without a Prefect API; the ``serve`` flow (:func:`serve_policy`) wraps it.

    Args:
        preset: Preset name or YAML path (an online reasoning run).
        overrides: ``section.field=value`` strings.
        run_name: Shortcut for ``run.name=...``.
        model: Serve this registered version or model directory instead of the run's.
        duration_s: Stop after this long (None: until SIGINT/SIGTERM or cancellation).

    Returns:
        The URL served and the versions it served.
    """
    given = list(overrides or [])
    cfg = load_config(preset, [*given, *([f"run.name={run_name}"] if run_name else [])])
    if not isinstance(cfg, OnlineConfig):
        raise ValueError(
            f"{preset}: a {cfg.kind_name} run; only online runs (a reasoning config with "
            "online.enabled: true) are served"
        )
    online = cfg.online
    from infra.driver.session import resolve_tracking_uri

    tracking_uri = resolve_tracking_uri(
        cfg.tracking.tracking_uri, Path(cfg.run.output_dir).resolve()
    )
    weights = served_weights(cfg, model, tracking_uri)
    token = os.environ.get(online.token_env) or None
    settings = server_settings(
        cfg,
        token,
        trainer="external",
        preset=str(Path(preset).resolve()) if Path(preset).is_file() else preset,
        run_name=cfg.run.name,
        overrides=trainer_overrides(cfg, given),
    )
    if online.mirror:  # (a lost database comes back from the mirror before serving)
        restore_store(store_path(cfg), online.mirror)
    ray_cluster.connect_cluster(cfg.cluster)
    port = online.port or _free_port()
    url = start_policy_server(settings, weights, online.host, port)
    logger.info(
        "serving %s (weight version %d) at %s/v1; feedback to %s; Ctrl-C stops",
        settings.model_name,
        weights.version,
        url,
        settings.store,
    )
    stop = threading.Event()
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda *_: stop.set())
    try:
        stop.wait(duration_s)
    finally:
        from ray import serve

        serve.shutdown()
        logger.info("stopped serving %s", settings.model_name)
    served = read_weights(settings.weights_file)
    return {"url": url, "first_version": weights.version, "last_version": served.version}


#: :func:`serve` as a Prefect flow, the ``serve-online-arith`` deployment's entrypoint: the
#: server runs until the flow run is cancelled (or for ``duration_s`` seconds).
serve_policy = flow(name="serve", flow_run_name="serve-{preset}", persist_result=False)(serve)


def _free_port() -> int:
    from infra.processes import free_port

    return free_port()


def main(argv: list[str] | None = None, prog: str = "python flows/serve.py") -> int:
    """CLI entry point."""
    import argparse

    from flows.cli_args import run_name_arg

    parser = argparse.ArgumentParser(prog=prog, description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", default="online_arith", help="preset name or YAML path")
    parser.add_argument("--run-name", type=run_name_arg, help="run name; same as run.name=...")
    parser.add_argument("--model", help="serve this registered version or model directory")
    parser.add_argument("--duration", type=float, help="stop after this many seconds")
    parser.add_argument("overrides", nargs="*", help="dotted overrides, e.g. online.port=8001")
    args = parser.parse_args(argv)
    handler = logging.StreamHandler(sys.stdout)
    handler.setFormatter(logging.Formatter("%(asctime)s | %(levelname)-7s | %(message)s"))
    for name in PROJECT_LOGGERS:
        logging.getLogger(name).addHandler(handler)
        logging.getLogger(name).setLevel(logging.INFO)
    result = serve(
        preset=args.config,
        overrides=args.overrides,
        run_name=args.run_name,
        model=args.model,
        duration_s=args.duration,
    )
    logger.info("served %s", result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
