"""One-paragraph readings of where and why our numbers differ from the paper's (written after the runs)."""

READINGS: dict[str, str] = {}
