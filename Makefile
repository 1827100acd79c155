# Two commands from a fresh clone (see README "Quick start"):
#   make audit   creates .venv on first use and runs the flagship audit (report under runs/)
#   make test    creates .venv on first use and runs the test-suite (what .ci/run runs) on TEST_WORKERS
#                processes (pytest-xdist, a test file per worker at a time; TEST_WORKERS=0: one process)
#   make test-fast  the unit lane: every test outside tests/e2e/ (whose conftest marks its tests slow), on
#                TEST_WORKERS processes too
#   make lint    ruff (E,F,I,W,B,UP, complexity C901 <= 15, PLR0913 <= 8 arguments; .ci/run runs it too)
#   make docs    builds the documentation site into site/, warnings as errors (.ci/run builds it too)
PYTHON ?= python3
VENV := .venv
# two workers: the machine README and CI assume has two cores (tests/README.md, "Time")
TEST_WORKERS ?= 2

.PHONY: audit test test-fast docs lint

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install -e '.[dev]'
	touch $@

audit: $(VENV)/.installed
	$(VENV)/bin/python -m audit run membership --target dpsgd_mnist

test: $(VENV)/.installed
	$(VENV)/bin/python -m pytest -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder

test-fast: $(VENV)/.installed
	$(VENV)/bin/python -m pytest -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder -m "not slow" -p no:cacheprovider -q

docs: $(VENV)/.installed
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/python -m mkdocs build --strict --site-dir $(or $(SITE_DIR),site)

lint: $(VENV)/.installed
	$(VENV)/bin/ruff check .
