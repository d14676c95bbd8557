"""Tool arguments checked against a tool's input model, every refusal one coded error.

The rules, the same at every depth (nested objects, list items, dict values):

- Unknown names are refused, naming them and the accepted ones (a misspelt optional argument
  would otherwise be silently ignored).
- Types are strict, as JSON has them: a boolean is `true`/`false` (never "yes", 1 or "true"), an
  integer is a JSON integer (never "1", 1.0 or true), a string is never a number. A JSON integer
  is accepted where a number is expected (1 for 1.0: JSON does not tell them apart reliably).
  Object keys that stand for integers (fold → …) are strings, as JSON writes them.
- One client quirk is kept from the MCP SDK: a top-level list or object argument sent as a JSON
  string (`"[1, 2]"`) is parsed first.

A refusal reads `<field path>: got <value, cut to ~200 characters>; expected <what>`, with the
path as the caller wrote it (`artifacts.predictions.0`, `command.2`), never pydantic's words or its
internal model names.
"""

from __future__ import annotations

import json
import types
import typing
from typing import Any

from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from amid.server.errors import InvalidInput, cut, shown

EXPECTED = {
    "missing": "a value: this argument is required",
    "bool_type": "true or false (a JSON boolean, not a string or number)",
    "int_type": "an integer (a JSON number without a fraction, not a string)",
    "int_from_float": "an integer (a JSON number without a fraction)",
    "int_parsing": "an integer",
    "float_type": "a number (not a string)",
    "float_parsing": "a number",
    "string_type": "a string",
    "list_type": "a list",
    "tuple_type": "a list",
    "set_type": "a list",
    "dict_type": "an object",
    "model_type": "an object",
    "model_attributes_type": "an object",
    "dataclass_type": "an object",
    "none_required": "null",
    "json_invalid": "valid JSON",
}
CUSTOM = frozenset({"value_error", "assertion_error"})  # the tool's own sentence: shown as written


def validate_arguments(model: type[BaseModel], arguments: dict[str, Any]) -> BaseModel:
    """The validated request, or InvalidInput naming the first problem (and how many more)."""
    arguments = _pre_parsed(model, arguments)
    try:
        return model.model_validate_json(json.dumps(arguments), strict=True, extra="forbid")
    except ValidationError as exc:
        raise refusal(model, arguments, exc.errors(include_url=False)) from None
    except ValueError as exc:  # a number JSON cannot write back (an integer past 4300 digits, …)
        raise InvalidInput(f"arguments: got values JSON cannot hold ({shown(str(exc))})", field="arguments") from None


def refusal(model: type[BaseModel], arguments: Any, errors: list[ErrorDetails]) -> InvalidInput:
    """One message for a failed validation: unknown names first (grouped by where they were
    sent), then the other problems, the first in full and the rest by path."""
    unknown: dict[tuple[str, ...], list[str]] = {}
    problems: dict[tuple[str, ...], list[ErrorDetails]] = {}
    for error in errors:
        parts = _path(error, arguments)
        if error["type"] == "extra_forbidden" and parts:
            unknown.setdefault(parts[:-1], []).append(parts[-1])
        else:
            problems.setdefault(parts, []).append(error)
    messages = [_unknown(model, parent, names) for parent, names in unknown.items()]
    messages += [_describe(_dotted(parts), found) for parts, found in problems.items()]
    fields = [_dotted(parent) for parent in unknown] + [_dotted(parts) for parts in problems]
    message = messages[0]
    if len(messages) > 1:
        message += f" (and {len(messages) - 1} more: {cut(', '.join(fields[1:]))})"
    return InvalidInput(message, field=fields[0])


def _dotted(parts: tuple[str, ...]) -> str:
    return ".".join(parts) or "arguments"


def _describe(where: str, errors: list[ErrorDetails]) -> str:
    custom = [e for e in errors if e["type"] in CUSTOM]
    if custom:
        return f"{where}: {custom[0]['msg'].removeprefix('Value error, ').removeprefix('Assertion failed, ')}"
    expected = " or ".join(dict.fromkeys(_expected(e) for e in errors))
    received = "nothing" if errors[0]["type"] == "missing" else shown(errors[0]["input"])
    as_key = " (as an object key)" if any("[key]" in e["loc"] for e in errors) else ""
    return f"{where}: got {received}{as_key}; expected {expected}"


