# The two set-up commands of the README: `make run` (main job) and `make test` (tests).
# Each creates or reuses the virtual environment .venv and installs what it needs.
PYTHON ?= python3
TORCH ?= torch==2.13.0
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.sklearn_calib_installed

.PHONY: run test

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q "$(TORCH)"
	$(BIN)/python -m pip install -q -e ".[test,plot,dask,persist]"
	touch $(STAMP)

run: $(STAMP)
	$(BIN)/python -m sklearn_calib

test: $(STAMP)
	$(BIN)/python -m pytest
