"""User-facing errors: one line, exit code 2, no traceback (see autotune.cli)."""


class UserError(Exception):
    """Bad input from the user. The message is one line naming what was wrong and what is accepted."""

    exit_code = 2
