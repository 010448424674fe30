"""Write the Nsight Systems SQLite fixtures of tests/test_nsight_fixtures.py.

No public `nsys export --type sqlite` file was found and Nsight Systems does
not run on our GPU box, so these are built to the export schema NVIDIA
documents (Nsight Systems User Guide, "SQLite Schema Reference"): the tables
and columns below are the documented ones diag's reader (diag/store/nsight.py)
queries, plus OSRT_API, which it ignores. Column types and the encodings follow
the guide: times in ns from the session start, names as StringIds ids,
globalPid = pid << 24 and globalTid = (pid << 24) | tid, copyKind / srcKind /
dstKind as CUPTI_ActivityMemcpyKind / CUPTI_ActivityMemoryKind, NVTX eventType
59 (push/pop), 60 (start/end), 75 (domain create).

    .venv/bin/python tests/data/nsight/make_fixtures.py   # rewrites the three *.sqlite here

Deterministic: the same bytes' content every time (no randomness, no clock).
"""

from __future__ import annotations

import os
import sqlite3

HERE = os.path.dirname(os.path.abspath(__file__))
EPOCH_NS = 1_700_000_000_000_000_000  # TARGET_INFO_SESSION_START_TIME.utcEpochNs
PID, TID = 4242, 4243
GLOBAL_PID = PID << 24
GLOBAL_TID = (PID << 24) | TID
MS, US = 1_000_000, 1_000

SCHEMA = """
CREATE TABLE StringIds (id INTEGER NOT NULL PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE TARGET_INFO_SESSION_START_TIME (utcEpochNs INTEGER, utcTime TEXT, localTime TEXT);
CREATE TABLE TARGET_INFO_GPU (vmId INTEGER NOT NULL, id INTEGER NOT NULL, name TEXT, busLocation TEXT,
    isDiscrete INTEGER, l2CacheSize INTEGER, totalMemory INTEGER, memoryBandwidth INTEGER,
    clockRate INTEGER, smCount INTEGER, computeMajor INTEGER, computeMinor INTEGER);
CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INTEGER NOT NULL, end INTEGER NOT NULL,
    deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL, streamId INTEGER NOT NULL,
    correlationId INTEGER, globalPid INTEGER, demangledName INTEGER NOT NULL, shortName INTEGER NOT NULL,
    mangledName INTEGER, launchType INTEGER, cacheConfig INTEGER, registersPerThread INTEGER NOT NULL,
    gridX INTEGER NOT NULL, gridY INTEGER NOT NULL, gridZ INTEGER NOT NULL,
    blockX INTEGER NOT NULL, blockY INTEGER NOT NULL, blockZ INTEGER NOT NULL,
    staticSharedMemory INTEGER NOT NULL, dynamicSharedMemory INTEGER NOT NULL,
    localMemoryPerThread INTEGER NOT NULL, localMemoryTotal INTEGER NOT NULL,
    gridId INTEGER NOT NULL, sharedMemoryExecuted INTEGER, graphNodeId INTEGER, sharedMemoryLimitConfig INTEGER);
CREATE TABLE CUPTI_ACTIVITY_KIND_MEMCPY (start INTEGER NOT NULL, end INTEGER NOT NULL,
    deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL, streamId INTEGER NOT NULL,
    correlationId INTEGER, globalPid INTEGER, bytes INTEGER NOT NULL, copyKind INTEGER NOT NULL,
    deprecatedSrcId INTEGER, srcKind INTEGER, dstKind INTEGER, srcDeviceId INTEGER, srcContextId INTEGER,
    dstDeviceId INTEGER, dstContextId INTEGER, migrationCause INTEGER, graphNodeId INTEGER,
    virtualAddress INTEGER);
CREATE TABLE CUPTI_ACTIVITY_KIND_MEMSET (start INTEGER NOT NULL, end INTEGER NOT NULL,
    deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL, streamId INTEGER NOT NULL,
    correlationId INTEGER, globalPid INTEGER, value INTEGER NOT NULL, bytes INTEGER NOT NULL,
    graphNodeId INTEGER, memKind INTEGER);
CREATE TABLE NVTX_EVENTS (start INTEGER NOT NULL, end INTEGER, eventType INTEGER NOT NULL,
    rangeId INTEGER, category INTEGER, color INTEGER, text TEXT, globalTid INTEGER, endGlobalTid INTEGER,
    textId INTEGER, domainId INTEGER, uint64Value INTEGER, int64Value INTEGER, doubleValue REAL,
    uint32Value INTEGER, int32Value INTEGER, floatValue REAL, jsonTextId INTEGER, jsonText TEXT);
CREATE TABLE OSRT_API (start INTEGER NOT NULL, end INTEGER, eventClass INTEGER NOT NULL,
    globalTid INTEGER, correlationId INTEGER, nameId INTEGER NOT NULL, returnValue INTEGER NOT NULL,
    nestingLevel INTEGER, callchainId INTEGER);
"""

