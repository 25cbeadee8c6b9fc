"""Build the tiny character-level Qwen2 model used by tests and reasoning presets.

Usage: ``python scripts/build_tiny_lm.py OUT_DIR [--seed N] [--layers N] [--width N]``.
Nothing is downloaded; the directory loads with ``AutoModelForCausalLM.from_pretrained``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rl_core.models.tiny_lm import create_tiny_lm  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    """CLI entry point."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("out_dir")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--width", type=int, default=64)
    args = parser.parse_args(argv)
    out = create_tiny_lm(
        args.out_dir,
        seed=args.seed,
        num_hidden_layers=args.layers,
        hidden_size=args.width,
        intermediate_size=args.width * 11 // 4,
    )
    print(f"wrote tiny model to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
