"""Import contracts between diag's layers, read from the source with ast (nothing is imported)."""

from __future__ import annotations

import ast
from pathlib import Path

import diag

ROOT = Path(diag.__file__).parent
# What sits above analysis in the pipeline: the engine and every view.
ABOVE_ANALYSIS = ("diag.engine", "diag.views", "diag.tui", "diag.report", "diag.cli", "diag.demo")


def imports_in(source: str, package: str) -> set[str]:
    """Every module that code in `package` imports (relative imports resolved), at any depth of the code."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package.rsplit(".", node.level - 1)[0] if node.level else ""
            module = ".".join(p for p in (base, node.module or "") if p)
            out.add(module)
            out.update(f"{module}.{a.name}" for a in node.names)  # `from diag import engine`
    return out


def _is_under(module: str, packages: tuple[str, ...]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in packages)


def test_analysis_imports_neither_engine_nor_views() -> None:
    files = sorted((ROOT / "analysis").rglob("*.py"))
    assert files
    bad = {f"{f.relative_to(ROOT.parent)}: {m}" for f in files
           for m in imports_in(f.read_text(), ".".join(f.relative_to(ROOT.parent).parts[:-1]))
           if _is_under(m, ABOVE_ANALYSIS)}
    assert not bad, sorted(bad)


def test_the_scan_sees_an_upward_import() -> None:
    code = "from ..engine.diagnosis import Phase\nimport diag.tui.fmt\n\ndef f():\n    from diag import report\n"
    found = {m for m in imports_in(code, "diag.analysis") if _is_under(m, ABOVE_ANALYSIS)}
    assert {"diag.engine.diagnosis", "diag.tui.fmt", "diag.report"} <= found
