# Two commands from a fresh clone (see README "Quick start"):
#   make audit   creates .venv on first use and runs the flagship audit (report under runs/)
#   make test    creates .venv on first use and runs the test-suite (what .ci/run runs)
PYTHON ?= python3
VENV := .venv

.PHONY: audit test

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install -e '.[dev]'
	touch $@

audit: $(VENV)/.installed
	$(VENV)/bin/python -m audit run membership --target dpsgd_mnist

test: $(VENV)/.installed
	$(VENV)/bin/python -m pytest
