"""Socket sampler: requests that wait in the kernel before the server takes them.

A server that is offered more than it serves lets requests pile up where its
own timing cannot see them: in a listening socket's accept queue (a sync
worker busy with the previous request) or, on a kept-alive connection, as
bytes the server has not read yet (a starved event loop). Linux shows both in
/proc/<pid>/net/tcp{,6}: for a listening socket `rx_queue` is the accept
queue's length; for an established one, the bytes received and not yet read.

Every tick writes one `sockets` row per listening port of the target's
process tree (docs/run-format.md): `accept_queue`, and `unread` (accepted
connections on that port with unread bytes). The sockets that belong to the
tree are found from /proc/<pid>/fd (`socket:[inode]`), refreshed once a
second; a tree with no listening TCP socket costs one such refresh a second
and nothing else.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Any

from diag.collect.host_sampler import PROC, ProcessTree
from diag.collect.sampler import PeriodicSampler, Unavailable

LISTEN = "0A"  # include/net/tcp_states.h: TCP_LISTEN
ESTABLISHED = "01"
REFRESH_S = 1.0  # how often the tree's socket inodes (and so its listening ports) are looked up again


@dataclass(frozen=True)
class TcpRow:
    """One line of /proc/net/tcp{,6}: what this sampler needs of it."""

    port: int  # local port
    state: str  # two hex digits, as the kernel writes them
    rx_queue: int  # listening: the accept queue's length; established: bytes not yet read
    inode: int


def parse_tcp(text: str) -> list[TcpRow]:
    """Rows of a /proc/net/tcp or tcp6 file (the header line and malformed lines are skipped)."""
    rows = []
    for line in text.splitlines()[1:]:
        # sl local rem st tx:rx tr:when retrnsmt uid timeout inode ...; a busy server's table holds
        # thousands of TIME_WAIT lines: look at the state before splitting the rest
        head = line.split(None, 4)
        if len(head) < 5 or head[3] not in (LISTEN, ESTABLISHED):
            continue
        f = line.split()
        try:
            port = int(f[1].rsplit(":", 1)[1], 16)
            rows.append(TcpRow(port, f[3], int(f[4].split(":")[1], 16), int(f[9])))
        except (ValueError, IndexError):
            continue
    return rows


def socket_inodes(pid: int) -> set[int]:
    """Inodes of the sockets process `pid` holds open (empty when it is gone or not ours to read)."""
    out: set[int] = set()
    fd_dir = f"{PROC}/{pid}/fd"
    try:
        names = os.listdir(fd_dir)
    except OSError:
        return out
    for name in names:
        try:
            link = os.readlink(f"{fd_dir}/{name}")
        except OSError:
            continue
        if link.startswith("socket:["):
            out.add(int(link[8:-1]))
    return out


def backlog_rows(rows: list[TcpRow], inodes: set[int]) -> dict[int, dict[str, int]]:
    """Per listening port held by `inodes`: accept_queue, unread.

    A connection still in the accept queue has no inode yet (it belongs to no
    process): the listening socket's own count covers it. Once accepted it is
    the server's, and unread bytes on it are a request the server has not read.
    """
    out: dict[int, dict[str, int]] = {}
    for r in rows:
        if r.state == LISTEN and r.inode in inodes:
            # one port may listen on IPv4 and IPv6, or on several sockets (SO_REUSEPORT): add them
            o = out.setdefault(r.port, {"accept_queue": 0, "unread": 0})
            o["accept_queue"] += r.rx_queue
    for r in rows:
        if r.state == ESTABLISHED and r.port in out and r.inode in inodes and r.rx_queue > 0:
            out[r.port]["unread"] += 1
    return out


class SocketSampler(PeriodicSampler):
    """The accept backlog and unread requests of the target's listening TCP ports, every `interval_s`."""

    name = "sockets"
    tables = ("sockets",)

    def __init__(self, interval_s: float = 0.1) -> None:
        super().__init__(interval_s)
        self._tree: ProcessTree | None = None
        self._root = 0
        self._inodes: set[int] = set()
        self._listening = False
        self._refreshed = 0.0
        self.ports: set[int] = set()  # every listening port seen (status)

    def open(self, run_dir: str, root_pid: int) -> dict[str, Any] | None:
        if not os.path.exists(f"{PROC}/{root_pid}/net/tcp"):
            raise Unavailable("no /proc/<pid>/net/tcp (not Linux)")
        self._tree = ProcessTree(root_pid)
        self._root = root_pid
        return None

    def extra_status(self) -> dict[str, Any]:
        return {"ports": sorted(self.ports)}

    def _tables(self) -> list[TcpRow]:
        rows: list[TcpRow] = []
        for name in ("tcp", "tcp6"):
            try:  # the root's view of its network namespace (the tree shares it)
                with open(f"{PROC}/{self._root}/net/{name}") as f:
                    rows += parse_tcp(f.read())
            except OSError:
                continue
        return rows

    def tick(self) -> None:
        assert self._tree is not None
        now = time.monotonic()
        if now - self._refreshed >= REFRESH_S:
            self._refreshed = now
            members = self._tree.scan()
            if members and self._root not in members:
                self._root = min(members)  # the root is gone: read the namespace through a live member
            self._inodes = set().union(*(socket_inodes(p) for p in members)) if members else set()
            self._listening = bool(self._inodes)
        if not self._listening:
            return
        ts = time.time_ns()
        found = backlog_rows(self._tables(), self._inodes)
        self._listening = bool(found)  # no listening socket: wait for the next refresh
        for port, o in sorted(found.items()):
            self.ports.add(port)
            self.write("sockets", {"ts_ns": ts, "port": port, **o})
