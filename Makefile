# `make demo`: set up and run every example on every target, checked against NumPy.
# `make test`: set up and run the whole test suite (every backend must load).
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: demo test lint bench bench-quick clean system

# The tests also need Graphviz's `dot` (SVG views) and Chromium (the HTML view is checked in
# a real headless browser): installed from the system's package manager when missing (root).
system:
	@if ! command -v dot >/dev/null || ! command -v chromium >/dev/null; then \
		if [ "$$(id -u)" = 0 ]; then \
			apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
				--no-install-recommends graphviz chromium >/dev/null; \
		else \
			echo "make test needs graphviz and chromium: sudo apt-get install graphviz chromium"; \
			exit 1; \
		fi; \
	fi

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	# torch is pinned exactly and installed first: a looser pin pulls a multi-GB CUDA build.
	$(PY) -m pip install --quiet "torch==2.13.0"
	$(PY) -m pip install --quiet -e ".[dev]"
	touch $(STAMP)

demo: $(STAMP)
	$(PY) examples/run_all.py

test: system $(STAMP)
	$(VENV)/bin/unigraph backends --check
	$(PY) -m pytest -q

lint: $(STAMP)
	$(VENV)/bin/ruff check unigraph backends tests examples bench

bench: $(STAMP)
	$(PY) bench/run.py

bench-quick: $(STAMP)
	$(PY) bench/run.py --quick

clean:
	rm -rf $(VENV)
