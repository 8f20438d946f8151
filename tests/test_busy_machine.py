"""What the tests that start Ray run beside (issue 38): two CPU-bound processes, as a machine
busy with other work is, and a watch on the addresses the processes they start listen on.

Ray's own start fails now and then on two cores busy with other work (its raylet waits at most
15 s for the dashboard agent, ray-project/ray#65983), and the tests that start Ray passed alone
but failed beside other jobs. So those tests run with :func:`busy` beside them, every time:
``tests/pipeline/test_ray_grid.py`` (a local node; its listening sockets watched),
``tests/pipeline/test_ray_cluster.py`` (two nodes on the machine's address) and
``tests/flower/test_simulation.py`` (Flower's simulation on a local node; watched).
``tests/flower/test_app.py`` watches its ``flwr run`` (SuperLink, SuperExec, simulation, Ray
node) without the busy processes, which would make the slowest test slower still. They load
this module by its path: the tests are no package.

:func:`listening` reads the kernel's socket tables (``/proc/net/tcp``, ``tcp6``): Linux only,
and no package beyond the standard library.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Iterable, Iterator
from pathlib import Path

import pytest

#: CPU-bound processes beside a test that starts Ray: on 2 cores, as many as there are cores
BUSY = 2
#: the seconds between two looks at the listening sockets
WATCH_INTERVAL_S = 0.5
#: /proc/net/tcp's state of a listening socket
_LISTEN = "0A"


@contextlib.contextmanager
def busy(count: int = BUSY) -> Iterator[list[subprocess.Popen]]:
    """``count`` processes that spin on a core each for the block, killed after it."""
    processes = []
    try:
        for _ in range(count):
            processes.append(
                subprocess.Popen([sys.executable, "-c", "while True: pass"], start_new_session=True)
            )
        yield processes
    finally:
        for process in processes:
            process.kill()
            process.wait()


def descendants(pid: int) -> set[int]:
    """``pid`` and every process below it, read from ``/proc``."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            # the command name, in parentheses, may hold spaces: the parent's pid follows it
            ppid = int(stat.read_text().rsplit(")", 1)[1].split()[1])
            children.setdefault(ppid, []).append(int(stat.parent.name))
    found, todo = set(), [pid]
    while todo:
        found.add(current := todo.pop())
        todo.extend(children.get(current, ()))
    return found


def _address(hex_address: str) -> str:
    """An address of /proc/net/tcp{,6} (32-bit words in host order, little-endian here)."""
    words = [int(hex_address[i : i + 8], 16) for i in range(0, len(hex_address), 8)]
    packed = b"".join(struct.pack("<I", w) for w in words)
    return socket.inet_ntop(socket.AF_INET if len(packed) == 4 else socket.AF_INET6, packed)


def listening(pids: Iterable[int]) -> set[tuple[str, int]]:
    """The TCP addresses (address, port) that the processes ``pids`` listen on."""
    inodes = set()
    for pid in pids:
        with contextlib.suppress(OSError):
            for fd in Path(f"/proc/{pid}/fd").iterdir():
                with contextlib.suppress(OSError):
                    if (target := os.readlink(fd)).startswith("socket:["):
                        inodes.add(target[len("socket:[") : -1])
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError):
            for line in Path(table).read_text().splitlines()[1:]:
                fields = line.split()
                if fields[3] == _LISTEN and fields[9] in inodes:
                    address, port = fields[1].rsplit(":", 1)
                    found.add((_address(address), int(port, 16)))
    return found


def beyond_loopback(addresses: Iterable[tuple[str, int]]) -> set[tuple[str, int]]:
    """The addresses that another machine could reach: not 127.0.0.0/8 nor ::1 (nor
    127.0.0.0/8 mapped into IPv6)."""

    def loopback(ip: str) -> bool:
        address = ipaddress.ip_address(ip)
        mapped = getattr(address, "ipv4_mapped", None)
        return address.is_loopback or (mapped is not None and mapped.is_loopback)

    return {(ip, port) for ip, port in addresses if not loopback(ip)}


@contextlib.contextmanager
def watch() -> Iterator[set[tuple[str, int]]]:
    """Every address that this process or one it started listened on during the block, looked
    at every :data:`WATCH_INTERVAL_S` (and once at the end)."""
    seen: set[tuple[str, int]] = set()
    done = threading.Event()

    def look() -> None:
        seen.update(listening(descendants(os.getpid())))

    def run() -> None:
        while not done.wait(WATCH_INTERVAL_S):
            look()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        yield seen
        look()
    finally:
        done.set()
        thread.join()


pytestmark = pytest.mark.skipif(
    not Path("/proc/net/tcp").exists(), reason="reads Linux's /proc to find processes and sockets"
)


def test_the_busy_processes_take_a_core_each_and_end_with_the_block():
    with busy() as processes:
        time.sleep(1.0)
        assert all(p.poll() is None for p in processes)
        ticks = [int(Path(f"/proc/{p.pid}/stat").read_text().split()[13]) for p in processes]
        assert all(t > 0 for t in ticks)  # user CPU time: they ran
        assert {p.pid for p in processes} <= descendants(os.getpid())
    assert all(p.poll() is not None for p in processes)


def test_the_watch_tells_a_socket_on_all_interfaces_from_one_on_loopback():
    with watch() as seen, socket.socket() as inside, socket.socket() as outside:
        inside.bind(("127.0.0.1", 0))
        inside.listen()
        outside.bind(("0.0.0.0", 0))
        outside.listen()
        ports = inside.getsockname()[1], outside.getsockname()[1]
        time.sleep(2 * WATCH_INTERVAL_S)
    assert {("127.0.0.1", ports[0]), ("0.0.0.0", ports[1])} <= seen
    assert ("0.0.0.0", ports[1]) in beyond_loopback(seen)
    assert not beyond_loopback({("127.0.0.1", 1), ("127.8.0.1", 2), ("::1", 3)})
    assert not beyond_loopback({("::ffff:127.0.0.1", 4)})
    assert beyond_loopback({("::", 5), ("192.0.2.2", 6)}) == {("::", 5), ("192.0.2.2", 6)}
