"""An Optuna-driven search strategy for MetaSchedule (``--strategy optuna``), the baseline the
learned cost models are compared with.

MetaSchedule's design space is a handful of traces whose sampling instructions carry the
decisions (tile sizes, categorical choices such as unroll depth, compute locations). This
strategy asks an Optuna TPE study for those decisions, replays the design-space trace with
them, runs the postprocessors and hands the program to the measurer; measured latencies go
back to the study. No cost model is involved: it is a black-box optimizer over the decisions.

Parameter space (static per name, as TPE wants):
- ``SamplePerfectTile(n, max_innermost)`` over an extent E: the innermost factor is a divisor
  of E not above max_innermost; each middle factor is a divisor of E, clipped to
  ``gcd(choice, what is left of E)``; the outermost takes the rest. Every choice is valid.
- ``SampleCategorical``: the index of the candidate.
- ``SampleComputeLocation``: left to the trace's own random sampling (its valid range depends
  on the other decisions), so the objective TPE sees is a little noisy there.
"""

from __future__ import annotations

import logging
import math
import warnings

from autotune.tvmrt.startup import fast_start

fast_start("llvm")

import optuna  # noqa: E402
import tvm.s_tir as s_tir  # noqa: E402
from tvm.ir.utils import derived_object  # noqa: E402
from tvm.s_tir import meta_schedule as ms  # noqa: E402
from tvm.s_tir.meta_schedule.search_strategy import MeasureCandidate, PySearchStrategy  # noqa: E402
from tvm.s_tir.schedule import Trace  # noqa: E402

logger = logging.getLogger(__name__)


def _divisors(n: int) -> list[int]:
    small = [d for d in range(1, int(math.isqrt(n)) + 1) if n % d == 0]
    return sorted(set(small + [n // d for d in small]))


def space_params(trace) -> list[tuple]:
    """The searchable sampling instructions of a design-space trace: (index, inst, kind, info)."""
    out = []
    for i, inst in enumerate(trace.insts):
        name = inst.kind.name
        if name == "SamplePerfectTile":
            decision = [int(x) for x in trace.get_decision(inst)]
            extent = math.prod(decision)
            n, max_inner = int(inst.attrs[0]), int(inst.attrs[1])
            out.append((i, inst, "tile", (extent, n, max_inner)))
        elif name == "SampleCategorical":
            out.append((i, inst, "cat", len(inst.attrs[0])))
    return out


def suggest_decisions(trial, space: int, params: list[tuple]) -> dict:
    """Ask ``trial`` for every decision of design space ``space``; returns {inst: decision}."""
    decisions = {}
    for i, inst, kind, info in params:
        prefix = f"s{space}.i{i}"
        if kind == "cat":
            decisions[inst] = trial.suggest_categorical(prefix, list(range(info)))
            continue
        extent, n, max_inner = info
        divs = _divisors(extent)
        inner_choices = [d for d in divs if max_inner <= 0 or d <= max_inner]
        inner = trial.suggest_categorical(prefix + ".inner", inner_choices)
        factors, left = [inner], extent // inner
        for j in range(1, n - 1):
            f = math.gcd(trial.suggest_categorical(f"{prefix}.f{j}", divs), left)
            factors.append(f)
            left //= f
        factors.append(left)
        decisions[inst] = list(reversed(factors))
    return decisions


@derived_object
class OptunaSearch(PySearchStrategy):
    """TPE over the trace decisions; ``num_trials_per_iter`` trials are asked at once (constant liar)."""

    def __init__(self, seed: int = 0, n_startup_trials: int = 16, max_retries: int = 8):
        self.seed = seed
        self.n_startup_trials = n_startup_trials
        self.max_retries = max_retries
        self.study = None
        self._pending: list = []
        self._seen: set = set()

    def _initialize_with_tune_context(self, context) -> None:
        self.mod = context.mod
        self.postprocs = list(context.space_generator.postprocs) if context.space_generator else []
        state = int(context.rand_state) if context.rand_state is not None else -1
        self.rand_seed = state if state >= 0 else self.seed

    def pre_tuning(self, max_trials, num_trials_per_iter, design_spaces, database=None, cost_model=None) -> None:
        self.max_trials = int(max_trials)
        self.per_iter = int(num_trials_per_iter)
        self.spaces = [sch.trace for sch in design_spaces]
        self.params = [space_params(t) for t in self.spaces]
        self.trials = 0
        with warnings.catch_warnings():  # multivariate/group are flagged experimental
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            sampler = optuna.samplers.TPESampler(seed=self.rand_seed, n_startup_trials=self.n_startup_trials,
                                                 multivariate=True, group=True, constant_liar=True)
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        self.study = optuna.create_study(direction="minimize", sampler=sampler)

    def post_tuning(self) -> None:
        self._drop_pending()

    def _drop_pending(self) -> None:
        """Trials asked but not measured (the tuner measured fewer than offered): forget them."""
        for trial, key in self._pending:
            self.study.tell(trial, state=optuna.trial.TrialState.FAIL)
            self._seen.discard(key)
        self._pending = []

    def _build(self, space: int, decisions: dict):
        trace = Trace(self.spaces[space].insts, decisions)
        sch = s_tir.Schedule(self.mod, seed=self.rand_seed, debug_mask="none", error_render_level="none")
        self.rand_seed = (self.rand_seed * 1_103_515_245 + 12345) % (2**31 - 1)
        try:
            trace.apply_to_schedule(sch, remove_postproc=True)
            sch.enter_postproc()
            for postproc in self.postprocs:
                if not postproc.apply(sch):
                    return None
        except Exception:  # noqa: BLE001 - an invalid combination is a failed trial, not an error
            return None
        return sch

    def generate_measure_candidates(self):
        want = min(self.per_iter, self.max_trials - self.trials)
        if want <= 0:
            return None
        candidates = []
        attempts = 0
        while len(candidates) < want and attempts < want * self.max_retries:
            attempts += 1
            trial = self.study.ask()
            space = trial.suggest_categorical("space", list(range(len(self.spaces))))
            decisions = suggest_decisions(trial, space, self.params[space])
            key = (space, tuple(tuple(v) if isinstance(v, list) else v for v in decisions.values()))
            if key in self._seen:
                self.study.tell(trial, state=optuna.trial.TrialState.PRUNED)
                continue
            self._seen.add(key)
            sch = self._build(space, decisions)
            if sch is None:
                self.study.tell(trial, state=optuna.trial.TrialState.FAIL)
                continue
            args = ms.arg_info.ArgInfo.from_entry_func(sch.mod, remove_preproc=True)
            candidates.append(MeasureCandidate(sch, args))
            self._pending.append((trial, key))
        if not candidates:
            logger.info("optuna search: no new valid program in %d attempts; task done", attempts)
            return None
        return candidates

    def notify_runner_results(self, measure_candidates, results) -> None:
        pending, self._pending = self._pending[: len(results)], self._pending[len(results):]
        self._drop_pending()
        for (trial, _key), result in zip(pending, results):
            secs = [float(getattr(s, "value", s)) for s in (result.run_secs or [])]
            if result.error_msg is None and secs and max(secs) < 1e9:
                self.study.tell(trial, sum(secs) / len(secs))
            else:
                self.study.tell(trial, state=optuna.trial.TrialState.FAIL)
        self.trials += len(results)

    def clone(self):
        return OptunaSearch(self.seed, self.n_startup_trials, self.max_retries)
