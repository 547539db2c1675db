"""A coder is warned about only what the user wrote, whatever way its contract travelled: the
ledger's stored document, a full dump an older assay stored, Temporal's data converter."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from assay.adapters.coders import get_coder, ignored_settings
from assay.adapters.store.contracts import contract_document
from assay.core.contract import CoderSpec, Contract, contract_template, parse_contract

WRITTEN = """task: fix it
coder:
  kind: replay
  steps:
    - {script: "true"}
validators:
  - {id: tests, kind: command, run: "true"}
"""


def _stored(contract: Contract) -> Contract:
    """Queued today: only what was set is stored; a worker validates it again."""
    return Contract.model_validate(contract_document(contract))


def _full_dump(contract: Contract) -> Contract:
    """Queued by an older assay: every field, defaults included, in the stored document."""
    return Contract.model_validate(contract.model_dump(mode="json"))


def _temporal(contract: Contract) -> Contract:
    """Sent to a Temporal worker in a run's plan: the pydantic data converter dumps every
    field, and the worker validates the lot again."""
    converter = pytest.importorskip("temporalio.contrib.pydantic").pydantic_data_converter
    payloads = converter.payload_converter.to_payloads([contract])
    (back,) = converter.payload_converter.from_payloads(payloads, [Contract])
    assert isinstance(back, Contract)
    return back


TRIPS: dict[str, Callable[[Contract], Contract]] = {
    "as parsed": lambda c: c,
    "stored in the ledger": _stored,
    "an older assay's full dump": _full_dump,
    "through temporal": _temporal,
}


def _ignored(contract: Contract) -> list[str]:
    spec = contract.coder_for_seat(1)
    return ignored_settings(spec, get_coder(spec.kind.value))


@pytest.mark.parametrize("trip", sorted(TRIPS))
def test_defaults_the_user_never_wrote_are_never_ignored_settings(trip: str) -> None:
    travelled = TRIPS[trip](parse_contract(WRITTEN))
    spec = travelled.coder_for_seat(1)
    if trip in {"an older assay's full dump", "through temporal"}:  # the case being fixed
        assert "model" in spec.model_fields_set and "prompt_via" in spec.model_fields_set
    assert _ignored(travelled) == []


@pytest.mark.parametrize("trip", sorted(TRIPS))
def test_a_setting_the_user_wrote_is_still_named_after_any_trip(trip: str) -> None:
    written = WRITTEN.replace("  kind: replay\n", "  kind: replay\n  model: gpt-5\n  args: [-v]\n")
    assert _ignored(TRIPS[trip](parse_contract(written))) == ["args", "model"]


def test_a_default_written_out_changes_nothing_and_is_not_named() -> None:
    # `prompt_via: file` is what the replay coder would get anyway: there is nothing to ignore.
    spec = CoderSpec(kind="replay", steps=[{"script": "true"}], prompt_via="file", model=None)
    assert {"prompt_via", "model"} <= spec.model_fields_set
    assert ignored_settings(spec, get_coder("replay")) == []
    changed: dict[str, Any] = {"prompt_via": "stdin"}
    assert ignored_settings(spec.model_copy(update=changed), get_coder("replay")) == ["prompt_via"]


def _from_template(kind_lines: str) -> Contract:
    """The template as `assay contract init` writes it, its coder kind changed by the user."""
    text = contract_template().replace("  kind: claude\n", kind_lines, 1)
    if kind_lines == "  kind: llm\n":  # the llm coder needs a model
        text = text.replace("  model: null ", "  model: m    ", 1)
    return parse_contract(text)


KIND_LINES = {
    "command": '  kind: command\n  command: "sh ./fix.sh"\n',
    "replay": '  kind: replay\n  steps: [{script: "true"}]\n',
    "codex": "  kind: codex\n",
    "aider": "  kind: aider\n",
    "mini": "  kind: mini\n",
    "claude": "  kind: claude\n",
    "llm": "  kind: llm\n",
}


@pytest.mark.parametrize("trip", sorted(TRIPS))
@pytest.mark.parametrize("kind", sorted(KIND_LINES))
def test_what_the_template_wrote_is_never_an_ignored_setting(kind: str, trip: str) -> None:
    # `max_turns: 40`, `timeout_seconds: 1800`, `model: null` as the template wrote them: the
    # user changed only the kind, so nothing of theirs is ignored
    contract = TRIPS[trip](_from_template(KIND_LINES[kind]))
    assert contract.coder_for_seat(1).max_turns == 40
    assert _ignored(contract) == []


@pytest.mark.parametrize("trip", sorted(TRIPS))
def test_a_template_value_the_user_changed_is_named(trip: str) -> None:
    lines = KIND_LINES["command"]
    contract = parse_contract(
        contract_template()
        .replace("  kind: claude\n", lines, 1)
        .replace("max_turns: 40 ", "max_turns: 12 ", 1)
        .replace("model: null ", "model: gpt-5 ", 1)
    )
    assert _ignored(TRIPS[trip](contract)) == ["max_turns", "model"]
