"""The run directory: manifest, raw JSON lines, Parquet tables (docs/run-format.md)."""
