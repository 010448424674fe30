"""The TUI's views, one module each, in tab order."""
