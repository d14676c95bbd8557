"""How a tool module becomes an MCP tool: one `ToolSpec` per tool, registered once.

A tool module declares a pydantic input model, a pydantic output model (derived from
`ToolResult`) and one function `run(ctx, request) -> result`. `register` turns that into an MCP
tool whose arguments are the input model's fields, and wraps every call the same way: identify the
caller from the bearer token, enforce the role, run the work in a thread, log the call in the
events log, attach the caller's pending heartbeats, and turn `AmidError` into a tool error.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any

import anyio
import anyio.from_thread
import anyio.to_thread
from mcp.server import MCPServer
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import BaseModel, Field, ValidationError

from server.context import Services, ToolContext
from server.errors import AmidError, Forbidden, InvalidInput
from server.ledger import Identity, Role

ALL_ROLES: frozenset[Role] = frozenset({"agent", "supervisor", "human"})
WORKERS: frozenset[Role] = frozenset({"agent", "supervisor"})


class ToolResult(BaseModel):
    """Base of every tool result: pending heartbeats ride along in `inbox`."""

    inbox: list[str] = Field(default_factory=list, description="prompts from the supervisor: act on them")


Progress = Callable[[float, float | None, str | None], None]


@dataclass(frozen=True)
class ToolSpec:
    name: str
    title: str
    input_model: type[BaseModel]
    output_model: type[ToolResult]
    run: Callable[..., ToolResult]
    roles: frozenset[Role] = ALL_ROLES
    read_only: bool = False
    idempotent: bool = False
    destructive: bool = False
    wants_progress: bool = False

    @property
    def description(self) -> str:
        return inspect.cleandoc(self.run.__doc__ or self.title)


def resolve_identity(services: Services, local_identity: Identity | None) -> Identity:
    """The caller: the bearer token's agent over HTTP, or the one local agent over stdio."""
    token = get_access_token()
    if token is not None:
        return Identity(agent_id=token.client_id, role=token.scopes[0])  # type: ignore[arg-type]
    if local_identity is not None:
        return local_identity
    raise Forbidden("no identity: connect with an `Authorization: Bearer <token>` header (amid token create)")


def _signature(spec: ToolSpec) -> inspect.Signature:
    params = [inspect.Parameter("mcp_context", inspect.Parameter.KEYWORD_ONLY, annotation=Context)]
    for name, field in spec.input_model.model_fields.items():
        default = inspect.Parameter.empty if field.is_required() else field.get_default(call_default_factory=True)
        # Constraints travel as metadata; the default goes on the parameter (not both places).
        annotation = Annotated[(field.annotation, *field.metadata, Field(description=field.description))]  # type: ignore[name-defined]
        params.append(inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, annotation=annotation, default=default))
    return inspect.Signature(params, return_annotation=spec.output_model)


def _validate(spec: ToolSpec, arguments: dict[str, Any]) -> BaseModel:
    """Checks that span fields (model validators) run here; name the field and the fix."""
    try:
        return spec.input_model.model_validate(arguments)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "arguments"
        message = first["msg"].removeprefix("Value error, ")
        raise InvalidInput(f"{where}: {message}", field=where) from None


def _run_call(spec: ToolSpec, ctx: ToolContext, arguments: dict[str, Any], progress: Progress | None) -> ToolResult:
    started = time.monotonic()
    outcome = "ok"
    try:
        if ctx.caller.role not in spec.roles:
            allowed = ", ".join(sorted(spec.roles))
            raise Forbidden(f"{spec.name} needs role {allowed}; agent {ctx.caller.agent_id!r} is {ctx.caller.role!r}")
        request = _validate(spec, arguments)
        result = spec.run(ctx, request, progress) if spec.wants_progress else spec.run(ctx, request)
        if ctx.caller.role != "human":
            pending = ctx.ledger.activity.take_inbox(ctx.caller.agent_id)
            result.inbox = [f"[{row['kind']} #{row['heartbeat_id']}] {row['prompt']}" for row in pending]
        return result
    except AmidError as exc:
        outcome = exc.code
        raise
    finally:
        ctx.ledger.activity.log(
            "tool_call",
            agent_id=ctx.caller.agent_id,
            subject_type="tool",
            subject_id=spec.name,
            payload={"outcome": outcome, "ms": round(1000 * (time.monotonic() - started), 1)},
        )


def _make_handler(spec: ToolSpec, services: Services, local_identity: Identity | None) -> Callable[..., Any]:
    async def handler(mcp_context: Context, **arguments: Any) -> ToolResult:
        try:
            caller = resolve_identity(services, local_identity)
            ctx = ToolContext(services=services, caller=caller)
            progress = _progress_bridge(mcp_context) if spec.wants_progress else None
            return await anyio.to_thread.run_sync(_run_call, spec, ctx, arguments, progress)
        except AmidError as exc:
            raise ToolError(f"{exc.code}: {exc.message}") from None

    handler.__name__ = spec.name
    signature = _signature(spec)
    handler.__signature__ = signature  # type: ignore[attr-defined]
    handler.__annotations__ = {p.name: p.annotation for p in signature.parameters.values()}
    handler.__annotations__["return"] = spec.output_model
    return handler


def _progress_bridge(mcp_context: Context) -> Progress:
    def report(done: float, total: float | None = None, message: str | None = None) -> None:
        try:
            anyio.from_thread.run(mcp_context.report_progress, done, total, message)
        except Exception:
            return

    return report


def register(mcp: MCPServer, spec: ToolSpec, services: Services, local_identity: Identity | None) -> None:
    annotations = ToolAnnotations(
        read_only_hint=spec.read_only,
        idempotent_hint=spec.idempotent or spec.read_only,
        destructive_hint=spec.destructive,
        open_world_hint=False,
    )
    mcp.add_tool(
        _make_handler(spec, services, local_identity),
        name=spec.name,
        title=spec.title,
        description=spec.description,
        annotations=annotations,
        structured_output=True,
    )
    # Titles that pydantic derives from field names repeat the names: drop them from the published
    # schemas (every byte of tools/list sits in each client's context). The SDK exposes no public
    # hook for this, hence the one reach into its tool manager.
    tool = mcp._tool_manager.get_tool(spec.name)
    if tool is not None:
        _compact(tool.parameters, ("title",))
        # Output schemas tell a client the shape; the prose is in the tool description.
        _compact(tool.fn_metadata.output_schema, ("title", "description", "default", "required"))


def _merge_nullable(schema: dict[str, Any]) -> None:
    """`anyOf: [{type: T}, {type: null}]` says the same as `type: [T, null]`, in fewer bytes."""
    options = schema.get("anyOf")
    if isinstance(options, list) and all(set(o) == {"type"} and isinstance(o["type"], str) for o in options):
        schema.pop("anyOf")
        schema["type"] = [o["type"] for o in options]


def _compact(schema: Any, keywords: tuple[str, ...]) -> None:
    """Remove annotation keywords (title, …) from a JSON schema, walking only schema positions:
    a property that is itself named "title" or "description" is kept."""
    if not isinstance(schema, dict):
        return
    for keyword in keywords:
        schema.pop(keyword, None)
    _merge_nullable(schema)
    for key in ("properties", "$defs"):
        for sub in (schema.get(key) or {}).values():
            _compact(sub, keywords)
    for key in ("anyOf", "allOf", "oneOf"):
        for sub in schema.get(key) or []:
            _compact(sub, keywords)
    for key in ("items", "additionalProperties"):
        _compact(schema.get(key), keywords)
