# autotune: every target sets up .venv from pyproject.toml itself (no manual steps).
PY ?= .venv/bin/python
# a pip index serving torch's CPU wheels (e.g. PyTorch's own CPU index): on machines where only PyPI is
# reached, torch==2.13.0 for Linux x86_64 from PyPI is the CUDA build (several GB); this project runs on CPU
TORCH_INDEX ?=
VENV_STAMP := .venv/.installed-$(shell cat pyproject.toml | sha256sum | cut -c1-12)

MODEL ?= resnet18
TRIALS ?= 400
TARGET ?= llvm

DATASET ?= datasets/cpu-znver3-2c
PROGRAMS ?= 100

.PHONY: setup tune test test-slow test-fast lint bench clean-venv collect gpu-bundle features train-costmodel experiments-costmodel tune-costmodel-hparams \
	experiments-tuning-efficiency experiments-tuning-efficiency-quick experiments-online-update collect-transfer \
	transfer-costmodel experiments-transfer experiments-transfer-quick experiments-loho calibrate \
	experiments-active-learning experiments-active-learning-quick experiments-active-learning-real

setup: $(VENV_STAMP)

$(VENV_STAMP): pyproject.toml
	python3 -m venv .venv
	$(PY) -m pip install -q --upgrade pip
	# torch first, pinned: an unpinned torch would pull a multi-GB CUDA build
	$(PY) -m pip install -q torch==2.13.0 $(if $(TORCH_INDEX),--index-url $(TORCH_INDEX))
	# xgboost-cpu, not xgboost (which pulls a ~470 MB CUDA NCCL library): drop an older venv's copy first
	if $(PY) -m pip show -q xgboost >/dev/null 2>&1; then $(PY) -m pip uninstall -y -q xgboost nvidia-nccl-cu12; fi
	$(PY) -m pip install -q -e '.[dev]'
	rm -f .venv/.installed-*
	touch $(VENV_STAMP)

# The main job: tune a model on this CPU with a default budget (~10 min here), compile it,
# check it against torch and time it. Resumes if run again.
tune: setup
	$(PY) -m autotune.tune --model $(MODEL) --target $(TARGET) --trials $(TRIALS)

# The README's test command (<= 10 min here): everything but the cases marked slow, which CI runs too.
# TEST_WORKERS pytest-xdist processes, each running whole test files (module fixtures are built once);
# TEST_WORKERS=0 runs every case in this one process.
TEST_WORKERS ?= 2
PYTEST_PAR = $(if $(filter 0,$(TEST_WORKERS)),,-n $(TEST_WORKERS) --dist loadfile)
test: setup
	$(PY) -m pytest -q -m "not slow" --durations=20 $(PYTEST_PAR)

test-slow: setup
	$(PY) -m pytest -q -m slow --durations=20 $(PYTEST_PAR)

test-fast: setup
	$(PY) -m pytest -q -m "not tvm and not slow"

lint: setup
	$(PY) -m ruff check autotune tests experiments

bench: setup
	$(PY) benchmarks/startup_and_trial.py

# Measure programs into this machine's dataset, datasets/<hardware id> (python -m autotune.env), over the
# main set's tasks (hours; resumable on any machine of the same hardware: rerun to continue).
HW = $(shell $(PY) -m autotune.env --hardware-id 2>/dev/null)
COLLECT_OUT ?= datasets/$(HW)
collect: setup
	$(PY) -m autotune.collect --out $(COLLECT_OUT) --same-tasks-as $(DATASET) --programs-per-task $(PROGRAMS)

# Per-model task weights for datasets made before they were recorded (idempotent).
reweigh: setup
	$(PY) -m autotune.collection.reweigh $(DATASET)

# The transfer set: same CPU, baseline x86-64-v2 ISA (no AVX2/FMA), 1 core, the main dataset's tasks.
collect-transfer: setup
	$(PY) -m autotune.collect --out datasets/cpu-x86-64-v2-1c --target '{"kind": "llvm", "mcpu": "x86-64-v2", "num-cores": 1}' \
		--same-tasks-as $(DATASET) --programs-per-task 32 --pass-size 16

