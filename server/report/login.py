"""Browser login for the dashboard: one-time login links and session cookies, in the server's memory.

`amid dashboard` asks the running server (through its admin route, so only the workspace's owner
can) for a login link for one human identity. Opening the link consumes its code and sets a
session cookie: HttpOnly (no script reads it), SameSite=Strict (no other site's page sends it),
scoped to the dashboard's path and expiring after `SESSION_S`. Only sha256 digests of codes and
session ids are kept, and both die with the server. Every request re-checks that the identity
still holds a live human token, so `amid token revoke NAME` also ends NAME's browser sessions.
"""

from __future__ import annotations

import hashlib
import secrets
import threading
import time
from dataclasses import dataclass

from amid.server.errors import Forbidden, InvalidInput, invalid
from amid.server.ledger import Ledger
from amid.server.ledger.identity import check_agent_name

COOKIE = "amid_dashboard"
SESSION_S = 8 * 3600  # a working day; then the browser needs a new link
LINK_VALID_S = 600.0  # how long an unused login link opens the dashboard
MAX_LINK_VALID_S = 86_400.0


def _digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


@dataclass(frozen=True)
class _Grant:
    agent_id: str
    expires: float  # time.monotonic()


class DashboardLogins:
    """One-time codes and live sessions, each by digest; safe to use from many threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._codes: dict[str, _Grant] = {}
        self._sessions: dict[str, _Grant] = {}

    def issue_code(self, agent_id: str, valid_s: float) -> str:
        code = secrets.token_urlsafe(32)
        with self._lock:
            self._drop_expired()
            self._codes[_digest(code)] = _Grant(agent_id, time.monotonic() + valid_s)
        return code

    def redeem(self, code: str) -> tuple[str, str] | None:
        """(agent_id, new session id) for a live code, consumed now; None for a used, expired or unknown one."""
        with self._lock:
            grant = self._codes.pop(_digest(code), None)
            if grant is None or grant.expires <= time.monotonic():
                return None
            session = secrets.token_urlsafe(32)
            self._sessions[_digest(session)] = _Grant(grant.agent_id, time.monotonic() + SESSION_S)
        return grant.agent_id, session

    def session_agent(self, session: str) -> str | None:
        with self._lock:
            grant = self._sessions.get(_digest(session))
            if grant is None or grant.expires <= time.monotonic():
                self._sessions.pop(_digest(session), None)
                return None
        return grant.agent_id

    def end(self, session: str) -> str | None:
        with self._lock:
            grant = self._sessions.pop(_digest(session), None)
        return grant.agent_id if grant else None

    def _drop_expired(self) -> None:
        now = time.monotonic()
        self._codes = {k: g for k, g in self._codes.items() if g.expires > now}
        self._sessions = {k: g for k, g in self._sessions.items() if g.expires > now}


def holds_human_token(ledger: Ledger, agent_id: str) -> bool:
    live = ledger.db.scalar(
        "SELECT count(*) FROM tokens WHERE agent_id = ? AND role = 'human' AND revoked_at IS NULL", [agent_id]
    )
    return bool(live)


def login_link(ledger: Ledger, logins: DashboardLogins, body: dict[str, object]) -> dict[str, object]:
    """The admin action behind `amid dashboard`: a one-time login path for the human `as`.

    An unknown name is registered as a human (its token is not shown: the link stands in for it);
    an agent's or supervisor's name is refused, so no agent token holder gets a browser session."""
    name = body.get("as")
    if not isinstance(name, str):
        raise invalid("as", name, "the name of a human identity, e.g. human")
    check_agent_name(name)
    valid_s = body.get("valid_s", LINK_VALID_S)
    if isinstance(valid_s, bool) or not isinstance(valid_s, int | float) or not 0 < valid_s <= MAX_LINK_VALID_S:
        raise invalid("valid_s", valid_s, f"seconds the link stays usable, above 0 and at most {MAX_LINK_VALID_S:.0f}")
    role = ledger.identities.role_of(name)
    if role is not None and role != "human":
        raise Forbidden(
            f"as: got {name!r} with role {role}; expected a human identity (the dashboard is for people: "
            "amid token create NAME --role human)",
            field="as",
        )
    if role is None:
        ledger.identities.create_token(name, "human")
        ledger.activity.log(
            "token_created",
            agent_id=None,
            subject_type="agent",
            subject_id=name,
            payload={"role": "human", "for": "dashboard login"},
        )
    elif not holds_human_token(ledger, name):
        raise InvalidInput(
            f"as: got {name!r}, whose tokens are all revoked; expected a human with a live token "
            f"(amid token create {name} --role human)",
            field="as",
        )
    code = logins.issue_code(name, float(valid_s))
    ledger.activity.log(
        "dashboard_link_issued",
        agent_id=None,
        subject_type="agent",
        subject_id=name,
        payload={"valid_s": float(valid_s)},
    )
    return {"as": name, "path": f"/dashboard/login?code={code}", "valid_s": float(valid_s)}
