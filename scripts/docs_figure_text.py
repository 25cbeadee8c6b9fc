"""The text of the docs' figure blocks, from the results of the documented runs.

Used by ``scripts/make_docs_figures.py``; a result is any object with the fields of its
``RunResult`` (``command``, ``commit``, ``seconds``, ``summary``, ``last_line``,
``summary_text``, ``metrics``, ``curve``).
"""

from __future__ import annotations

import re
from typing import Any

from docs_blocks import REPRODUCE

DEFAULT_CURVE = "learning-curve-ppo-cartpole.png"
SFT_CURVE = "learning-curve-sft-arith.png"
SUMMARY_RULE = "rlpipe run finished"
_SUMMARY_LINE = re.compile(r"^\s*([^:]+?): (.*)$")
#: A per-iteration progress line (after the log line's time and level, when present).
_ITERATION_LINE = re.compile(r"(iter (\d+)/\d+ \|.*)$")


def parse_summary(output: str) -> tuple[str, dict[str, str]]:
    """The summary block a run command prints at its end, as text and as a dict.

    Raises:
        ValueError: ``output`` has no summary.
    """
    lines = output.splitlines()
    starts = [i for i, line in enumerate(lines) if SUMMARY_RULE in line]
    if not starts:
        raise ValueError(f"no {SUMMARY_RULE!r} summary in the output:\n{output}")
    block = [line.rstrip() for line in lines[starts[-1] :] if line.strip()]
    fields = {}
    for line in block[1:]:
        match = _SUMMARY_LINE.match(line)
        if match:
            fields[match.group(1).strip()] = match.group(2).strip()
    return "\n".join(block), fields


def iteration_lines(output: str) -> list[tuple[int, str]]:
    """The per-iteration progress lines (``iter k/n | ...``) with their iteration ``k``."""
    found = (_ITERATION_LINE.search(line.rstrip()) for line in output.splitlines())
    return [(int(m.group(2)), m.group(1)) for m in found if m]


def last_iteration_line(output: str) -> str:
    """The last per-iteration progress line, or an empty string."""
    lines = iteration_lines(output)
    return lines[-1][1] if lines else ""


def iteration_values(output: str, label: str) -> list[tuple[int, float]]:
    """``(k, value)`` of ``label value`` in each progress line that shows it (``accuracy``)."""
    pattern = re.compile(rf"\| {re.escape(label)} (-?[\d.]+)")
    found = ((k, pattern.search(line)) for k, line in iteration_lines(output))
    return [(k, float(m.group(1))) for k, m in found if m]


def duration(seconds: float) -> str:
    """``42 s`` or ``1 min 50 s``."""
    whole = round(seconds)
    return f"{whole} s" if whole < 60 else f"{whole // 60} min {whole % 60} s"


def iteration_seconds(result: Any) -> float:
    """Seconds spent in iterations (the sum of the run's ``time/iteration`` metric)."""
    return sum(value for _, value in result.metrics.get("time/iteration", []))


def measured_by(result: Any) -> str:
    """``Measured by `python scripts/make_docs_figures.py` at commit `abc1234```."""
    return f"Measured by `{REPRODUCE}` at commit `{result.commit}`"


def _measured(result: Any, cores: int) -> str:
    return (
        f"{measured_by(result)} (a fresh `{result.command}`, seed 0, on {cores} CPU cores, no GPU)"
    )


def _fenced(result: Any) -> str:
    shown = [result.last_line, result.summary_text] if result.last_line else [result.summary_text]
    return "```\n" + "\n".join(shown) + "\n```\n"


def summary_block(result: Any, cores: int) -> str:
    """The end of the run's terminal output, fenced, with how to reproduce it."""
    return f"{_fenced(result)}\n{_measured(result, cores)}.\n"


def default_run_sentence(result: Any, cores: int) -> str:
    """One sentence: where the default run was solved, and how long it took."""
    s = result.summary
    iterations = iteration_seconds(result)
    return (
        f"{_measured(result, cores)}: solved at iteration {s['iterations']} (evaluation "
        f"return {s['last_eval_return']}), {duration(iterations)} of iterations, "
        f"{duration(result.seconds)} for the whole command (the rest is the start-up of the "
        "Prefect API, Ray and the workers, and the shutdown). The run is deterministic: the "
        "iterations and returns repeat exactly; the times vary with the machine's load.\n"
    )


def default_run(result: Any, cores: int, images: str) -> str:
    """The README's view of the default run: its output, its timing, its learning curve."""
    curve = f"\n![Learning curve of the default run]({images}{DEFAULT_CURVE})\n"
    return (
        _fenced(result)
        + "\n"
        + default_run_sentence(result, cores)
        + (curve if result.curve else "")
    )