# CUDA data for a lent GPU: compile sm_90 programs here (no GPU needed) — 16 per held-out-model task (the
# target's test set), then up to 6 per other task (training data for transfer) for GPU_BUNDLE_TRAIN_S
# seconds; resumable (rerun continues) — and pack them; on the GPU machine (carry gpu_bundle.tar.xz; it
# brings its own tvm_ffi wheel and TVM runtime libraries) run
#   python3 -m autotune.cuda.measure gpu_bundle.tar.xz --out $$OUT --time-limit 420
# then: $(PY) -m autotune.cuda.bundle ingest gpu_bundle RESULTS.jsonl --out datasets/cuda-sm_90
GPU_BUNDLE_TRAIN_S ?= 2100
gpu-bundle: setup
	$(PY) -m autotune.cuda.bundle build --tasks-from $(DATASET) --programs-per-task 16 --out gpu_bundle
	$(PY) -m autotune.cuda.bundle build --tasks-from $(DATASET) --only-models '' --programs-per-task 6 \
		--time-limit $(GPU_BUNDLE_TRAIN_S) --out gpu_bundle
	$(PY) -m autotune.cuda.bundle pack gpu_bundle

features: setup
	$(PY) -m autotune.collection.features $(DATASET)

# Train and compare the cost models on the shipped dataset (held-out models: resnet50,
# mobilenet_v2, bert_base); writes models/<hardware>/<kind>/ and experiments/costmodel/results/.
# SEEDS: train every model that many times and report mean ± sd and a paired comparison per model pair
# (top-1 moves by tenths between seeds; issue 12's targets are read over >= 3 seeds)
# Every row of experiments/costmodel/results/comparison.md: ~85 min of fits per seed on a 2-core CPU (seq,
# seq-top and ensemble ~15 min each, seq-lstm-cos and seq-lstm-rows 15, seq-lstm-cos-x2 30, seq-lstm-distil 10 on
# top of the seq-lstm-cos-x2 fits it takes as its teacher from SEEDS_DIR), ~4 h for 3 seeds; MODELS=xgb,ms-xgb
# retrains some and keeps the other rows. Every seed's fit is kept under SEEDS_DIR (committees of saved fits:
# experiments/costmodel/variants.py --committee); seq-lstm-distil alone reads its teacher's fits there.
# JOBS: seeds fitted side by side, one process and cores/JOBS threads each (a torch fit runs about as fast on one
# core as on two here, so 2 about halves the wall time; JOBS=1 fits one seed at a time with every core)
SEEDS ?= 3
JOBS ?= 2
SEEDS_DIR ?= runs/seeds
MODELS ?= xgb,xgb-reg,ms-xgb,ms-mlp,seq,seq-lstm,seq-lstm-cos,seq-lstm-rows,seq-lstm-cos-x2,seq-lstm-distil,seq-top,ensemble,random
train-costmodel: features
	$(PY) -m autotune.costmodel.train --dataset $(DATASET) --seeds $(SEEDS) --jobs $(JOBS) --models $(MODELS) \
	    --save-seeds $(SEEDS_DIR) --teachers-from $(SEEDS_DIR)
	$(PY) experiments/costmodel/readings.py --dataset $(DATASET)

# After train-costmodel: TCL claim T2 (Mamba vs LSTM vs attention mixers, ~40 min of fits, resumable), where
# held-out top-1 is lost and rank ensembles of the saved models, offline scores vs tuning (no training), the
# data curve (~46 min) and pooling the other CPU sets' programs into training (~35 min, then ~7 min with
# rank-anchored labels; features of every set)
experiments-costmodel: features
	$(PY) experiments/costmodel/t2_mixers.py --dataset $(DATASET) --seeds $(SEEDS)
	$(PY) experiments/costmodel/top1_analysis.py --dataset $(DATASET)
	$(PY) experiments/costmodel/offline_vs_tuning.py
	$(PY) experiments/costmodel/data_curve.py --dataset $(DATASET)
	for d in datasets/cpu-*; do $(PY) -m autotune.collection.features $$d || exit 1; done
	$(PY) experiments/costmodel/pooled_hardware.py --dataset $(DATASET) --kinds ms-xgb,xgb-reg,xgb,seq-lstm \
		--arms none,all,halves
	$(PY) experiments/costmodel/pooled_hardware.py --dataset $(DATASET) --kinds ms-xgb,xgb-reg,xgb \
		--arms none,all,halves --labels anchored --name pooled_hardware_anchored
	$(PY) -m autotune.costmodel.train --dataset $(DATASET) --summarize-only

