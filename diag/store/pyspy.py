"""py-spy chrometrace output (RUN/raw/pyspy.json) -> the `stacks` table.

py-spy's chrometrace writer emits, per thread, `B`/`E` events only where the
sampled stack changes: the frames that left the stack end (`E`), the frames
that joined it begin (`B`), all at the sample's time. Replaying them per
thread gives the stack held over each interval between two changes: one row
per interval (`ts_ns`, `dur_ns`, `pid`, `tid`, `stack`, `idle`).

Times: `ts` is microseconds since py-spy started; the launcher records that
moment in run.json at `collectors.stacks.start_ns` (falling back to the run's
`start_ns`).

Threads: py-spy names a thread by its pthread id (newer versions remap it to
a small number and give the real id in a `thread_name` metadata event). Where
the recorder's meta rows carry `thread_ident` and `native_id`, ids are mapped
to the native tids the other tables use.

Idle: the chrometrace format carries no idle flag, and a thread that py-spy
skipped as idle simply keeps its last stack. `idle` is therefore a heuristic:
True when the innermost frame is a known blocking wait of the standard library
(IDLE_FRAMES). A bare `time.sleep()` in user code cannot be told apart.

Forked processes: py-spy keeps the previous stack it diffs against per thread
id only, and a forked child's main thread has the same pthread id as the
parent thread that forked it. With --subprocesses, py-spy then emits a
worker's sample as the diff against its parent's last stack: `E` events for
frames the worker never had, then `B` events for the worker's whole stack. A
stack begins with a `process N:"cmd"` root frame, which can only be the
outermost: a `B` of one resets the thread's stack, and a stack deeper than
Python's recursion limit allows is reset as a last resort.

Robustness and speed: py-spy killed mid-write leaves a truncated JSON array;
events are matched one by one with a regular expression over the (memory
mapped) file, so every complete event is kept. serde writes py-spy's fields in
a fixed order; a file in another layout falls back to a tolerant JSON parse.
"""

from __future__ import annotations

import glob
import json
import mmap
import os
import re
from collections.abc import Iterator
from typing import Any

import numpy as np
import pandas as pd

from diag.errors import DiagError
from diag.store.jsonl import RAW_DIR, read_raw
from diag.store.manifest import read_manifest
from diag.store.run import derived_table
from diag.store.safe import loads, max_trace_bytes, open_regular

# (file name ending, function) pairs whose presence as the innermost frame means "waiting".
IDLE_FRAMES: list[tuple[str, str]] = [
    ("threading.py", "wait"), ("threading.py", "_wait_for_tstate_lock"), ("threading.py", "join"),
    ("threading.py", "Condition.wait"), ("threading.py", "Event.wait"), ("threading.py", "Thread.join"),
    ("threading.py", "Thread._wait_for_tstate_lock"), ("threading.py", "Semaphore.acquire"),
    ("queue.py", "get"), ("queue.py", "Queue.get"), ("queue.py", "put"), ("queue.py", "Queue.put"),
    ("selectors.py", "select"), ("selectors.py", "EpollSelector.select"), ("selectors.py", "PollSelector.select"),
    ("selectors.py", "DefaultSelector.select"),
    ("socket.py", "accept"), ("socket.py", "readinto"), ("socket.py", "socket.accept"),
    ("socket.py", "SocketIO.readinto"), ("ssl.py", "read"), ("ssl.py", "recv_into"),
    ("connection.py", "_recv"), ("connection.py", "_poll"), ("connection.py", "wait"),
    ("connection.py", "Connection._recv"), ("connection.py", "Connection._poll"),
    ("subprocess.py", "_wait"), ("subprocess.py", "Popen._wait"), ("subprocess.py", "_try_wait"),
    ("subprocess.py", "Popen._try_wait"), ("popen_fork.py", "poll"), ("popen_fork.py", "Popen.poll"),
    ("_base.py", "result"), ("_base.py", "Future.result"), ("_base.py", "wait"),
    ("thread.py", "_worker"), ("pool.py", "worker"),
]
_IDLE = set(IDLE_FRAMES)

