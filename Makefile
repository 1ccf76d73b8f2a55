# The two set-up commands of the README: `make run` (main job) and `make test` (tests), and
# `make docs` (the documentation site, docs/_build/html). Each creates or reuses the virtual
# environment .venv and installs what it needs.
PYTHON ?= python3
TORCH ?= torch==2.13.0
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.sklearn_calib_installed
DOCS_STAMP := $(VENV)/.sklearn_calib_docs_installed

.PHONY: run test docs

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q "$(TORCH)"
	$(BIN)/python -m pip install -q -e ".[test,plot,dask,persist]"
	touch $(STAMP)

# The docs extra (Sphinx and its extensions): for `make docs`, and for `make test`, whose
# tests/test_docs.py builds the site.
$(DOCS_STAMP): $(STAMP)
	$(BIN)/python -m pip install -q -e ".[docs]"
	touch $(DOCS_STAMP)

run: $(STAMP)
	$(BIN)/python -m sklearn_calib

test: $(DOCS_STAMP)
	$(BIN)/python -m pytest

# Warnings (broken references, docstring format errors, failing examples) fail the build.
docs: $(DOCS_STAMP)
	$(BIN)/python -m sphinx -W --keep-going -b html docs docs/_build/html
