"""Anchors: the paths, symbols and lines a task names, checked before any coder starts.

Forms: ``path``, ``path::symbol`` (the symbol must appear as a whole word in the file) and
``path:LINE`` (the file must have that many lines). Resolution is pure: the caller supplies
a function that returns a file's text at the base commit, or None when it does not exist.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable

from pydantic import BaseModel, ConfigDict

_LINE = re.compile(r"^(?P<path>.+):(?P<line>\d+)$")


class Anchor(BaseModel):
    model_config = ConfigDict(frozen=True)

    text: str
    path: str
    symbol: str | None = None
    line: int | None = None


def parse_anchor(text: str) -> Anchor:
    if "::" in text:
        path, symbol = text.split("::", 1)
        return Anchor(text=text, path=path.strip(), symbol=symbol.strip() or None)
    match = _LINE.match(text)
    if match:
        return Anchor(text=text, path=match["path"], line=int(match["line"]))
    return Anchor(text=text, path=text.strip())


def unresolved_anchors(anchors: Iterable[str], read_file: Callable[[str], str | None]) -> list[str]:
    """Every anchor that does not resolve, each with the reason, in contract order."""
    problems: list[str] = []
    for text in anchors:
        anchor = parse_anchor(text)
        content = read_file(anchor.path)
        if content is None:
            problems.append(f"{text} (no such file)")
        elif anchor.symbol and not re.search(rf"\b{re.escape(anchor.symbol)}\b", content):
            problems.append(f"{text} (symbol not found in {anchor.path})")
        elif anchor.line is not None and not 1 <= anchor.line <= len(content.splitlines()):
            problems.append(f"{text} (the file has {len(content.splitlines())} lines)")
    return problems
