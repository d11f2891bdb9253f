"""Builders and runners: where candidates are compiled and timed.

``PooledBuilder`` keeps one worker pool for the whole run (stock ``LocalBuilder``
respawns its pool every batch: 6-12 s per batch here), starts every worker with the
fast start-up, and links a shared object in the builder so the runner only dlopens it.
Runners are MetaSchedule's own ``LocalRunner`` / ``RPCRunner`` with the same initializer.
"""

from __future__ import annotations

import logging
import os
import shutil
import time
from dataclasses import dataclass

from .startup import fast_start

fast_start("llvm")

from tvm.ir.utils import derived_object  # noqa: E402
from tvm.s_tir import meta_schedule as ms  # noqa: E402
from tvm.s_tir.meta_schedule.builder import BuilderInput, BuilderResult, PyBuilder  # noqa: E402
from tvm.s_tir.meta_schedule.runner import PyRunner, RunnerInput  # noqa: E402
from tvm.s_tir.meta_schedule.runner.local_runner import LocalRunnerFuture  # noqa: E402
from tvm.s_tir.meta_schedule.runner.local_runner import _worker_func as _stock_run_worker  # noqa: E402
from tvm.support.popen_pool import StatusKind  # noqa: E402

from .artifacts import artifact_dir, sweep_orphans  # noqa: E402
from .pool import LeanPopenPool  # noqa: E402
from .startup import worker_initializer_cuda, worker_initializer_llvm  # noqa: E402

logger = logging.getLogger(__name__)


def _build_and_export(mod, target, link_shared: bool) -> str:
    """Runs in a builder worker: compile one candidate and write its artifact."""
    from tvm.driver import build as tvm_build
    from tvm.s_tir.transform import RemoveWeightLayoutRewriteBlock

    mod = RemoveWeightLayoutRewriteBlock(skip_tensor_rewrite=True)(mod)
    with target:  # TVM's CUDA compile callback reads the arch (sm_90) from the current target
        rt_mod = tvm_build(mod, target=target)
    out_dir = artifact_dir()
    if link_shared:
        path = os.path.join(out_dir, "candidate.so")
        rt_mod.export_library(path)
    else:  # RPC: ship a tar, the remote links it for its own toolchain
        from tvm.support.tar import tar

        path = os.path.join(out_dir, "candidate." + tar.output_format)
        rt_mod.export_library(path, fcompile=tar)
    return path


@derived_object
class PooledBuilder(PyBuilder):
    """A MetaSchedule builder with one long-lived pool of fast-starting workers."""

    def __init__(
        self,
        *,
        max_workers: int | None = None,
        timeout_sec: float = 60.0,
        target_kind: str = "llvm",
        link_shared: bool = True,
        max_uses: int = 200,
    ) -> None:
        super().__init__()
        self.max_workers = max_workers or max(1, len(os.sched_getaffinity(0)))
        self.timeout_sec = timeout_sec
        self.link_shared = link_shared
        init = worker_initializer_cuda if target_kind == "cuda" else worker_initializer_llvm
        self._pool = LeanPopenPool(
            max_workers=self.max_workers,
            timeout=timeout_sec,
            initializer=init,
            maximum_process_uses=max_uses,
        )

    def warm_up(self) -> None:
        """Start the workers now, in the background (they take seconds to import TVM)."""
        self._pool.warm_up(self.max_workers)

    def build(self, build_inputs: list[BuilderInput]) -> list[BuilderResult]:
        results: list[BuilderResult] = []
        jobs = [(inp.mod, inp.target, self.link_shared) for inp in build_inputs]
        for res in self._pool.map_with_error_catching(lambda job: _build_and_export(*job), jobs):
            if res.status == StatusKind.COMPLETE:
                results.append(BuilderResult(res.value, None))
            elif res.status == StatusKind.TIMEOUT:
                results.append(BuilderResult(None, f"PooledBuilder: Timeout after {self.timeout_sec} s"))
            else:
                results.append(BuilderResult(None, "PooledBuilder: exception\n" + str(res.value)))
        return results

    def shutdown(self) -> None:
        self._pool.shutdown()


def default_evaluator_config(kind: str = "llvm") -> ms.runner.EvaluatorConfig:
    """3 repeats, each at least 20 ms (auto-scaled ``number``): every repeat is kept in datasets."""
    return ms.runner.EvaluatorConfig(
        number=1, repeat=3, min_repeat_ms=20 if kind == "llvm" else 10, enable_cpu_cache_flush=False
    )


