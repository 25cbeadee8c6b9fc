"""rlpipe installs as a package: the presets ship inside it, and nothing edits ``sys.path``."""

from __future__ import annotations

import fnmatch
import os
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

from rl_core.config import available_presets, load_config
from rl_core.config.loader import PRESET_DIR, load_raw_config, resolve_preset_path

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
#: The top-level packages the distribution installs (``[tool.setuptools.packages.find]``).
PACKAGES = [p.rstrip("*") for p in PYPROJECT["tool"]["setuptools"]["packages"]["find"]["include"]]


def _preset_files() -> list[Path]:
    return sorted(p for p in PRESET_DIR.rglob("*") if p.is_file() and "__pycache__" not in p.parts)


def _env(**extra: str) -> dict[str, str]:
    env = {**os.environ, **extra}
    env.pop("RLPIPE_EXT_MODULE", None)
    return env


def test_presets_resolve_by_name_from_any_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    names = available_presets()
    assert "ppo_cartpole" in names and len(names) == len(list(PRESET_DIR.glob("*.yaml")))
    for name in names:
        path, data = load_raw_config(name)
        assert path == PRESET_DIR / f"{name}.yaml"
        assert data["preset"] == name
    cfg = load_config("ppo_cartpole", ["run.max_iterations=3"])
    assert cfg.preset == "ppo_cartpole" and cfg.run.max_iterations == 3


def test_a_preset_reads_its_data_files_from_beside_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    data = Path(load_config("rlpd_pendulum").replay.offline_data)
    assert data.is_absolute() and data.is_file()
    assert data.parent.parent == PRESET_DIR
    # an override is read from the working directory, as written
    (tmp_path / "mine.safetensors").write_bytes(data.read_bytes())
    cfg = load_config("rlpd_pendulum", ["replay.offline_data=mine.safetensors"])
    assert cfg.replay.offline_data == "mine.safetensors"


def test_a_relative_file_in_a_yaml_file_is_found_under_the_working_directory_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shipped = Path(load_config("rlpd_pendulum").replay.offline_data)
    (tmp_path / "offline").mkdir()
    (tmp_path / "offline" / shipped.name).write_bytes(shipped.read_bytes())
    yaml_file = tmp_path / "elsewhere" / "mine.yaml"
    yaml_file.parent.mkdir()
    yaml_file.write_text((PRESET_DIR / "rlpd_pendulum.yaml").read_text())
    monkeypatch.chdir(tmp_path)
    cfg = load_config(str(yaml_file))
    assert cfg.replay.offline_data == f"offline/{shipped.name}"  # as written: it exists here


def test_a_yaml_path_still_works_and_configs_names_the_preset_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert (ROOT / "configs").resolve() == PRESET_DIR
    monkeypatch.chdir(ROOT)
    assert resolve_preset_path("configs/ppo_cartpole.yaml").resolve() == (
        PRESET_DIR / "ppo_cartpole.yaml"
    )
    monkeypatch.chdir(tmp_path)
    assert load_config(str(ROOT / "configs" / "ppo_cartpole.yaml")).preset == "ppo_cartpole"


def test_every_preset_file_is_package_data() -> None:
    package_dir = ROOT / "rl_core"
    assert PRESET_DIR.parent == package_dir and not (PRESET_DIR / "__init__.py").exists()
    patterns = PYPROJECT["tool"]["setuptools"]["package-data"]["rl_core"]
    files = _preset_files()
    assert {p.suffix for p in files} >= {".yaml", ".safetensors"}
    for path in files:
        relative = path.relative_to(package_dir).as_posix()
        assert any(fnmatch.fnmatch(relative, pattern) for pattern in patterns), relative
    # no preset is left outside the package: ``configs/`` only links to the package folder
    configs = ROOT / "configs"
    assert not configs.exists() or (configs.is_symlink() and configs.resolve() == PRESET_DIR)


@pytest.mark.parametrize("package", PACKAGES)
def test_no_module_of_the_packages_edits_sys_path(package: str) -> None:
    offenders = []
    for path in sorted((ROOT / package).rglob("*.py")):
        text = path.read_text()
        if "sys.path.insert" in text or "sys.path.append" in text:
            offenders.append(str(path.relative_to(ROOT)))
    assert offenders == []


def test_a_flow_script_runs_from_another_directory(tmp_path: Path) -> None:
    """``python flows/train.py`` imports the installed project, whatever the working directory."""
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    out = subprocess.run(
        [sys.executable, str(ROOT / "flows" / "train.py"), "--help"],
        cwd=tmp_path,
        env=_env(PYTHONPATH=path),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "rlpd_pendulum" in out.stdout


def test_the_wheel_holds_the_presets_and_finds_them_from_any_directory(tmp_path: Path) -> None:
    source = tmp_path / "src"
    source.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(ROOT / name, source / name)
    for package in PACKAGES:
        if (ROOT / package).is_dir():
            shutil.copytree(
                ROOT / package, source / package, ignore=shutil.ignore_patterns("__pycache__")
            )
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check"]
    subprocess.run(
        [*pip, "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", tmp_path / "dist", source],
        check=True,
        capture_output=True,
        timeout=300,
    )
    (wheel,) = (tmp_path / "dist").glob("rlpipe-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for path in _preset_files():
        assert path.relative_to(ROOT).as_posix() in names

    site = tmp_path / "site"
    subprocess.run(
        [*pip, "install", "-q", "--no-deps", "--no-compile", "--target", site, wheel],
        check=True,
        capture_output=True,
        timeout=300,
    )
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    probe = (
        "from rl_core.config.loader import PRESET_DIR, load_config\n"
        "cfg = load_config('rlpd_pendulum')\n"
        "print(PRESET_DIR)\n"
        "print(cfg.replay.offline_data)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=elsewhere,
        env=_env(PYTHONPATH=str(site)),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    preset_dir, offline_data = out.stdout.split()
    assert Path(preset_dir) == site / "rl_core" / "presets"
    assert Path(offline_data).is_relative_to(site) and Path(offline_data).is_file()


def test_workers_import_the_drivers_packages(monkeypatch: pytest.MonkeyPatch) -> None:
    import site as site_module

    from infra.cluster import ray_cluster

    assert ray_cluster.PACKAGES_ROOT == ROOT
    forwarded = os.pathsep.join(["/extra", str(ROOT)])
    assert ray_cluster.worker_pythonpath(forwarded) == os.pathsep.join([str(ROOT), "/extra"])
    assert ray_cluster.worker_pythonpath() == str(ROOT)
    # an installed wheel's site-packages is every worker's already: not put first
    installed = Path(site_module.getsitepackages()[0]).resolve()
    monkeypatch.setattr(ray_cluster, "PACKAGES_ROOT", installed)
    assert ray_cluster.worker_pythonpath("/extra") == "/extra"
