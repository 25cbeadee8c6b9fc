"""The docs' figure blocks: rewriting them, and that every one the script fills exists."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _script(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault(name, module)
    spec.loader.exec_module(module)
    return module


blocks = _script("docs_blocks")
figures = _script("make_docs_figures")
text = _script("docs_figure_text")

DOC = "intro\n<!-- figures:run -->\nold 1\nold 2\n<!-- /figures:run -->\noutro\n"


def test_replace_block_swaps_only_the_contents():
    new = blocks.replace_block(DOC, "run", "iteration 12, eval 500.0")
    assert new == (
        "intro\n<!-- figures:run -->\niteration 12, eval 500.0\n<!-- /figures:run -->\noutro\n"
    )
    assert blocks.replace_block(new, "run", "iteration 12, eval 500.0") == new


@pytest.mark.parametrize(
    "doc",
    [
        "no markers at all\n",
        "<!-- figures:run -->\nopened only\n",
        "<!-- /figures:run -->\n<!-- figures:run -->\n",
        DOC + DOC,
    ],
    ids=["missing", "unclosed", "reversed", "twice"],
)
def test_a_missing_or_broken_marker_fails_naming_the_block(doc):
    with pytest.raises(blocks.MissingBlockError, match="block 'run'"):
        blocks.replace_block(doc, "run", "x")


def test_rewrite_file_names_the_file_and_writes_nothing_on_a_missing_block(tmp_path):
    page = tmp_path / "page.md"
    page.write_text(DOC)
    with pytest.raises(blocks.MissingBlockError, match=r"page\.md: block 'other'"):
        blocks.rewrite_file(page, {"run": "new", "other": "x"})
    assert page.read_text() == DOC
    assert blocks.rewrite_file(page, {"run": "new"}) is True
    assert blocks.rewrite_file(page, {"run": "new"}) is False


def test_every_figure_block_exists_once_and_says_how_to_reproduce():
    declared = set()
    for name, names in figures.DOC_BLOCKS.items():
        page = (ROOT / name).read_text()
        for block in names:
            start, end = blocks.markers(block)
            assert page.count(start) == 1 and page.count(end) == 1, (name, block)
            body = page.split(start, 1)[1].split(end, 1)[0]
            assert blocks.REPRODUCE in body, (name, block)
            assert re.search(r"at commit `[0-9a-f]{7}`", body), (name, block, "no commit")
            declared.add((name, block))
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    found = {
        (str(p.relative_to(ROOT)), b) for p in pages for b in blocks.block_names(p.read_text())
    }
    assert found == declared, "a figure block no script run fills, or one missing"


SAMPLE_OUTPUT = """\
run ppo-cartpole: full log in /…/outputs/ppo-cartpole/rlpipe.log
03:28:49 | INFO    | iter 11/60 | env steps 11264 | return 150.2 | accuracy 0.465 | orch 700 ms
03:28:51 | INFO    | iter 12/60 | env steps 12288 | return 180.9 | eval 500.0 | orch 690 ms
──────────── rlpipe run finished ────────────
          run_name: ppo-cartpole
        iterations: 12
            solved: True
  last_eval_return: 500.0
     MLflow run id: abc123
"""


def test_the_summary_and_last_progress_line_are_read_from_the_output():
    shown, fields = text.parse_summary(SAMPLE_OUTPUT)
    assert shown.startswith("──") and shown.endswith("MLflow run id: abc123")
    assert fields["iterations"] == "12" and fields["MLflow run id"] == "abc123"
    assert text.last_iteration_line(SAMPLE_OUTPUT).startswith("iter 12/60 | env steps 12288")
    assert text.iteration_values(SAMPLE_OUTPUT, "accuracy") == [(11, 0.465)]
    assert text.iteration_values(SAMPLE_OUTPUT, "eval") == [(12, 500.0)]
    with pytest.raises(ValueError, match="rlpipe run finished"):
        text.parse_summary("error: boom\n")


def test_block_texts_carry_the_run_numbers():
    shown, fields = text.parse_summary(SAMPLE_OUTPUT)
    result = SimpleNamespace(
        command="python flows/train.py",
        commit="abc1234",
        seconds=75.4,
        summary=fields,
        last_line=text.last_iteration_line(SAMPLE_OUTPUT),
        summary_text=shown,
        metrics={"time/iteration": [(1, 2.0), (2, 2.5)]},
        curve=None,
    )
    body = text.default_run(result, 2, "docs/images/")
    assert "solved at iteration 12 (evaluation return 500.0)" in body
    assert "4 s of iterations, 1 min 15 s for the whole command" in body
    assert blocks.REPRODUCE in body and "iter 12/60" in body
    assert f"`{blocks.REPRODUCE}` at commit `abc1234`" in body
    sft = SimpleNamespace(
        command="python flows/sft.py",
        commit="abc1234",
        seconds=110,
        summary={"iterations": "7", "last_eval_return": "0.725"},
        metrics={"accuracy": [(i, i / 10) for i in range(1, 8)]},
        curve=Path("x.png"),
    )
    body = text.sft_arith(sft, 2, "images/")
    assert "| iteration | 5 | 7 |" in body and "| held-out accuracy | 50.0% | 70.0% |" in body
    assert "Stopped at iteration 7 with 72.5%" in body and "1 min 50 s" in body
    assert f"images/{text.SFT_CURVE}" in body


RL_OUTPUT = """\
03:30:00 | INFO    | before training | eval 0.660
03:30:05 | INFO    | iter 10/120 | reward 0.700 | accuracy 0.795 | orch 300 ms
03:30:09 | INFO    | iter 20/120 | reward 0.800 | accuracy 0.830 | orch 300 ms
03:30:30 | INFO    | iter 120/120 | reward 0.900 | accuracy 0.845 | orch 300 ms
"""


def test_rl_tables_read_before_each_column_and_the_best():
    assert text.before_training(RL_OUTPUT) == 0.66
    assert text.before_training("no evaluation before training") is None

    def result(command: str) -> SimpleNamespace:
        return SimpleNamespace(
            command=command,
            commit="def5678",
            seconds=130.0,
            output=RL_OUTPUT,
            metrics={
                "time/iteration": [(0, 40.0), (1, 30.0)],
                "accuracy": text.iteration_values(RL_OUTPUT, "accuracy"),
            },
        )

    results = {
        preset: result(f"python flows/train.py --config {preset}") for preset in text.RL_PRESETS
    }
    table = text.rl_arith(results, None, 2)
    row = "| `grpo_arith` | 66.0% | 79.5% | 83.0% | – | – | – | – | 84.5% | 84.5% | 1 min 10 s | 2 min 10 s |"
    assert row in table.splitlines(), table
    assert blocks.REPRODUCE in table and table.count("\n| `") == len(text.RL_PRESETS)
    paragraph = text.grpo_arith_learning(results, 2)
    assert "66.0% held-out accuracy" in paragraph and "79.5% after 10 iterations" in paragraph
    assert "84.5% after 120 (best 84.5%), **+18.5 points**" in paragraph
    megatron = text.megatron_learning(results, 2)
    assert "| `grpo_arith_megatron` (TP 2) | 66.0% | 79.5%" in megatron
    assert blocks.REPRODUCE in paragraph and blocks.REPRODUCE in megatron
    assert all("at commit `def5678`" in body for body in (table, paragraph, megatron))