# Optuna on the training tasks only; OBJECTIVE: top1 (validation top-1, default), pairwise, blend or task_top1;
# trials whose saved model would exceed MAX_MODEL_MB are pruned (models/ stays <= 40 MB); FIT_SEEDS fits per
# trial step, scores averaged (top-1 moves by tenths between seeds of one configuration; N times the cost)
OBJECTIVE ?= top1
FIT_SEEDS ?= 1
MAX_MODEL_MB ?= 5
tune-costmodel-hparams: setup
	$(PY) -m autotune.costmodel.hparams --dataset $(DATASET) --models xgb,seq --trials 30 \
		--objective $(OBJECTIVE) --max-model-mb $(MAX_MODEL_MB) --fit-seeds $(FIT_SEEDS)

# Tuning efficiency of each cost model on the held-out models (hours; resumable) and its CI check.
experiments-tuning-efficiency: setup
	$(PY) experiments/tuning_efficiency/run.py

experiments-tuning-efficiency-quick: setup
	$(PY) experiments/tuning_efficiency/run.py --quick

# Online-update modes replayed on the dataset's held-out tasks (minutes, no TVM measuring).
experiments-online-update: setup
	$(PY) experiments/online_update/run.py --dataset $(DATASET)

# Active learning T1: samplers pick 2-50% of the training tasks' programs; xgb and seq trained on each
# selection, scored on the held-out models (about an hour on 2 shared cores; resumable) and its CI check.
# ACQUISITION: what uncertainty / rdu / topk-biased read: bootstrap-xgb (default) or ensemble (a committee of
# xgb-reg, ms-xgb and ms-mlp whose spread is their disagreement; results in results_acq_ensemble/)
ACQUISITION ?= bootstrap-xgb
experiments-active-learning: features
	$(PY) experiments/active_learning/run.py --dataset $(DATASET) --acquisition $(ACQUISITION)

experiments-active-learning-quick: setup
	$(PY) experiments/active_learning/run.py --quick

# issue 13's real run: new programs picked by rdu vs at random on this machine (~25 min, run it alone)
experiments-active-learning-real: setup
	$(PY) experiments/active_learning/real_collection.py

# Cross-hardware transfer (issue 14): a cost model for DST's hardware from the SRC hardware's model
# (models/$(SRC)/$(KIND)), using FRACTION of DST's training programs; writes models/<DST hardware>/$(KIND)/.
KIND ?= seq
METHOD ?= ckd
FRACTION ?= 0.1
transfer-costmodel: setup
	@test -n "$(SRC)" -a -n "$(DST)" || { echo "error: give SRC=<source hardware id, a folder of models/> DST=<target dataset folder>" >&2; exit 2; }
	$(PY) -m autotune.costmodel.transfer --source models/$(SRC)/$(KIND) --target-dataset $(DST) --method $(METHOD) --fraction $(FRACTION)

# Experiment T3: every transfer method x target fraction x seed (resumable) and its CI form.
experiments-transfer: setup
	$(PY) experiments/transfer/run.py

experiments-transfer-quick: setup
	$(PY) experiments/transfer/run.py --quick
	$(PY) experiments/transfer/loho.py --quick --kind xgb
	$(PY) experiments/transfer/loho.py --quick --kind ms-mlp

# One cost model over every CPU set, each CPU held out in turn (issue 48): needs every set's feature cache
experiments-loho: setup
	for d in datasets/cpu-*; do $(PY) -m autotune.collection.features $$d || exit 1; done
	$(PY) experiments/transfer/loho.py --kind xgb
	$(PY) experiments/transfer/loho.py --kind ms-mlp --seeds 0

# A cost model for this CPU from ~10 minutes of measurements (when it has none); make tune then uses it
calibrate: setup
	$(PY) -m autotune.calibrate --target $(TARGET)

clean-venv:
	rm -rf .venv

-include experiments/survey/Makefile.inc