GEMM = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off"
ATTN = "void flash_fwd_kernel<Flash_fwd_kernel_traits<128, 64, 64, 4, false, false, cutlass::bfloat16_t>>(Flash_fwd_params)"
ADD = "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>>(int, float*)"
# CUPTI_ActivityMemcpyKind and CUPTI_ActivityMemoryKind values
HTOD, DTOH = 1, 2
PAGEABLE, PINNED, DEVICE = 1, 2, 3
PUSHPOP, STARTEND, DOMAIN_CREATE = 59, 60, 75


class Export:
    """One export being written: string ids, and rows per table."""

    def __init__(self, path: str) -> None:
        if os.path.exists(path):
            os.remove(path)
        self.db = sqlite3.connect(path)
        self.db.executescript(SCHEMA)
        self.strings: dict[str, int] = {}
        self.corr = 0
        self.db.execute("INSERT INTO TARGET_INFO_SESSION_START_TIME VALUES (?, ?, ?)",
                        (EPOCH_NS, "2023-11-14T22:13:20Z", "2023-11-14T22:13:20"))
        self.db.execute("INSERT INTO TARGET_INFO_GPU (vmId, id, name, busLocation, isDiscrete, totalMemory, "
                        "smCount, computeMajor, computeMinor) VALUES (0, 0, 'NVIDIA H100 80GB HBM3', "
                        "'0000:18:00.0', 1, 85032321024, 132, 9, 0)")

    def sid(self, text: str) -> int:
        if text not in self.strings:
            self.strings[text] = len(self.strings) + 1
            self.db.execute("INSERT INTO StringIds VALUES (?, ?)", (self.strings[text], text))
        return self.strings[text]

    def kernel(self, start: int, dur: int, name: str, grid: int = 132) -> None:
        self.corr += 1
        short = name.split("<")[0].split("(")[0].replace("void ", "")
        self.db.execute(
            "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL (start, end, deviceId, contextId, streamId, correlationId, "
            "globalPid, demangledName, shortName, mangledName, launchType, cacheConfig, registersPerThread, "
            "gridX, gridY, gridZ, blockX, blockY, blockZ, staticSharedMemory, dynamicSharedMemory, "
            "localMemoryPerThread, localMemoryTotal, gridId, sharedMemoryExecuted) "
            "VALUES (?, ?, 0, 1, 7, ?, ?, ?, ?, ?, 0, 0, 128, ?, 1, 1, 384, 1, 1, 0, 49152, 0, 0, ?, 65536)",
            (start, start + dur, self.corr, GLOBAL_PID, self.sid(name), self.sid(short), self.sid("_Z" + short),
             grid, self.corr))

    def memcpy(self, start: int, dur: int, nbytes: int, kind: int, src: int, dst: int) -> None:
        self.corr += 1
        self.db.execute(
            "INSERT INTO CUPTI_ACTIVITY_KIND_MEMCPY (start, end, deviceId, contextId, streamId, correlationId, "
            "globalPid, bytes, copyKind, srcKind, dstKind, srcDeviceId, dstDeviceId) "
            "VALUES (?, ?, 0, 1, 7, ?, ?, ?, ?, ?, ?, 0, 0)",
            (start, start + dur, self.corr, GLOBAL_PID, nbytes, kind, src, dst))

    def memset(self, start: int, dur: int, nbytes: int) -> None:
        self.corr += 1
        self.db.execute(
            "INSERT INTO CUPTI_ACTIVITY_KIND_MEMSET (start, end, deviceId, contextId, streamId, correlationId, "
            "globalPid, value, bytes, memKind) VALUES (?, ?, 0, 1, 7, ?, ?, 0, ?, ?)",
            (start, start + dur, self.corr, GLOBAL_PID, nbytes, DEVICE))

    def nvtx(self, start: int, end: int, text: str, event_type: int = PUSHPOP, domain: int = 0,
             inline: bool = False) -> None:
        """A range; its name inline in `text` or, as nsys does for registered strings, through textId."""
        self.db.execute(
            "INSERT INTO NVTX_EVENTS (start, end, eventType, text, globalTid, endGlobalTid, textId, domainId) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (start, end, event_type, text if inline else None, GLOBAL_TID, GLOBAL_TID,
             None if inline else self.sid(text), domain))

    def osrt(self, start: int, dur: int, name: str) -> None:
        self.db.execute("INSERT INTO OSRT_API (start, end, eventClass, globalTid, nameId, returnValue, "
                        "nestingLevel) VALUES (?, ?, 27, ?, ?, 0, 0)",
                        (start, start + dur, GLOBAL_TID, self.sid(name)))

    def close(self) -> None:
        self.db.commit()
        self.db.execute("VACUUM")
        self.db.close()


