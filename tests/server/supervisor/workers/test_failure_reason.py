"""Why a worker's CLI failed is read from what it printed: each real CLI's error event (as printed on a
refused API key) gives its message, events without one say nothing, and plain lines stay as they are."""

from __future__ import annotations

import json
from typing import Any

from amid.server.supervisor.workers.backend import readable, reason_lines

CLAUDE_RESULT = json.dumps(
    {
        "type": "result",
        "subtype": "success",
        "is_error": True,
        "api_error_status": 401,
        "result": "Invalid API key · Fix external API key",
        "session_id": "s1",
        "usage": {"input_tokens": 0, "server_tool_use": {"web_search_requests": 0}},
        "permission_denials": [],
    }
)
CODEX_FAILED = json.dumps({"type": "turn.failed", "error": {"message": "unexpected status 401 Unauthorized"}})
CODEX_ERROR = json.dumps({"type": "error", "message": "unexpected status 401 Unauthorized"})
OPENCODE_ERROR = json.dumps(
    {"type": "error", "sessionID": "ses_1", "error": {"name": "APIError", "data": {"message": "Incorrect API key"}}}
)
INIT = json.dumps({"type": "system", "subtype": "init", "session_id": "s1", "tools": ["Bash"] * 50})


def test_each_real_clis_error_event_reads_as_its_message() -> None:
    assert readable(CLAUDE_RESULT) == "Invalid API key · Fix external API key"
    assert readable(CODEX_FAILED) == readable(CODEX_ERROR) == "unexpected status 401 Unauthorized"
    assert readable(OPENCODE_ERROR) == "Incorrect API key"


def test_events_without_a_message_say_nothing_and_plain_lines_stay() -> None:
    assert readable(INIT) == "" and readable("[1, 2]") == "[1, 2]"
    assert readable("bwrap: execvp /x/claude: No such file") == "bwrap: execvp /x/claude: No such file"


def test_the_reason_keeps_the_last_distinct_messages_and_not_the_usage_noise_after_them() -> None:
    tail = [INIT, "Reconnecting... 5/5", CODEX_ERROR, CODEX_FAILED, INIT, ""]
    assert reason_lines(tail, 3) == ["Reconnecting... 5/5", "unexpected status 401 Unauthorized"]
    assert reason_lines([INIT, CLAUDE_RESULT], 3) == ["Invalid API key · Fix external API key"]
    assert reason_lines([INIT], 3) == []


def test_a_clean_opencode_exit_whose_json_timestamps_hold_429_is_clean_and_a_real_429_is_a_usage_limit() -> None:
    """OpenCode's JSON events carry millisecond timestamps: 1796182429973 holds "429" and was read as a usage limit."""
    from amid.registry.loader import worker_backend
    from amid.server.supervisor.workers.backend import classify_exit

    opencode = worker_backend("opencode")
    finished = json.dumps({"type": "step_finish", "timestamp": 1796182429973, "part": {"reason": "stop"}})
    limited = json.dumps({"type": "error", "error": {"name": "APIError", "data": {"statusCode": 429}}})
    common: dict[str, Any] = {"returncode": 0, "saw_result": True, "uptime_s": 30.0, "min_uptime_s": 5.0}
    common |= {"resumed": None, "reported": None}
    assert classify_exit(opencode, output_tail=finished, **common) == "clean"
    assert classify_exit(opencode, output_tail=limited, **common) == "usage_limit"
