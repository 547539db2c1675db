"""The dispatch contract: what to do, who codes it, who judges it, and what may stop it.

Inputs we own are parsed strictly (``extra="forbid"``) so a misspelt key is an error, not a
silently ignored setting.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from assay.core.halts import CANONICAL_HALTS
from assay.core.vocab import CoderKind, HaltSeverity, LandMode, OnFail, PolicyMode, ValidatorKind


class _Input(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Scope(_Input):
    allow: list[str] = Field(default_factory=lambda: ["**"])
    protect: list[str] = Field(default_factory=list)


class CoderSpec(_Input):
    """One coder. Settings a kind does not honour produce a warning when the run starts."""

    kind: CoderKind = CoderKind.COMMAND
    model: str | None = None
    timeout_seconds: float = Field(default=1800.0, gt=0)
    max_turns: int | None = Field(default=None, ge=1)
    # command: the command line; {prompt_file} is replaced by the prompt file's path
    command: str | list[str] | None = None
    prompt_via: str = Field(default="file", pattern="^(file|stdin|env)$")
    # replay: one step per attempt (the last repeats): {diff: path} or {script: command}
    steps: list[dict[str, str]] = Field(default_factory=list)
    # llm / judges: an OpenAI-compatible endpoint
    base_url: str | None = None
    api_key_env: str | None = None
    args: list[str] = Field(default_factory=list)  # extra arguments for CLI coders


class ValidatorSpec(_Input):
    id: str = Field(min_length=1)
    kind: ValidatorKind = ValidatorKind.COMMAND
    run: str | None = None
    on_fail: OnFail = OnFail.BLOCK
    timeout_seconds: float = Field(default=600.0, gt=0)
    model: str | None = None
    criteria: list[str] = Field(default_factory=list)
    base_url: str | None = None
    api_key_env: str | None = None
    max_turns: int = Field(default=3, ge=1)

    @model_validator(mode="after")
    def _command_needs_run(self) -> ValidatorSpec:
        if self.kind is ValidatorKind.COMMAND and not self.run:
            raise ValueError(f"validator {self.id!r} of kind command needs `run`")
        return self


class Budgets(_Input):
    max_attempts: int = Field(default=3, ge=1)
    max_recovery: int = Field(default=2, ge=0)


class HaltClass(_Input):
    name: str = Field(min_length=1)
    severity: HaltSeverity


def canonical_halt_classes() -> list[HaltClass]:
    return [HaltClass(name=name.value, severity=sev) for name, sev in CANONICAL_HALTS.items()]


class Contract(_Input):
    task: str = Field(min_length=1)
    anchors: list[str] = Field(default_factory=list)
    scope: Scope = Field(default_factory=Scope)
    coder: CoderSpec | list[CoderSpec] = Field(default_factory=CoderSpec)
    seats: int = Field(default=1, ge=1, le=16)
    judges: int = Field(default=0, ge=0, le=9)
    validators: list[ValidatorSpec] = Field(default_factory=list)
    policy: PolicyMode = PolicyMode.UNANIMOUS
    threshold: float = Field(default=0.67, gt=0, le=1)
    budgets: Budgets = Field(default_factory=Budgets)
    land: LandMode = LandMode.BRANCH
    env: dict[str, str] = Field(default_factory=dict)
    halt_classes: list[HaltClass] = Field(default_factory=canonical_halt_classes)

    @field_validator("validators")
    @classmethod
    def _unique_validator_ids(cls, value: list[ValidatorSpec]) -> list[ValidatorSpec]:
        seen: set[str] = set()
        for spec in value:
            if spec.id in seen:
                raise ValueError(f"validator id {spec.id!r} is used twice")
            seen.add(spec.id)
        return value

    def coder_for_seat(self, seat: int) -> CoderSpec:
        """Seat numbers start at 1; a list of coders is cycled over the seats."""
        coders = self.coder if isinstance(self.coder, list) else [self.coder]
        return coders[(seat - 1) % len(coders)]

    def halt_document(self) -> dict[str, Any]:
        """The contract as ``assay halt arm`` reads it (only ``halt_classes`` matters)."""
        return {"halt_classes": [h.model_dump(mode="json") for h in self.halt_classes]}