def _unknown(model: type[BaseModel], parent: tuple[str, ...], names: list[str]) -> str:
    accepted = _fields_at(model, list(parent))
    listed = ", ".join(accepted) if accepted else "the names in the tool's input schema"
    noun = "an unknown name" if len(names) == 1 else "unknown names"
    return f"{_dotted(parent)}: got {noun} {cut(', '.join(map(repr, names)))}; expected only {listed}"


SIZED = {
    "string_too_short": "a string of at least {min_length} characters",
    "string_too_long": "a string of at most {max_length} characters",
    "too_short": "at least {min_length} item(s)",
    "too_long": "at most {max_length} item(s)",
}


def _expected(error: ErrorDetails) -> str:
    if error["type"] in EXPECTED:
        return EXPECTED[error["type"]]
    if error["type"] in SIZED and "ctx" in error:
        return SIZED[error["type"]].format(**error["ctx"])
    return error["msg"].removeprefix("Input should be ").removeprefix("Value error, ")


def _path(error: ErrorDetails, arguments: Any) -> tuple[str, ...]:
    """The error's location as the caller wrote it: parts that are not keys or indices of the sent
    data (pydantic's union and validator tags) are dropped; a missing name is kept."""
    parts: list[str] = []
    node = arguments
    for index, part in enumerate(error["loc"]):
        if isinstance(node, dict) and str(part) in node:
            parts.append(str(part))
            node = node[str(part)]
        elif isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node):
            parts.append(str(part))
            node = node[part]
        elif error["type"] == "missing" and index == len(error["loc"]) - 1:
            parts.append(str(part))
    return tuple(parts)


def _fields_at(model: type[BaseModel], parts: list[str]) -> list[str] | None:
    """The field names accepted at a path of the model (None where no model stands there)."""
    node: Any = model
    for part in parts:
        node = _step(node, part)
        if node is None:
            return None
    found = _model_in(node)
    return list(found.model_fields) if found else None


def _step(annotation: Any, part: str) -> Any:
    found = _model_in(annotation)
    if found is not None:
        field = found.model_fields.get(part)
        return field.annotation if field else None
    for option in _options(annotation):
        origin, args = typing.get_origin(option), typing.get_args(option)
        if origin in (list, set, tuple) and args:
            return args[0]
        if origin is dict and len(args) == 2:
            return args[1]
    return None


def _options(annotation: Any) -> list[Any]:
    """The alternatives of a union (Optional included), each with Annotated metadata removed."""
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _options(typing.get_args(annotation)[0])
    if origin in (typing.Union, types.UnionType):
        return [o for arg in typing.get_args(annotation) for o in _options(arg)]
    return [annotation]


def _model_in(annotation: Any) -> type[BaseModel] | None:
    for option in _options(annotation):
        if isinstance(option, type) and issubclass(option, BaseModel):
            return option
    return None


def _pre_parsed(model: type[BaseModel], arguments: dict[str, Any]) -> dict[str, Any]:
    """Top-level list/object arguments sent as JSON text, parsed (as the MCP SDK does for them)."""
    parsed = dict(arguments)
    for name, value in arguments.items():
        field = model.model_fields.get(name)
        if field is None or not isinstance(value, str) or not _is_container(field.annotation):
            continue
        try:
            candidate = json.loads(value)
        except (ValueError, RecursionError):
            continue
        if isinstance(candidate, list | dict):
            parsed[name] = candidate
    return parsed


def _is_container(annotation: Any) -> bool:
    """A field that takes a list or an object and never a string."""
    options = [o for o in _options(annotation) if o is not type(None)]
    containers = [o for o in options if typing.get_origin(o) in (list, dict, set, tuple) or _model_in(o)]
    return bool(options) and len(containers) == len(options)
