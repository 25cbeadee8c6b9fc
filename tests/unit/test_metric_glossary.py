"""The metric glossary (rl_core/metrics_glossary/) matches the code; docs/metrics.md matches it.

The code is read with ``ast``, never imported: every string constant and f-string of
``rl_core``, ``infra``, ``kinds``, ``tasks`` and ``flows`` shaped like a metric key (``section/name``,
an f-string's variable parts as ``{}``) is a key the code writes (or reads back), unless it
is an artifact path of the glossary or listed in :data:`NOT_METRIC_KEYS`.

Some keys are built from a prefix and names kept elsewhere (``f"train/{k}"`` over a loss's
statistics dict): :data:`FEEDERS` names where those names come from, so the keys they make
are checked one by one, and :data:`OPEN_PREFIXES` lists the prefix f-strings allowed to
cover them.
"""

from __future__ import annotations

import ast
import functools
import importlib.util
import re
from dataclasses import dataclass
from pathlib import Path

from rl_core.metrics_glossary import ARTIFACTS, METRICS, PLACEHOLDERS, TAGS
from rl_core.steps import COST_PHASES, STATEFUL_STEPS, Step

ROOT = Path(__file__).resolve().parents[2]
SOURCE_DIRS = ("rl_core", "infra", "kinds", "tasks", "flows")
#: The glossary package: its strings are the entries, not keys the code writes.
GLOSSARY = "rl_core/metrics_glossary/"
SCRIPT = ROOT / "scripts" / "gen_metric_docs.py"
#: A string shaped like a metric key (``{}`` marks an f-string's variable part).
KEY_SHAPE = re.compile(r"^[a-z][a-z0-9_]*/[A-Za-z0-9_{}/-]*$")
_PLACEHOLDER = re.compile(r"<([a-z_]+)>")
#: Strings shaped like metric keys that are not metric keys, and why.
NOT_METRIC_KEYS = {
    "application/json": "a MIME type (the S3 run lease)",
    "openai/gsm8k": "a dataset's hub id (a data_source of the data_source reward)",
    "lighteval/MATH": "a dataset's hub id (a data_source of the data_source reward)",
    "openai/openai_humaneval": "a dataset's hub id (HumanEval rows' data_source)",
}
#: ``(file, function, variable, prefixes)``: the names ``variable`` takes in ``function``
#: (keys of the dict assigned to it, keys stored into it, or the strings a ``for`` loop gives
#: it; ``None``: keys of the dicts the function returns) become the keys ``prefix + name``.
FEEDERS = (
    ("rl_core/training/ppo.py", "ppo_update", "step_metrics", ("train/",)),
    ("rl_core/algorithms/losses.py", "compute_ppo_policy_loss", "metrics", ("train/",)),
    ("rl_core/algorithms/losses.py", "compute_value_loss", None, ("train/",)),
    ("rl_core/algorithms/off_policy.py", "importance_weights", "metrics", ("train/",)),
    ("rl_core/algorithms/off_policy.py", "compute_decoupled_ppo_loss", "metrics", ("train/",)),
    ("rl_core/training/llm_update.py", "accumulate_minibatch", "terms", ("train/",)),
    ("rl_core/training/llm_update.py", "llm_update", "metrics", ("train/",)),
    (
        "rl_core/agents/metrics.py",
        "trajectory_metrics",
        "values",
        ("agent/", "agent/<kind>/", "eval/agent/", "eval/agent/<kind>/"),
    ),
    ("rl_core/agents/metrics.py", "reward_by_tool_use", "suffix", ("agent/", "agent/<kind>/")),
)
#: ``(file, f-string)``: prefix f-strings whose names come from :data:`FEEDERS` (or, for the
#: driver's ``eval/`` filter, from the evaluation metrics): covered by any entry they fit.
OPEN_PREFIXES = {
    ("rl_core/training/ppo.py", "train/{}"),
    ("rl_core/training/llm_update.py", "train/{}"),
    ("flows/run_loop.py", "eval/{}"),
}
#: Entries whose keys MLflow makes up, and what in the code starts MLflow writing them.
EXTERNAL = {"system/<name>": ("infra/tracking/system_metrics.py", "SystemMetricsMonitor")}


@dataclass(frozen=True)
class CodeKey:
    """A metric key the code writes: literal, or an f-string with ``{}`` holes."""

    text: str
    template: bool
    where: str


