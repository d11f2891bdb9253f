"""The vectorizable erf (autotune/tvmrt/fastmath.py): GELU's erf no longer calls libm's scalar erff per
element on CPU, and stays within 1e-6 of the exact erf."""

from __future__ import annotations

import math
import os
import subprocess
import sys

import numpy as np
import pytest

pytestmark = pytest.mark.tvm

PROBE = """
import math, sys
import numpy as np
from autotune.tvmrt.startup import fast_start
fast_start("llvm")
import tvm
from tvm import te, tirx
from tvm.driver import build
dtype = sys.argv[1]
a = te.placeholder((4, 64), dtype, name="a")
b = te.compute((4, 64), lambda i, j: tirx.erf(a[i, j]), name="b")
sch = tvm.s_tir.Schedule(te.create_prim_func([a, b]))
i, j = sch.get_loops(sch.get_sblock("b"))
jo, ji = sch.split(j, [None, 16])
sch.vectorize(ji)
m = build(sch.mod, target="llvm")
xs = np.linspace(-6, 6, 256).reshape(4, 64).astype(dtype)
y = tvm.runtime.empty((4, 64), dtype, tvm.cpu())
m(tvm.runtime.tensor(xs, tvm.cpu()), y)
err = float(np.abs(y.numpy().astype("float64") - np.vectorize(math.erf)(xs.astype("float64"))).max())
print("erf" in m.inspect_source("asm"), err)
"""


def _probe(dtype: str, exact: bool) -> tuple[bool, float]:
    env = dict(os.environ, AUTOTUNE_EXACT_ERF="1" if exact else "0")
    res = subprocess.run([sys.executable, "-c", PROBE, dtype], capture_output=True, text=True, env=env, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    calls, err = res.stdout.split()[-2:]
    return calls == "True", float(err)


def test_float32_erf_is_a_polynomial_not_a_libm_call():
    calls, err = _probe("float32", exact=False)
    assert not calls and err < 1e-6, (calls, err)
    calls_exact, err_exact = _probe("float32", exact=True)  # the switch restores stock TVM's erff
    assert calls_exact and err_exact < 1e-6


def test_float64_keeps_libm_erf():
    calls, err = _probe("float64", exact=False)
    assert calls and err < 1e-12


def test_polynomial_matches_erf_in_numpy():
    """The coefficients themselves, evaluated in float64 the way the TIR expression is built."""
    from autotune.tvmrt.fastmath import _ALPHA, _BETA

    x = np.clip(np.linspace(-8, 8, 4001), -4, 4)
    x2 = x * x
    p = np.full_like(x, _ALPHA[0])
    for a in _ALPHA[1:]:
        p = p * x2 + a
    q = np.full_like(x, _BETA[0])
    for b in _BETA[1:]:
        q = q * x2 + b
    exact = np.vectorize(math.erf)(np.linspace(-8, 8, 4001))
    assert np.abs(x * p / q - exact).max() < 2e-7
