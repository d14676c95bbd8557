"""How a tool module becomes an MCP tool: one `ToolSpec` per tool, registered once.

A tool module declares a pydantic input model, a pydantic output model (derived from
`ToolResult`) and one function `run(ctx, request) -> result`. `published_schema` derives the
tool's inputSchema from the input model's fields (once, into `server/tool_manifest.json`);
`register` lists the tool from its manifest entry and wraps every call the same way: import the
tool's module at its first call, identify the caller from the bearer token, enforce the role, run
the work in a thread, log the call in the events log, attach the caller's pending heartbeats, and
turn `AmidError` into a tool error.
"""

from __future__ import annotations

import hashlib
import inspect
import logging
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any

import anyio
import anyio.from_thread
import anyio.to_thread
import pydantic_core
from mcp.server import MCPServer
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.tools.base import Tool as SdkTool
from mcp.server.mcpserver.utilities.func_metadata import ArgModelBase, FuncMetadata, func_metadata
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from mcp.types import Tool as ListedTool
from pydantic import BaseModel, ConfigDict, Field

from amid.server.context import Services, ToolContext
from amid.server.errors import MESSAGE_CHARS, AmidError, Conflict, Forbidden, cut, shown
from amid.server.ledger import Identity, Role
from amid.server.ledger.idempotency import Receipt
from amid.server.tool_entries import ToolEntry
from amid.server.validation import validate_arguments

log = logging.getLogger("amid.tools")
ALL_ROLES: frozenset[Role] = frozenset({"agent", "supervisor", "human"})
WORKERS: frozenset[Role] = frozenset({"agent", "supervisor"})


class ToolResult(BaseModel):
    """Base of every tool result: pending heartbeats ride along in `inbox`."""

    inbox: list[str] = Field(default_factory=list, description="prompts from the supervisor: act on them")


Progress = Callable[[float, float | None, str | None], None]
Created = Annotated[bool, Field(description="false: this idempotency_key was used before; its first result")]
IdempotencyKey = Annotated[
    str | None,
    Field(min_length=1, max_length=128, description="retry-safe: a repeat returns the first result"),
]


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
    keyed: bool = False  # an `idempotency_key` argument and a `created` result, handled by `_once`

    def __post_init__(self) -> None:
        if self.keyed and not (
            "idempotency_key" in self.input_model.model_fields and "created" in self.output_model.model_fields
        ):
            raise TypeError(f"{self.name}: a keyed tool needs an idempotency_key argument and a created result")

    @property
    def description(self) -> str:
        return inspect.cleandoc(self.run.__doc__ or self.title)


class RoleListedServer(MCPServer):
    """An MCP server whose `tools/list` holds only the tools the caller's role may call. A token's
    role never changes, so its list is fixed; a caller without an identity sees every tool (and
    is refused at the call)."""

    def __init__(
        self,
        *args: Any,
        local_identity: Identity | None = None,
        tool_roles: dict[str, frozenset[Role]] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self.local_identity = local_identity
        self.tool_roles: dict[str, frozenset[Role]] = dict(tool_roles or {})
        self._listed: dict[Role | None, list[ListedTool]] = {}

    async def list_tools(self) -> list[ListedTool]:
        role = _caller_role(self.local_identity)
        if role not in self._listed:  # built once per role: the tools are registered at start
            tools = await super().list_tools()
            self._listed[role] = [t for t in tools if role is None or role in self.tool_roles.get(t.name, ALL_ROLES)]
        return self._listed[role]


def _caller_role(local_identity: Identity | None) -> Role | None:
    token = get_access_token()
    if token is not None:
        return token.scopes[0]  # type: ignore[return-value]
    return local_identity.role if local_identity is not None else None


def resolve_identity(services: Services, local_identity: Identity | None) -> Identity:
    """The caller: the bearer token's agent over HTTP, or the one local agent over stdio."""
    token = get_access_token()
    if token is not None:
        return Identity(agent_id=token.client_id, role=token.scopes[0])  # type: ignore[arg-type]
    if local_identity is not None:
        return local_identity
    raise Forbidden(
        "authorization: got no identity; expected an `Authorization: Bearer <token>` header (amid token create)",
        field="authorization",
    )


def _signature(spec: ToolSpec) -> inspect.Signature:
    params = [inspect.Parameter("mcp_context", inspect.Parameter.KEYWORD_ONLY, annotation=Context)]
    for name, field in spec.input_model.model_fields.items():
        default = inspect.Parameter.empty if field.is_required() else field.get_default(call_default_factory=True)
        # Constraints travel as metadata; the default goes on the parameter (not both places).
        annotation = Annotated[(field.annotation, *field.metadata, Field(description=field.description))]  # type: ignore[name-defined]
        params.append(inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, annotation=annotation, default=default))
    return inspect.Signature(params, return_annotation=spec.output_model)


