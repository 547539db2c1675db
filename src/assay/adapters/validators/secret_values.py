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
_KEY_END = re.compile(r"-----END [A-Z0-9 ]*PRIVATE KEY[A-Z ]*-----|---- END SSH2")
_KEY_BODY = re.compile(r"[A-Za-z0-9+/=]{8,}")
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


def private_key_body(lines: Sequence[str], at: int) -> set[str]:
    """The base64 lines of the private key whose header is on ``lines[at]``."""
    text = []
    for line in lines[at : at + MAX_KEY_LINES]:
        text.append(line)
        if _KEY_END.search(line.replace("\\n", "\n")):
            break
    block = "\n".join(text).replace("\\r", "\n").replace("\\n", "\n")
    begin = max(block.find("PRIVATE KEY"), 0)  # PuTTY's header does not say it
    end = _KEY_END.search(block, begin + 1)
    body = block[begin : end.start() if end else len(block)].split("\n", 1)
    if len(body) < 2:
        return set()
    return {token for token in _KEY_BODY.findall(body[1]) if not token.isalpha()}
