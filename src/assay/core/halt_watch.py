"""What the engine has seen of a dispatch's halt state file, so the coder cannot erase a halt.

The state file lives where the coder can write it. The engine therefore never trusts it as its
only record: every firing it observes (in the file, or journaled in the ledger by
``assay halt check --fire``) is kept here and journaled, and a file that goes backwards —
missing or unreadable, another dispatch id, another set of halts, a severity changed, a halt
seen FIRED no longer FIRED, a history cut short, a journaled firing the file no longer shows —
is itself a block: :data:`TAMPERED`.

What this cannot catch: a coder that forges the file before the engine (or the halt command)
first sees a firing, by never firing through ``assay halt check`` and editing the file by hand.
Only a sandbox that makes the state folder unwritable to the coder closes that.

Pure: the caller reads the file and the ledger and passes what it found.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from assay.core.halts import HaltState
from assay.core.payload import HaltNotice
from assay.core.statefile import HaltStateFile
from assay.core.vocab import HaltLifecycle, HaltSeverity

TAMPERED = "halt-state-tampered"
TAMPERED_LEAD = "the halt state file was removed or tampered with while the coder ran"


def firings(state: HaltStateFile) -> list[HaltNotice]:
    """Every firing the file records: halts FIRED (or fired, then attested) and the firings a
    re-arm cleared, which its history keeps."""
    found: list[HaltNotice] = []
    for halt in state.halts:
        for rearm in halt.history:
            if rearm.cleared is HaltLifecycle.FIRED or rearm.cleared_fired_at:
                found.append(_notice(halt, rearm.cleared_evidence, rearm.cleared_fired_at))
        if halt.lifecycle is HaltLifecycle.FIRED or halt.has_fired:
            found.append(_notice(halt, halt.evidence, halt.fired_at))
    return found


def _notice(halt: HaltState, evidence: object, fired_at: str | None) -> HaltNotice:
    detail = evidence.get("detail", "") if isinstance(evidence, dict) else ""
    return HaltNotice(name=halt.name, severity=halt.severity, detail=str(detail), fired_at=fired_at)


def _key(notice: HaltNotice) -> tuple[str, str | None]:
    return notice.name, notice.fired_at


@dataclass
class HaltWatch:
    """The engine's own record of one dispatch's halts, built from every read of its file."""

    dispatch_id: str
    severities: dict[str, HaltSeverity] | None = None  # the halts armed, at the first read
    fired_seen: dict[str, str | None] = field(default_factory=dict)  # name -> fired_at seen
    history_seen: dict[str, int] = field(default_factory=dict)
    known: dict[tuple[str, str | None], HaltNotice] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)

    def observe(
        self,
        state: HaltStateFile | None,
        problem: str | None = None,
        journaled: Sequence[HaltNotice] = (),
    ) -> list[HaltNotice]:
        """Take one read of the file (``state``, or None and the ``problem`` reading it) and
        the firings the ledger journaled; return the firings not seen before (to journal)."""
        new = self._learn(journaled)
        if state is None:
            self._tampered(problem or "it cannot be read")
            return new
        if state.dispatch_id != self.dispatch_id:
            self._tampered(f"its dispatch id changed to {state.dispatch_id!r}")
        now = {h.name: h for h in state.halts}
        if self.severities is None:
            self.severities = {h.name: h.severity for h in state.halts}
        else:
            self._compare(now)
        in_file = firings(state)
        shown = {n.name for n in in_file}
        for notice in self.known.values():
            if notice.name not in shown:
                self._tampered(f"{notice.name} fired, and the file no longer says so")
        new += self._learn(in_file)
        for halt in state.halts:
            if halt.lifecycle is HaltLifecycle.FIRED:
                self.fired_seen[halt.name] = halt.fired_at
            self.history_seen[halt.name] = max(
                self.history_seen.get(halt.name, 0), len(halt.history)
            )
        return new

    def _compare(self, now: dict[str, HaltState]) -> None:
        assert self.severities is not None
        if set(now) != set(self.severities):
            added = sorted(set(now) - set(self.severities))
            removed = sorted(set(self.severities) - set(now))
            change = "; ".join(
                part
                for part in (
                    added and f"added {', '.join(added)}",
                    removed and f"removed {', '.join(removed)}",
                )
                if part
            )
            self._tampered(f"its set of halts changed ({change})")
        for name, severity in self.severities.items():
            halt = now.get(name)
            if halt is not None and halt.severity is not severity:
                self._tampered(f"{name}'s severity changed from {severity} to {halt.severity}")
        for name, fired_at in self.fired_seen.items():
            halt = now.get(name)
            if halt is None:
                continue
            onward = halt.lifecycle in (HaltLifecycle.FIRED, HaltLifecycle.ATTESTED)
            if not onward or halt.fired_at != fired_at:
                self._tampered(f"{name} was FIRED and is now {halt.lifecycle}")
        for name, length in self.history_seen.items():
            halt = now.get(name)
            if halt is not None and len(halt.history) < length:
                self._tampered(f"{name}'s history was cut")

    def _learn(self, notices: Iterable[HaltNotice]) -> list[HaltNotice]:
        new = []
        for notice in notices:
            if _key(notice) not in self.known:
                self.known[_key(notice)] = notice
                new.append(notice)
        return new

    def _tampered(self, why: str) -> None:
        if why not in self.problems:
            self.problems.append(why)

    @property
    def tampered(self) -> bool:
        return bool(self.problems)

    def fired(self) -> list[HaltNotice]:
        """Every firing seen so far, and the tampering as a block halt of its own."""
        notices = list(self.known.values())
        if self.problems:
            notices.append(
                HaltNotice(
                    name=TAMPERED,
                    severity=HaltSeverity.BLOCK,
                    detail=f"{TAMPERED_LEAD}: {'; '.join(self.problems)}",
                )
            )
        return notices