@functools.cache
def _trees() -> dict[str, ast.Module]:
    files = sorted(p for d in SOURCE_DIRS for p in (ROOT / d).rglob("*.py"))
    return {
        p.relative_to(ROOT).as_posix(): ast.parse(p.read_text())
        for p in files
        if not p.relative_to(ROOT).as_posix().startswith(GLOSSARY)
    }


def _strings(tree: ast.Module) -> list[tuple[str, bool, int]]:
    """``(text, is_template, line)`` of every string constant and f-string of ``tree``."""
    found, parts_of_fstrings = [], set()
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            parts_of_fstrings.update(id(v) for v in node.values)
            text = "".join(v.value if isinstance(v, ast.Constant) else "{}" for v in node.values)
            found.append((text, True, node.lineno))
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and id(node) not in parts_of_fstrings
        ):
            found.append((node.value, False, node.lineno))
    return found


def _artifact_path(text: str, template: bool) -> bool:
    """Whether ``text`` is (a folder of) an artifact path of the glossary, and no metric."""
    if template and any(_fits(text, e.key, strictly=False) for e in METRICS):
        return False
    for artifact in ARTIFACTS:
        path = artifact.path
        if path.startswith(text.rstrip("/") + "/") or text == path:
            return True
        if template and re.fullmatch(_template_regex(text), path):
            return True
    return False


def _template_regex(text: str) -> str:
    return "(.+)".join(re.escape(part) for part in text.split("{}"))


def _dict_keys(node: ast.AST) -> set[str]:
    """String keys of the dicts in ``node`` (splatted ``**{...}`` ones included)."""
    return {
        k.value
        for d in ast.walk(node)
        if isinstance(d, ast.Dict)
        for k in d.keys
        if isinstance(k, ast.Constant) and isinstance(k.value, str)
    }


def _fed_names(tree: ast.Module, function: str, variable: str | None) -> set[str]:
    """The names ``variable`` takes in ``function`` (see :data:`FEEDERS`)."""
    fn = next(
        (n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == function),
        None,
    )
    assert fn is not None, f"FEEDERS names a function {function!r} that no longer exists"

    names: set[str] = set()
    for node in ast.walk(fn):
        if variable is None:
            if isinstance(node, ast.Return) and node.value is not None:
                names |= _dict_keys(node.value)
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name) and target.id == variable:
                    if isinstance(node.value, ast.Dict):
                        names |= _dict_keys(node.value)
                elif (
                    isinstance(target, ast.Subscript)
                    and isinstance(target.value, ast.Name)
                    and target.value.id == variable
                    and isinstance(target.slice, ast.Constant)
                ):
                    names.add(target.slice.value)
        elif isinstance(node, ast.For):
            if any(isinstance(n, ast.Name) and n.id == variable for n in ast.walk(node.target)):
                names |= {
                    c.value
                    for c in ast.walk(node.iter)
                    if isinstance(c, ast.Constant) and isinstance(c.value, str)
                }
    return names


@functools.cache
def _code_keys() -> tuple[CodeKey, ...]:
    """Every metric key the code writes or reads back, with those the feeders make."""
    keys = []
    for path, tree in _trees().items():
        for text, template, line in _strings(tree):
            if not template and text.endswith("/"):  # a prefix the code adds names to
                text, template = text + "{}", True
            if not KEY_SHAPE.match(text) or text in NOT_METRIC_KEYS:
                continue
            if not _artifact_path(text, template):
                keys.append(CodeKey(text, template, f"{path}:{line}"))
    for path, function, variable, prefixes in FEEDERS:
        names = _fed_names(_trees()[path], function, variable)
        assert names, f"FEEDERS: {path}:{function} gives {variable!r} no names any more"
        keys += [
            CodeKey(prefix + name, False, f"{path}:{function}")
            for prefix in prefixes
            for name in sorted(names)
        ]
    return tuple(keys)


@functools.cache
def _entry_regex(key: str) -> re.Pattern[str]:
    """A glossary key as a regular expression (placeholders: their values or pattern)."""
    by_name = {p.name: p for p in PLACEHOLDERS}
    parts, last = [], 0
    for match in _PLACEHOLDER.finditer(key):
        parts.append(re.escape(key[last : match.start()]))
        placeholder = by_name[match.group(1)]
        values = "|".join(re.escape(v) for v in placeholder.values)
        parts.append(f"(?:{values})" if values else f"(?:{placeholder.pattern})")
        last = match.end()
    parts.append(re.escape(key[last:]))
    return re.compile("".join(parts))


