"""The steps table's columns: the one definition of a step row.

The recorder queues a step as a plain list in `STEP_COLUMNS` order (cheap on
the target's hot path) and adds `pid` when it writes the row; the hooks and
the recorder index that list with the constants below; the run reader lists
`TABLE_COLUMNS`; docs/run-format.md documents the same columns (a test checks
it). Standard library only: the recording side imports this module.
"""

from __future__ import annotations

# (name, type) in the order of a queued row; type is how the recorder encodes it:
# int, str, bool, or shapes (a list of shapes, written as text like `[[8,3,224,224]]`).
STEP_LAYOUT: tuple[tuple[str, str], ...] = (
    ("ts_ns", "int"),
    ("dur_ns", "int"),
    ("tid", "int"),
    ("source", "str"),
    ("model", "str"),
    ("batch", "int"),
    ("shapes", "shapes"),
    ("dtype", "str"),
    ("device", "str"),
    ("gpu_ns", "int"),
    ("syncs", "int"),
    ("seq", "int"),
    ("in_window", "bool"),
    ("weight", "int"),
)
STEP_COLUMNS: tuple[str, ...] = tuple(name for name, _ in STEP_LAYOUT)

# Indexes into a queued step row.
(TS, DUR, TID, SOURCE, MODEL, BATCH, SHAPES, DTYPE, DEVICE, GPU_NS, SYNCS, SEQ, IN_WINDOW,
 WEIGHT) = range(len(STEP_COLUMNS))

# The columns as stored: the queued row plus the process id the recorder adds.
TABLE_COLUMNS: tuple[str, ...] = (*STEP_COLUMNS, "pid")
