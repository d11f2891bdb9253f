"""``python -m autotune.env``: what this machine is to autotune (for bug reports and scripts).

Prints the versions, the host CPU as TVM sees it, the CPU descriptor cost models read (``autotune.hardware``),
the hardware id that datasets and pretrained models
are filed under (``cpu-<mcpu>-<cores>c``), and which shipped datasets and models match it.
``--hardware-id`` prints only the id (the Makefile's default collection folder uses it).
"""

from __future__ import annotations

import argparse
import json
import os

from autotune.cli import run_main, versions
from autotune.paths import REPO


def shipped(root: str, hw: str) -> dict:
    """Datasets and models under ``root`` and whether each is for this hardware."""
    out = {}
    for kind in ("datasets", "models"):
        folder = os.path.join(root, kind)
        names = sorted(d for d in os.listdir(folder) if os.path.isdir(os.path.join(folder, d)) and d.startswith(("cpu-", "cuda-"))) \
            if os.path.isdir(folder) else []
        out[kind] = {name: name == hw for name in names}
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m autotune.env", description=__doc__.split("\n\n")[0])
    ap.add_argument("--hardware-id", action="store_true", help="print only this host's hardware id")
    ap.add_argument("--target", default="llvm", help="'llvm' (this CPU) or a JSON target dict")
    args = ap.parse_args(argv)

    def body() -> int:
        from autotune.tvmrt.target import detect_host, hardware_id, parse_target, target_json

        target = parse_target(args.target)
        hw = hardware_id(target)
        if args.hardware_id:
            print(hw)
            return 0
        from autotune.hardware import describe

        host = detect_host().as_json()
        info = {"hardware_id": hw, "target": target_json(target), "host": host,
                "descriptor": describe({"target": target_json(target), "host": host}),
                "versions": versions(), "shipped": shipped(REPO, hw)}
        print(json.dumps(info, indent=2))
        return 0

    return run_main(body)


if __name__ == "__main__":
    raise SystemExit(main())