# serde writes py-spy's events with a fixed field order. One match per event,
# three groups: the frame (args..name, raw), the phase, and "pid,tid,ts" (raw):
# few groups keep the per-event cost low. The fast pattern takes strings as
# `[^"]*`; the exact one allows escaped quotes and is used when the file has one.
_FAST_STR = rb'"[^"]*"'
_EXACT_STR = rb'"[^"\\]*(?:\\.[^"\\]*)*"'


def _event_re(s: bytes) -> re.Pattern[bytes]:
    return re.compile(rb'\{"args":(\{"filename":' + s + rb',"line":(?:null|\d+)(?:,"name":' + s + rb')?\},'
                      rb'"cat":' + s + rb',"name":' + s + rb'),"ph":"([BE])","pid":(\d+,"tid":\d+,"ts":\d+)\}')


def _thread_name_re(s: bytes) -> re.Pattern[bytes]:
    return re.compile(rb'\{"args":\{"filename":' + s + rb',"line":(?:null|\d+),"name":"(\d+)[^"]*"\},'
                      rb'"cat":' + s + rb',"name":"thread_name","ph":"M","pid":(\d+),"tid":(\d+),')


_FAST_RE, _EXACT_RE = _event_re(_FAST_STR), _event_re(_EXACT_STR)
_FRAME_RE = re.compile(rb'^\{"filename":"(.*)","line":(null|\d+)(?:,"name":".*")?\},"cat":".*","name":"(.*)"$', re.S)
CHUNK = 16 << 20
# A root frame (py-spy --subprocesses): `process N:"cmd"`, no file. Only ever outermost.
_ROOT_FRAME = b'{"filename":"","line":'
_ROOT_NAME = b'"name":"process '
MAX_DEPTH = 1100  # deeper than CPython's default recursion limit (1000): the replay lost track

# One event, raw: (frame, phase, b'pid,"tid":tid,"ts":ts')
RawEvent = tuple[bytes, bytes, bytes]


def _text(raw: bytes | None) -> str:
    if not raw:
        return ""
    if b"\\" in raw:
        try:
            return json.loads(b'"' + raw + b'"')
        except ValueError:
            pass
    return raw.decode("utf-8", "replace")


def _tolerant_json(data: bytes) -> list[Any]:
    """Parse a JSON array, or as much of one as a kill left behind."""
    try:
        out = loads(data)  # finite numbers; too deep a nesting is a ValueError
        return out if isinstance(out, list) else []
    except ValueError:
        pass
    text = data.decode("utf-8", "replace").lstrip()
    if not text.startswith("["):
        return []
    decoder, events, i = json.JSONDecoder(), [], 1
    while True:
        while i < len(text) and text[i] in " \t\r\n,":
            i += 1
        try:
            obj, i = decoder.raw_decode(text, i)
        except (ValueError, RecursionError):
            return events
        events.append(obj)


def _reencode(e: dict[str, Any]) -> RawEvent:
    """An event of a file in another layout, as the regular expression would give it."""
    args = e.get("args") if isinstance(e.get("args"), dict) else {}
    frame = json.dumps({"filename": str(args.get("filename", "")), "line": args.get("line")},
                       separators=(",", ":"))
    frame += ',"cat":"","name":' + json.dumps(str(e.get("name", "")))
    rest = b'%d,"tid":%d,"ts":%d' % (int(e.get("pid", -1)), int(e.get("tid", -1)), int(e.get("ts", 0)))
    return frame.encode(), str(e["ph"]).encode(), rest


def read_events(path: str, renamed: dict[tuple[int, int], int]) -> Iterator[list[RawEvent]]:
    """Batches of the complete B/E events of a py-spy chrometrace file, even a truncated one.

    Fills `renamed` with (pid, tid) -> real thread id from `thread_name` metadata.
    """
    with open_regular(path, follow=False) as f:  # no FIFO, no planted symlink
        size = os.fstat(f.fileno()).st_size
        if size == 0:
            return
        if size > max_trace_bytes():
            raise DiagError(f"{path}: larger than {max_trace_bytes()} bytes (raise DIAG_MAX_TRACE_BYTES to read it)")
        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as buf:
            s = _EXACT_STR if buf.find(b'\\"') >= 0 else _FAST_STR
            pattern = _event_re(s) if s is _EXACT_STR else _FAST_RE
            if buf.find(b'"ph":"M"') >= 0:
                for real, pid, tid in _thread_name_re(s).findall(buf):
                    renamed[(int(pid), int(tid))] = int(real)
            found, pos, size = False, 0, len(buf)
            while pos < size:
                # Windows end on an event boundary; findall(pos, endpos) reads the map without copying.
                cut = buf.rfind(b"},{", pos, pos + CHUNK) + 1 if pos + CHUNK < size else size
                cut = cut if cut > pos else min(size, pos + CHUNK)
                batch = pattern.findall(buf, pos, cut)
                if batch:
                    found = True
                    yield batch
                pos = cut
            if found:
                return
            data = buf[:]
    batch = []
    for e in _tolerant_json(data):
        if isinstance(e, dict) and e.get("ph") in ("B", "E"):
            try:
                batch.append(_reencode(e))
            except (TypeError, ValueError):
                continue
    if batch:
        yield batch


