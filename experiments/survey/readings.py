"""One-paragraph readings of where and why our numbers differ from the paper's.

Written by hand after the committed CPU runs (results/*_cpu.json); report.py appends them to the tables.
The numbers quoted are those runs'; rerunning changes them within the noise of a shared machine.
"""

READINGS: dict[str, str] = {
    "e1": (
        "Our largest Inductor speedup on a fusion-friendly graph is **2.35x** (14 pointwise ops on 4M floats) "
        "against the paper's **8.21x** on an RTX A6000, and the GEMM/conv-bound workloads sit at 0.91–1.03x, "
        "which agrees with the paper's 'limited improvement elsewhere'. The gap on fusion is the platform: on one "
        "CPU thread each eager op is already a vectorised loop behind ~3 µs of dispatch, so fusion only saves "
        "memory traffic (13 temporaries of 16 MB become one pass), whereas on a GPU each eager op is a kernel "
        "launch and `mode=\"reduce-overhead\"` (CUDA graphs) removes the launches too: that is where 8x-class "
        "numbers come from, and what `gpu_run.sh` measures (not yet run: no GPU was lent). At 1k elements "
        "Inductor loses (0.91x): its call path (dynamo guards, AOTAutograd wrapper, config context) costs ~50 µs "
        "of Python per call by profile, as much as eager's 14 dispatches; TVM's Relax VM call costs a few µs, "
        "so even untuned TVM is 3x (ew_chain_1k) to 13x (tiny_graph) faster than eager there, on call overhead "
        "alone. bias+GELU+residual+LayerNorm is a real Inductor CPU-codegen regression (0.35x): the fused kernel "
        "makes three passes per row (mean, variance, normalise) and recomputes bias+erf-GELU in each of them "
        "(the generated C++ has `erf()` in all three loops), tripling the costliest op; it recovers with batch "
        "(0.36x at B=1 to 0.68x at B=64) as eager turns memory-bound. The MLP sweep stays at 0.88–0.97x: both "
        "sides call the same oneDNN/MKL GEMM (Inductor emits extern calls), only the epilogue differs. TVM "
        "without tuning applies no schedule on CPU (no tiling, no vectorisation plan), so GEMM/conv-bound graphs "
        "run 35–100x slower than eager (0.01–0.03x); memory-bound ones land at 0.2–0.9x. MetaSchedule tuning "
        "(autotune.api, 48 trials, 47–69 s per workload) closes most of the GEMM gap, matmul 0.68x and MLP "
        "0.44x of eager (34–68x faster than untuned; kernel-only 0.85x and 0.59x of MKL/oneDNN), but not the "
        "fusion workloads (bias+GELU+LN 0.17x, softmax 0.33x): 48 trials spread over several small tasks found "
        "little better than the unscheduled loops, and at sub-millisecond sizes the API callable's torch/TVM "
        "copies cost a share (kernel-only 0.20x and 0.43x). The tuned rows were measured in a later run under "
        "heavier load (loadavg ~7) and merged; their ratios come from the same alternating blocks."
    ),
    "e2": (
        "On one core a cold Inductor compile of one workload takes 1.5–4.8 s, after a one-time framework "
        "initialisation of 6–10 s per process (2–3 s with a warm cache); process start-up with `import torch` "
        "is 2.6 s on top. The break-even N* spans **32** (the 4M-element chain saves 46 ms per call) to "
        "**~10^5** (tiny graph, ResNet and transformer blocks save 15–70 µs per call), and 5 of 9 workloads "
        "never amortise because the compiled code is not faster (N* = ∞). The paper's 'thousands of "
        "executions' lies inside our range: on a GPU compiles are slower (Triton codegen and autotuning) but "
        "per-call savings on launch-bound graphs are larger, and which effect wins depends on the workload, "
        "exactly as here. A warm cache (FX graph + AOTAutograd cache hits, checked in the counters) cuts the "
        "compile 6–16x (1.5–4.8 s to 0.16–0.4 s; 1.6x for matmul, which has no generated kernel) and N* by the "
        "same factor; counting the per-process initialisation multiplies the cold N* 2.5–7x. For TVM, an untuned compile is under a second but the untuned code is "
        "slower than eager, so it never amortises; tuning is the overhead that buys speed: 11–27 s for 8–32 "
        "trials here. Against eager the tuned code still loses at these budgets (N* = ∞); against untuned TVM "
        "the MLP pays its tuning back after **138–283 calls** (83 ms to ~2 ms per call), and N* grows with the "
        "budget because extra trials cost more time than they save per call, while bias+GELU+LN, where "
        "tuning barely helps, needs 1.6–5 x 10^5 calls. Re-using the MetaSchedule database "
        "(`compile_torch(database_dir=...)`) compiles in 0.3–2.3 s: TVM's warm cache, as cheap as Inductor's."
    ),
    "e3": (
        "Inductor's dynamic-shape mode cuts the cumulative cost by **72% at N=5**, 85% at N=10 and 92% at "
        "N=24, with a steady-state dynamic/static latency ratio of **1.005** (per-shape 0.90–1.04): the paper's "
        "~70% is our N≈5 point, and the reduction keeps growing as ≈ 1 − c/N because a static compile (~3 s) "
        "is paid for every new shape while the dynamic one (3.6–4.5 s, 1.1–1.6x a static compile) is paid "
        "once. The slowdown the paper calls modest is within noise here: the FFN is GEMM-dominated and the "
        "GEMMs go to the same extern kernel whatever the shape; only the LayerNorm/GELU loops lose constant "
        "trip counts. On a GPU, symbolic Triton kernels also lose per-shape block-size autotuning, so a larger "
        "steady-state gap is expected there. Eager's cumulative cost (2.0 s at N=24, 10 calls per shape) is "
        "below both compiled arms: at this call count neither compile pays off (see E2). TVM: compiling one "
        "Relax function with a symbolic seq (torch.export.Dim) once saves 27–40% against export+compile per "
        "shape, less than Inductor because a static TVM compile is cheap (~1.1 s vs 1.6 s symbolic) and untuned "
        "CPU code is so slow (0.1–1.5 s per call) that execution dominates; the steady-state ratio is 1.004 "
        "since untuned code has no schedule that could exploit static extents. MetaSchedule tunes static shapes "
        "only, so a tuned TVM deployment pays the static arm's cost (minutes of tuning) per shape: the dynamic "
        "trade-off matters even more for TVM than for Inductor."
    ),
}
