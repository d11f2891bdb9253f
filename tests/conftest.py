import os

# OpenMP threads that spin-wait collapse (10-100x) when the 2 cores are shared with TVM workers.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import subprocess  # noqa: E402
import sys  # noqa: E402

import pytest  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_cli(*args: str, timeout: float = 600, env: dict | None = None) -> subprocess.CompletedProcess:
    """Run ``python -m <args>`` as a user would, from the repository root."""
    full_env = dict(os.environ, PYTHONUNBUFFERED="1", **(env or {}))
    return subprocess.run(
        [sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout, env=full_env
    )


@pytest.fixture
def cli():
    return run_cli