def compute_heavy(path: str) -> None:
    """GEMM and attention kernels back to back for 2 s: the GPU ~98% busy, ~80% of it GEMM."""
    x = Export(path)
    x.memcpy(0, 2 * MS, 256 << 20, HTOD, PINNED, DEVICE)  # the weights, once
    t = 3 * MS
    for i in range(500):
        x.kernel(t, 3 * MS, GEMM)
        t += 3 * MS + 5 * US
        x.kernel(t, 600 * US, ATTN)
        t += 600 * US + 5 * US
        x.kernel(t, 60 * US, ADD)
        t += 60 * US + 5 * US
        if i % 50 == 0:
            x.osrt(t, 20 * US, "pthread_cond_timedwait")
    x.close()


def transfer_heavy(path: str) -> None:
    """Each batch copied from pageable memory (64 MB at ~8 GB/s), a short kernel, results copied back."""
    x = Export(path)
    t = 0
    for _ in range(200):
        x.memcpy(t, 8 * MS, 64 << 20, HTOD, PAGEABLE, DEVICE)
        t += 8 * MS + 20 * US
        x.memset(t, 10 * US, 1 << 20)
        t += 10 * US + 5 * US
        x.kernel(t, 900 * US, GEMM)
        t += 900 * US + 5 * US
        x.memcpy(t, 2 * MS, 16 << 20, DTOH, DEVICE, PAGEABLE)
        t += 2 * MS + 100 * US
        x.osrt(t - 90 * US, 80 * US, "read")
    x.close()


def nvtx_requests(path: str) -> None:
    """An inference server: NVTX "request" ranges (push/pop), prefill/decode stages inside them
    (one named inline, one through StringIds), a start/end range across requests, a domain."""
    x = Export(path)
    x.db.execute("INSERT INTO NVTX_EVENTS (start, end, eventType, text, globalTid, domainId) "
                 "VALUES (0, NULL, ?, 'vllm', ?, 1)", (DOMAIN_CREATE, GLOBAL_TID))
    t = 1 * MS
    for _ in range(40):
        start = t
        t += 200 * US  # host work before the first kernel
        pre = t
        for _ in range(4):
            x.kernel(t, 2 * MS, GEMM)
            t += 2 * MS + 5 * US
            x.kernel(t, 500 * US, ATTN)
            t += 500 * US + 5 * US
        x.nvtx(pre, t, "prefill", domain=1, inline=True)
        dec = t
        for _ in range(20):
            x.kernel(t, 400 * US, GEMM)
            t += 400 * US + 5 * US
            x.kernel(t, 100 * US, ATTN)
            t += 100 * US + 5 * US
        x.nvtx(dec, t, "decode", domain=1)
        t += 100 * US
        x.nvtx(start, t, "request", domain=1)
        t += 300 * US  # between requests
    x.nvtx(0, t, "serve_loop", STARTEND, domain=1)
    x.close()


FIXTURES = {"compute_heavy.sqlite": compute_heavy, "transfer_heavy.sqlite": transfer_heavy,
            "nvtx_requests.sqlite": nvtx_requests}


def main() -> None:
    for name, build in FIXTURES.items():
        build(os.path.join(HERE, name))
        print(name, os.path.getsize(os.path.join(HERE, name)), "bytes")


if __name__ == "__main__":
    main()
