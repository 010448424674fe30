"""Built-in rules (TOML). Shipped in the wheel as diag._rules."""
