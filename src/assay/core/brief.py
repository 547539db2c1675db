"""The brief: the rules of a dispatch, told to the agent that codes it.

An agent that is never told the scope, the halts, the report file or the no-op protocol can
only follow them by luck. The brief is one template, rendered from the contract for each coder
kind: the differences are only in *how* that kind acts (a shell tool, a bash action, a tool of
assay's own loop), never in the rules. Pure: the contract in, text (or a JSON document) out.

Every command it shows is one that works verbatim inside the dispatch: ``assay`` is on the
coder's PATH and ``ASSAY_DISPATCH_ID``, ``ASSAY_HALT_STATE_DIR`` and ``ASSAY_REPORT_PATH`` are
set in its environment (see ``assay.adapters.coders.base.assay_env``).
"""

from __future__ import annotations

import json
from typing import Any

from assay.core.contract import Contract
from assay.core.vocab import (
    CanonicalHalt,
    CoderKind,
    FileChangeKind,
    HaltSeverity,
    OnFail,
    StopReason,
    ValidatorKind,
)

__all__ = [
    "HALT_WHEN",
    "NO_CHANGE_MARK",
    "REPORT_FIELDS",
    "brief_document",
    "fire_command",
    "query_command",
    "render_brief",
]

NO_CHANGE_MARK = "NO CHANGE NEEDED:"
"""The prefix of a verified no-op's summary (``assay.engine.graph.empty_wave`` checks the same)."""

EVIDENCE_PLACEHOLDER = "<evidence: what you found, with file and line>"

HALT_WHEN: dict[CanonicalHalt, str] = {
    CanonicalHalt.ANCHOR_RESOLUTION_FAILURE: (
        "a file, symbol or line the task names does not exist, or is not what the task says"
    ),
    CanonicalHalt.SCOPE_BREACH: (
        "the task can only be done by changing a file outside the allowed scope or inside a "
        "protected path"
    ),
    CanonicalHalt.SECRET_EXPOSURE: (
        "you found a secret (a key, token or password) that the change, a log or your answer "
        "would expose"
    ),
    CanonicalHalt.SPEC_CONTRADICTION: (
        "the task contradicts itself, the code or the tests, so doing it would mean guessing "
        "what was meant"
    ),
    CanonicalHalt.IRREVERSIBLE_ACTION: (
        "the task needs an action that cannot be undone (deleting data, pushing, publishing, "
        "migrating a live system, sending a message)"
    ),
    CanonicalHalt.BUDGET_EXHAUSTED: (
        "you will run out of turns, time or context before the task is done"
    ),
    CanonicalHalt.VERIFICATION_GAP: (
        "you cannot check your change: no test covers it, or the tests cannot run here"
    ),
}
"""One sentence per canonical halt: when the agent should fire it."""

_CANONICAL_NAMES = frozenset(h.value for h in CanonicalHalt)

OWN_HALT_WHEN = "what its name says happens"

REPORT_FIELDS: dict[str, str] = {
    "files": (
        'the files you changed, each {"path": "relative/path", "kind": '
        + " | ".join(f'"{k.value}"' for k in FileChangeKind)
        + "}"
    ),
    "summary": "what you did and why, in a few sentences (or the no-op claim, below)",
    "turns_used": "how many turns you used",
    "turns_available": "how many turns you had",
    "tokens_used": "tokens used, if you know",
    "context_window": "your context window in tokens, if you know",
    "wall_time_ms": "how long you worked, in milliseconds",
    "cost_usd": "what the run cost in US dollars, if you know",
    "stop_reason": "why you stopped: " + " | ".join(f'"{r.value}"' for r in StopReason),
}
"""Every field of seed 001's coder report (``CoderReport``), with what to put in it."""

REPORT_EXAMPLE: dict[str, Any] = {
    "files": [{"path": "src/slug.py", "kind": "modified"}],
    "summary": "slugify() dropped digits; it now keeps alphanumeric words.",
    "turns_used": 6,
    "stop_reason": "completed",
}

# How each kind of coder runs a shell command, and where its summary comes from when it writes
# no report file. ``llm`` has no shell: assay's own loop gives it tools instead.
_SHELL_HOW: dict[CoderKind, str] = {
    CoderKind.CLAUDE: "Run each command below with your Bash tool, exactly as shown.",
    CoderKind.CODEX: "Run each command below with your shell tool, exactly as shown.",
    CoderKind.AIDER: (
        "You cannot run a shell command yourself here: aider runs none of the commands a reply "
        "suggests. To fire a halt, copy its command below, put your evidence in place of the "
        "placeholder, and write the command alone in a ```bash block of your reply. assay runs "
        "that one command for you after you finish; it runs no other command you suggest, and "
        "you will not see what it prints."
    ),
    CoderKind.MINI: "Run each command below as your bash action, exactly as shown.",
    CoderKind.COMMAND: "Run each command below in a shell, exactly as shown.",
    CoderKind.REPLAY: "Run each command below in a shell, exactly as shown.",
}
_FINAL_ANSWER: dict[CoderKind, str] = {
    CoderKind.CLAUDE: "your final answer",
    CoderKind.CODEX: "your final message",
    CoderKind.AIDER: "your last reply",
    CoderKind.MINI: "your final output",
}


