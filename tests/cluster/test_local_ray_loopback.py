"""A local Ray cluster started by rlpipe listens on the loopback interface only."""

from __future__ import annotations

import ipaddress
import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.integration

# Runs in a child process: start the cluster the way a training run does, make sure
# workers exist, then report every listening TCP socket of that process tree.
SCRIPT = f"""
import json, sys
sys.path.insert(0, {str(ROOT)!r})
sys.path.insert(0, {str(Path(__file__).parent)!r})
import ray
from infra.cluster.ray_cluster import connect, shutdown
from test_local_ray_loopback import listening_sockets_of_tree

connect(num_cpus=1)

@ray.remote(num_cpus=0)
def node_ip():
    return ray.util.get_node_ip_address()

ip = ray.get(node_ip.remote())
print(json.dumps({{"node_ip": ip, "sockets": listening_sockets_of_tree()}}))
shutdown()
"""


def _decode(hex_addr: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    raw = bytes.fromhex(hex_addr)
    if len(raw) == 4:
        return ipaddress.ip_address(raw[::-1])
    words = b"".join(raw[i : i + 4][::-1] for i in range(0, 16, 4))
    return ipaddress.ip_address(socket.inet_ntop(socket.AF_INET6, words))


def _is_loopback(addr: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    mapped = getattr(addr, "ipv4_mapped", None)
    return addr.is_loopback or bool(mapped and mapped.is_loopback)


def listening_sockets_of_tree(root: int | None = None) -> list[dict]:
    """Listening TCP sockets of ``root`` (default: this process) and its descendants."""
    import os

    root = root or os.getpid()
    parents = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            parents[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    tree = {root}
    changed = True
    while changed:
        new = {pid for pid, ppid in parents.items() if ppid in tree} - tree
        tree |= new
        changed = bool(new)
    inodes = {}
    for pid in tree:
        try:
            for fd in Path(f"/proc/{pid}/fd").iterdir():
                target = os.readlink(fd)
                if target.startswith("socket:["):
                    inodes[target[8:-1]] = pid
        except OSError:
            continue
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            local, state, inode = fields[1], fields[3], fields[9]
            if state == "0A" and inode in inodes:  # 0A = LISTEN
                host, port = local.split(":")
                found.append(
                    {"pid": inodes[inode], "addr": str(_decode(host)), "port": int(port, 16)}
                )
    return found


def test_local_cluster_binds_loopback_only() -> None:
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT], cwd=ROOT, capture_output=True, text=True, timeout=180
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert report["node_ip"] == "127.0.0.1"
    sockets = report["sockets"]
    assert len(sockets) >= 3, sockets  # GCS, raylet, workers: the check saw Ray's servers
    exposed = [s for s in sockets if not _is_loopback(ipaddress.ip_address(s["addr"]))]
    assert exposed == [], f"Ray listens beyond 127.0.0.1: {exposed}"
