"""Search kinds (``--strategy``): how a task's candidates are proposed each round.

Each kind is a small registered class that makes a fresh MetaSchedule ``SearchStrategy`` per task.
Capabilities are flags, not name checks: ``uses_cost_model`` says whether the strategy asks the
cost model to rank candidates (when it does not, the CLI resolves no cost model at all).

Registered kinds (``SEARCH_KINDS``):
- ``evolutionary``: MetaSchedule's EvolutionarySearch, guided by the cost model (``SearchConfig``
  sizes it for small budgets);
- ``optuna``: TPE over the design space's sampling decisions (``autotune.tuning.optuna_search``);
- ``replay-trace``: MetaSchedule's ReplayTrace, uniform random samples of the design space.

A new kind: subclass ``SearchKind`` and decorate it with ``@register``; the contract suite in
``autotune.testing.search`` (tests/test_search_contract.py) runs it. Importing this module does not
import TVM (the CLI validates ``--strategy`` before TVM starts); ``create`` does.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, ClassVar

from autotune.errors import UserError


class SearchKind(ABC):
    """One ``--strategy``.

    Contract (``autotune.testing.search`` checks it for every registered kind):
    - ``name``: the registry key; ``help``: one line for ``--help``.
    - ``uses_cost_model``: True when the strategy calls the cost model's ``predict``; False means it
      never does (the tuner still passes measurements to a cost model it was given).
    - ``create(config)``: a fresh MetaSchedule ``SearchStrategy`` for one task, configured from
      ``config``; the tuner drives it with ``pre_tuning`` / ``generate_measure_candidates`` /
      ``notify_runner_results`` / ``post_tuning``, at most ``config.num_trials_per_iter`` candidates a
      round, none measured twice.
    """

    name: ClassVar[str]
    help: ClassVar[str]
    uses_cost_model: ClassVar[bool]

    @abstractmethod
    # config: a tuning.config.SearchConfig (not imported: config validates --strategy through this module, and an
    # arrow back would make the two a loop)
    def create(self, config: Any): ...


SEARCH_KINDS: dict[str, type[SearchKind]] = {}


def register(cls: type[SearchKind]) -> type[SearchKind]:
    SEARCH_KINDS[cls.name] = cls
    return cls


def search_kind(name: str) -> SearchKind:
    if name not in SEARCH_KINDS:
        raise UserError(f"--strategy: unknown {name!r}; valid: {', '.join(SEARCH_KINDS)}")
    return SEARCH_KINDS[name]()


def _ms():
    from autotune.tvmrt.startup import fast_start

    fast_start("llvm")
    from tvm.s_tir import meta_schedule as ms

    return ms


@register
class Evolutionary(SearchKind):
    name = "evolutionary"
    help = "MetaSchedule's evolutionary search, guided by --cost-model (default)"
    uses_cost_model = True

    def create(self, config):
        return _ms().search_strategy.EvolutionarySearch(
            population_size=config.population_size,
            init_measured_ratio=config.init_measured_ratio,
            init_min_unmeasured=config.init_min_unmeasured,
            genetic_num_iters=config.genetic_num_iters,
            eps_greedy=config.eps_greedy,
        )


@register
class Optuna(SearchKind):
    name = "optuna"
    help = "TPE over the schedule's decisions (no cost model)"
    uses_cost_model = False

    def create(self, config):
        from autotune.tuning.optuna_search import OptunaSearch

        return OptunaSearch()


@register
class ReplayTrace(SearchKind):
    name = "replay-trace"
    help = "uniform random samples of the design space (no cost model)"
    uses_cost_model = False

    def create(self, config):
        return _ms().search_strategy.ReplayTrace()
