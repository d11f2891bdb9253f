"""Command-line pieces shared by the three entry points (modes, output paths, checks)."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from . import timing

log = logging.getLogger("survey")


def parser(description: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--quick", action="store_true", help="CI mode: small sizes, qualitative checks")
    mode.add_argument("--dry-run", action="store_true",
                      help="smoke-test the code path at tiny sizes (e.g. gpu_run.sh with --device cpu)")
    p.add_argument("--check", action="store_true", help="exit 1 if a qualitative assertion fails")
    p.add_argument("--out", type=Path, help="JSON output (default: results/ for full runs, runs/ otherwise)")
    p.add_argument("--rounds", type=int, help="alternating rounds per measurement")
    p.add_argument("--block-s", type=float, help="seconds per timed block")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--seed", type=int, default=0)
    return p


def mode_of(args) -> str:
    return "dry-run" if args.dry_run else "quick" if args.quick else "full"


def out_path(args, experiment: str) -> Path:
    if args.out:
        return args.out
    if mode_of(args) == "full":
        return timing.RESULTS / f"{experiment}_{args.device}.json"
    return timing.REPO / "runs" / f"survey-{mode_of(args)}" / f"{experiment}_{args.device}.json"


def setup(args) -> dict:
    """Logging, thread pinning, numerics; returns the run header stored in every JSON."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s", datefmt="%H:%M:%S")
    if args.device == "cuda":
        import torch

        if not torch.cuda.is_available():
            raise SystemExit("--device cuda requested but torch.cuda.is_available() is False")
    pinned = timing.configure(args.threads, args.device)
    return {"mode": mode_of(args), "seed": args.seed, "pinned": pinned,
            "env": timing.env_info(args.device), "started": timing.stamp()}


class Checks:
    """Qualitative assertions collected during a run; `finish` turns failures into exit code 1."""

    def __init__(self) -> None:
        self.items: list[dict] = []

    def expect(self, ok: bool, what: str, detail: object = None) -> bool:
        self.items.append({"ok": bool(ok), "what": what, "detail": detail})
        (log.info if ok else log.error)("check %s: %s (%s)", "PASS" if ok else "FAIL", what, detail)
        return bool(ok)

    @property
    def failed(self) -> list[dict]:
        return [c for c in self.items if not c["ok"]]

    def finish(self, enforce: bool) -> int:
        if self.failed and enforce:
            for c in self.failed:
                log.error("FAILED: %s (%s)", c["what"], c["detail"])
            return 1
        return 0
