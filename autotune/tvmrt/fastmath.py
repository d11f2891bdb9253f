"""A vectorizable ``erf`` for CPU code (GELU), registered in every process that starts TVM.

TVM 0.27 lowers ``tirx.erf`` on ``llvm`` targets to a call of libm's scalar ``erff`` per element,
even inside a vectorized loop: bert_base's GELU task (128 x 3072 elements) took 2.6 ms, 26% of the
tuned model, at 0.6 GFLOP/s (benchmarks/results/vs_pytorch_<hardware id>.md). Here ``erf`` of float32 (and float16,
through float32) lowers instead to the rational approximation TVM already ships as ``topi.fast_erf``
(Eigen's: x clamped to [-4, 4], odd degree-13 numerator over even degree-8 denominator, max error
~1e-7 on float32), which LLVM vectorizes. PyTorch's CPU ``erf``/GELU is a vectorized polynomial too.

Only code generation changes: workloads, their hashes and tuning databases stay the same (a database
tuned before this applies as it was). float64 keeps libm's ``erf``. ``AUTOTUNE_EXACT_ERF=1`` turns it
off (libm ``erff`` everywhere, as stock TVM).
"""

from __future__ import annotations

import os

ENV_OFF = "AUTOTUNE_EXACT_ERF"
_ALPHA = (-2.72614225801306e-10, 2.77068142495902e-08, -2.10102402082508e-06, -5.69250639462346e-05,
          -7.34990630326855e-04, -2.95459980854025e-03, -1.60960333262415e-02)  # x^13 ... x^1 (odd)
_BETA = (-1.45660718464996e-05, -2.13374055278905e-04, -1.68282697438203e-03, -7.37332916720468e-03,
         -1.42647390514189e-02)  # x^8 ... x^0 (even)
_REGISTERED = False


def fast_erf_expr(x):
    """``erf(x)`` of a float32 TIR expression as a clamped rational polynomial (topi.fast_erf's)."""
    from tvm import tirx

    def const(v):
        return tirx.const(v, "float32")

    x = tirx.max(tirx.min(x, const(4.0)), const(-4.0))
    x2 = x * x
    p = const(_ALPHA[0])
    for a in _ALPHA[1:]:
        p = p * x2 + const(a)
    q = const(_BETA[0])
    for b in _BETA[1:]:
        q = q * x2 + const(b)
    return x * p / q


def _lower_erf(call):
    from tvm import tirx

    (arg,) = call.args
    dtype = str(getattr(call.ty, "dtype", ""))
    if dtype == "float32":
        return fast_erf_expr(arg)
    if dtype == "float16":
        return tirx.Cast("float16", fast_erf_expr(tirx.Cast("float32", arg)))
    return call  # unchanged: TVM's default lowering (libm erf) applies


def register_fast_erf() -> bool:
    """Register the lowering for ``llvm`` (once per process). False where turned off by the env."""
    global _REGISTERED
    if os.environ.get(ENV_OFF, "") not in ("", "0"):
        return False
    if not _REGISTERED:
        from tvm.target.intrin import register_intrin_lowering

        register_intrin_lowering("tirx.erf", target="llvm", f=_lower_erf, level=99)
        _REGISTERED = True
    return True
