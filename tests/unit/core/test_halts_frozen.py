"""The halt records (assay.core.frozen): immutable, compared by value, copied by replace().

They stand in for frozen dataclasses on the ``assay halt check`` path, so they must behave
like them wherever the code relies on it.
"""

from __future__ import annotations

import copy
import pickle

import pytest

from assay.adapters.actor import Actor
from assay.core.frozen import replace
from assay.core.halts import HaltRearm, HaltState, Rejection, Transitioned, Violation
from assay.core.statefile import HaltStateFile
from assay.core.vocab import ActorVia, CheckHalt, HaltLifecycle, HaltSeverity

AT = "2026-01-01T00:00:00.000000Z"


def halt(**changes: object) -> HaltState:
    base = HaltState(
        name="h", severity=HaltSeverity.BLOCK, lifecycle=HaltLifecycle.ARMED, armed_at=AT
    )
    return replace(base, **changes)


def test_defaults_are_those_of_the_state_file() -> None:
    state = halt()
    assert (state.evidence, state.fired_at, state.attested_at, state.history, state.extra) == (
        None,
        None,
        None,
        (),
        (),
    )
    assert Violation("c", "d").severity is HaltSeverity.BLOCK


def test_equality_is_by_value_and_by_type() -> None:
    assert halt() == halt()
    assert halt() != halt(lifecycle=HaltLifecycle.CHECKED)
    assert halt(evidence={"detail": "x"}) == halt(evidence={"detail": "x"})
    assert Rejection(CheckHalt.STICKY_REJECTION, "d") != Violation(
        CheckHalt.STICKY_REJECTION.value, "d"
    )
    assert halt() != ("h",)
    assert Actor("ana@host", ActorVia.CLI) == Actor(by="ana@host", via=ActorVia.CLI)


def test_records_hash_by_value_when_their_fields_do() -> None:
    assert hash(Violation("c", "d")) == hash(Violation("c", "d"))
    assert len({Actor("a", ActorVia.CLI), Actor("a", ActorVia.CLI), Actor("a", ActorVia.WEB)}) == 2
    with pytest.raises(TypeError):  # a dict field, as with a frozen dataclass
        hash(halt(evidence={"detail": "x"}))


def test_fields_cannot_be_assigned_or_deleted_or_added() -> None:
    state = halt()
    with pytest.raises(AttributeError, match="frozen"):
        state.name = "other"  # type: ignore[misc]
    with pytest.raises(AttributeError, match="frozen"):
        del state.name  # type: ignore[misc]
    with pytest.raises(AttributeError):
        state.surprise = 1  # type: ignore[attr-defined]
    assert state.name == "h"


def test_replace_copies_with_changes_and_leaves_the_original() -> None:
    before = halt()
    after = replace(before, lifecycle=HaltLifecycle.FIRED, fired_at=AT)
    assert (after.lifecycle, after.fired_at, after.name) == (HaltLifecycle.FIRED, AT, "h")
    assert (before.lifecycle, before.fired_at) == (HaltLifecycle.ARMED, None)
    with pytest.raises(TypeError, match="no field"):
        replace(before, lifecyle=HaltLifecycle.FIRED)


def test_repr_names_every_field() -> None:
    text = repr(Violation("halt-x", "why", HaltSeverity.WARN))
    assert text.startswith("Violation(")
    for part in ("halt_class='halt-x'", "detail='why'", "severity="):
        assert part in text


def test_a_subclass_init_that_forgets_a_field_is_caught() -> None:
    from assay.core.frozen import Frozen

    class Broken(Frozen):
        __slots__ = ("a", "b")

        def __init__(self, a: int) -> None:
            super().__init__(a=a)

    with pytest.raises(TypeError, match="fields are"):
        Broken(1)


@pytest.mark.parametrize(
    "record",
    [
        halt(history=(HaltRearm(cleared=HaltLifecycle.FIRED, rearmed_at=AT, evidence={"d": 1}),)),
        Transitioned(halt(), HaltLifecycle.ARMED, True),
        HaltStateFile(
            dispatch_id="d",
            contract_path="/c",
            armed_at=AT,
            halts=(halt(),),
            canonical_halt_count=1,
            per_dispatch_addition_count=0,
        ),
        Actor("ana@host", ActorVia.WEB),
    ],
)
def test_copy_deepcopy_and_pickle_give_equal_records(record: object) -> None:
    assert copy.copy(record) == record
    assert copy.deepcopy(record) == record
    assert pickle.loads(pickle.dumps(record)) == record
