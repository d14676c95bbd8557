"""The one exception tree of AMID.

Every failure that a caller can act on is one of these; the MCP edge turns each into a tool
error whose text names the field, what was received and what would be accepted.

    AmidError
    ├── InvalidInput      a field has a bad value (names the field and the fix)
    ├── NotFound          a named thing (lane, attempt, job, commit, file) does not exist
    ├── Conflict          the thing exists but is in the wrong state (claimed, locked, frozen)
    ├── Forbidden         the caller's role or identity may not do this
    ├── DataUnreadable    a data file exists but cannot be read or parsed
    └── JobFailed         a job or subprocess could not start or ended badly

Domain libraries (contract, profiling, metrics, planning) raise these too; they import nothing
else from the server package.
"""

from __future__ import annotations


class AmidError(Exception):
    """Base of every error AMID raises on purpose."""

    code = "AMID_ERROR"

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.field = field

    def __str__(self) -> str:
        return self.message


class InvalidInput(AmidError):
    code = "INVALID_INPUT"


class NotFound(AmidError):
    code = "NOT_FOUND"


class Conflict(AmidError):
    code = "CONFLICT"


class Forbidden(AmidError):
    code = "FORBIDDEN"


class DataUnreadable(AmidError):
    code = "DATA_UNREADABLE"


class JobFailed(AmidError):
    code = "JOB_FAILED"


def invalid(field: str, received: object, expected: str) -> InvalidInput:
    """Build the standard message: which field, what came, what would be accepted."""
    shown = repr(received)
    if len(shown) > 120:
        shown = shown[:117] + "..."
    return InvalidInput(f"{field}: got {shown}; expected {expected}", field=field)
