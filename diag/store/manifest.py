"""run.json: the run's manifest. Standard library only (the recorder writes it)."""

from __future__ import annotations

import json
import os
from typing import Any

SCHEMA = "diag.run/1"
MANIFEST = "run.json"


def write_manifest(run_dir: str, manifest: dict[str, Any]) -> None:
    """Write atomically (temp file + rename) so a kill never leaves half a file."""
    path = os.path.join(run_dir, MANIFEST)
    tmp = f"{path}.tmp.{os.getpid()}"
    with open(tmp, "w") as f:
        json.dump(manifest, f, indent=2, default=str)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def read_manifest(run_dir: str) -> dict[str, Any]:
    with open(os.path.join(run_dir, MANIFEST)) as f:
        data = json.load(f)
    if not isinstance(data, dict) or not str(data.get("schema", "")).startswith("diag.run/"):
        raise ValueError("run.json has no diag.run schema")
    return data