def alloc_argument_safe(device, args_info, alloc_repeat: int) -> list:
    """MetaSchedule's argument allocation, except that integer tensors are zero-filled.

    Stock random fill gives index tensors (``take``/gather of embeddings) random values, so the
    program reads out of bounds and the runner process dies ("Subprocess terminated"): every
    candidate of such a task failed. Zero is a valid index for any table.
    """
    import numpy as np
    import tvm
    from tvm.s_tir.meta_schedule.utils import get_global_func_with_default_on_worker

    random_fill = get_global_func_with_default_on_worker("tvm.contrib.random.random_fill_for_measure", None)
    repeated = []
    for _ in range(alloc_repeat):
        args = []
        for kind, dtype, shape in args_info:
            if kind != "TENSOR":
                raise NotImplementedError(f"argument kind {kind}")
            arr = tvm.runtime.empty(shape=shape, dtype=dtype, device=device)
            if "int" in str(dtype) or str(dtype) == "bool":
                arr.copyfrom(np.zeros([int(x) for x in shape], dtype=str(dtype)))
            else:
                random_fill(arr)
            args.append(arr)
        repeated.append(args)
    return repeated


@dataclass(frozen=True)
class RPCSettings:
    tracker_host: str
    tracker_port: int
    key: str
    session_timeout_sec: int = 60


def _tracker_summary(host: str, port: int, timeout: float) -> dict:
    """The tracker's summary over one short-lived connection (TVM's client retries for 60 s)."""
    import socket
    import struct

    from tvm.rpc import base

    with socket.create_connection((host, port), timeout=timeout) as sock:
        sock.sendall(struct.pack("<i", base.RPC_TRACKER_MAGIC))
        if struct.unpack("<i", base.recvall(sock, 4))[0] != base.RPC_TRACKER_MAGIC:
            raise ValueError("wrong handshake")
        base.sendjson(sock, [base.TrackerCode.SUMMARY])
        reply = base.recvjson(sock)
    if not (isinstance(reply, list) and len(reply) == 2 and reply[0] == base.TrackerCode.SUCCESS):
        raise ValueError("unexpected reply")
    return reply[1]


def live_servers(summary: dict, key: str) -> int:
    """Servers connected to the tracker under ``key`` now (``queue_info`` keeps a key after its last
    server is gone, so it cannot tell)."""
    return sum(1 for info in summary.get("server_info") or []
               if str(info.get("key", "")).split(":", 1)[-1] == key)


def _live_keys(summary: dict) -> set[str]:
    return {str(info.get("key", "")).split(":", 1)[-1] for info in summary.get("server_info") or []}


def wait_for_servers(rpc: RPCSettings, wait_sec: float = 20.0, timeout_sec: float = 5.0,
                     mid_run: bool = False) -> int:
    """The number of servers connected under ``rpc.key`` (waiting up to ``wait_sec`` for one), or one
    UserError line that says what is missing.

    Before a run (``mid_run=False``) this replaces 60 s of TVM's "Cannot connect to tracker" retries and
    tracebacks from runner threads, after which a run ended "successfully" having measured nothing.
    Mid-run (before each group of candidates) it stops a run whose last server died, which used to wait
    for a session forever; everything measured is already in the work dir."""
    from autotune.errors import UserError

    where = f"--rpc-tracker {rpc.tracker_host}:{rpc.tracker_port}"
    deadline = time.time() + wait_sec
    while True:
        try:
            summary = _tracker_summary(rpc.tracker_host, rpc.tracker_port, timeout_sec)
        except (TimeoutError, ValueError, EOFError, OSError) as err:
            if mid_run:
                raise UserError(f"{where}: the tracker stopped answering mid-run; everything measured so far is "
                                "in the work dir: restart it and run the same command again") from None
            reason = err.strerror if isinstance(err, OSError) and err.strerror else (str(err) or type(err).__name__)
            raise UserError(
                f"{where}: no TVM RPC tracker answers there ({reason}); start one with python -m "
                f"tvm.exec.rpc_tracker --host 127.0.0.1 --port {rpc.tracker_port}, or fix the address"
            ) from None
        n = live_servers(summary, rpc.key)
        if n:
            return n
        if time.time() >= deadline:
            if mid_run:
                raise UserError(f"--rpc-key {rpc.key}: no RPC server left under this key at {rpc.tracker_host}:"
                                f"{rpc.tracker_port} (the last one went away mid-run, {wait_sec:.0f} s ago); "
                                "everything measured so far is in the work dir: start a server and run the same "
                                "command again")
            raise UserError(
                f"--rpc-key {rpc.key}: no RPC server registered under this key at {rpc.tracker_host}:"
                f"{rpc.tracker_port} after {wait_sec:.0f} s (keys there: "
                f"{', '.join(sorted(_live_keys(summary))) or 'none'}); start one with python -m tvm.exec.rpc_server "
                f"--tracker {rpc.tracker_host}:{rpc.tracker_port} --key {rpc.key} --host 127.0.0.1"
            )
        if not mid_run:
            logger.info("waiting for an RPC server under key %r at the tracker (%.0f s left)", rpc.key,
                        deadline - time.time())
        time.sleep(1.0)


