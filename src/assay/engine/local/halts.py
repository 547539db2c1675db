"""The local executor's halts: the watch over the run's state file and the journal, and the
relays the coders' ``assay halt check`` acts through (:mod:`assay.engine.local.halt_relay`): one per
seat dispatch, each bound read-only into that seat's sandbox only. All live on the worker that
holds the run's seats."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from pathlib import Path

from pydantic import JsonValue

from assay.adapters.store import halt_files, halt_ops
from assay.adapters.store.halt_journal import event_data
from assay.core.halt_watch import HaltWatch
from assay.core.payload import HaltNotice
from assay.core.statefile import HaltStateFile
from assay.core.vocab import CanonicalHalt, EventKind
from assay.engine.local.halt_relay import HaltRelay
from assay.engine.values import RunEvent, RunPlan


class HaltKeeper:
    """The firings of one run: seen in its state file, its journal and its relays."""

    def __init__(
        self,
        state_dir: Path,
        *,
        lock: threading.RLock,
        record: Callable[[RunEvent], None],
        journaled: Callable[[], Sequence[HaltNotice]],
        warn: Callable[[str], None],
    ) -> None:
        """``state_dir``: the halt state files' folder; ``lock``: the run's (events come from
        the graph's thread, the seats' and the relays'); ``record``: journal an event;
        ``journaled``: the firings the run's journal holds; ``warn``: a run warning."""
        self.state_dir = state_dir
        self._lock = lock
        self._record = record
        self._journaled = journaled
        self._warn = warn
        self.halt_watch: HaltWatch | None = None
        self.relays: dict[tuple[int, int], HaltRelay] = {}  # (attempt, seat) -> its relay
        self.relayed: list[HaltNotice] = []  # firings the halt command made through a relay
        self._relay_journaled: set[tuple[str, str | None]] = set()

    def armed(self, plan: RunPlan) -> None:
        """The state file is armed: watch it from here on."""
        self.halt_watch = HaltWatch(plan.dispatch_id)
        self.watch(plan)  # the armed file: what comes after

    def open_relay(self, plan: RunPlan, attempt: int, seat: int) -> HaltRelay | None:
        """The relay of the seat's dispatch in ``attempt``, listening (the seat's relay of an
        earlier attempt is closed: its dispatch is over); None when it cannot listen (a run
        warning: that coder's halt commands then reach no state file, and fail)."""
        with self._lock:
            earlier = [key for key in self.relays if key[1] == seat and key != (attempt, seat)]
        for key in earlier:
            self.close_relay(*key)
        if (attempt, seat) in self.relays:
            return self.relays[(attempt, seat)]
        relay = HaltRelay(
            dispatch_id=plan.dispatch_id,
            state_dir=self.state_dir,
            armed=(self.halt_watch.severities if self.halt_watch else None) or {},
            record=self._relayed_firing,
        )
        try:
            relay.start()
        except OSError as exc:
            self._warn(f"the halt relay of seat {seat} could not listen: {exc}")
            return None
        with self._lock:
            self.relays[(attempt, seat)] = relay
        return relay

    def close_relay(self, attempt: int, seat: int) -> None:
        """The seat's dispatch of ``attempt`` is over: stop its relay, remove its folder."""
        with self._lock:
            relay = self.relays.pop((attempt, seat), None)
        if relay is not None:
            relay.close()

    def _relayed_firing(self, notice: HaltNotice) -> None:
        """A firing the halt command made through a relay: counted and journaled at once (the
        relay's thread)."""
        key = (notice.name, notice.fired_at)
        with self._lock:
            if key in self._relay_journaled:
                return
            if all((n.name, n.fired_at) != key for n in self.relayed):
                self.relayed.append(notice)  # counted even if the journal write fails
            self._record(_fired(notice, by="halt check"))
            self._relay_journaled.add(key)

    def close(self) -> None:
        """The run is over: stop every relay and remove their folders (idempotent)."""
        with self._lock:
            keys = list(self.relays)
        for key in keys:
            self.close_relay(*key)

    def fire_now(self, plan: RunPlan, halt: CanonicalHalt, evidence: str) -> None:
        """Fire ``halt`` from a seat's thread the moment the engine learns of it (a spent
        budget): in the state file and journaled, as the ``fire`` effect does between steps."""
        with self._lock:
            halt_ops.check(plan.dispatch_id, halt.value, self.state_dir, fire=True,
                           evidence=evidence)  # fmt: skip
            self.watch(plan)

    def watch(self, plan: RunPlan) -> list[HaltNotice]:
        """Every firing seen so far; a new one the journal lacks is journaled now (one caller
        at a time: the graph's and a budget's firing from a seat's thread)."""
        with self._lock:
            return self._watch(plan)

    def _watch(self, plan: RunPlan) -> list[HaltNotice]:
        if self.halt_watch is None:  # not armed (a test driving effects directly)
            self.halt_watch = HaltWatch(plan.dispatch_id)
        watch = self.halt_watch
        path = halt_files.state_path(self.state_dir, plan.dispatch_id)
        state: HaltStateFile | None = None
        problem = None
        try:
            state = halt_files.read_state(path)
        except halt_files.StateFileError as exc:
            problem = "it was removed" if not path.exists() else f"it cannot be read: {exc}"
        journaled = list(self._journaled())
        recorded = {(n.name, n.fired_at) for n in journaled}
        journaled += self.relayed  # what the relay took counts, journaled already or not
        recorded |= self._relay_journaled
        for notice in watch.observe(state, problem, journaled):
            if (notice.name, notice.fired_at) not in recorded:
                self._record(_fired(notice, by="engine"))
        return watch.fired()


def _fired(notice: HaltNotice, *, by: str) -> RunEvent:
    data: dict[str, JsonValue] = {**event_data(notice, by=by)}
    return RunEvent(EventKind.HALT_FIRED, data)