def _validate(spec: ToolSpec, arguments: dict[str, Any]) -> BaseModel:
    """Every check runs here (the SDK's own is bypassed, see `_RawArguments`): strict types, no
    unknown names, model validators; each refusal names the field and the fix."""
    return validate_arguments(spec.input_model, arguments)


class _RawArguments(ArgModelBase):
    """The SDK validates arguments against a model of the handler's signature before calling it,
    and answers a mismatch in pydantic's own words (naming its internal `…Arguments` model). This
    model accepts any arguments and hands them over unchanged; `_validate` then checks them with
    coded errors. The published inputSchema is the manifest's (`published_schema`)."""

    model_config = ConfigDict(extra="allow", arbitrary_types_allowed=True)

    def model_dump_one_level(self) -> dict[str, Any]:
        return {"raw_arguments": dict(self.__pydantic_extra__ or {})}


def _run_call(spec: ToolSpec, ctx: ToolContext, arguments: dict[str, Any], progress: Progress | None) -> ToolResult:
    started = time.monotonic()
    outcome = "ok"
    try:
        if ctx.caller.role not in spec.roles:
            allowed = ", ".join(sorted(spec.roles))
            raise Forbidden(
                f"role: got {ctx.caller.role!r} (agent {ctx.caller.agent_id!r}); expected {allowed} for {spec.name}",
                field="role",
            )
        request = _validate(spec, arguments)
        result = _once(spec, ctx, request, progress) if spec.keyed else _perform(spec, ctx, request, progress)
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
            deferred=True,  # one per call: written in batches, before anything reads the events
        )


def _perform(spec: ToolSpec, ctx: ToolContext, request: BaseModel, progress: Progress | None) -> ToolResult:
    return spec.run(ctx, request, progress) if spec.wants_progress else spec.run(ctx, request)


_KEY_LOCKS = tuple(threading.Lock() for _ in range(64))  # striped: one key's calls run one at a time


def receipt_for(spec_name: str, ctx: ToolContext, request: BaseModel) -> Receipt | None:
    """The receipt a keyed call records (None without a key); its digest covers every argument
    but the key, so a repeat with other content is told apart."""
    key = getattr(request, "idempotency_key", None)
    if key is None:
        return None
    content = request.model_dump_json(exclude={"idempotency_key"})
    return Receipt(ctx.caller.agent_id, spec_name, key, hashlib.sha256(content.encode()).hexdigest())


def _once(spec: ToolSpec, ctx: ToolContext, request: BaseModel, progress: Progress | None) -> ToolResult:
    """A keyed write: a repeated key returns the first result (created: false) if the arguments are
    the same, and is a Conflict naming the key if they differ. The key is recorded after the work,
    in the work's own transaction where the tool passes the receipt to the ledger (post_note)."""
    receipt = receipt_for(spec.name, ctx, request)
    if receipt is None:
        return _perform(spec, ctx, request, progress)
    with _KEY_LOCKS[hash((receipt.agent_id, receipt.tool, receipt.key)) % len(_KEY_LOCKS)]:
        known = ctx.ledger.idempotency.get(receipt.agent_id, receipt.tool, receipt.key)
        if known is not None:
            if known["request_digest"] != receipt.request_digest:
                raise Conflict(
                    f"idempotency_key: got {shown(receipt.key)}, used at {known['created_at']:%Y-%m-%d %H:%M:%S} "
                    f"for a {spec.name} call with other arguments; expected the same arguments (to get its result) "
                    "or a new key",
                    field="idempotency_key",
                )
            return spec.output_model.model_validate({**known["result"], "created": False})
        result = _perform(spec, ctx, request, progress)
        ctx.ledger.idempotency.record(receipt, result.model_dump(mode="json", exclude={"inbox", "created"}))
        return result


def _make_handler(entry: ToolEntry, services: Services, local_identity: Identity | None) -> Callable[..., Any]:
    async def handler(mcp_context: Context, raw_arguments: dict[str, Any]) -> CallToolResult:
        try:
            caller = resolve_identity(services, local_identity)
            ctx = ToolContext(services=services, caller=caller)
            progress = _progress_bridge(mcp_context) if entry.wants_progress else None
            return encode_result(await anyio.to_thread.run_sync(_run_entry, entry, ctx, raw_arguments, progress))
        except AmidError as exc:
            raise ToolError(cut(f"{exc.code}: {exc.message}", MESSAGE_CHARS)) from None
        except Exception as exc:  # a bug or an unforeseen input: coded, its traceback only in the server's log
            raise ToolError(internal_error(entry.name, exc)) from None

    handler.__name__ = entry.name
    return handler


def internal_error(tool: str, exc: Exception) -> str:
    """The tool error for an exception AMID did not raise on purpose: its class and a reference the
    server's log holds beside the traceback; never the exception's text (it may name server paths)."""
    ref = secrets.token_hex(4)
    log.error("tool %s failed (ref %s)", tool, ref, exc_info=exc)
    return (
        f"INTERNAL: {tool}: got a server failure ({type(exc).__name__}, ref {ref}); expected a result: "
        f"retry once, and if it fails again report ref {ref} to the run's owner (the traceback is in the server log)"
    )