def sft_arith(result: Any, cores: int, images: str) -> str:
    """The ``sft_arith`` preset's accuracy by iteration, where it stopped, how long it took."""
    curve = result.metrics.get("accuracy", [])
    shown = [(step, value) for step, value in curve if step % 5 == 0 or step == curve[-1][0]]
    header = " | ".join(str(step) for step, _ in shown)
    values = " | ".join(f"{100 * value:.1f}%" for _, value in shown)
    s = result.summary
    table = (
        f"| iteration | {header} |\n| --- |{' --- |' * len(shown)}\n"
        f"| held-out accuracy | {values} |\n"
    )
    text = (
        f"{_measured(result, cores)}; held-out accuracy on 200 prompts, greedy, after "
        "iteration k (the terminal's `iter k/…` lines):\n\n"
        f"{table}\n"
        f"Stopped at iteration {s['iterations']} with {100 * float(s['last_eval_return']):.1f}% "
        f"(the first evaluation at or above 60%), {duration(result.seconds)} for the whole "
        "command (the time varies with the machine's load; the accuracies repeat exactly). "
        "The plot's x axis is the MLflow step, the iteration − 1.\n"
    )
    if result.curve:
        text += f"\n![Learning curve of the sft_arith preset]({images}{SFT_CURVE})\n"
    return text


#: The RL presets on arithmetic, each warm-started from the ``sft_arith`` export.
RL_PRESETS = ("grpo_arith", "dapo_arith", "reinforce_pp_arith", "grpo_arith_megatron")
#: The iterations whose held-out accuracy the RL tables show.
RL_COLUMNS = (10, 20, 40, 60, 80, 100, 120)
_BEFORE = re.compile(r"before training \| eval (-?[\d.]+)")


def before_training(output: str) -> float | None:
    """The ``eval.before_training`` result a run printed (None: it printed none)."""
    found = _BEFORE.search(output)
    return float(found.group(1)) if found else None


def _percent(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.1f}%"


def _rl_cells(result: Any) -> list[str]:
    """before, the accuracy at each of :data:`RL_COLUMNS`, best."""
    accuracy = dict(result.metrics.get("accuracy", []))
    before = before_training(result.output)
    values = [v for v in (before, *accuracy.values()) if v is not None]
    best = max(values) if values else None
    return [_percent(before), *(_percent(accuracy.get(k)) for k in RL_COLUMNS), _percent(best)]


def _rl_header(extra: tuple[str, ...]) -> str:
    columns = ("preset", "before", *(f"iter {k}" for k in RL_COLUMNS), "best", *extra)
    return f"| {' | '.join(columns)} |\n|{' --- |' * len(columns)}\n"


def rl_arith(results: dict[str, Any], sft: Any, cores: int) -> str:
    """The RL presets' accuracy table: every row from the same ``sft_arith`` export."""
    rows = "".join(
        f"| `{preset}` | {' | '.join(_rl_cells(r))} | {duration(iteration_seconds(r))} | "
        f"{duration(r.seconds)} |\n"
        for preset, r in results.items()
    )
    return (
        f"{measured_by(next(iter(results.values())))} on {cores} CPU cores, no GPU, seed 0: right after the "
        f"`sft_arith` run above, each preset ran fresh (`python flows/train.py --config "
        "PRESET`) and warm-started from that run's export, whose held-out accuracy is the "
        '"before" column (each run evaluates it before training). Held-out accuracy on 200 '
        "prompts, greedy, after iteration k; the times are the sum of the iterations and the "
        "whole command (they vary with the machine's load; the accuracies repeat exactly):\n\n"
        f"{_rl_header(('iterations', 'whole command'))}{rows}"
    )


def grpo_arith_learning(results: dict[str, Any], cores: int) -> str:
    """One paragraph: what ``grpo_arith`` gains over its warm start, and the others' bests."""
    r = results["grpo_arith"]
    accuracy = dict(r.metrics.get("accuracy", []))
    before = before_training(r.output) or 0.0
    last = accuracy.get(max(accuracy)) if accuracy else None
    cells = _rl_cells(r)
    others = "; ".join(
        f"`{preset}` {_rl_cells(o)[-1]}" for preset, o in results.items() if preset != "grpo_arith"
    )
    gain = 100 * ((last or before) - before)
    return (
        f"{measured_by(r)} (seed 0, {cores} CPU cores, no GPU): from the `sft_arith` "
        f"export ({_percent(before)} held-out accuracy, evaluated before training), "
        f"`grpo_arith` reaches {_percent(accuracy.get(10))} after 10 iterations and "
        f"{_percent(last)} after {max(accuracy) if accuracy else 0} (best {cells[-1]}), "
        f"**{gain:+.1f} points**, in {duration(iteration_seconds(r))} of iterations. The best "
        f"accuracies of the other presets from the same export: {others}.\n"
    )


def megatron_learning(results: dict[str, Any], cores: int) -> str:
    """``grpo_arith`` (FSDP2) and ``grpo_arith_megatron`` (TP 2) side by side."""
    rows = "".join(
        f"| `{preset}` ({label}) | {' | '.join(_rl_cells(results[preset]))} | "
        f"{duration(iteration_seconds(results[preset]))} |\n"
        for preset, label in (("grpo_arith", "FSDP2, 1 rank"), ("grpo_arith_megatron", "TP 2"))
    )
    return (
        f"{measured_by(results['grpo_arith'])} on {cores} CPU cores, seed 0: both from the same "
        "`sft_arith` export, held-out accuracy on 200 prompts, greedy, after iteration k, and "
        "the sum of the iteration times:\n\n"
        f"{_rl_header(('iterations',))}{rows}"
    )
