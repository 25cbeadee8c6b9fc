"""``function``: your own reward function, named in the config (``reward.function``).

``reward.function`` is ``path/to/file.py:name`` (a file, relative to the working directory)
or ``package.module:name`` (an importable module). Two signatures are recognised, by their
parameter names (``completions``: TRL's; else ``solution_str``, or ``data_source`` with
``ground_truth``: verl's):

* **verl** (``custom_reward_function``): ``compute_score(data_source, solution_str,
  ground_truth, extra_info=None)``, called once per response. ``data_source`` and
  ``extra_info`` come from the prompt row's columns (verl's Parquet files have them),
  ``ground_truth`` is the row's answer. It returns a number, or a dict with ``score``.
* **TRL** (``reward_funcs``): ``reward_func(prompts, completions, **kwargs)``, called once
  per batch with lists of strings. The keywords are the rows' other columns, one list each
  (``answer`` and ``ground_truth`` hold the answers). It returns one number per completion;
  ``None`` means "not scored here", as in TRL.

Errors in your code never pass silently, and never turn into scores of 0. A response whose
scoring raises (or returns something other than a number) is **not scored** (NaN: left out
of training, like a sandbox failure), and the log shows its row and the traceback. A TRL
function that raises on a batch is called again row by row to find the rows at fault. A
batch in which no response could be scored stops the run with the first traceback.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import inspect
import logging
import math
import sys
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from rl_core.rewards.registry import register_reward

logger = logging.getLogger(__name__)

VERL_SIGNATURE = "compute_score(data_source, solution_str, ground_truth, extra_info=None)"
TRL_SIGNATURE = "reward_func(prompts, completions, **kwargs)"


class RewardFunctionError(RuntimeError):
    """Your reward function could not score any response of a batch (the first traceback)."""


@dataclass(frozen=True)
class UserRewardFunction:
    """A loaded reward function and the signature it was recognised by.

    Attributes:
        target: ``reward.function`` as configured.
        fn: The function.
        style: ``verl`` or ``trl``.
    """

    target: str
    fn: Callable[..., Any]
    style: str


_loaded: dict[tuple[str, str], ModuleType] = {}


def load_reward_function(target: str) -> UserRewardFunction:
    """Import the function ``target`` names and recognise its signature.

    Raises:
        ValueError: ``target`` is malformed, its file or module cannot be imported, it has
            no such function, or the function has neither signature (the message says which
            and shows both).
    """
    location, sep, name = target.rpartition(":")
    if not sep or not location or not name.isidentifier():
        raise ValueError(
            f"reward.function {target!r} must be 'path/to/file.py:name' or 'package.module:name'"
        )
    module = _import(location, target)
    fn = getattr(module, name, None)
    if not callable(fn):
        names = sorted(k for k, v in vars(module).items() if callable(v) and not k.startswith("_"))
        raise ValueError(
            f"reward.function {target!r}: {location} has no function {name!r} "
            f"(its functions: {', '.join(names) or 'none'})"
        )
    return UserRewardFunction(target, fn, signature_style(fn, target))


def signature_style(fn: Callable[..., Any], target: str = "reward.function") -> str:
    """``verl`` or ``trl``, from ``fn``'s parameter names (module docstring).

    Raises:
        ValueError: Neither signature.
    """
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError) as exc:
        raise ValueError(f"reward.function {target!r}: cannot read its signature: {exc}") from exc
    if "completions" in params:  # TRL's (its columns may be named like verl's)
        return "trl"
    if "solution_str" in params or {"data_source", "ground_truth"} <= set(params):
        return "verl"
    raise ValueError(
        f"reward.function {target!r} has parameters ({', '.join(params)}): expected verl's "
        f"{VERL_SIGNATURE} or TRL's {TRL_SIGNATURE}"
    )


def _import(location: str, target: str) -> ModuleType:
    is_file = location.endswith(".py") or "/" in location or "\\" in location
    try:
        if not is_file:
            return importlib.import_module(location)
        path = Path(location).expanduser().resolve()
        if not path.is_file():
            raise ValueError(f"reward.function {target!r}: no such file {path}")
        digest = hashlib.sha256(path.read_bytes()).hexdigest()[:16]
        key = (str(path), digest)
        if key not in _loaded:
            module_name = f"rlpipe_reward_{path.stem}_{digest}"
            spec = importlib.util.spec_from_file_location(module_name, path)
            assert spec is not None and spec.loader is not None
            module = importlib.util.module_from_spec(spec)
            sys.modules[module_name] = module
            spec.loader.exec_module(module)
            _loaded[key] = module
        return _loaded[key]
    except ValueError:
        raise
    except Exception as exc:  # noqa: BLE001 - anything the user's module raises on import
        detail = "".join(traceback.format_exception_only(type(exc), exc)).strip()
        raise ValueError(
            f"reward.function {target!r}: importing {location} failed: {detail}"
        ) from exc


@register_reward("function")
class FunctionReward:
    """The reward ``reward.function`` names (module docstring).

    Args:
        reward_cfg: The ``reward`` section (its ``function``).

    Raises:
        ValueError: ``reward.function`` is unset or unusable.
    """

    def __init__(self, reward_cfg: Any) -> None:
        target = getattr(reward_cfg, "function", None)
        if not target:
            raise ValueError("reward_type 'function' needs reward.function ('file.py:name')")
        self.user = load_reward_function(target)

    def __call__(
        self,
        *,
        prompts: Sequence[str],
        completions: Sequence[str],
        answers: Sequence[str],
        fields: Sequence[dict[str, Any]] | None = None,
        scale: float = 1.0,
        **_: Any,
    ) -> np.ndarray:
        """``scale`` times each response's score (NaN: not scored)."""
        rows = list(fields) if fields is not None else [{} for _ in completions]
        if not len(prompts) == len(completions) == len(answers) == len(rows):
            raise ValueError(
                f"reward.function: {len(completions)} completions for {len(prompts)} prompts, "
                f"{len(answers)} answers and {len(rows)} rows"
            )
        batch = _Batch(list(prompts), list(completions), list(answers), rows)
        if self.user.style == "verl":
            scores = [self._verl_row(batch, i) for i in range(len(batch))]
        else:
            scores = self._trl_batch(batch)
        out = np.asarray(scores, dtype=np.float64)
        failed = [i for i, s in enumerate(scores) if isinstance(s, _Failure)]
        if failed:
            first = scores[failed[0]]
            assert isinstance(first, _Failure)
            if len(failed) == len(scores):
                raise RewardFunctionError(
                    f"reward.function {self.user.target!r} scored none of {len(scores)} "
                    f"responses; the first failure (row {failed[0]}):\n{first.detail}"
                )
            logger.error(
                "reward.function %r: %d of %d responses not scored (left out of training); "
                "row %d: %s",
                self.user.target,
                len(failed),
                len(scores),
                failed[0],
                first.detail,
            )
        return (out * scale).astype(np.float32)

    def _verl_row(self, batch: _Batch, i: int) -> float | _Failure:
        row = batch.fields[i]
        kwargs = {
            "data_source": row.get("data_source"),
            "solution_str": batch.completions[i],
            "ground_truth": batch.answers[i],
            "extra_info": row.get("extra_info"),
        }
        try:
            value = _call(self.user.fn, kwargs)
            if isinstance(value, dict):
                value = value.get("score")
            return _number(value, allow_none=False)
        except Exception:  # noqa: BLE001 - the user's code: reported, never silent
            return _Failure(_describe(batch, i))

    def _trl_batch(self, batch: _Batch) -> list[float | _Failure]:
        try:
            return self._trl_values(batch, range(len(batch)))
        except Exception:  # noqa: BLE001 - find the rows at fault one by one
            logger.warning(
                "reward.function %r raised on a batch of %d; scoring it row by row",
                self.user.target,
                len(batch),
            )
        scores: list[float | _Failure] = []
        for i in range(len(batch)):
            try:
                scores.extend(self._trl_values(batch, [i]))
            except Exception:  # noqa: BLE001 - the user's code: reported, never silent
                scores.append(_Failure(_describe(batch, i)))
        return scores

    def _trl_values(self, batch: _Batch, rows: Sequence[int]) -> list[float]:
        columns: dict[str, list[Any]] = {}
        for key in sorted({k for i in rows for k in batch.fields[i]}):
            columns[key] = [batch.fields[i].get(key) for i in rows]
        answers = [batch.answers[i] for i in rows]
        columns.update(answer=answers, ground_truth=answers)
        kwargs = {
            "prompts": [batch.prompts[i] for i in rows],
            "completions": [batch.completions[i] for i in rows],
            **columns,
        }
        values = _call(self.user.fn, kwargs)
        values = list(values)
        if len(values) != len(rows):
            raise ValueError(f"returned {len(values)} scores for {len(rows)} completions")
        return [_number(v, allow_none=True) for v in values]


@dataclass
class _Batch:
    prompts: list[str]
    completions: list[str]
    answers: list[str]
    fields: list[dict[str, Any]]

    def __len__(self) -> int:
        return len(self.completions)


@dataclass(frozen=True)
class _Failure:
    detail: str

    def __float__(self) -> float:
        return math.nan


def _call(fn: Callable[..., Any], kwargs: dict[str, Any]) -> Any:
    """``fn(**kwargs)``, leaving out keywords a function without ``**kwargs`` does not take."""
    params = inspect.signature(fn).parameters
    if not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        kwargs = {k: v for k, v in kwargs.items() if k in params}
    return fn(**kwargs)


def _number(value: Any, allow_none: bool) -> float:
    if value is None and allow_none:
        return math.nan
    if isinstance(value, (bool, int, float, np.number)) and not isinstance(value, complex):
        return float(value)
    raise TypeError(f"a score must be a number, got {type(value).__name__}: {value!r}")


def _describe(batch: _Batch, i: int) -> str:
    """The row at fault and the traceback being handled."""
    prompt = batch.prompts[i].replace("\n", " ")
    return f"prompt {prompt[:80]!r}\n{traceback.format_exc().rstrip()}"