def _frame(raw: bytes) -> tuple[str, bool]:
    """`function (file:line)` and whether it is a known wait, from a raw frame."""
    m = _FRAME_RE.match(raw)
    if not m:
        return _text(raw), False
    filename, line, name = _text(m.group(1)), m.group(2), _text(m.group(3))
    text = f"{name} ({filename}:{int(line)})" if line != b"null" else f"{name} ({filename})"
    return text, (filename.rsplit("/", 1)[-1], name) in _IDLE


def parse_pyspy(path: str, start_ns: int, tid_map: dict[int, int] | None = None) -> pd.DataFrame:
    """Rows of the stacks table from one py-spy chrometrace file.

    `start_ns`: Unix-epoch ns of py-spy's start (its ts 0). `tid_map`: py-spy
    thread id -> the native tid other tables use, where known.
    """
    tid_map = dict(tid_map or {})
    renamed: dict[tuple[int, int], int] = {}
    ts_col: list[bytes] = []
    end_col: list[bytes] = []
    key_col: list[bytes] = []
    stack_col: list[str] = []
    # Per thread (raw b'pid,"tid":tid'): [joined stack prefixes, raw ts the current stack began].
    threads: dict[bytes, list[Any]] = {}
    # (parent stack, raw frame) -> the joined stack "a;b;c"; and stack -> idle.
    stacks: dict[tuple[str, bytes], str] = {}
    idle_of: dict[str, bool] = {}
    cur = b""
    prefixes: list[str] = []

    # The hot loop: raw bytes in; a thread's state is looked up once per sample, not per event.
    for batch in read_events(path, renamed):
        for frame, ph, rest in batch:
            if rest != cur:
                key, _, ts = rest.rpartition(b',"ts":')
                state = threads.get(key)
                if state is None:
                    state = threads[key] = [[], ts]
                elif ts != state[1]:
                    if state[0]:
                        ts_col.append(state[1])
                        end_col.append(ts)
                        key_col.append(key)
                        stack_col.append(state[0][-1])
                    state[1] = ts
                prefixes = state[0]
                cur = rest
            if ph == b"E":
                if prefixes:
                    prefixes.pop()
                continue
            if (frame.startswith(_ROOT_FRAME) and _ROOT_NAME in frame) or len(prefixes) >= MAX_DEPTH:
                prefixes.clear()  # a new stack from its root: nothing that came before encloses it
            parent = prefixes[-1] if prefixes else ""
            stack = stacks.get((parent, frame))
            if stack is None:
                text, idle = _frame(frame)
                stack = stacks[(parent, frame)] = f"{parent};{text}" if parent else text
                idle_of[stack] = idle
            prefixes.append(stack)

    # A truncated file leaves stacks open: end them at the last time seen.
    last = max((int(st[1]) for st in threads.values()), default=0)
    for key, st in threads.items():
        if st[0] and int(st[1]) < last:
            ts_col.append(st[1])
            end_col.append(b"%d" % last)
            key_col.append(key)
            stack_col.append(st[0][-1])

    if not ts_col:
        return pd.DataFrame({c: [] for c in ("ts_ns", "dur_ns", "pid", "tid", "stack", "idle")})
    begin = np.array(ts_col).astype(np.int64)  # numpy parses the digit strings in C
    end = np.array(end_col).astype(np.int64)
    codes = {k: i for i, k in enumerate(threads)}
    idx = np.fromiter((codes[k] for k in key_col), dtype=np.int64, count=len(key_col))
    ids = [tuple(int(x) for x in k.split(b',"tid":')) for k in threads]
    pids = np.array([p for p, _ in ids], dtype=np.int64)
    real = [renamed.get((p, t), t) for p, t in ids]
    tids = np.array([tid_map.get(t, t) for t in real], dtype=np.int64)
    return pd.DataFrame({
        "ts_ns": start_ns + begin * 1000, "dur_ns": (end - begin) * 1000,
        "pid": pids[idx], "tid": tids[idx], "stack": stack_col,
        "idle": np.fromiter((idle_of[s] for s in stack_col), dtype=bool, count=len(stack_col)),
    })


