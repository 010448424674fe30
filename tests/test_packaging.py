"""The wheel ships every package of diag/, the built-in rules and the sample workloads."""

from __future__ import annotations

import os
import sys

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_every_folder_with_python_code_is_a_listed_package() -> None:
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        listed = set(tomllib.load(f)["tool"]["setuptools"]["packages"])
    found = set()
    for dirpath, dirnames, filenames in os.walk(os.path.join(ROOT, "diag")):
        dirnames[:] = [d for d in dirnames if not d.startswith((".", "__"))]
        if any(f.endswith(".py") for f in filenames):
            found.add(os.path.relpath(dirpath, ROOT).replace(os.sep, "."))
    assert found - listed == set(), "add these to [tool.setuptools] packages in pyproject.toml"


def test_rules_and_samples_are_importable_as_package_data() -> None:
    from importlib import resources

    assert any(p.name.endswith(".toml") for p in resources.files("diag._rules").iterdir())
    assert any(p.name == "cnn_pipeline.py" for p in resources.files("diag._samples").iterdir())
