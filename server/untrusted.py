"""Agent-written text, framed as data when it is served to another agent.

Notes and agents' skills are written by untrusted programs and read by models. A model that reads
"ignore previous instructions" in a tool result cannot tell whose voice it is unless the result says
so; every such text is therefore delivered inside one frame:

    <agent-authored-content nonce=3f9ac0e1b2d4a6c8>
    …the text, with anything shaped like the frame's own tag defanged…
    </agent-authored-content nonce=3f9ac0e1b2d4a6c8>

beside a `trust` field. The nonce is derived from the text itself, so a text cannot contain the
closing line of its own frame (it would have to hold its own hash), and tag-shaped strings inside
it are escaped as well, so neither a forged closing tag nor a lookalike ends the frame early.
"""

from __future__ import annotations

import hashlib
import re

AGENT_TRUST = "agent-authored, unverified"
SEEDED_TRUST = "seeded by the server, read-only"
TAG = "agent-authored-content"
# '<' and its lookalikes (fullwidth, small, angle brackets, single guillemet) before the tag name.
_TAG_LIKE = re.compile(r"[<\uff1c\ufe64\u2039\u27e8\u3008]\s*/?\s*agent[\s_-]*authored[\s_-]*content", re.I)
NONCE_CHARS = 16


def nonce_of(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:NONCE_CHARS]


def defang(text: str) -> str:
    """The text with every tag-shaped `<agent-authored-content` turned into `&lt;…`."""
    return _TAG_LIKE.sub(lambda m: "&lt;" + m.group(0)[1:], text)


def frame(text: str) -> str:
    """`text` inside the untrusted-content frame (see the module docstring)."""
    inner = defang(text)
    nonce = nonce_of(inner)
    return f"<{TAG} nonce={nonce}>\n{inner}\n</{TAG} nonce={nonce}>"


def unframe(framed: str) -> str | None:
    """The defanged text inside a frame made by `frame`, or None when `framed` is not one whole frame."""
    match = re.fullmatch(rf"<{TAG} nonce=([0-9a-f]{{{NONCE_CHARS}}})>\n(.*)\n</{TAG} nonce=\1>", framed, re.S)
    if match is None or nonce_of(match.group(2)) != match.group(1):
        return None
    return match.group(2)
