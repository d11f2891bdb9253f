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


# The longest files first (by their cases' --durations in stop 34's clean-clone CI, fast + slow): pytest-xdist's
# --dist loadfile hands whole files to the two workers in collection order, so a long file collected last
# (alphabetically: test_vs_pytorch.py) ran alone at the end while the other worker idled.
LONG_FILES_FIRST = [
    "test_search_costmodel.py", "reliability/test_rpc_faults.py", "reliability/test_kill_quick.py",
    "test_survey_quick.py", "test_tune_cli.py", "test_vs_pytorch.py", "test_train_costmodel.py",
    "test_layout_rewrite.py", "reliability/test_disk_full.py", "test_collect.py", "test_rpc.py",
    "test_costmodel_torch.py", "test_batch_selection.py", "test_tuning_efficiency_harness.py", "test_remeasure.py",
    "test_api.py",
]


def pytest_collection_modifyitems(config, items):
    rank = {name: i for i, name in enumerate(LONG_FILES_FIRST)}

    def key(item) -> int:
        rel = os.path.relpath(str(item.path), os.path.join(ROOT, "tests")).replace(os.sep, "/")
        return rank.get(rel, len(rank))

    items.sort(key=key)  # stable: a file's cases keep their order, the other files theirs
