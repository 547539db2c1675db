"""Blind judging: labels from a seeded shuffle, each judge's own order, and redacted diffs.

A judge must rank candidates on their code alone. So seats become labels ``A``, ``B``, ``C``…
assigned by a shuffle seeded by the run id (sha256, no random state: the same run id gives the
same labels on every machine), each judge sees the candidates in an order of its own, and what
would reveal the coder is removed from the diff it reads:

- branch names ``assay/<run>/<seat>`` and seat paths ``.assay/seats/<run>/<seat>`` (and the
  ``.assay/worktrees/…`` of older versions);
- any exact string the caller names (the run id, dispatch id, model names);
- commit metadata around the diff (``git show`` / ``format-patch`` headers and messages);
- attribution trailers (``Co-authored-by:``, ``Signed-off-by:``…) the change adds;
- comments (and prose lines in text files) the change adds that credit a tool: ``Generated
  with Claude Code``, ``🤖 …``, ``# written by codex``, ``// aider: …``;
- whole files that are a tool's own state (``.aider*``, ``.claude/``, ``.codex/``, trajectories).

Code is never rewritten: an added line is dropped only when it is a trailer, a comment, or prose,
and hunk headers are recounted so the diff stays well formed.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field

from assay.core.changes import ChangeSet, TypeChange
from assay.core.tally import is_usable

__all__ = [
    "BlindCandidate",
    "blind_candidates",
    "blind_labels",
    "is_tool_artefact",
    "judge_order",
    "label_for",
    "needs_deliberation",
    "redact",
]

BRANCH_MARK = "<branch>"
WORKTREE_MARK = "<worktree>"
IDENTITY_MARK = "<redacted>"
MIN_IDENTITY_CHARS = 3  # shorter strings would erase ordinary code


class BlindCandidate(BaseModel):
    """One candidate as a judge sees it: a label, a redacted diff, the paths it changes."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    label: str = Field(min_length=1)
    diff: str
    files: list[str] = Field(default_factory=list)
    type_changes: list[TypeChange] = Field(
        default_factory=list, description="what a unified diff shows only as delete and add"
    )


def label_for(index: int) -> str:
    """``0 -> A``, ``25 -> Z``, ``26 -> AA``: spreadsheet-style, so any count has labels."""
    if index < 0:
        raise ValueError(f"a label index is at least 0, got {index}")
    text = ""
    index += 1
    while index:
        index, rest = divmod(index - 1, 26)
        text = chr(ord("A") + rest) + text
    return text


def _key(*parts: object) -> str:
    return hashlib.sha256("\x00".join(str(p) for p in parts).encode()).hexdigest()


def blind_labels(seats: Sequence[int], seed: str) -> dict[int, str]:
    """Seat -> label, from a shuffle seeded by ``seed`` (the run id). A bijection onto A, B…"""
    if len(set(seats)) != len(seats):
        raise ValueError(f"seats must be distinct, got {list(seats)}")
    shuffled = sorted(seats, key=lambda seat: (_key("labels", seed, seat), seat))
    return {seat: label_for(place) for place, seat in enumerate(shuffled)}


def judge_order(labels: Sequence[str], seed: str, judge_index: int) -> list[str]:
    """The order in which judge ``judge_index`` (from 0) sees ``labels``: its own permutation."""
    return sorted(labels, key=lambda label: (_key("order", seed, judge_index, label), label))


def needs_deliberation(rankings: Sequence[Sequence[str] | None], candidates: Sequence[str]) -> bool:
    """True when at least two usable rankings disagree on the first choice (a split panel)."""
    firsts = {r[0] for r in rankings if r is not None and is_usable(r, candidates)}
    return len(firsts) > 1