def fire_command(name: str, evidence: str = EVIDENCE_PLACEHOLDER) -> str:
    """The shell command that fires halt ``name`` with ``evidence``."""
    quoted = evidence.replace("\\", "\\\\").replace('"', '\\"').replace("$", "\\$")
    quoted = quoted.replace("`", "\\`")
    return (
        f'assay halt check --dispatch-id "$ASSAY_DISPATCH_ID" --condition {name} '
        f'--fire --evidence "{quoted}"'
    )


def query_command(name: str) -> str:
    """The shell command that queries halt ``name`` (ARMED -> CHECKED; changes nothing else)."""
    return f'assay halt check --dispatch-id "$ASSAY_DISPATCH_ID" --condition {name}'


def _kind(kind: CoderKind | str) -> CoderKind:
    return kind if isinstance(kind, CoderKind) else CoderKind(kind)


def brief_document(contract: Contract, kind: CoderKind | str) -> dict[str, Any]:
    """The brief as data: every rule the text states, for ``assay brief --json``."""
    coder = _kind(kind)
    shell = coder is not CoderKind.LLM
    halts = []
    for halt in contract.halt_classes:
        canonical = halt.name in _CANONICAL_NAMES
        entry: dict[str, Any] = {
            "name": halt.name,
            "severity": halt.severity.value,
            "canonical": canonical,
            "when": HALT_WHEN[CanonicalHalt(halt.name)] if canonical else OWN_HALT_WHEN,
        }
        if shell:
            entry["fire"] = fire_command(halt.name)
            if coder is not CoderKind.AIDER:  # aider runs no command: assay fires for it
                entry["query"] = query_command(halt.name)
        else:
            entry["fire"] = {"tool": "fire_halt", "arguments": {"name": halt.name}}
        halts.append(entry)
    return {
        "kind": coder.value,
        "task": contract.task,
        "scope": {
            "allow": list(contract.scope.allow),
            "protect": list(contract.scope.protect),
            "allow_type_changes": contract.scope.allow_type_changes,
        },
        "validators": {
            v.id: v.run
            for v in contract.validators
            if v.run and v.kind is ValidatorKind.COMMAND and v.on_fail is OnFail.BLOCK
        },
        "advisory": {
            v.id: v.run
            for v in contract.validators
            if v.run and v.kind is ValidatorKind.COMMAND and v.on_fail is OnFail.WARN
        },
        "halts": halts,
        "report": {
            "path_variable": "ASSAY_REPORT_PATH",
            "written_by": "assay" if not shell else "you",
            "fields": dict(REPORT_FIELDS),
            "example": dict(REPORT_EXAMPLE),
            "final_answer_is_summary": coder in _FINAL_ANSWER,
        },
        "no_change": {
            "mark": NO_CHANGE_MARK,
            "rule": (
                f"change no file; the summary starts with {NO_CHANGE_MARK!r} followed by the "
                "evidence; the validators must pass on the unchanged tree"
            ),
        },
    }


def render_brief(contract: Contract, kind: CoderKind | str) -> str:
    """The brief as the agent reads it (Markdown), for coder ``kind``."""
    doc = brief_document(contract, kind)
    coder = _kind(kind)
    parts = [
        _intro(),
        _task(doc),
        _scope(doc),
        _validators(doc),
        _halts(doc, coder),
        _report(doc, coder),
        _no_change(coder),
    ]
    return "\n\n".join(part for part in parts if part) + "\n"


def _intro() -> str:
    return (
        "# The rules of this task (assay)\n\n"
        "You work unattended for assay, alone in a git repository of your own. assay reads what "
        "you changed from the files themselves, never from what you say, and independent "
        "validators decide whether it lands. You need not commit: the working tree is what "
        "counts. When a rule below applies, follow it exactly."
    )


def _task(doc: dict[str, Any]) -> str:
    return f"## The task\n\n{doc['task'].strip()}"


