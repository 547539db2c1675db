"""The brief: every rule of the contract reaches the text, and every command in it works."""

from __future__ import annotations

import re
import shlex
import subprocess

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from assay.cli.halt import _parser as halt_parser
from assay.core.brief import (
    HALT_WHEN,
    NO_CHANGE_MARK,
    REPORT_EXAMPLE,
    REPORT_FIELDS,
    brief_document,
    fire_command,
    query_command,
    render_brief,
)
from assay.core.contract import Contract, HaltClass, Scope, canonical_halt_classes
from assay.core.halt_skill import SKILL_NAME, render_halt_skill
from assay.core.report import CoderReport, parse_coder_report
from assay.core.vocab import CanonicalHalt, CoderKind, HaltSeverity
from assay.engine.graph.records import NO_CHANGE_MARK as ENGINE_MARK

SHELL_KINDS = [k for k in CoderKind if k is not CoderKind.LLM]
FIRE_LINE = re.compile(r"^    (assay halt check .* --fire --evidence .*)$", re.MULTILINE)

task_text = st.text(
    alphabet=st.characters(blacklist_categories=("Cs", "Cc")), min_size=1, max_size=80
).filter(str.strip)
halt_name = st.from_regex(r"halt-[a-z][a-z0-9-]{0,20}", fullmatch=True).filter(
    lambda n: n not in {h.value for h in CanonicalHalt}
)
own_halts = st.lists(
    st.tuples(halt_name, st.sampled_from(list(HaltSeverity))), max_size=3, unique_by=lambda h: h[0]
)
patterns = st.lists(st.sampled_from(["src/**", "docs/*.md", "tests/**", ".github/**"]), max_size=3)


def contract_of(
    task: str, extra: list[tuple[str, HaltSeverity]], allow: list[str], protect: list[str]
) -> Contract:
    halts = canonical_halt_classes() + [HaltClass(name=n, severity=s) for n, s in extra]
    return Contract(
        task=task,
        scope=Scope(allow=allow or ["**"], protect=protect),
        halt_classes=halts,
    )


@settings(max_examples=60, deadline=None)
@given(task_text, own_halts, patterns, patterns, st.sampled_from(list(CoderKind)))
def test_every_rule_of_the_contract_is_in_the_brief(
    task: str,
    extra: list[tuple[str, HaltSeverity]],
    allow: list[str],
    protect: list[str],
    kind: CoderKind,
) -> None:
    contract = contract_of(task, extra, allow, protect)
    text = render_brief(contract, kind)
    assert task.strip() in text
    for pattern in contract.scope.allow + contract.scope.protect:
        assert f"`{pattern}`" in text
    for halt in contract.halt_classes:
        assert f"- `{halt.name}` ({halt.severity.value}" in text
        # Shell kinds get the exact command; the llm coder its fire_halt tool.
        assert (fire_command(halt.name) in text) is (kind is not CoderKind.LLM)
    assert NO_CHANGE_MARK in text
    assert ("$ASSAY_REPORT_PATH" in text) is (kind is not CoderKind.LLM)
    assert render_brief(contract, kind) == text  # pure: the same contract, the same brief


@settings(max_examples=30, deadline=None)
@given(own_halts, st.sampled_from(SHELL_KINDS))
def test_each_fire_line_is_a_real_halt_check_invocation(
    extra: list[tuple[str, HaltSeverity]], kind: CoderKind
) -> None:
    contract = contract_of("t", extra, [], [])
    lines = FIRE_LINE.findall(render_brief(contract, kind))
    assert len(lines) == len(contract.halt_classes)
    for line, halt in zip(lines, contract.halt_classes, strict=True):
        argv = shlex.split(line.replace("$ASSAY_DISPATCH_ID", "r20260101-000000-abcdef"))
        assert argv[:3] == ["assay", "halt", "check"]
        args = halt_parser()[0].parse_args(argv[2:])  # the flags assay halt really takes
        assert (args.command, args.condition, args.fire) == ("check", halt.name, True)
        assert args.dispatch_id == "r20260101-000000-abcdef"
        assert args.evidence and args.evidence.strip()


def test_the_query_form_is_a_real_invocation_that_does_not_fire() -> None:
    argv = shlex.split(query_command("halt-scope-breach").replace("$ASSAY_DISPATCH_ID", "d-1"))
    args = halt_parser()[0].parse_args(argv[2:])
    assert (args.command, args.condition, args.fire, args.evidence) == (
        "check",
        "halt-scope-breach",
        False,
        None,
    )


@settings(max_examples=25, deadline=None)
@given(st.text(alphabet=st.characters(blacklist_categories=("Cs", "Cc")), max_size=40))
def test_evidence_survives_the_shell_verbatim(evidence: str) -> None:
    """Whatever the evidence holds ($, backquotes, quotes, backslashes), sh passes it as is."""
    command = fire_command("halt-spec-contradiction", evidence).replace(
        "assay halt check", "printf %s", 1
    )
    command = command.replace('--dispatch-id "$ASSAY_DISPATCH_ID" ', "").replace(
        "--condition halt-spec-contradiction --fire --evidence ", ""
    )
    out = subprocess.run(["/bin/sh", "-c", command], capture_output=True, check=True)
    assert out.stdout.decode() == evidence


def test_every_canonical_halt_has_one_sentence_on_when_to_fire_it() -> None:
    assert set(HALT_WHEN) == set(CanonicalHalt)
    for sentence in HALT_WHEN.values():
        # One sentence; the template adds the full stop after "fire it when …".
        assert sentence.strip() and ". " not in sentence and not sentence.endswith(".")