def _fits(template: str, key: str, strictly: bool = True) -> bool:
    """Whether an f-string ``template`` makes the glossary ``key``.

    Strictly: each of its variable parts stands for placeholders of the key only
    (``time/{}`` makes ``time/<step>``, not ``time/compute``).
    """
    match = re.fullmatch(_template_regex(template), key)
    if match is None:
        return False
    return not strictly or all(
        re.fullmatch(r"<[a-z_]+>(/<[a-z_]+>)*", part) for part in match.groups()
    )


def _covered(code: CodeKey) -> bool:
    if not code.template:
        return any(_entry_regex(e.key).fullmatch(code.text) for e in METRICS)
    if any(_fits(code.text, e.key) for e in METRICS):
        return True
    path = code.where.rsplit(":", 1)[0]
    return (path, code.text) in OPEN_PREFIXES and any(
        _fits(code.text, e.key, strictly=False) for e in METRICS
    )


def test_the_scan_finds_the_metric_keys():
    keys = {k.text for k in _code_keys()}
    assert len(keys) >= 100, f"only {len(keys)} metric keys found: the scan is broken"
    for known in ("train/policy_loss", "rollout/reward_mean", "time/{}", "cost/cpu_hours_{}"):
        assert known in keys, f"the scan misses {known!r}"
    assert "eval/samples_{}.json" not in keys and "eval/videos" not in keys  # artifacts


def test_every_metric_the_code_writes_has_a_glossary_entry():
    missing = sorted({f"{k.text}  ({k.where})" for k in _code_keys() if not _covered(k)})
    assert not missing, (
        "metric keys written by the code without an entry in rl_core/metrics_glossary/ "
        "(add them, then regenerate docs/metrics.md):\n  " + "\n  ".join(missing)
    )


def test_every_glossary_entry_is_written_by_the_code():
    code = _code_keys()
    stale = []
    for entry in METRICS:
        if entry.key in EXTERNAL:
            path, marker = EXTERNAL[entry.key]
            found = marker in (ROOT / path).read_text()
        else:
            regex = _entry_regex(entry.key)
            found = any(
                _fits(k.text, entry.key) if k.template else regex.fullmatch(k.text) is not None
                for k in code
            )
        if not found:
            stale.append(entry.key)
    assert not stale, f"glossary entries no code writes (remove or fix them): {stale}"


def test_open_prefixes_are_still_in_the_code():
    code = {(k.where.rsplit(":", 1)[0], k.text) for k in _code_keys() if k.template}
    gone = sorted(OPEN_PREFIXES - code)
    assert not gone, f"OPEN_PREFIXES lists f-strings the code no longer has: {gone}"


# -- placeholders ------------------------------------------------------------------------


def _iterates(path: str, name: str) -> bool:
    """Whether ``path`` has a ``for`` loop over the module-level name ``name``."""
    return any(
        isinstance(node, ast.For) and getattr(node.iter, "id", None) == name
        for node in ast.walk(_trees()[path])
    )


def test_placeholder_values_are_the_codes():
    # the code's step lists are derived from rl_core.steps, and the code uses them
    assert _iterates("flows/iteration_metrics.py", "Step")  # time/<step>
    assert _iterates("infra/cost.py", "COST_PHASES")  # cost/cpu_hours_<phase>
    assert "STATEFUL_STEPS" in (ROOT / "infra/driver/guard.py").read_text()  # snapshot_<...>
    in_code = {
        "step": tuple(Step),
        "stateful_step": STATEFUL_STEPS,
        "phase": COST_PHASES,
        "trajectory_metric": tuple(
            _fed_names(_trees()["rl_core/agents/metrics.py"], "trajectory_metrics", "values")
        ),
    }
    for placeholder in PLACEHOLDERS:
        if placeholder.name in in_code:
            assert set(placeholder.values) == set(in_code[placeholder.name]), placeholder.name
        else:
            assert not placeholder.values, f"<{placeholder.name}>: where do its values come from?"


# -- tags --------------------------------------------------------------------------------