def _thread_map(run_dir: str) -> dict[int, int]:
    """thread ident (pthread id, what py-spy reports) -> native tid, from the recorder's meta rows."""
    out: dict[int, int] = {}
    for row in read_raw(run_dir, "meta"):
        ident, native = row.get("thread_ident"), row.get("native_id")
        if isinstance(ident, int) and isinstance(native, int):
            out[ident] = native
    return out


def pyspy_start_ns(manifest: dict[str, Any]) -> int:
    """py-spy's ts 0 on the Unix epoch: collectors.stacks.start_ns, else the run's start."""
    stacks = (manifest.get("collectors") or {}).get("stacks") or {}
    return int(stacks.get("start_ns") or manifest.get("start_ns") or 0)


_SEGMENT = re.compile(r"pyspy\.(\d+)\.json$")
_COMPACT = re.compile(r"stacks\.(\d+)\.parquet$")


def _segment_start(path: str, manifest: dict[str, Any]) -> int:
    """A segment's time zero: in its name (pyspy.<start_ns>.json), else the manifest."""
    m = _SEGMENT.search(os.path.basename(path))
    return int(m.group(1)) if m else pyspy_start_ns(manifest)


def compact(path: str) -> str:
    """Turn one finished py-spy segment into raw/stacks.<start_ns>.parquet and delete it.

    Thread ids stay py-spy's; they are mapped when the run is read.
    """
    start_ns = _segment_start(path, {})
    out = os.path.join(os.path.dirname(path), f"stacks.{start_ns}.parquet")
    parse_pyspy(path, start_ns).to_parquet(out + ".tmp", index=False, compression="zstd")  # as store/run.py
    os.replace(out + ".tmp", out)
    os.remove(path)
    return out


@derived_table("stacks")
def stacks_of_run(run_dir: str) -> Any:
    """The stacks table of a run: compacted segments plus py-spy files still in JSON."""
    raw = os.path.join(run_dir, RAW_DIR)
    try:
        manifest = read_manifest(run_dir)
    except DiagError:
        manifest = {}
    parts = []
    for path in sorted(glob.glob(os.path.join(raw, "stacks.*.parquet"))):
        try:
            parts.append(pd.read_parquet(path))
        except (OSError, ValueError):
            continue  # a compaction cut short by a kill: its JSON is still there
    compacted = {_COMPACT.search(p).group(1) for p in glob.glob(os.path.join(raw, "stacks.*.parquet"))
                 if _COMPACT.search(p)}
    for path in sorted(glob.glob(os.path.join(raw, "pyspy*.json"))):
        m = _SEGMENT.search(os.path.basename(path))
        if m and m.group(1) in compacted:
            continue
        try:
            parts.append(parse_pyspy(path, _segment_start(path, manifest)))
        except (OSError, ValueError, OverflowError):
            continue  # cut short by a kill, or times beyond int64: not a py-spy file diag can use
    parts = [p for p in parts if not p.empty]
    if not parts:
        return []
    df = pd.concat(parts, ignore_index=True)
    tid_map = _thread_map(run_dir)
    if tid_map:
        df["tid"] = df["tid"].map(lambda t: tid_map.get(int(t), int(t)))
    return df


if __name__ == "__main__":  # python -m diag.store.pyspy compact FILE (run by the stack sampler)
    import sys

    if len(sys.argv) == 3 and sys.argv[1] == "compact":
        print(f"compacted {compact(sys.argv[2])}")
    else:
        sys.exit("usage: python -m diag.store.pyspy compact PYSPY_SEGMENT.json")
