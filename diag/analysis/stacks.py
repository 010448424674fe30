"""Stack samples (py-spy): which ones wait on files or sockets."""

from __future__ import annotations

import re
from collections.abc import Callable

import numpy as np
import pandas as pd

# Leaf Python frames that wait on files or sockets. py-spy shows Python frames,
# so a C-level read appears as the library function that called it.
IO_FRAME = re.compile(
    r"(?:\w+\.)*(?:read|readinto|readline|readlines|read1|recv|recv_into|recvfrom|recvfrom_into|recvmsg|"
    r"_safe_read|_read_status|begin|getresponse|urlopen|select|poll|_read|fromfile|load|"
    r"sendall|connect|create_connection|_fp_read|readexactly|sock_recv|read_csv|read_parquet|imread|open)"
    r" \((?:[^;()]*/)?(?:socket|ssl|selectors|http/client|urllib/[^;]*|requests/[^;]*|urllib3/[^;]*|"
    r"gzip|bz2|lzma|zipfile|tarfile|_compression|io|codecs|shutil|asyncio/[^;]*|numpy/[^;]*npyio[^;]*|"
    r"numpy/lib/format|PIL/[^;]*|torch/serialization|pandas/io/[^;]*|pyarrow/[^;]*|h5py/[^;]*|"
    r"cv2/[^;]*|fsspec/[^;]*|s3fs/[^;]*|boto[^;]*|datasets/[^;]*)\.py:\d+\)$"
)

# Frames of a wait for another process of the same program: a multiprocessing
# pipe or queue (a DataLoader's main process waiting for a batch from its
# workers, or a worker waiting for indices). The leaf is a select/poll/read on
# a pipe to one's own worker, which is not input I/O: only descriptors that lead
# to a file or a remote peer are. Single-process DataLoader loading
# (_next_data -> fetch) is not matched: its reads are the program's own I/O.
WORKER_WAIT_FRAME = re.compile(
    r"\((?:[^;()]*/)?multiprocessing/(?:connection|queues)\.py:\d+\)"
    r"|(?:\w+\.)*(?:_try_get_data|_get_data) \((?:[^;()]*/)?torch/utils/data/dataloader\.py:\d+\)"
)

# The innermost frame of a blocking wait in such a pipe or queue: a select or poll
# on the pipe, the blocking receive, or a condition wait. (The unpickling that
# follows a receive is work, and is not matched.)
WAIT_LEAF = re.compile(
    r"(?:\w+\.)*(?:select|poll|_poll|wait|_recv|_recv_bytes|recv_bytes|recv|get|_get) "
    r"\((?:[^;()]*/)?(?:selectors|threading|queue|multiprocessing/(?:connection|queues|synchronize|popen_fork))"
    r"\.py:\d+\)$"
)


# Frames only a thread inside a model call has on its stack: a torch Module call or an ORT run.
MODEL_FRAME = re.compile(r"(?:_call_impl|_wrapped_call_impl) \([^;]*torch/nn/modules/module\.py|run \([^;]*onnxruntime/")


def _judge(stacks: pd.Series, test: Callable[[str], bool]) -> pd.Series:
    # stacks repeat: judge each distinct one once
    codes, uniques = pd.factorize(stacks)
    verdict = np.array([isinstance(s, str) and test(s) for s in uniques] + [False], dtype=bool)
    return pd.Series(verdict[codes], index=stacks.index)  # code -1 (null) picks the trailing False


def io_frames(stacks: pd.Series) -> pd.Series:
    """Whether each stack's innermost frame waits on a file or socket read (not on a worker process)."""
    return _judge(stacks, lambda s: bool(IO_FRAME.match(s.rpartition(";")[2])) and not WORKER_WAIT_FRAME.search(s))


def model_frames(stacks: pd.Series) -> pd.Series:
    """Whether each stack is inside a model call (even where the step row itself was not kept)."""
    return _judge(stacks, lambda s: bool(MODEL_FRAME.search(s)))


def thread_wait_frames(stacks: pd.Series) -> pd.Series:
    """Whether each stack's innermost frame waits on a lock, condition, queue or pipe of the program's own
    (WAIT_LEAF): a thread handed work to another and waits for its result."""
    return _judge(stacks, lambda s: bool(WAIT_LEAF.match(s.rpartition(";")[2])))


def worker_wait_frames(stacks: pd.Series) -> pd.Series:
    """Whether each stack blocks in a pipe or queue to the program's own worker processes (WORKER_WAIT_FRAME)."""
    return _judge(stacks, lambda s: bool(WAIT_LEAF.match(s.rpartition(";")[2])) and bool(WORKER_WAIT_FRAME.search(s)))
