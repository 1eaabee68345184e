# The two commands a new machine needs: `make dev` (start the local stack) and `make test`.
PYTHON ?= python3
VENV   := .venv
STAMP  := $(VENV)/.installed-$(shell cat pyproject.toml constraints.txt | cksum | cut -d' ' -f1)

.PHONY: install dev test bench lint

$(STAMP): pyproject.toml constraints.txt
	test -x $(VENV)/bin/python || $(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --upgrade pip
	$(VENV)/bin/pip install --quiet -c constraints.txt -e ".[dev]"
	rm -f $(VENV)/.installed-* && touch $(STAMP)

install: $(STAMP)

dev: install  ## install, then start the local stack (Ctrl-C stops it)
	$(VENV)/bin/cirrusmq dev $(ARGS)

test: install  ## install, then run the whole test suite
	$(VENV)/bin/pytest $(ARGS)

bench: install  ## core queue benchmark (figures in README.md)
	$(VENV)/bin/python tests/benchmarks/core_queue.py $(ARGS)

lint: install
	$(VENV)/bin/ruff check . && $(VENV)/bin/ruff format --check .
