"""The git commit recorded on MLflow runs."""

import re
import subprocess

from infra.provenance import git_commit


def test_commit_of_a_repository_and_dirty_marker(tmp_path):
    run = lambda *a: subprocess.run(["git", *a], cwd=tmp_path, check=True, capture_output=True)  # noqa: E731
    run("init", "-q")
    (tmp_path / "f.txt").write_text("a")
    run("add", "f.txt")
    run("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "x")
    commit = git_commit(tmp_path)
    assert re.fullmatch(r"[0-9a-f]{40}", commit)
    (tmp_path / "f.txt").write_text("b")
    assert git_commit(tmp_path) == f"{commit}-dirty"
    (tmp_path / "new.txt").write_text("untracked files do not count")
    (tmp_path / "f.txt").write_text("a")
    assert git_commit(tmp_path) == commit


def test_no_repository_gives_none(tmp_path):
    assert git_commit(tmp_path) is None