def check_rpc(rpc: RPCSettings, wait_sec: float = 20.0, timeout_sec: float = 5.0) -> int:
    """Before a run: the tracker answers and a server is connected under ``rpc.key`` (returns how many)."""
    return wait_for_servers(rpc, wait_sec, timeout_sec, mid_run=False)


@derived_object
class LeanLocalRunner(PyRunner):
    """MetaSchedule's LocalRunner (same worker function), on one lean, long-lived worker."""

    def __init__(self, timeout_sec: float = 30.0, evaluator_config=None, kind: str = "llvm") -> None:
        super().__init__()
        self.timeout_sec = timeout_sec
        self.evaluator_config = evaluator_config or default_evaluator_config(kind)
        init = worker_initializer_cuda if kind == "cuda" else worker_initializer_llvm
        self.pool = LeanPopenPool(max_workers=1, timeout=timeout_sec, initializer=init)

    def warm_up(self) -> None:
        self.pool.warm_up(1)

    def run(self, runner_inputs: list[RunnerInput]) -> list:
        futures = [
            self.pool.submit(
                _stock_run_worker, alloc_argument_safe, None, None, self.evaluator_config, 1,
                str(inp.artifact_path), str(inp.device_type),
                tuple(arg.as_json() for arg in inp.args_info),
            )
            for inp in runner_inputs
        ]
        results = []
        for fut in futures:
            try:
                results.append(LocalRunnerFuture(res=[float(x) for x in fut.result()]))
            except TimeoutError:
                results.append(LocalRunnerFuture(error_message=f"LocalRunner: Timeout after {self.timeout_sec} s"))
            except ChildProcessError as err:  # the pool starts a new worker for the next candidate
                results.append(LocalRunnerFuture(error_message=(
                    f"LocalRunner: the runner process died running this candidate ({err}): the kernel crashed "
                    "(segfault, abort) or its library did not load (unresolved symbol); the worker's own "
                    "message, if any, is on stderr")))
            except Exception as err:  # noqa: BLE001 - the worker's exception is the result
                results.append(LocalRunnerFuture(error_message="LocalRunner: exception\n" + str(err)))
        return results


def make_runner(kind: str = "llvm", rpc: RPCSettings | None = None, timeout_sec: float = 30.0, workers: int = 1):
    """A local runner, or MetaSchedule's RPCRunner with ``workers`` sessions at a time (one per server)."""
    init = worker_initializer_cuda if kind == "cuda" else worker_initializer_llvm
    config = default_evaluator_config(kind)
    if rpc is not None:
        rpc_config = ms.runner.RPCConfig(
            tracker_host=rpc.tracker_host,
            tracker_port=rpc.tracker_port,
            tracker_key=rpc.key,
            session_timeout_sec=rpc.session_timeout_sec,
        )
        runner = ms.runner.RPCRunner(rpc_config=rpc_config, evaluator_config=config, max_workers=1, initializer=init)
        # Stock RPCRunner's pool has no timeout: a candidate waiting for a session from a tracker whose
        # servers are gone waited forever. Its workers are now lean (no torch, die with this process)
        # and killed after the session timeout.
        runner.pool.shutdown()
        runner.pool = LeanPopenPool(max_workers=max(1, workers), timeout=rpc.session_timeout_sec, initializer=init)
        return runner
    return LeanLocalRunner(timeout_sec=timeout_sec, evaluator_config=config, kind=kind)


