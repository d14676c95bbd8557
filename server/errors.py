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
else from the server package. Messages read `field: got …; expected …`; `invalid`, `not_found`,
`conflict` and `forbidden` build that form. An exception that is none of these reaches an agent
as `INTERNAL` (server/toolkit.py), with a reference to the traceback in the server's log.
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


SHOWN_CHARS = 200  # what a message echoes of a received value: enough to recognise it, never a 1 MB echo
MESSAGE_CHARS = 2000  # the longest tool error text (and log line) the edge lets through


def cut(text: str, limit: int = SHOWN_CHARS) -> str:
    """`text` if short, else its start and how much was left out."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… ({len(text) - limit} more characters)"


def shown(received: object) -> str:
    """A received value as a message shows it: its repr, cut to SHOWN_CHARS."""
    return cut(repr(received))


def invalid(field: str, received: object, expected: str) -> InvalidInput:
    """Build the standard message: which field, what came, what would be accepted."""
    return InvalidInput(f"{field}: got {shown(received)}; expected {expected}", field=field)


def not_found(field: str, received: object, expected: str) -> NotFound:
    """`field: got 'x'; expected …`: a named thing that does not exist, and where to find real ones."""
    return NotFound(f"{field}: got {shown(received)}; expected {expected}", field=field)


def conflict(field: str, received: object, expected: str) -> Conflict:
    """`field: got 'x' (its state); expected …`: the thing exists but is in the wrong state."""
    return Conflict(f"{field}: got {shown(received)}; expected {expected}", field=field)


def forbidden(field: str, received: object, expected: str) -> Forbidden:
    """`field: got 'x'; expected …`: the caller's role or identity may not do this."""
    return Forbidden(f"{field}: got {shown(received)}; expected {expected}", field=field)
