"""Write offline transitions for RLPD from a trained policy's episodes.

Usage:
    .venv/bin/python scripts/make_offline_data.py CHECKPOINT OUT.safetensors
        [--episodes 10] [--seed 0] [--mode train|eval]

CHECKPOINT is a run's checkpoint store (``<output_dir>/<run>/checkpoints``) or one of its
``step_*`` folders, of a run whose model caches ``states`` and ``actions`` (``mlp_sac``,
e.g. a ``sac_pendulum`` run). The episodes use reset seeds ``seed .. seed+episodes-1``;
``--mode train`` samples actions (varied data, the default), ``eval`` takes mean actions.
The file is safetensors (reading it cannot run code); set ``replay.offline_data`` to it.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main(argv: list[str] | None = None) -> int:
    """Play the episodes and write the file; prints a summary line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checkpoint", help="checkpoint store or step_* folder")
    parser.add_argument("out", help="output .safetensors file")
    parser.add_argument("--episodes", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0, help="first reset seed")
    parser.add_argument("--mode", choices=("train", "eval"), default="train")
    args = parser.parse_args(argv)

    from infra.checkpoint.export import policy_from_checkpoint
    from infra.checkpoint.reader import locate_checkpoint
    from infra.checkpoint.store import CheckpointError
    from rl_core.config import validate_config
    from rl_core.data.offline_episodes import collect_transitions
    from rl_core.data.replay_buffer import TransitionFileError, save_transitions

    try:
        policy, config, _ = policy_from_checkpoint(locate_checkpoint(args.checkpoint))
        cfg = validate_config(config, source=args.checkpoint)
        seeds = list(range(args.seed, args.seed + args.episodes))
        data, returns = collect_transitions(policy, cfg.env, seeds, args.mode, args.seed)
        path = save_transitions(data, args.out)
    except (CheckpointError, TransitionFileError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    mean = sum(returns) / len(returns)
    print(
        f"wrote {path}: {len(data['rewards'])} transitions from {len(returns)} "
        f"{cfg.env.env_id} episodes (mean return {mean:.1f}, {args.mode} actions)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