def blind_candidates(
    changes: Mapping[int, ChangeSet],
    seed: str,
    *,
    secrets_of_identity: Sequence[str] = (),
) -> list[BlindCandidate]:
    """The viable seats' changes as blind candidates, sorted by label."""
    labels = blind_labels(list(changes), seed)
    found = [
        BlindCandidate(
            label=labels[seat],
            diff=redact(change.diff, secrets_of_identity=secrets_of_identity),
            files=[p for p in change.paths if not is_tool_artefact(p)],
            type_changes=[
                c.model_copy(update={"path": _scrub(c.path, secrets_of_identity)})
                for c in change.type_changes()
                if not is_tool_artefact(c.path)
            ],
        )
        for seat, change in changes.items()
    ]
    return sorted(found, key=lambda c: (len(c.label), c.label))


# --- redaction -------------------------------------------------------------------------------

_WORKTREE = re.compile(r"\.assay/(?:seats|worktrees)/[^\s/\"']+(?:/[^\s/\"']+)?")
_BRANCH = re.compile(r"\bassay/[A-Za-z0-9._-]+/(?:seat-?)?\d+\b")
_TRAILER = re.compile(
    r"^(?:co-authored-by|signed-off-by|generated-by|assisted-by|authored-by|made-with)\s*:",
    re.IGNORECASE,
)
_TOOLS = (
    r"claude(?:[ -]code)?|anthropic|codex|openai|chatgpt|gpt-?\d[\w.-]*|aider"
    r"|mini-swe-agent|swe-agent|copilot|an? (?:ai|llm)(?: assistant| agent| model)?"
)
_CREDIT = re.compile(
    r"\b(?:generated|written|created|authored|co-authored|produced|assisted|drafted|made"
    r"|implemented|edited|modified|refactored|added|updated|fixed)\s+"
    r"(?:by|with|using|via|through)\s+\[?(?:" + _TOOLS + r")\b",
    re.IGNORECASE,
)
_SPEAKER = re.compile(r"^\[?(?:claude|codex|aider)\]?\s*[:>-]", re.IGNORECASE)
_ROBOT = "\N{ROBOT FACE}"
_COMMENT = re.compile(r"^(?:#+|//+|/\*+|\*+|<!--|--|;+|%+|\"\"\"|''')\s*")
_PROSE_SUFFIXES = (".md", ".markdown", ".rst", ".txt", ".adoc", ".org")
_ARTEFACT_DIRS = frozenset({".claude", ".codex", ".mini-swe-agent"})
_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@(.*)$", re.DOTALL)
_GIT_PATH = re.compile(r"^diff --git \"?a/(.+?)\"? \"?b/(.+?)\"?$")


def is_tool_artefact(path: str) -> bool:
    """A file that is a coding tool's own state (chat history, caches, settings, trajectory)."""
    parts = [p for p in path.strip().strip('"').split("/") if p]
    if not parts:
        return False
    if any(p in _ARTEFACT_DIRS or p.startswith(".aider") for p in parts):
        return True
    return parts[-1].endswith(".traj.json")


def redact(diff_text: str, *, secrets_of_identity: Sequence[str] = ()) -> str:
    """``diff_text`` with everything that would reveal its coder removed (see the module).

    Text that holds no diff at all is filtered line by line as prose.
    """
    parser = _Parser(diff_text.splitlines(keepends=True))
    kept = parser.run()
    if not parser.sections:
        kept = [ln for ln in parser.lines if not _attribution(_strip_eol(ln), prose=True)]
    return _scrub("".join(kept), secrets_of_identity)


def _scrub(text: str, identities: Sequence[str]) -> str:
    text = _WORKTREE.sub(WORKTREE_MARK, text)
    text = _BRANCH.sub(BRANCH_MARK, text)
    usable = sorted({s for s in identities if len(s.strip()) >= MIN_IDENTITY_CHARS}, key=len)
    for identity in reversed(usable):
        text = re.sub(re.escape(identity), IDENTITY_MARK, text, flags=re.IGNORECASE)
    return text


def _strip_eol(line: str) -> str:
    return line.rstrip("\r\n")


def _attribution(content: str, *, prose: bool) -> bool:
    """True when an added line only credits or identifies a tool (never for code)."""
    text = content.strip()
    if not text:
        return False
    marker = _COMMENT.match(text)
    body = text[marker.end() :] if marker else text
    if _TRAILER.match(body):
        return True
    if not (marker or prose):
        return False
    return _ROBOT in body or bool(_CREDIT.search(body)) or bool(_SPEAKER.match(body))


