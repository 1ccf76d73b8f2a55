# The two set-up commands of the README: `make run` (main job) and `make test` (tests), and
# `make docs` (the documentation site, docs/_build/html). Each creates or reuses the virtual
# environment .venv and installs what it needs, at the versions of constraints.txt (those CI
# tested). `make test-fast` leaves out the tests marked slow. `make test-numpy` reruns the
# metric and calibrator tests on the numpy path (numba switched off), the path of users
# without the `fast` extra; CI runs it after `make test`. The tests run in two processes
# (pytest-xdist); the tests of one xdist_group (the docs build's) share one. pytest runs
# with Python's bytecode cache on, whatever PYTHONDONTWRITEBYTECODE says: it caches its
# assertion-rewritten test modules there, which saves each worker seconds on the next run.
PYTHON ?= python3
TORCH ?= torch==2.13.0
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.sklearn_calib_installed
DOCS_STAMP := $(VENV)/.sklearn_calib_docs_installed
PYTEST := env -u PYTHONDONTWRITEBYTECODE $(BIN)/python -m pytest -n 2 --dist loadgroup

.PHONY: run test test-fast test-numpy docs

$(STAMP): pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q "$(TORCH)"
	$(BIN)/python -m pip install -q -c constraints.txt -e ".[test,plot,dask,persist]"
	touch $(STAMP)

# The docs extra (Sphinx and its extensions): for `make docs`, and for `make test`, whose
# tests/test_docs.py builds the site.
$(DOCS_STAMP): $(STAMP)
	$(BIN)/python -m pip install -q -c constraints.txt -e ".[docs]"
	touch $(DOCS_STAMP)

run: $(STAMP)
	$(BIN)/python -m sklearn_calib

test: $(DOCS_STAMP)
	$(PYTEST)

test-fast: $(DOCS_STAMP)
	$(PYTEST) -m "not slow"

# The tests of the metrics, their statistics and the calibrators, with numba switched off.
NUMPY_PATH_TESTS := $(addprefix tests/test_,accumulator.py binning.py bootstrap.py \
	calibration_report.py calibrators.py calibrator_selection.py debiased_and_top_label.py \
	decomposition.py group_sums.py groups.py hypothesis_tests.py isotonic_scores.py \
	metric_registry.py scoring.py scorers.py smooth.py weight_invariances.py)

test-numpy: $(STAMP)
	SKLEARN_CALIB_NUMBA=0 $(PYTEST) $(NUMPY_PATH_TESTS)

# Warnings (broken references, docstring format errors, failing examples) fail the build.
docs: $(DOCS_STAMP)
	$(BIN)/python -m sphinx -W --keep-going -b html docs docs/_build/html