def _scope(doc: dict[str, Any]) -> str:
    allow = ", ".join(f"`{p}`" for p in doc["scope"]["allow"]) or "(nothing)"
    lines = ["## Scope", "", f"You may change only files matching: {allow}."]
    if doc["scope"]["protect"]:
        protect = ", ".join(f"`{p}`" for p in doc["scope"]["protect"])
        lines.append(f"Never change files matching: {protect}.")
    lines.append(
        "Write nothing outside this repository (but the report file below) and nothing "
        "inside its `.git`, and add no symlink that points outside it. A change outside the "
        "scope blocks your work; when the task cannot be done inside it, fire "
        "`halt-scope-breach` instead."
    )
    if not doc["scope"]["allow_type_changes"]:
        lines.append(
            "Never replace a symlink by a regular file or a folder: edit its target instead "
            "(`sed -i` writes a copy in the link's place unless given `--follow-symlinks`)."
        )
    return "\n".join(lines)


def _validators(doc: dict[str, Any]) -> str:
    commands: dict[str, str] = doc["validators"]
    advisory: dict[str, str] = doc["advisory"]
    if not commands and not advisory:
        return ""
    lines = ["## How your work is checked", ""]
    if commands:
        lines.append("These commands decide, after you stop:")
        lines += [f"- {vid}: `{command}`" for vid, command in sorted(commands.items())]
    if advisory:
        if commands:
            lines.append("")
        lines.append("These only warn (on_fail: warn); they never stop your change:")
        lines += [f"- {vid}: `{command}`" for vid, command in sorted(advisory.items())]
    return "\n".join(lines)


def _halts(doc: dict[str, Any], coder: CoderKind) -> str:
    lines = [
        "## Halts",
        "",
        "A halt stops the task for a human. When one of the conditions below holds, do not "
        "guess and do not work around it: fire that halt with your evidence, then stop. A "
        f"`{HaltSeverity.BLOCK.value}` halt holds the task; a `{HaltSeverity.WARN.value}` or "
        f"`{HaltSeverity.LOG.value}` halt is recorded and the work goes on.",
        "",
    ]
    if coder is CoderKind.LLM:
        lines.append(
            "Fire a halt with the `fire_halt` tool: `name` is the halt's name, `evidence` says "
            "what you found, with file and line. Then call `finish`."
        )
    elif coder is CoderKind.AIDER:  # see assay.adapters.coders.aider_halts
        lines.append(_SHELL_HOW[coder])
    else:
        lines += [
            _SHELL_HOW[coder] + " `assay` is on your PATH and `$ASSAY_DISPATCH_ID` is set; "
            "replace the evidence text with what you found. The command prints JSON and exits 1 "
            "when a block halt fired: that is the expected answer, not an error.",
            "",
            "To see a halt's state without firing it:",
            "",
            f"    {query_command('NAME')}",
        ]
    for halt in doc["halts"]:
        own = "" if halt["canonical"] else ", this contract's own"
        lines += ["", f"- `{halt['name']}` ({halt['severity']}{own}): fire it when {halt['when']}."]
        if coder is not CoderKind.LLM:
            lines += ["", f"    {halt['fire']}"]
    return "\n".join(lines)


def _report(doc: dict[str, Any], coder: CoderKind) -> str:
    if coder is CoderKind.LLM:
        return (
            "## Report\n\nassay writes your report from its own loop: the files you wrote, your "
            "turns, and the summary you give to `finish`. Give `finish` a summary of what you "
            "changed and why."
        )
    fields = "\n".join(f"- `{name}`: {what}" for name, what in doc["report"]["fields"].items())
    example = json.dumps(doc["report"]["example"])
    fallback = (
        f"If you write no report file, {_FINAL_ANSWER[coder]} becomes its `summary`."
        if coder in _FINAL_ANSWER
        else "Nothing else you print becomes your report: only this file does."
    )
    return (
        "## Report\n\n"
        "Before you stop, write a JSON object to the file named by `$ASSAY_REPORT_PATH` (outside "
        "the repository; it is set in your environment). Every field is optional; leave out "
        "what you do not know, and add no other key (a report with an unknown key is "
        f"discarded). {fallback} The report is your account, kept as evidence: it never makes "
        "your work pass.\n\n"
        f"{fields}\n\nFor example:\n\n    {example}"
    )


def _no_change(coder: CoderKind) -> str:
    if coder is CoderKind.LLM:
        where = "call `finish` with a summary that starts"
    elif coder in _FINAL_ANSWER:
        where = f"make the report's `summary` (or {_FINAL_ANSWER[coder]}) start"
    else:
        where = "make the report's `summary` start"
    return (
        "## When nothing needs to change\n\n"
        "If the task is already done in the code as it is, change no file and "
        f"{where} with `{NO_CHANGE_MARK}` followed by your evidence, for example:\n\n"
        f"    {NO_CHANGE_MARK} test_digits already passes at HEAD; slugify keeps digits "
        "(src/slug.py line 3)\n\n"
        "assay accepts the claim only when the tree is unchanged, the summary starts with "
        f"`{NO_CHANGE_MARK}` and evidence follows it, and the validators pass on the unchanged "
        "tree; a human then confirms it. Without the mark, an unchanged tree is a failed "
        "attempt."
    )