@dataclass
class MeasureOutcome:
    """One candidate's measurement: run times in seconds, or an error kind and message."""

    run_secs: list[float] | None
    error_kind: str  # "ok" | "build_error" | "build_timeout" | "run_error" | "run_timeout"
    error_msg: str = ""

    @property
    def ok(self) -> bool:
        return self.error_kind == "ok"


@dataclass
class MeasureTimes:
    build_s: float = 0.0
    run_s: float = 0.0


class Measurer:
    """Build + run a batch of MeasureCandidates; owns the worker pools (call ``close``)."""

    def __init__(self, target, rpc: RPCSettings | None = None, build_timeout_sec: float = 60.0,
                 run_timeout_sec: float = 30.0):
        # before any pool starts: an unreachable farm is one line, not 60 s of retries
        self.rpc_workers = check_rpc(rpc) if rpc is not None else 0  # one session per server found at start
        sweep_orphans()  # candidates a killed run built and never ran
        kind = str(target.kind.name)
        self.target, self.rpc = target, rpc
        self.builder = PooledBuilder(target_kind=kind, link_shared=rpc is None, timeout_sec=build_timeout_sec)
        self.runner = make_runner(kind, rpc, timeout_sec=run_timeout_sec, workers=self.rpc_workers)
        self.device_type = "cuda" if kind == "cuda" else "cpu"
        self.times = MeasureTimes()

    def warm_up(self) -> None:
        """Start builder and runner workers in the background while the caller prepares tasks."""
        self.builder.warm_up()
        if hasattr(self.runner, "warm_up"):
            self.runner.warm_up()

    def measure(self, candidates) -> tuple[list[MeasureOutcome], list, list]:
        """Returns outcomes plus the raw BuilderResults/RunnerResults (MetaSchedule wants them back)."""
        t0 = time.perf_counter()
        builder_results = self.builder.build(
            [BuilderInput(c.sch.mod, self.target) for c in candidates]
        )
        t1 = time.perf_counter()
        runner_inputs, index = [], []
        for i, (cand, br) in enumerate(zip(candidates, builder_results)):
            if br.error_msg is None:
                runner_inputs.append(ms.runner.RunnerInput(br.artifact_path, self.device_type, cand.args_info))
                index.append(i)
        run_results = [None] * len(candidates)
        for i, res in zip(index, self._run(runner_inputs)):
            run_results[i] = res
        t2 = time.perf_counter()
        self.times.build_s += t1 - t0
        self.times.run_s += t2 - t1
        outcomes, runner_results = [], []
        for br, rr in zip(builder_results, run_results):
            if br.error_msg is not None:
                kind = "build_timeout" if "Timeout" in br.error_msg else "build_error"
                outcomes.append(MeasureOutcome(None, kind, br.error_msg[:2000]))
                runner_results.append(ms.runner.RunnerResult(None, br.error_msg))
                continue
            _remove_artifact(br.artifact_path)
            if rr.error_msg is not None or rr.run_secs is None:
                msg = rr.error_msg or "no run time"
                kind = "run_timeout" if "Timeout" in msg else "run_error"
                outcomes.append(MeasureOutcome(None, kind, msg[:2000]))
            else:
                outcomes.append(MeasureOutcome([float(getattr(x, "value", x)) for x in rr.run_secs], "ok"))
            runner_results.append(rr)
        return outcomes, builder_results, runner_results

    def _run(self, runner_inputs: list) -> list:
        if not runner_inputs:
            return []
        if self.rpc is None:
            return [fut.result() for fut in self.runner.run(runner_inputs)]
        # RPC: as many candidates at a time as servers are connected (at most one per server found at the
        # start), the farm checked before each group. A candidate on a server that dies fails at once (its
        # connection resets); without the check the next ones waited for a session from a tracker with no
        # server left (60 s each, then forever for the next batch).
        results, i = [], 0
        while i < len(runner_inputs):
            n = min(wait_for_servers(self.rpc, mid_run=True), max(1, self.rpc_workers))
            results += [fut.result() for fut in self.runner.run(runner_inputs[i:i + n])]
            i += n
        return results

    def close(self) -> None:
        self.builder.shutdown()
        pool = getattr(self.runner, "pool", None)
        if pool is not None:
            pool.shutdown()


def _remove_artifact(path: str | None) -> None:
    if path:
        shutil.rmtree(os.path.dirname(path), ignore_errors=True)