def _run_entry(entry: ToolEntry, ctx: ToolContext, arguments: dict[str, Any], progress: Progress | None) -> ToolResult:
    """In a worker thread: the tool's module is imported here at its first call, not at start."""
    return _run_call(entry.spec(), ctx, arguments, progress)


def encode_result(result: ToolResult) -> CallToolResult:
    """The structured result, and the same JSON without indentation as its text: a client that
    hands the text to the model pays for every byte (the SDK's own text is indented)."""
    structured = result.model_dump(mode="json")
    text = pydantic_core.to_json(structured).decode()
    return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=structured)


def _progress_bridge(mcp_context: Context) -> Progress:
    def report(done: float, total: float | None = None, message: str | None = None) -> None:
        try:
            anyio.from_thread.run(mcp_context.report_progress, done, total, message)
        except Exception:
            return

    return report


def published_annotations(spec: ToolSpec) -> ToolAnnotations:
    """Hints at their protocol default are left out (idempotent: false), and so are the two that
    mean nothing for a read-only tool (destructive, idempotent)."""
    return ToolAnnotations(
        read_only_hint=spec.read_only,
        idempotent_hint=None if spec.read_only or not spec.idempotent else True,
        destructive_hint=None if spec.read_only else spec.destructive,
        open_world_hint=False,
    )


def published_schema(spec: ToolSpec) -> dict[str, Any]:
    """The inputSchema clients are shown: the SDK's derivation from the arguments (a signature of
    the input model's fields), made smaller. Computed by `amid.server.tool_manifest`, not at start."""

    async def signature_only(**kwargs: Any) -> None:
        raise NotImplementedError

    signature = _signature(spec)
    signature_only.__signature__ = signature  # type: ignore[attr-defined]
    signature_only.__annotations__ = {p.name: p.annotation for p in signature.parameters.values()}
    arguments = func_metadata(signature_only, skip_names=["mcp_context"], structured_output=False).arg_model
    schema = arguments.model_json_schema(by_alias=True)
    _close_objects(schema)
    # Titles that pydantic derives from field names repeat the names: every byte of tools/list
    # sits in each client's context.
    _compact(schema, ("title",))
    _drop_null_defaults(schema)
    return schema


def build_tool(entry: ToolEntry, services: Services, local_identity: Identity | None) -> SdkTool:
    """One listed tool as its manifest entry describes it, for the server's constructor (`tools=`).
    The SDK would derive the schema again from a signature (what `published_schema` did once), so the
    tool is built here from the manifest's schema.

    The handler builds its CallToolResult itself, structured content included. No output schema
    is published: it was 40 % of tools/list, in every client's context, and told no more than the
    result's own compact JSON; results stay pydantic-validated (built as the output model)."""
    return SdkTool(
        fn=_make_handler(entry, services, local_identity),
        name=entry.name,
        title=entry.title,
        description=entry.description,
        parameters=entry.input_schema,
        fn_metadata=FuncMetadata(arg_model=_RawArguments),
        is_async=True,
        context_kwarg="mcp_context",
        annotations=ToolAnnotations.model_validate(entry.annotations),
    )


def _close_objects(schema: dict[str, Any]) -> None:
    """`additionalProperties: false` on the arguments object and on every model in `$defs`: true of
    them, since `_validate` refuses unknown names at every depth (dict-typed fields keep theirs)."""
    schema["additionalProperties"] = False
    for sub in (schema.get("$defs") or {}).values():
        if isinstance(sub, dict) and "properties" in sub:
            sub.setdefault("additionalProperties", False)


def _drop_null_defaults(schema: dict[str, Any]) -> None:
    """`default: null` on an optional argument says only that it may be left out, which `required`
    says already."""
    for sub in [*(schema.get("properties") or {}).values(), *(schema.get("$defs") or {}).values()]:
        if isinstance(sub, dict):
            if "default" in sub and sub["default"] is None:
                sub.pop("default")
            _drop_null_defaults(sub)


def _merge_nullable(schema: dict[str, Any]) -> None:
    """`anyOf: [{type: T, …}, {type: null}]` says the same as `type: [T, null], …`, in fewer bytes
    (a constraint such as maxLength applies to T's values only; null has none to break)."""
    options = schema.get("anyOf")
    if not isinstance(options, list) or not all(isinstance(o, dict) for o in options):
        return
    if all(set(o) == {"type"} and isinstance(o["type"], str) for o in options):
        schema.pop("anyOf")
        schema["type"] = [o["type"] for o in options]
        return
    typed = [o for o in options if o != {"type": "null"}]
    if len(options) == 2 and len(typed) == 1 and isinstance(typed[0].get("type"), str):
        only = typed[0]
        if not set(only) & (set(schema) | {"$ref", "anyOf", "oneOf", "allOf", "properties", "items"}):
            schema.pop("anyOf")
            schema.update({**only, "type": [only["type"], "null"]})


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
