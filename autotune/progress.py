"""Progress for the CLIs: a rich bar on a terminal, plain log lines otherwise."""

from __future__ import annotations

import logging
import sys
import time

logger = logging.getLogger("autotune")


class Progress:
    def __init__(self, total: int, description: str, done: int = 0, enabled_rich: bool | None = None):
        self.total, self.done, self.description = max(total, 1), done, description
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
            self._task = self._rich.add_task(description, total=self.total, completed=done, best="")
            self._rich.start()

    def eta_s(self) -> float | None:
        rate_n = self.done - self.start_done
        if rate_n <= 0:
            return None
        return (time.perf_counter() - self.start) / rate_n * max(self.total - self.done, 0)

    def update(self, done: int, best_text: str = "") -> None:
        self.done = done
        self.best_text = best_text or self.best_text
        if self._rich is not None:
            self._rich.update(self._task, completed=done, best=self.best_text)
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