def test_the_report_section_names_exactly_the_fields_of_seed_001() -> None:
    assert list(REPORT_FIELDS) == list(CoderReport.model_fields)
    text = render_brief(Contract(task="t"), CoderKind.CLAUDE)
    for name in CoderReport.model_fields:
        assert f"- `{name}`: " in text
    example = parse_coder_report(REPORT_EXAMPLE)
    assert example is not None and example.summary


def test_the_example_in_the_text_is_the_example_report_and_parses() -> None:
    text = render_brief(Contract(task="t"), CoderKind.COMMAND)
    line = next(x for x in text.splitlines() if x.startswith('    {"files"'))
    assert parse_coder_report(line.strip()) == parse_coder_report(REPORT_EXAMPLE)


def test_the_no_op_mark_is_the_one_the_engine_accepts() -> None:
    assert NO_CHANGE_MARK == ENGINE_MARK
    for kind in CoderKind:
        text = render_brief(Contract(task="t"), kind)
        example = next(x.strip() for x in text.splitlines() if x.startswith(f"    {ENGINE_MARK}"))
        # The engine's rule: the summary starts with the mark and evidence follows it.
        assert example.startswith(ENGINE_MARK) and len(example) > len(ENGINE_MARK) + 10


@pytest.mark.parametrize(
    ("kind", "how"),
    [
        (CoderKind.CLAUDE, "with your Bash tool"),
        (CoderKind.CODEX, "with your shell tool"),
        (CoderKind.AIDER, "```bash block"),
        (CoderKind.MINI, "as your bash action"),
        (CoderKind.COMMAND, "in a shell"),
        (CoderKind.LLM, "the `fire_halt` tool"),
    ],
)
def test_one_template_with_small_differences_per_kind(kind: CoderKind, how: str) -> None:
    text = render_brief(Contract(task="t"), kind)
    assert how in text
    others = [k for k in CoderKind if k is not kind and k is not CoderKind.REPLAY]
    assert all(how not in render_brief(Contract(task="t"), k) for k in others)
    # The same sections, in the same order, for every kind.
    headings = [x for x in text.splitlines() if x.startswith("#")]
    assert headings == [
        "# The rules of this task (assay)",
        "## The task",
        "## Scope",
        "## Halts",
        "## Report",
        "## When nothing needs to change",
    ]


def test_final_answer_fallback_is_promised_only_to_kinds_that_have_one() -> None:
    for kind in CoderKind:
        doc = brief_document(Contract(task="t"), kind)
        expected = kind in (CoderKind.CLAUDE, CoderKind.CODEX, CoderKind.AIDER, CoderKind.MINI)
        assert doc["report"]["final_answer_is_summary"] is expected


def test_validator_commands_are_listed() -> None:
    contract = Contract.model_validate(
        {
            "task": "t",
            "validators": [{"id": "tests", "run": "pytest -q"}, {"id": "s", "kind": "secrets"}],
        }
    )
    text = render_brief(contract, "claude")
    assert "- tests: `pytest -q`" in text and "- s:" not in text
    assert "## How your work is checked" not in render_brief(Contract(task="t"), "claude")


def test_the_halt_skill_has_the_front_matter_claude_code_expects() -> None:
    text = render_halt_skill([("halt-db-migration", "warn")])
    assert text.startswith("---\n")
    front, body = text[4:].split("\n---\n", 1)
    meta = yaml.safe_load(front)
    assert set(meta) == {"name", "description"}
    assert meta["name"] == SKILL_NAME and re.fullmatch(r"[a-z0-9-]+", SKILL_NAME)
    assert 0 < len(meta["description"]) <= 1024
    assert query_command("halt-spec-contradiction") in body
    assert "- `halt-db-migration` (warn)" in body
    for word in ("ARMED", "CHECKED", "FIRED", "ATTESTED", "halt-check-sticky-rejection"):
        assert word in body


def test_the_brief_forbids_replacing_a_symlink_unless_type_changes_are_allowed() -> None:
    rule = "Never replace a symlink by a regular file or a folder"
    assert rule in render_brief(Contract(task="t"), CoderKind.COMMAND)
    allowing = Contract.model_validate({"task": "t", "scope": {"allow_type_changes": True}})
    assert rule not in render_brief(allowing, CoderKind.COMMAND)
    assert brief_document(allowing, CoderKind.COMMAND)["scope"]["allow_type_changes"] is True


def test_a_warn_only_validator_is_briefed_as_one_that_only_warns() -> None:
    contract = Contract(
        task="t",
        validators=[
            {"id": "tests", "kind": "command", "run": "pytest -q"},
            {"id": "lint", "kind": "command", "run": "ruff check .", "on_fail": "warn"},
        ],
    )
    doc = brief_document(contract, CoderKind.CLAUDE)
    assert doc["validators"] == {"tests": "pytest -q"}
    assert doc["advisory"] == {"lint": "ruff check ."}
    text = render_brief(contract, CoderKind.CLAUDE)
    decide, warn = text.index("These commands decide"), text.index("These only warn")
    assert decide < text.index("- tests: `pytest -q`") < warn < text.index("- lint: `ruff check .`")
    only_lint = Contract(
        task="t", validators=[{"id": "lint", "run": "ruff check .", "on_fail": "warn"}]
    )
    assert "These commands decide" not in render_brief(only_lint, CoderKind.CLAUDE)
