# Two commands for a new user: `make demo` and `make test` (README.md).
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
# The CPU wheel of torch that lies on this machine's disk; an unpinned torch
# would pull a multi-GB CUDA build. On a GPU machine: make demo TORCH=torch
TORCH ?= torch==2.13.0
PIP := $(BIN)/python -m pip -q --disable-pip-version-check

.PHONY: demo test lint install install-test bench clean

$(BIN)/python:
	$(PY) -m venv $(VENV)

$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(PIP) install "$(TORCH)"
	$(PIP) install -e .
	touch $@

$(VENV)/.installed-test: pyproject.toml $(VENV)/.installed
	$(PIP) install -e ".[test]"
	touch $@

install: $(VENV)/.installed
install-test: $(VENV)/.installed-test

demo: install
	rm -rf runs/demo
	$(BIN)/diag demo --out runs/demo

test: install-test
	$(BIN)/python -m pytest -q -ra

lint: install-test
	$(BIN)/ruff check diag tests benchmarks sample_workloads
	$(BIN)/lint-imports

bench: install-test
	$(BIN)/python benchmarks/analyze.py
	$(BIN)/python benchmarks/overhead.py --seconds 10

clean:
	rm -rf $(VENV) runs build *.egg-info
