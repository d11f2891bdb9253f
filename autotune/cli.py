"""Shared CLI plumbing: logging set-up, the UserError -> exit 2 contract, run metadata."""

from __future__ import annotations

import contextlib
import errno
import json
import logging
import os
import platform
import re
import subprocess
import sys
from collections.abc import Callable

from autotune.errors import UserError

logger = logging.getLogger("autotune")

# Third-party warnings a user can do nothing about: captured (logging.captureWarnings) into the log
# file only. Patterns match the formatted warning ("path:line: Category: message"); every other
# warning, autotune's own first of all, still reaches the console.
KNOWN_WARNING_NOISE = (
    # torch 2.13's pytree, when a TreeSpec is copied (torch.export): `isinstance(treespec, LeafSpec)` is deprecated
    r"FutureWarning: `isinstance\(treespec, LeafSpec\)` is deprecated",
)


def _for_console(record: logging.LogRecord) -> bool:
    if record.name == "py.warnings":
        return not any(re.search(p, record.getMessage()) for p in KNOWN_WARNING_NOISE)
    return record.name.startswith("autotune") or record.levelno >= logging.WARNING


class _UntilLogFile(logging.Handler):
    """Keeps records (noise included) until setup_logging is given the log folder, then hands them over."""

    def __init__(self, capacity: int = 10_000):
        super().__init__(logging.DEBUG)
        self.capacity, self.records = capacity, []

    def emit(self, record: logging.LogRecord) -> None:
        if len(self.records) < self.capacity:
            self.records.append(record)


def setup_logging(log_dir: str | None = None, verbose: bool = False) -> None:
    """Console: autotune at INFO, TVM at WARNING, Python warnings but known third-party noise.
    File (log_dir/autotune.log): everything at DEBUG, from the first call on (kept until log_dir is known)."""
    root = logging.getLogger()
    root.setLevel(logging.DEBUG)
    logging.raiseExceptions = False  # a log file on a full disk must not print a traceback per log line
    pending = next((h for h in root.handlers if isinstance(h, _UntilLogFile)), None)
    for handler in list(root.handlers):
        root.removeHandler(handler)
    logging.captureWarnings(True)
    console = logging.StreamHandler(sys.stderr)
    console.setLevel(logging.DEBUG if verbose else logging.INFO)
    console.setFormatter(logging.Formatter("%(asctime)s %(levelname).1s %(message)s", "%H:%M:%S"))
    console.addFilter(_for_console)
    root.addHandler(console)
    if log_dir:
        os.makedirs(log_dir, exist_ok=True)
        fh = logging.FileHandler(os.path.join(log_dir, "autotune.log"))
        fh.setLevel(logging.DEBUG)
        fh.setFormatter(logging.Formatter("%(asctime)s %(name)s %(levelname)s %(message)s"))
        root.addHandler(fh)
        for record in pending.records if pending else []:
            fh.handle(record)
    else:
        root.addHandler(pending or _UntilLogFile())
    # MetaSchedule's create_loggers gives its console handler the level this logger has when the
    # work dir's loggers are made: WARNING keeps the console quiet, its files still get DEBUG.
    logging.getLogger("tvm.s_tir.meta_schedule").setLevel(logging.WARNING)


def run_main(main: Callable[[], int]) -> int:
    """Run a CLI body: a UserError prints one line and exits 2, Ctrl-C exits 130."""
    try:
        return main()
    except UserError as err:
        print(f"error: {one_line(str(err))}", file=sys.stderr)
        return 2
    except Exception as err:  # a full disk, whether Python, a compiler (ld) or TVM saw it first
        enospc = isinstance(err, OSError) and err.errno in (errno.ENOSPC, errno.EDQUOT)
        if not enospc and "No space left on device" not in str(err):
            raise
        where = f" (writing {err.filename})" if isinstance(err, OSError) and err.filename else ""
        print(f"error: no space left on device{where}; free space and run again", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted: everything measured so far is in the work dir; run again to resume", file=sys.stderr)
        return 130


def comma_list(text: str) -> list[str]:
    """'a, b,,c' -> ['a', 'b', 'c']: a comma-separated flag value, blanks dropped."""
    return [part.strip() for part in text.split(",") if part.strip()]


def seed_list(text: str, flag: str = "--seeds") -> list[int]:
    """A comma-separated list of seeds; anything else (or none) is a UserError naming ``flag``."""
    from autotune.errors import UserError

    try:
        seeds = [int(s) for s in comma_list(text)]
    except ValueError:
        raise UserError(f"{flag}: {text!r} is not a comma-separated list of integers") from None
    if not seeds:
        raise UserError(f"{flag}: give at least one seed")
    return seeds


def check_threads(n: int | None, flag: str = "--threads") -> None:
    """A threads-per-fit flag: None (the default) or 1 or more; anything else is a UserError naming ``flag``."""
    from autotune.errors import UserError

    if n is not None and n < 1:
        raise UserError(f"{flag}: {n} is not a number of threads; give 1 or more")


def one_line(text: str) -> str:
    """A message as one line: terminal colour codes dropped, line breaks and runs of spaces collapsed
    (some libraries' errors embedded in a UserError span several lines)."""
    return " ".join(re.sub(r"\x1b\[[0-9;]*m", "", text).split())


def git_commit() -> str | None:
    with contextlib.suppress(Exception):
        here = os.path.dirname(os.path.abspath(__file__))
        out = subprocess.run(
            ["git", "-C", here, "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5, check=False
        )
        if out.returncode == 0:
            return out.stdout.strip()
    return None


def versions() -> dict:
    import importlib.metadata as md

    out = {"python": platform.python_version()}
    for pkg in ("apache-tvm", "apache-tvm-ffi", "torch", "xgboost", "numpy"):
        with contextlib.suppress(md.PackageNotFoundError):
            out[pkg] = md.version(pkg)
    return out


def loadavg() -> list[float] | None:
    with contextlib.suppress(OSError):
        with open("/proc/loadavg", encoding="utf-8") as f:
            return [float(x) for x in f.read().split()[:3]]
    return None


def host_cpu() -> str:
    """This machine's CPU as /proc/cpuinfo names it, with its core count (TVM-free: where a timing on the
    learning side ran, e.g. "Intel(R) Xeon(R) Processor, 2 cores"; the TVM side names hardware by its id)."""
    name = platform.processor() or platform.machine()
    with contextlib.suppress(OSError):
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            name = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), name)
    return f"{name}, {os.cpu_count()} cores"


def write_results(json_path: str, data: dict, md_path: str, table: str) -> None:
    """A run's results as the project keeps them: ``data`` as JSON and ``table`` as markdown (folders
    made as needed); the table is printed too."""
    for path in (json_path, md_path):
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    write_json(json_path, data)
    with open(md_path, "w", encoding="utf-8") as f:
        f.write(table)
    print(table)


def write_json(path: str, data: dict) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=2, sort_keys=False, default=str)
        f.write("\n")
    os.replace(tmp, path)
