"""Which stacks wait on input I/O, and which wait on the program's own worker processes."""

from __future__ import annotations

import pandas as pd

from diag.analysis.stacks import io_frames

LIB = "/usr/lib/python3.11"
TORCH = "/venv/lib/python3.11/site-packages/torch"


def test_dataloader_queue_wait_is_not_io():
    main = (f"<module> (run.py:10);_MultiProcessingDataLoaderIter._next_data ({TORCH}/utils/data/dataloader.py:1458);"
            f"_MultiProcessingDataLoaderIter._get_data ({TORCH}/utils/data/dataloader.py:1410);"
            f"_MultiProcessingDataLoaderIter._try_get_data ({TORCH}/utils/data/dataloader.py:1251);"
            f"Queue.get ({LIB}/multiprocessing/queues.py:113);Connection.poll ({LIB}/multiprocessing/connection.py:257);"
            f"Connection._poll ({LIB}/multiprocessing/connection.py:440);wait ({LIB}/multiprocessing/connection.py:1136);"
            f"_PollLikeSelector.select ({LIB}/selectors.py:415)")
    worker = (f"_worker_loop ({TORCH}/utils/data/_utils/worker.py:300);Queue.get ({LIB}/multiprocessing/queues.py:113);"
              f"Connection.poll ({LIB}/multiprocessing/connection.py:257);_PollLikeSelector.select ({LIB}/selectors.py:415)")
    socket = f"<module> (srv.py:3);socket.recv_into ({LIB}/socket.py:706)"
    select = f"<module> (srv.py:3);serve (srv.py:9);_PollLikeSelector.select ({LIB}/selectors.py:415)"
    single = (f"<module> (run.py:10);_SingleProcessDataLoaderIter._next_data ({TORCH}/utils/data/dataloader.py:790);"
              f"_MapDatasetFetcher.fetch ({TORCH}/utils/data/_utils/fetch.py:54);BufferedReader.read ({LIB}/io.py:1)")
    got = io_frames(pd.Series([main, worker, socket, select, single, None])).tolist()
    assert got == [False, False, True, True, True, False]
