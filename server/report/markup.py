"""Building HTML and SVG safely: every text and attribute value is escaped unless it is `Markup`.

Ledger text is written by agents (note titles, lane titles, messages), so nothing read from the
ledger may reach the page unescaped. `el` escapes every plain string it is given; only what `el`
itself built (a `Markup`) passes through as it is.
"""

from __future__ import annotations

import html
import math
from collections.abc import Iterable


class Markup(str):
    """A string of markup this module built; `el` inserts it without escaping."""


Child = str | int | float | None


def text(value: Child) -> Markup:
    """One child as markup: Markup unchanged, numbers formatted, anything else escaped."""
    if value is None:
        return Markup("")
    if isinstance(value, Markup):
        return value
    if isinstance(value, float):
        return Markup(html.escape(fmt(value)))
    return Markup(html.escape(str(value)))


def fmt(value: float | int | None, digits: int = 4) -> str:
    """A number for people: 4 significant digits, '-' for missing or NaN."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if isinstance(value, int):
        return str(value)
    return f"{value:.{digits}g}"


def _attrs(attrs: dict[str, Child]) -> str:
    parts = []
    for name, value in attrs.items():
        if value is None:
            continue
        key = name.rstrip("_").replace("_", "-")  # class_ -> class, data_n -> data-n
        shown = f"{value:.6g}" if isinstance(value, float) else str(value)
        parts.append(f' {key}="{html.escape(shown, quote=True)}"')
    return "".join(parts)


def el(tag: str, *children: Child | Iterable[Child], **attrs: Child) -> Markup:
    """`<tag attrs>children</tag>`; children may be nested iterables of strings and numbers."""
    return Markup(f"<{tag}{_attrs(attrs)}>{join(children)}</{tag}>")


def void(tag: str, **attrs: Child) -> Markup:
    """An element without children (`<circle .../>`, `<meta ...>`)."""
    return Markup(f"<{tag}{_attrs(attrs)}/>")


def join(children: Iterable[Child | Iterable[Child]]) -> Markup:
    parts: list[str] = []
    for child in children:
        if isinstance(child, str | int | float) or child is None:
            parts.append(text(child))
        else:
            parts.append(join(child))
    return Markup("".join(parts))
