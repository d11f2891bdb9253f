"""The benchmark workload shared by the GEMM arms: C = A @ B, fp32, n x n x n."""


def gemm_module(n: int = 512):
    """IRModule of the GEMM; imports tvm itself (each arm decides how tvm starts before calling this)."""
    import tvm
    from tvm import te

    a = te.placeholder((n, n), name="A")
    b = te.placeholder((n, n), name="B")
    k = te.reduce_axis((0, n), "k")
    c = te.compute((n, n), lambda i, j: te.sum(a[i, k] * b[k, j], axis=k), name="C")
    return tvm.IRModule({"main": te.create_prim_func([a, b, c])})
