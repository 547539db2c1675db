"""The exact text of a credential detect-secrets found, so it can be redacted where it was kept.

detect-secrets reports what its regex captured, which is not always the whole credential: the
GitHub detector captures only the ``ghp`` prefix, the Artifactory one the quote before the key,
the private-key detector only the ``BEGIN ... PRIVATE KEY`` header. Redacting that would leave
the credential in the logs, so each value is completed from the line it was found on, within
the detector's own match, and a private key's whole body is taken, line by line (a log may hold
it with its newlines escaped, as a JSON event stream does).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

PRIVATE_KEY_TYPE = "Private Key"
_TOKEN_CHAR = re.compile(r"[A-Za-z0-9_\-]")
_EDGE = " \t\"'`=:,;"
KEY_END = re.compile(r"-----END [A-Z0-9 ]*PRIVATE KEY[A-Z ]*-----|---- END SSH2")
# A key line, bare or inside a string literal (`"MIIE...\n" +`, `+ 'MIIE...'`, `("MIIE...",`).
_KEY_LINE = re.compile(
    r"""[\s"'`(]*(?:\+[\s"'`(]+)?([A-Za-z0-9+/=]{8,})[\s"'`,;)\\]*(?:\+[\s"'`,;)\\]*)?"""
)
_HEADER_FIELD = re.compile(r"\s*[A-Za-z][A-Za-z0-9-]*: ")  # Proc-Type:, DEK-Info:, Public-Lines:
MAX_KEY_LINES = 200


def completed_values(line: str, captured: str, patterns: Iterable[re.Pattern[str]]) -> set[str]:
    """The whole credential(s) in ``line`` that a detector reported as ``captured``."""
    found: set[str] = set()
    for pattern in patterns:
        for match in pattern.finditer(line):
            for group in range(pattern.groups + 1):
                if match.group(group) != captured:
                    continue
                start, end = match.span(group)
                if group:  # a capture inside the match: grow it to the token it belongs to
                    low, high = match.span(0)
                    while start > low and _TOKEN_CHAR.match(line[start - 1]):
                        start -= 1
                    while end < high and _TOKEN_CHAR.match(line[end]):
                        end += 1
                found.add(line[start:end].strip(_EDGE))
    if not found:
        found.add(captured.strip(_EDGE))
    return {v for v in found if v}


def key_material(line: str) -> str | None:
    """The base64 text of ``line`` when the line is one of a private key's body (bare, or inside
    a string literal), else None."""
    material = _KEY_LINE.fullmatch(line)
    if material is None or material.group(1).isalpha():
        return None
    return material.group(1)


def inside_key(line: str) -> bool:
    """Whether ``line`` may sit between a private key's header and its body's end: key
    material, a header field (``Proc-Type:``), a blank line or a literal's quotes alone."""
    if not line.strip(" \t\"'`,;()+\\") or _HEADER_FIELD.match(line):
        return True
    return _KEY_LINE.fullmatch(line) is not None and not KEY_END.search(line)


def private_key_body(lines: Sequence[str], at: int) -> set[str]:
    """The base64 lines of the private key whose header is on ``lines[at]``.

    The key ends at its END line, or at the first line that is not key material (header
    fields such as ``Proc-Type:``, blank lines and a source file's quotes and commas around
    each line are passed over): a coder that prints the first lines of a key file, then other
    things, hands over only the lines of the key, so whether the key is new is judged by them.
    """
    text = []
    for line in lines[at : at + MAX_KEY_LINES]:
        text.append(line)
        if KEY_END.search(line.replace("\\n", "\n")):
            break
    block = "\n".join(text).replace("\\r", "\n").replace("\\n", "\n").replace("\r", "\n")
    begin = max(block.find("PRIVATE KEY"), 0)  # PuTTY's header does not say it
    segments = block[begin:].split("\n")[1:]
    found: set[str] = set()
    for segment in segments:
        if KEY_END.search(segment):
            break
        if not segment.strip(" \t\"'`,;()+\\") or _HEADER_FIELD.match(segment):
            continue  # a blank line, a literal's quotes alone, a header field
        material = _KEY_LINE.fullmatch(segment)
        if material is None:
            break
        if not material.group(1).isalpha():
            found.add(material.group(1))
    return found
