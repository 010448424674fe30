"""Sample inference workloads (also shipped in the wheel as diag._samples for `diag demo`)."""
