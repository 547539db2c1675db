"""Every closed vocabulary is pinned: widening one means editing vocab_baseline.json on purpose."""

from __future__ import annotations

import json
from enum import StrEnum
from pathlib import Path

import pytest

from assay.core import vocab

BASELINE_PATH = Path(__file__).with_name("vocab_baseline.json")


def _discovered() -> dict[str, type[StrEnum]]:
    """Every StrEnum subclass *defined* in assay.core.vocab (not merely imported there)."""
    return {
        name: obj
        for name, obj in vars(vocab).items()
        if isinstance(obj, type)
        and issubclass(obj, StrEnum)
        and obj is not StrEnum
        and obj.__module__ == vocab.__name__
    }


def _baseline() -> dict[str, list[str]]:
    data = json.loads(BASELINE_PATH.read_text(encoding="utf-8"))
    assert isinstance(data, dict)
    return data


def test_baseline_file_is_well_formed() -> None:
    data = _baseline()
    assert data, "the baseline is empty"
    for name, tokens in data.items():
        assert isinstance(tokens, list), name
        assert tokens, f"{name} has no tokens in the baseline"
        assert all(isinstance(t, str) for t in tokens), name
        assert len(set(tokens)) == len(tokens), f"{name} repeats a token in the baseline"


def test_the_set_of_vocabularies_equals_the_baseline() -> None:
    found = set(_discovered())
    pinned = set(_baseline())
    assert found - pinned == set(), "new vocabularies: add them to vocab_baseline.json on purpose"
    assert pinned - found == set(), "vocabularies removed from assay.core.vocab"


@pytest.mark.parametrize("name", sorted(_baseline()))
def test_each_vocabulary_has_exactly_its_baseline_tokens(name: str) -> None:
    cls = _discovered().get(name)
    assert cls is not None, f"{name} is pinned but not defined in assay.core.vocab"
    # Exact list: same tokens, same order, nothing added or removed.
    assert [member.value for member in cls] == _baseline()[name]
    # No aliases sneaking in a second name for a token.
    assert len(cls.__members__) == len(list(cls))


def _tokens(cls: type[StrEnum]) -> list[str]:
    return [member.value for member in cls]


@pytest.mark.parametrize(
    ("cls", "tokens"),
    [
        (vocab.Severity, ["pass", "warn", "block"]),
        (vocab.HaltSeverity, ["block", "warn", "log"]),
        (vocab.AttemptOutcome, ["passed", "warned", "blocked", "error"]),
        (
            vocab.StopReason,
            ["completed", "turn_budget", "context_budget", "provider_fault", "abandoned"],
        ),
        (vocab.FileChangeKind, ["created", "modified", "deleted"]),
        (vocab.TaskStatus, ["queued", "running", "done", "failed", "held"]),
        (vocab.HoldSource, ["manual", "machine"]),
        (vocab.HaltLifecycle, ["DECLARED", "ARMED", "CHECKED", "FIRED", "ATTESTED"]),
        (vocab.StageVerdict, ["advance", "loop_back", "escalate", "unvisited"]),
        (vocab.PolicyAction, ["proceed", "recover", "halt"]),
        (
            vocab.HaltType,
            [
                "none",
                "blocker",
                "escalate",
                "validator_error",
                "environment_error",
                "internal_error",
            ],
        ),
    ],
)
def test_design_md_tokens(cls: type[StrEnum], tokens: list[str]) -> None:
    """The tables of DESIGN.md "Closed vocabularies", checked independently of the baseline."""
    assert _tokens(cls) == tokens


def test_run_status_terminal_split_matches_design() -> None:
    non_terminal = ["prep", "implementing", "validating", "judging", "landing"]
    terminal = ["merged", "ready", "stalled", "blocked", "failed", "verified_noop"]
    assert _tokens(vocab.RunStatus) == non_terminal + terminal
    assert [s.value for s in vocab.RunStatus if s.terminal] == terminal
    assert [s.value for s in vocab.RunStatus if not s.terminal] == non_terminal
    assert {s.value for s in vocab.TERMINAL_RUN_STATUSES} == set(terminal)


def test_canonical_halts_are_the_seven_of_design_md() -> None:
    assert _tokens(vocab.CanonicalHalt) == [
        "halt-anchor-resolution-failure",
        "halt-scope-breach",
        "halt-secret-exposure",
        "halt-spec-contradiction",
        "halt-irreversible-action",
        "halt-budget-exhausted",
        "halt-verification-gap",
    ]


def test_tool_local_halt_names_of_seed_002() -> None:
    arm = set(_tokens(vocab.ArmHalt))
    check = set(_tokens(vocab.CheckHalt))
    assert {
        "halt-contract-yaml-malformed",
        "halt-halt-classes-missing",
        "halt-canonical-halt-incomplete",
        "halt-state-construction-failure",
        "halt-state-file-write-failure",
    } <= arm
    assert {
        "halt-check-state-file-missing",
        "halt-check-state-file-malformed",
        "halt-check-condition-not-found",
        "halt-check-state-construction-failure",
        "halt-check-sticky-rejection",
        "halt-check-transition-rejected",
        "halt-check-state-file-write-failure",
        "halt-check-fire-evidence-missing",
    } <= check
    # Tool-local halts never propagate into the canonical taxonomy.
    canonical = set(_tokens(vocab.CanonicalHalt))
    assert not (arm | check) & canonical


def test_tokens_are_plain_strings() -> None:
    assert vocab.HaltLifecycle.FIRED == "FIRED"
    assert str(vocab.HaltSeverity.BLOCK) == "block"
    assert json.dumps({"s": vocab.Severity.WARN}) == '{"s": "warn"}'
