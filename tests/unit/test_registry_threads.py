"""A registry's built-ins load once, and no thread sees the registry half-filled."""

from __future__ import annotations

import importlib
import sys
import threading


def test_threads_wait_for_builtins_another_thread_is_importing(tmp_path, monkeypatch):
    (tmp_path / "slow_registry_home.py").write_text(
        "from rl_core.registry import Registry\n"
        "SLOW = Registry('slow thing', 'slow_builtins_mod')\n"
    )
    # the built-in module registers its entry only after a pause, as a slow import would
    (tmp_path / "slow_builtins_mod.py").write_text(
        "import time\n"
        "from slow_registry_home import SLOW\n"
        "time.sleep(0.3)\n"
        "SLOW.register('thing', 42)\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in ("slow_registry_home", "slow_builtins_mod"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    registry = importlib.import_module("slow_registry_home").SLOW
    seen: list[bool] = []
    threads = [threading.Thread(target=lambda: seen.append("thing" in registry)) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert seen == [True] * 4
    assert registry.get("thing") == 42
