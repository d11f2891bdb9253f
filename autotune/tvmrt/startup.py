"""Fast TVM start-up: the only place that decides how tvm is imported.

Two fixes from shared/TVM_NOTES.md, applied in every process that touches TVM
(main process, builder and runner workers):

1. TVMScript's decorators call ``inspect.stack()``, which resolves a module for
   every frame by scanning ``sys.modules`` (~2,000 modules once torch is loaded).
   We give the three parser entry modules a ``stack()`` built on
   ``sys._getframe`` and ``linecache`` that returns the same fields they read.
2. ``tvm.s_tir.tensor_intrin`` registers every intrinsic of every backend on
   import (72-104 s here). We register only the target's family: a bare package
   object stands in for ``tvm.s_tir.tensor_intrin`` and only its ``x86`` (or
   ``cuda``) submodule is imported, so later ``import tvm.s_tir.tensor_intrin``
   is a no-op.

It also registers a vectorizable ``erf`` lowering for CPU code (fastmath.py: GELU ran on libm's scalar
``erff``).
"""

from __future__ import annotations

import importlib
import importlib.util
import linecache
import os
import sys
import types
from typing import NamedTuple

_DONE: set[str] = set()


class _FrameInfo(NamedTuple):
    frame: types.FrameType
    filename: str
    lineno: int
    function: str
    code_context: list[str] | None
    index: int | None


def _cheap_stack(context: int = 1) -> list[_FrameInfo]:
    frames: list[_FrameInfo] = []
    frame = sys._getframe(1)
    while frame is not None:
        code = frame.f_code
        line = linecache.getline(code.co_filename, frame.f_lineno)
        frames.append(
            _FrameInfo(frame, code.co_filename, frame.f_lineno, code.co_name, [line] if line else None, 0)
        )
        frame = frame.f_back
    return frames


class _InspectShim(types.ModuleType):
    """``inspect`` with a cheap ``stack``; every other name is the real one."""

    def __init__(self) -> None:
        super().__init__("inspect")
        import inspect

        self._real = inspect
        self.stack = _cheap_stack

    def __getattr__(self, name: str):
        return getattr(self._real, name)


_PARSER_ENTRIES = (
    "tvm.tirx.script.parser.entry",
    "tvm.script.parser.ir.entry",
    "tvm.relax.script.parser.entry",
)

_INTRIN_FAMILY = {"llvm": "x86", "cuda": "cuda"}


def _patch_parsers() -> None:
    shim = _InspectShim()
    for name in _PARSER_ENTRIES:
        try:
            module = importlib.import_module(name)
        except ImportError:  # pragma: no cover - layout changed in another TVM version
            continue
        module.inspect = shim


def _register_intrinsics(kind: str) -> None:
    family = _INTRIN_FAMILY.get(kind)
    pkg_name = "tvm.s_tir.tensor_intrin"
    if family is None or pkg_name in sys.modules:
        return
    spec = importlib.util.find_spec(pkg_name)
    if spec is None or not spec.submodule_search_locations:  # pragma: no cover
        return
    pkg = types.ModuleType(pkg_name)
    pkg.__path__ = list(spec.submodule_search_locations)
    pkg.__package__ = pkg_name
    pkg.__spec__ = spec
    sys.modules[pkg_name] = pkg
    import tvm.s_tir as s_tir

    s_tir.tensor_intrin = pkg
    importlib.import_module(f"{pkg_name}.{family}")


def fast_start(target_kind: str = "llvm") -> None:
    """Import tvm with both start-up fixes. Idempotent; safe in worker processes."""
    if target_kind in _DONE:
        return
    os.environ.setdefault("TVM_LOG_DEBUG", "0")
    import tvm  # noqa: F401  (the import itself is the point)

    if not _DONE:
        _patch_parsers()
        from autotune.tvmrt.fastmath import register_fast_erf

        register_fast_erf()  # a vectorizable erf on CPU (GELU): fastmath.py
    _register_intrinsics(target_kind)
    _DONE.add(target_kind)


def worker_initializer_llvm() -> None:
    """Initializer for PopenPool workers measuring CPU programs."""
    fast_start("llvm")


def worker_initializer_cuda() -> None:
    """Initializer for PopenPool workers building CUDA programs."""
    fast_start("cuda")