def _code_tags() -> dict[str, str]:
    """Tag keys and aliases the code sets, each with where.

    ``*_TAG`` and ``*_ALIAS`` constants; keys of the dicts passed as ``tags=``, to
    ``set_tags``, assigned to (or stored into) a variable named ``*tags``, or returned by a
    function named ``*_tags``.
    """
    found: dict[str, str] = {}
    for path, tree in _trees().items():

        def add(keys: set[str], line: int, path: str = path) -> None:
            for key in keys:
                found.setdefault(key, f"{path}:{line}")

        for node in ast.walk(tree):
            if isinstance(node, ast.Assign):
                for target in node.targets:
                    name = getattr(target, "id", "")
                    if re.search(r"_(TAG|ALIAS)$", name) and isinstance(node.value, ast.Constant):
                        add({node.value.value}, node.lineno)
                    elif name.endswith("tags") and isinstance(node.value, ast.Dict):
                        add(_dict_keys(node.value), node.lineno)
                    elif (
                        isinstance(target, ast.Subscript)
                        and getattr(target.value, "id", "").endswith("tags")
                        and isinstance(target.slice, ast.Constant)
                    ):
                        add({target.slice.value}, node.lineno)
            elif isinstance(node, ast.Call):
                for keyword in node.keywords:
                    if keyword.arg == "tags" and isinstance(keyword.value, ast.Dict):
                        add(_dict_keys(keyword.value), node.lineno)
                if getattr(node.func, "attr", "") == "set_tags" and node.args:
                    add(_dict_keys(node.args[0]), node.lineno)
            elif isinstance(node, ast.FunctionDef) and node.name.endswith("_tags"):
                for ret in ast.walk(node):
                    if isinstance(ret, ast.Return) and isinstance(ret.value, ast.Dict):
                        add(_dict_keys(ret.value), ret.lineno)
    return found


def test_tags_match_the_code():
    code = _code_tags()
    assert len(code) >= 30, f"only {len(code)} tags found: the scan is broken"
    glossary = {t.key for t in TAGS}
    missing = sorted(f"{k}  ({code[k]})" for k in set(code) - glossary)
    stale = sorted(glossary - set(code))
    assert not missing, "tags the code sets without a glossary entry:\n  " + "\n  ".join(missing)
    assert not stale, f"glossary tags no code sets: {stale}"


# -- the page ----------------------------------------------------------------------------


def _generator():
    spec = importlib.util.spec_from_file_location("gen_metric_docs", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_metrics_md_matches_the_glossary():
    gen = _generator()
    expected = gen.render()
    assert expected == gen.render()
    path = ROOT / "docs" / "metrics.md"
    current = path.read_text() if path.exists() else ""
    assert current == expected, (
        "docs/metrics.md is stale (rl_core/metrics_glossary/ changed); regenerate it "
        f"with: {gen.REGEN_COMMAND}"
    )
    for entry in METRICS:
        assert f"| `{entry.key}` |" in expected
    for tag in TAGS:
        assert f"| `{tag.key}` |" in expected


def test_config_fields_named_in_the_glossary_exist():
    """Every ``section.field`` the glossary names is a field of docs/configuration.md."""
    fields: dict[str, set[str]] = {}
    section = None
    for line in (ROOT / "docs" / "configuration.md").read_text().splitlines():
        heading = re.match(r"^## `([a-z_.]+)`", line)
        if heading:
            section = heading.group(1)
            fields.setdefault(section, set())
        elif line.startswith("## "):
            section = None
        elif section is not None and (row := re.match(r"^\| `([a-z_]+)` \|", line)):
            fields[section].add(row.group(1))
    roots = {name.split(".")[0] for name in fields}
    texts = [e.meaning for e in METRICS] + [p.meaning for p in PLACEHOLDERS]
    texts += [t.meaning for t in TAGS] + [a.meaning for a in ARTIFACTS]
    from rl_core.metrics_glossary import METRIC_SECTIONS, RUNS

    texts += [intro for _, _, intro in METRIC_SECTIONS] + list(RUNS.values())
    unknown = set()
    for text in texts:
        for ref in re.findall(r"`([a-z_]+(?:\.[a-z_]+)+)(?=[`:])", text):
            owner, _, field = ref.rpartition(".")
            if ref.split(".")[0] in roots and field not in fields.get(owner, set()):
                unknown.add(ref)
    assert not unknown, f"the glossary names config fields that do not exist: {sorted(unknown)}"
