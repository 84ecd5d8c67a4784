# `make demo`: set up and run every example on every target, checked against NumPy.
# `make test`: set up and run the whole test suite (every backend must load).
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: demo test lint bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	# torch is pinned exactly and installed first: a looser pin pulls a multi-GB CUDA build.
	$(PY) -m pip install --quiet "torch==2.13.0"
	$(PY) -m pip install --quiet -e ".[dev]"
	touch $(STAMP)

demo: $(STAMP)
	$(PY) examples/run_all.py

test: $(STAMP)
	$(VENV)/bin/unigraph backends --check
	$(PY) -m pytest -q

lint: $(STAMP)
	$(VENV)/bin/ruff check unigraph backends tests examples bench

bench: $(STAMP)
	$(PY) bench/run.py

clean:
	rm -rf $(VENV)
