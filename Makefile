# autotune: every target sets up .venv from pyproject.toml itself (no manual steps).
PY ?= .venv/bin/python
VENV_STAMP := .venv/.installed-$(shell cat pyproject.toml | sha256sum | cut -c1-12)

MODEL ?= resnet18
TRIALS ?= 400
TARGET ?= llvm

.PHONY: setup tune test test-fast lint bench clean-venv

setup: $(VENV_STAMP)

$(VENV_STAMP): pyproject.toml
	python3 -m venv .venv
	$(PY) -m pip install -q --upgrade pip
	# torch first, pinned: an unpinned torch would pull a multi-GB CUDA build
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -e '.[dev]'
	rm -f .venv/.installed-*
	touch $(VENV_STAMP)

# The main job: tune a model on this CPU with a default budget (~10 min here), compile it,
# check it against torch and time it. Resumes if run again.
tune: setup
	$(PY) -m autotune.tune --model $(MODEL) --target $(TARGET) --trials $(TRIALS)

test: setup
	$(PY) -m pytest -q

test-fast: setup
	$(PY) -m pytest -q -m "not tvm and not slow"

lint: setup
	$(PY) -m ruff check autotune tests experiments

bench: setup
	$(PY) benchmarks/startup_and_trial.py

clean-venv:
	rm -rf .venv

-include experiments/survey/Makefile.inc