@dataclass
class _Parser:
    """Walks a diff file section by file section; lines outside every section are dropped
    (commit headers and messages, patch signatures)."""

    lines: list[str]
    sections: int = 0
    i: int = 0

    def run(self) -> list[str]:
        out: list[str] = []
        while self.i < len(self.lines):
            if self._git_start() or self._plain_start():
                self.sections += 1
                out.extend(self._section())
            else:
                self.i += 1
        return out

    def _at(self, offset: int = 0) -> str:
        j = self.i + offset
        return self.lines[j] if j < len(self.lines) else ""

    def _git_start(self) -> bool:
        return self._at().startswith("diff --git ")

    def _plain_start(self) -> bool:
        return (
            self._at().startswith("--- ")
            and self._at(1).startswith("+++ ")
            and self._at(2).startswith("@@")
        )

    def _section(self) -> list[str]:
        header = [self._at()]
        self.i += 1
        if header[0].startswith("--- "):
            header.append(self._at())
            self.i += 1
        else:
            while self.i < len(self.lines) and self._at().startswith(_GIT_HEADERS):
                header.append(self._at())
                self.i += 1
        paths = _paths(header)
        prose = any(p.lower().endswith(_PROSE_SUFFIXES) for p in paths)
        body: list[str] = []
        shift = 0
        while (match := _HUNK.match(_strip_eol(self._at()))) is not None:
            original = self._at()
            hunk, removed = self._hunk(match, prose)
            body.append(_header(original, match, shift, removed))
            body.extend(hunk)
            shift += removed
        if any(is_tool_artefact(p) for p in paths):
            return []
        return header + body

    def _hunk(self, match: re.Match[str], prose: bool) -> tuple[list[str], int]:
        old = int(match.group(2)) if match.group(2) is not None else 1
        new = int(match.group(4)) if match.group(4) is not None else 1
        kept: list[str] = []
        removed = 0
        self.i += 1
        while self.i < len(self.lines) and (old > 0 or new > 0 or self._at().startswith("\\")):
            line = self._at()
            tag = line[:1]
            if tag == "+":
                new -= 1
                if _attribution(_strip_eol(line[1:]), prose=prose):
                    removed += 1
                    self.i += 1
                    continue
            elif tag == "-":
                old -= 1
            elif tag in (" ", "\n", "\r"):
                old, new = old - 1, new - 1
            elif tag != "\\":
                break  # a miscounted hunk: stop at the first line that cannot be part of it
            kept.append(line)
            self.i += 1
        return kept, removed


_GIT_HEADERS = (
    "index ",
    "--- ",
    "+++ ",
    "old mode ",
    "new mode ",
    "deleted file mode ",
    "new file mode ",
    "similarity index ",
    "dissimilarity index ",
    "rename from ",
    "rename to ",
    "copy from ",
    "copy to ",
    "Binary files ",
)


def _paths(header: Sequence[str]) -> list[str]:
    found: list[str] = []
    for line in header:
        text = _strip_eol(line)
        git = _GIT_PATH.match(text)
        if git:
            found += [git.group(1), git.group(2)]
            continue
        for prefix in ("--- a/", "+++ b/", "--- ", "+++ ", "rename from ", "rename to "):
            if text.startswith(prefix):
                found.append(text[len(prefix) :].split("\t")[0].strip('"'))
                break
    return [p for p in found if p != "/dev/null"]


def _header(original: str, match: re.Match[str], shift: int, removed: int) -> str:
    """The hunk header with the new side recounted after added lines were dropped."""
    if not shift and not removed:
        return original
    start = int(match.group(3)) - shift
    count = (int(match.group(4)) if match.group(4) is not None else 1) - removed
    old = match.group(1) + (f",{match.group(2)}" if match.group(2) is not None else "")
    eol = original[len(_strip_eol(original)) :]
    return f"@@ -{old} +{max(start, 0)},{count} @@{match.group(5)}{eol}"
