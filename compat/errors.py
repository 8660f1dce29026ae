"""User-facing errors: the CLI turns these into one line and exit code 2, never a traceback."""

from __future__ import annotations


class UserError(Exception):
    """Bad input or usage. `where` names the file (and field) at fault when there is one."""

    def __init__(self, message: str, where: str | None = None) -> None:
        self.message = message
        self.where = where
        super().__init__(self.line())

    def line(self) -> str:
        return f"{self.where}: {self.message}" if self.where else self.message


class LayoutError(UserError):
    """A vLLM tree that lacks a file or construct the static analysis needs."""
