"""What a tuning run is asked to do, as frozen values (TVM-free).

``TuneConfig`` is built once, from the CLI flags (``autotune.tune.config_from_args``) or the API's
keywords, validated there, and read by the session, the tuner and the cost-model resolver.
``SearchConfig`` sizes one search round; ``--trials-per-round`` lives only in it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from autotune.errors import UserError


def _positive(flag: str, value, allow_none: bool = False) -> None:
    if value is None and allow_none:
        return
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise UserError(f"{flag} must be a positive integer, got {value}")


LAYOUT_REWRITE = ("auto", "on", "off")
# --layout-rewrite auto on a new work dir, per target kind (a work dir keeps the way it was tuned). RewriteLayout
# is in MetaSchedule's llvm space only. Evidence (experiments/tuning_efficiency/results_real/, arms +lr, compiled
# latency timed side by side): bert_base seed 0, stock MetaSchedule 116.1 -> 76.6 ms with it, ms-mlp 94.8 -> 83.3 ms;
# resnet50 seed 0 (4 arms re-timed together), ms-mlp 53.6 -> 51.2 ms, stock 65.8 -> 71.5 ms (mixed on NCHW convs)
LAYOUT_REWRITE_DEFAULT = {"llvm": True}


def resolve_layout_rewrite(requested: str, kind: str, tuned_with: bool | None, work_dir: str) -> bool:
    """Whether this run's tasks mark their weights layout-free. ``tuned_with``: how the work dir's database was
    tuned (None: a new work dir). A flag contradicting the database is refused: its records would not match."""
    if requested == "auto":
        return tuned_with if tuned_with is not None else LAYOUT_REWRITE_DEFAULT.get(kind, False)
    want = requested == "on"
    if tuned_with is not None and want != tuned_with:
        raise UserError(f"--layout-rewrite {requested}: --work-dir {work_dir} was tuned with layout rewrite "
                        f"{'on' if tuned_with else 'off'}; use --layout-rewrite auto (or "
                        f"{'on' if tuned_with else 'off'}) there, or another --work-dir")
    return want


# --first-round-trials by default (the CLI and tune_torch; SearchConfig itself keeps None = a whole round, which
# collection and the strategy tests use). Evidence: the "First rounds" table of
# experiments/tuning_efficiency/results_real/cpu-znver4-2c/README.md (32 trials per task, resnet50 / mobilenet_v2 /
# bert_base x 2 seeds, compiled latency of +first4 over whole first rounds at 1/8, 1/4, 1/2 and the full budget,
# generated from the timed snapshots): far ahead early, level at the end within the timing noise.
FIRST_ROUND_TRIALS_DEFAULT = 4
# candidates per search round (--trials-per-round); experiments pass it as --first-round-trials for "whole rounds"
TRIALS_PER_ROUND_DEFAULT = 16

CONV_LAYOUT = ("auto", "nchw", "nhwc")
# --conv-layout auto on a new work dir, per target kind (a work dir keeps the layout it was tuned in; not listed:
# the model's own, NCHW for torch models). Evidence (experiments/tuning_efficiency/results_real/, seed 0, 32 trials
# per task, arm ms-mlp+lr+nhwc timed side by side with ms-mlp+lr): resnet50 50.6 -> 27.2 ms, mobilenet_v2
# 5.4 -> 3.5 ms (report.json of the runs); before, the 4 heaviest resnet50 convs at 48 trials each: 1.69x in NHWC.
# cuda: not measured (no GPU here), stays NCHW.
CONV_LAYOUT_DEFAULT: dict[str, str] = {"llvm": "nhwc"}


def resolve_conv_layout(requested: str, kind: str, tuned_with: str | None, work_dir: str) -> str:
    """The layout this run's 2-D convolutions are tuned in. ``tuned_with``: the work dir's (None: a new one). A
    flag contradicting the database is refused: its records would not match the tasks."""
    if requested == "auto":
        return tuned_with or CONV_LAYOUT_DEFAULT.get(kind, "nchw")
    if tuned_with is not None and requested != tuned_with:
        raise UserError(f"--conv-layout {requested}: --work-dir {work_dir} was tuned with --conv-layout {tuned_with}; "
                        f"use --conv-layout auto (or {tuned_with}) there, or another --work-dir")
    return requested


@dataclass(frozen=True)
class SearchConfig:
    """Search settings sized for small budgets (``kind``: a registered ``autotune.tuning.search`` kind).

    benchmarks/results/search_round_cost.md (resnet50, 16 candidates per round): population 256 x 2
    generations costs ~10 s of search per round with a pretrained model (feature extraction of every
    scored candidate dominates), about what measuring the 16 candidates costs; 128 x 1 costs ~3.3 s.
    """

    num_trials_per_iter: int = TRIALS_PER_ROUND_DEFAULT  # --trials-per-round
    population_size: int = 128  # --population
    genetic_num_iters: int = 1  # --search-iters
    init_min_unmeasured: int = 48
    init_measured_ratio: float = 0.2
    eps_greedy: float = 0.05
    kind: str = "evolutionary"  # --strategy
    batch_selection: str = "greedy"  # --batch-selection: greedy or an autotune.costmodel.sampling sampler
    selection_oversample: int = 4  # proposals per measured candidate when a sampler picks the batch
    # --first-round-trials: candidates measured on a task's first visit (None: num_trials_per_iter; the CLI's
    # default is FIRST_ROUND_TRIALS_DEFAULT). Every task
    # is visited once before the gradient scheduler chooses, so with 16 a round and 32 trials per task half the
    # budget goes by before the last task has a tuned program (the early snapshots of the real-budget runs)
    first_round_trials: int | None = None

    def __post_init__(self) -> None:
        _positive("--trials-per-round", self.num_trials_per_iter)
        _positive("--population", self.population_size)
        _positive("--search-iters", self.genetic_num_iters)
        self.search_kind()  # unknown kind: UserError listing the valid ones
        from autotune.tuning.selection import GREEDY, choices

        if self.batch_selection not in choices():
            raise UserError(f"--batch-selection: unknown {self.batch_selection!r}; valid: {', '.join(choices())}")
        if self.batch_selection != GREEDY and self.kind != "evolutionary":
            raise UserError(f"--batch-selection {self.batch_selection} picks among the evolutionary search's "
                            f"proposals; --strategy {self.kind} has none (use --strategy evolutionary)")
        _positive("--selection-oversample", self.selection_oversample)
        _positive("--first-round-trials", self.first_round_trials, allow_none=True)

    def search_kind(self):
        from autotune.tuning.search import search_kind

        return search_kind(self.kind)

    @property
    def uses_cost_model(self) -> bool:
        return self.search_kind().uses_cost_model

    def strategy(self):
        """A fresh MetaSchedule SearchStrategy for one task."""
        return self.search_kind().create(self)


@dataclass(frozen=True)
class RPCAddress:
    """``--rpc-tracker HOST:PORT --rpc-key KEY``."""

    host: str
    port: int
    key: str

    @classmethod
    def parse(cls, tracker: str | None, key: str | None) -> RPCAddress | None:
        if tracker is None and key is None:
            return None
        host, _, port = (tracker or "").rpartition(":")
        if not host or not port.isdigit() or not key:
            raise UserError("--rpc-tracker HOST:PORT and --rpc-key KEY must be given together "
                            "(e.g. 127.0.0.1:9190 and cpu)")
        return cls(host, int(port), key)

    def settings(self):
        from autotune.tvmrt.measure import RPCSettings

        return RPCSettings(self.host, self.port, self.key)


@dataclass(frozen=True)
class TuneConfig:
    """One tuning run. Defaults are the CLI's; ``__post_init__`` validates (UserError naming the flag)."""

    model: str = "resnet18"
    target: object = "llvm"  # 'llvm', 'cuda', a JSON string, a dict, or a tvm Target (API)
    trials: int = 400
    trials_per_task: int | None = None
    work_dir: str | None = None
    seed: int = 0
    cost_model: str = "auto"
    cost_model_path: str | None = None
    online_update: str = "finetune"
    search: SearchConfig = field(default_factory=SearchConfig)
    batch_size: int = 1
    input_shape: tuple[int, ...] | None = None
    num_cores: int | None = None  # threads for the tuned program (None: all of the target's)
    time_untuned: bool = True
    bench_rounds: int = 5
    rpc: RPCAddress | None = None
    verbose: bool = False
    layout_rewrite: str = "auto"  # auto | on | off: weights packed into the layouts tuned programs choose
    conv_layout: str = "auto"  # auto | nchw | nhwc: the layout 2-D convolutions are converted to and tuned in
    calibrate: bool = False  # a CPU without its own cost model gets one first (``autotune.calibrate``)

    def __post_init__(self) -> None:
        from autotune.costmodel.online import ONLINE_UPDATES
        from autotune.tuning.costmodels import check_name

        _positive("--trials", self.trials)
        _positive("--trials-per-task", self.trials_per_task, allow_none=True)
        _positive("--batch-size", self.batch_size)
        _positive("--num-cores", self.num_cores, allow_none=True)
        _positive("--bench-rounds", self.bench_rounds)
        check_name(self.cost_model)
        if self.layout_rewrite not in LAYOUT_REWRITE:
            raise UserError(f"--layout-rewrite: unknown {self.layout_rewrite!r}; valid: {', '.join(LAYOUT_REWRITE)}")
        if self.conv_layout not in CONV_LAYOUT:
            raise UserError(f"--conv-layout: unknown {self.conv_layout!r}; valid: {', '.join(CONV_LAYOUT)}")
        if self.online_update not in ONLINE_UPDATES:
            raise UserError(f"--online-update: unknown {self.online_update!r}; valid: {', '.join(ONLINE_UPDATES)}")
        if self.input_shape is not None and (not self.input_shape or min(self.input_shape) < 1):
            raise UserError(f"--input-shape: expected positive integers like 3,224,224, got {self.input_shape}")
