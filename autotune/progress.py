"""Progress for the CLIs: a rich bar on a terminal, plain log lines otherwise."""

from __future__ import annotations

import logging
import sys
import time

logger = logging.getLogger("autotune")


class Progress:
    """``done=None``: what the first ``update`` reports was done before (e.g. trials already in a database),
    so the rate and the ETA count only what this run does."""

    def __init__(self, total: int, description: str, done: int | None = 0, enabled_rich: bool | None = None):
        self.total, self.done, self.description = max(total, 1), done or 0, description
        self.start = time.perf_counter()
        self.start_done = done
        self.best_text = ""
        self._last_log = 0.0
        use_rich = sys.stdout.isatty() if enabled_rich is None else enabled_rich
        self._rich = None
        if use_rich:
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                TextColumn,
                TimeElapsedColumn,
                TimeRemainingColumn,
            )
            from rich.progress import Progress as RichProgress

            self._rich = RichProgress(
                TextColumn("[bold]{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                TextColumn("ETA"),
                TimeRemainingColumn(),
                TextColumn("{task.fields[best]}"),
            )
            self._task = self._rich.add_task(description, total=self.total, completed=self.done, best="")
            self._rich.start()

    def eta_s(self) -> float | None:
        rate_n = self.done - (self.start_done or 0)
        if self.start_done is None or rate_n <= 0:
            return None
        return (time.perf_counter() - self.start) / rate_n * max(self.total - self.done, 0)

    def update(self, done: int, best_text: str = "", total: int | None = None) -> None:
        """``total``: the budget as now known (the ETA is the time the trials left to it will take)."""
        if self.start_done is None:
            self.start, self.start_done = time.perf_counter(), done
            if self._rich is not None:  # its speed samples start here, not with a jump from 0
                self._rich.reset(self._task, completed=done)
        self.done = done
        self.best_text = best_text or self.best_text
        if total is not None:
            self.total = max(total, 1)
        if self._rich is not None:
            self._rich.update(self._task, completed=done, total=self.total, best=self.best_text)
            return
        now = time.perf_counter()
        if now - self._last_log >= 10.0 or done >= self.total:
            self._last_log = now
            eta = self.eta_s()
            eta_text = f"{eta:.0f} s" if eta is not None else "?"
            logger.info(
                "%s: %d/%d trials, %.0f s elapsed, ETA %s %s",
                self.description, done, self.total, now - self.start, eta_text, self.best_text,
            )

    def close(self) -> None:
        if self._rich is not None:
            self._rich.stop()
