"""Entry point of a lean TVM pool worker: TVM without torch, with the fast start-up.

``import tvm`` imports torch (through tvm_ffi) when it can: ~4 s and ~0.4 GB per worker
that neither builds nor runs need. Hiding torch makes that import fail softly.
"""

import sys

sys.modules.setdefault("torch", None)  # type: ignore[assignment]

from autotune.tvmrt.pdeath import die_with_parent  # noqa: E402

die_with_parent()  # a SIGKILLed tuner must not leave workers building or running for minutes

from autotune.tvmrt.cuda_build import load_stub_if_requested  # noqa: E402

load_stub_if_requested()  # CUDA builds on a machine without a GPU (cuda_build.py)

from autotune.tvmrt.startup import fast_start  # noqa: E402

fast_start("llvm")

from tvm.exec.popen_worker import main  # noqa: E402

if __name__ == "__main__":
    main()
