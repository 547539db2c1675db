"""The dispatch contract: what to do, who codes it, who judges it, and what may stop it.

Inputs we own are parsed strictly (``extra="forbid"``) so a misspelt key is an error, not a
silently ignored setting. :func:`parse_contract` reads the YAML text (pure: the caller reads the
file) and reports every problem with its key path and line; :func:`contract_from_flags` builds
the same model from ``assay run`` flags.
"""

from __future__ import annotations

import re
import string
from collections.abc import Mapping, Sequence
from typing import Annotated, Any, TypeVar

import yaml
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from assay.core.contract_rules import (
    allow_problem,
    base_url_problem,
    coder_problem,
    env_problem,
    key_variable_problem,
    near_canonical_problem,
    pattern_problem,
)
from assay.core.contract_template import ToolFacts, render_template
from assay.core.contract_yaml import (
    ContractError,
    ContractProblem,
    load_mapping,
    validation_problems,
)
from assay.core.halts import CANONICAL_HALTS, lowered_floor, with_canonical_halts
from assay.core.limits import MAX_ATTEMPTS_LIMIT, MAX_RECOVERY_LIMIT
from assay.core.policy import DEFAULT_QUORUM_THRESHOLD
from assay.core.usage import BudgetLimits
from assay.core.vocab import (
    BudgetAction,
    CoderKind,
    HaltSeverity,
    JudgeKind,
    LandMode,
    NetworkMode,
    OnFail,
    PolicyMode,
    SandboxMode,
    SecretsMode,
    ValidatorKind,
)

__all__ = [
    "Budgets",
    "CoderSpec",
    "Contract",
    "ContractError",
    "ContractProblem",
    "HaltClass",
    "JudgeSpec",
    "PullRequestSettings",
    "Scope",
    "ValidatorSpec",
    "canonical_halt_classes",
    "contract_from_flags",
    "contract_template",
    "contract_to_yaml",
    "parse_contract",
]


_T = TypeVar("_T")


def _refuse(problem: str | None) -> None:
    """Raise a rule's problem as the ``ValueError`` pydantic reports at the key; None passes."""
    if problem is not None:
        raise ValueError(problem)


def _key_variable(name: str | None) -> str | None:
    _refuse(key_variable_problem(name))
    return name


# The variable an API key is read from: never one of assay's own secrets.
KeyVariable = Annotated[str | None, AfterValidator(_key_variable)]


def _endpoint_url(url: str | None) -> str | None:
    _refuse(base_url_problem(url))
    return url


# A model endpoint: an http(s) URL with a host (and a port that is one).
EndpointUrl = Annotated[str | None, AfterValidator(_endpoint_url)]


class _Input(BaseModel):
    # Numbers are strict (``judges: true`` is an error, not 1); text must be storable.
    model_config = ConfigDict(extra="forbid", frozen=True)

    @field_validator("*", mode="after")
    @classmethod
    def _storable_text(cls, value: Any) -> Any:
        _refuse(unstorable_text(value))
        return value


def unstorable_text(value: object) -> str | None:
    """Why a value holds text that cannot be written as UTF-8 or passed to a process (a lone
    surrogate such as ``"\\ud800"``, a NUL character), or None when it is fine."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if "\x00" in item:
                return "the text contains a NUL character"
            try:
                item.encode("utf-8")
            except UnicodeEncodeError as exc:
                code = ord(item[exc.start])
                return f"the text contains U+{code:04X}, a lone surrogate that is not valid text"
        elif isinstance(item, list | tuple):
            stack.extend(item)
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
    return None


# What no coder may touch unless the contract says so: CI runs with the repository's secrets,
# so a workflow file is a way out of the sandbox. `protect: []` removes it, explicitly.
DEFAULT_PROTECT: tuple[str, ...] = (".github/**",)


class Scope(_Input):
    allow: list[str] = Field(default_factory=lambda: ["**"])
    protect: list[str] = Field(default_factory=lambda: list(DEFAULT_PROTECT))
    # A symlink replaced by a regular file (a bulk `sed -i` writes a copy of the target in the
    # link's place) is a breach unless the contract says such type changes are intended.
    allow_type_changes: bool = Field(default=False, strict=True)

    @field_validator("allow", "protect")
    @classmethod
    def _valid_patterns(cls, value: list[str]) -> list[str]:
        _refuse(pattern_problem(value))
        return value


class CoderSpec(_Input):
    """One coder. Settings a kind does not honour produce a warning when the run starts."""

    kind: CoderKind = CoderKind.CLAUDE  # as `assay run` without --coder
    model: str | None = None
    timeout_seconds: float = Field(default=1800.0, strict=True, gt=0)
    max_turns: int | None = Field(default=None, strict=True, ge=1)
    # command: the command line; {prompt_file} is replaced by the prompt file's path
    command: str | list[str] | None = None
    prompt_via: str = Field(default="file", pattern="^(file|stdin|env)$")
    # replay: one step per attempt (the last repeats): {diff: path} or {script: command}
    steps: list[dict[str, str]] = Field(default_factory=list)
    # llm / judges: an OpenAI-compatible endpoint
    base_url: EndpointUrl = None
    api_key_env: KeyVariable = None
    args: list[str] = Field(default_factory=list)  # extra arguments for CLI coders

    @model_validator(mode="after")
    def _runnable(self) -> CoderSpec:
        _refuse(coder_problem(self.kind, model=self.model, command=self.command, steps=self.steps))
        return self


class ValidatorSpec(_Input):
    id: str = Field(min_length=1)
    kind: ValidatorKind = ValidatorKind.COMMAND
    run: str | None = None
    on_fail: OnFail = OnFail.BLOCK
    timeout_seconds: float = Field(default=600.0, strict=True, gt=0)
    model: str | None = None
    criteria: list[str] = Field(default_factory=list)
    base_url: EndpointUrl = None
    api_key_env: KeyVariable = None
    max_turns: int = Field(default=3, strict=True, ge=1)

    @model_validator(mode="after")
    def _command_needs_run(self) -> ValidatorSpec:
        if self.kind is ValidatorKind.COMMAND and not self.run:
            raise ValueError(f"validator {self.id!r} of kind command needs `run`")
        if self.kind is ValidatorKind.JUDGE and not (self.model or "").strip():
            raise ValueError(f"validator {self.id!r} of kind judge needs `model`")
        return self


class JudgeSpec(_Input):
    """One blind judge: an OpenAI-compatible model (``llm``) or a coder CLI run read-only.

    ``max_turns``: for ``llm``, the answers it may give before it counts as unusable (default
    3); for ``claude``, its ``--max-turns``; ``codex`` has no turn limit. ``base_url`` and
    ``api_key_env`` name the ``llm`` endpoint; ``base_url`` also points a CLI at a gateway.
    """

    kind: JudgeKind = JudgeKind.LLM
    model: str | None = None
    base_url: EndpointUrl = None
    api_key_env: KeyVariable = None
    max_turns: int | None = Field(default=None, strict=True, ge=1)
    timeout_seconds: float = Field(default=600.0, strict=True, gt=0)

    @model_validator(mode="after")
    def _llm_needs_model(self) -> JudgeSpec:
        if self.kind is JudgeKind.LLM and not self.model:
            raise ValueError("a judge of kind llm needs `model`")
        return self


class NetworkPolicy(_Input):
    """What the processes of a seat may reach (``network: on`` is short for ``{mode: on}``).

    ``mode``: ``on``, a network namespace of the seat's own whose only way out is assay's
    allowlisting proxy (the coder's provider, derived from its settings, plus ``allow``);
    ``none``, nothing for command coders (an agent still reaches its provider, nothing else);
    ``host``, the machine's network, loopback included: an explicit opt-out, warned about.
    ``allow``: more hosts (``host``, ``host:port``, ``*.domain``, or a URL); a bare host means
    ports 443 and 80. ``validators``: command validators get no network unless this is ``on``
    (the seat's allowlist) or ``host``."""

    mode: NetworkMode = NetworkMode.ON
    allow: list[str] = Field(default_factory=list)
    validators: NetworkMode = NetworkMode.NONE

    @field_validator("allow")
    @classmethod
    def _valid_rules(cls, value: list[str]) -> list[str]:
        _refuse(allow_problem(value))
        return value


# Budgets are bounded so a typo (or 99999999999999999999) cannot make a run loop for days.
MAX_REFUNDS_LIMIT = 100
DEFAULT_MAX_FILES = 20_000
DEFAULT_MAX_BYTES = 100 * 1024 * 1024
DEFAULT_MAX_FILE_BYTES = 10 * 1024 * 1024
DEFAULT_MAX_DEPTH = 64
MAX_DEPTH_LIMIT = 1024


class Budgets(_Input):
    max_attempts: int = Field(default=3, strict=True, ge=1, le=MAX_ATTEMPTS_LIMIT)
    max_recovery: int = Field(default=2, strict=True, ge=0, le=MAX_RECOVERY_LIMIT)
    # Refunded runs in a row (quota, provider fault, interruption, environment) before the
    # task is held for a human, so a machine fault that never clears cannot loop forever.
    max_refunds: int = Field(default=3, ge=1, le=MAX_REFUNDS_LIMIT, strict=True)
    # A candidate's size, checked while it is captured (over one: a block halt, the task
    # held): new files, bytes of new and resized files, the largest such file, path depth.
    max_files: int = Field(default=DEFAULT_MAX_FILES, ge=1, strict=True)
    max_bytes: int = Field(default=DEFAULT_MAX_BYTES, ge=1, strict=True)
    max_file_bytes: int = Field(default=DEFAULT_MAX_FILE_BYTES, ge=1, strict=True)
    max_depth: int = Field(default=DEFAULT_MAX_DEPTH, ge=1, le=MAX_DEPTH_LIMIT, strict=True)
    # Spending caps, per run and per task across its runs (a refunded run's spending counts):
    # enforced while the coders run, from the usage their programs report. None: no cap.
    # ``max_tokens: {run: N, task: M}`` is the same as max_tokens: N, task_max_tokens: M.
    max_tokens: int | None = Field(default=None, ge=1, strict=True)
    max_cost_usd: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    task_max_tokens: int | None = Field(default=None, ge=1, strict=True)
    task_max_cost_usd: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    on_exhausted: BudgetAction = BudgetAction.HOLD

    @model_validator(mode="before")
    @classmethod
    def _run_and_task(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        data = dict(data)
        for name in ("max_tokens", "max_cost_usd"):
            value = data.get(name)
            if not isinstance(value, dict):
                continue
            unknown = sorted(set(value) - {"run", "task"})
            if unknown:
                raise ValueError(f"{name} takes `run` and `task`, not {', '.join(unknown)}")
            if f"task_{name}" in data and "task" in value:
                raise ValueError(f"task_{name} is given twice ({name}.task and task_{name})")
            data[name] = value.get("run")
            if "task" in value:
                data[f"task_{name}"] = value["task"]
        return data

    @property
    def limits(self) -> BudgetLimits:
        return BudgetLimits(
            run_tokens=self.max_tokens,
            run_cost_usd=self.max_cost_usd,
            task_tokens=self.task_max_tokens,
            task_cost_usd=self.task_max_cost_usd,
            action=self.on_exhausted,
        )


PR_TEMPLATE_FIELDS = frozenset({"title", "task", "task_id", "run_id", "branch", "base"})
"""The placeholders ``pr.title`` and ``pr.body`` may use, e.g. ``"assay: {title}"``."""


class PullRequestSettings(_Input):
    """How ``land: pr`` opens its pull request. Every key is optional.

    ``repo`` defaults to the owner/name parsed from the remote's URL (a local-path remote has
    none, so it must be given); ``base`` to the branch the run started from; ``api_base`` to
    ``ASSAY_GITHUB_API`` or https://api.github.com (set it for GitHub Enterprise).
    """

    remote: str = Field(default="origin", min_length=1)
    base: str | None = Field(default=None, min_length=1)
    api_base: str | None = Field(default=None, pattern=r"^https?://\S+$")
    repo: str | None = Field(default=None, pattern=r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$")
    draft: bool = False
    title: str = Field(default="{title}", min_length=1)
    body: str | None = None

    @field_validator("title", "body")
    @classmethod
    def _known_placeholders(cls, value: str | None) -> str | None:
        if value is None:
            return value
        try:
            names = {name for _, name, _, _ in string.Formatter().parse(value) if name is not None}
        except ValueError as exc:
            raise ValueError(f"not a valid template: {exc}") from None
        unknown = sorted(names - PR_TEMPLATE_FIELDS)
        if unknown:
            known = ", ".join("{" + f + "}" for f in sorted(PR_TEMPLATE_FIELDS))
            raise ValueError(f"unknown placeholder(s) {', '.join(unknown)}; use {known}")
        try:  # a bad format spec ({title:d}) fails here, not when the run lands
            value.format_map(dict.fromkeys(PR_TEMPLATE_FIELDS, "x"))
        except (ValueError, TypeError) as exc:
            raise ValueError(f"not a valid template: {exc}") from None
        return value

    def render(self, template: str, fields: dict[str, str]) -> str:
        """``template`` with its placeholders filled from ``fields``."""
        return template.format_map({name: fields.get(name, "") for name in PR_TEMPLATE_FIELDS})


def _not_blank(value: str) -> str:
    if not value.strip():
        raise ValueError("must not be empty")
    return value


class HaltClass(_Input):
    """One halt the run arms. A canonical halt may be made more severe, never less."""

    name: str
    severity: HaltSeverity

    @field_validator("name")
    @classmethod
    def _name_not_blank(cls, value: str) -> str:
        return _not_blank(value)

    @model_validator(mode="after")
    def _canonical_floor(self) -> HaltClass:
        floor = lowered_floor(self.name, self.severity)
        if floor is not None:
            raise ValueError(
                f"{self.name} is a canonical halt of severity {floor.value}; it may be raised, "
                f"never lowered to {self.severity.value}"
            )
        return self


VERIFYING_KINDS = frozenset({ValidatorKind.COMMAND, ValidatorKind.JUDGE})
"""Validator kinds that verify a change; scope and secrets only check where and what it wrote."""


def canonical_halt_classes() -> list[HaltClass]:
    return [HaltClass(name=name.value, severity=sev) for name, sev in CANONICAL_HALTS.items()]


class Contract(_Input):
    task: str
    anchors: list[str] = Field(default_factory=list)
    scope: Scope = Field(default_factory=Scope)
    coder: CoderSpec | list[CoderSpec] = Field(default_factory=CoderSpec)
    seats: int = Field(default=1, strict=True, ge=1, le=16)
    judges: int = Field(default=0, strict=True, ge=0, le=9)
    judge: JudgeSpec | list[JudgeSpec] | None = None
    deliberate_rounds: int = Field(default=0, strict=True, ge=0, le=3)
    validators: list[ValidatorSpec] = Field(default_factory=list)
    policy: PolicyMode = PolicyMode.UNANIMOUS
    threshold: float = Field(default=DEFAULT_QUORUM_THRESHOLD, strict=True, gt=0, le=1)
    budgets: Budgets = Field(default_factory=Budgets)
    land: LandMode = LandMode.BRANCH
    # `merge` with no verifying validator leaves a branch instead, unless this says otherwise.
    land_unverified: StrictBool = False
    pr: PullRequestSettings = Field(default_factory=PullRequestSettings)
    env: dict[str, str] = Field(default_factory=dict)
    sandbox: SandboxMode = SandboxMode.BWRAP
    network: NetworkPolicy = Field(default_factory=NetworkPolicy)
    # A generic secret finding (keyword, entropy, credentials in a URL) warns, or blocks.
    secrets: SecretsMode = SecretsMode.STANDARD
    halt_classes: list[HaltClass] = Field(default_factory=canonical_halt_classes)

    @field_validator("task")
    @classmethod
    def _task_not_blank(cls, value: str) -> str:
        return _not_blank(value)

    @field_validator("env")
    @classmethod
    def _passable_env(cls, value: dict[str, str]) -> dict[str, str]:
        _refuse(env_problem(value))
        return value

    @field_validator("network", mode="before")
    @classmethod
    def _network_shorthand(cls, value: object) -> object:
        """``network: none`` is short for ``network: {mode: none}``."""
        return {"mode": value} if isinstance(value, str) else value

    @field_validator("coder", "judge", mode="before")
    @classmethod
    def _kind_shorthand(cls, value: object) -> object:
        """``coder: claude`` (or a list of kinds) is short for ``coder: {kind: claude}``;
        likewise ``judge``."""
        if isinstance(value, str):
            return {"kind": value}
        if isinstance(value, list):
            return [{"kind": item} if isinstance(item, str) else item for item in value]
        return value

    @field_validator("coder", "judge")
    @classmethod
    def _list_not_empty(cls, value: _T, info: ValidationInfo) -> _T:
        if isinstance(value, list) and not value:
            raise ValueError(f"the list of {info.field_name}s is empty")
        return value

    @field_validator("validators")
    @classmethod
    def _unique_validator_ids(cls, value: list[ValidatorSpec]) -> list[ValidatorSpec]:
        seen: set[str] = set()
        for spec in value:
            if spec.id in seen:
                raise ValueError(f"validator id {spec.id!r} is used twice")
            seen.add(spec.id)
        return value

    @field_validator("halt_classes")
    @classmethod
    def _canonical_halts_added(cls, value: list[HaltClass]) -> list[HaltClass]:
        """Additive only: the canonical halts the list leaves out are added to it (see
        :func:`with_canonical_halts`); no halt twice, and no name a typo away from a canonical
        one (it would arm a halt of its own and leave the canonical one as it was)."""
        names = [h.name for h in value]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(f"halt class(es) listed twice: {', '.join(twice)}")
        _refuse(near_canonical_problem(names))
        armed = with_canonical_halts([(h.name, h.severity) for h in value])
        kept = {h.name: h for h in value}
        return [kept.get(name) or HaltClass(name=name, severity=sev) for name, sev in armed]

    @property
    def verified(self) -> bool:
        """Whether a validator checks the change itself (a command or a judge) and can block it,
        beyond the built-in scope and secret checks every run has. A check that only warns
        (``on_fail: warn``) never stops a failing change, so it verifies nothing."""
        return any(v.kind in VERIFYING_KINDS and v.on_fail is OnFail.BLOCK for v in self.validators)

    def coder_for_seat(self, seat: int) -> CoderSpec:
        """Seat numbers start at 1; a list of coders is cycled over the seats."""
        coders = self.coder if isinstance(self.coder, list) else [self.coder]
        return coders[(seat - 1) % len(coders)]

    def judge_for(self, index: int) -> JudgeSpec | None:
        """Judge numbers start at 0; a list of judges is cycled over them. None: none given."""
        if self.judge is None:
            return None
        judges = self.judge if isinstance(self.judge, list) else [self.judge]
        return judges[index % len(judges)]

    def halt_document(self) -> dict[str, Any]:
        """The contract as ``assay halt arm`` reads it (only ``halt_classes`` matters)."""
        return {"halt_classes": [h.model_dump(mode="json") for h in self.halt_classes]}


def parse_contract(text: str, source: str = "<contract>") -> Contract:
    """The contract in ``text``, or a ContractError naming each bad key and its line."""
    data, root = load_mapping(text, source)
    try:
        return Contract.model_validate(data)
    except ValidationError as exc:
        raise ContractError(source, validation_problems(exc, Contract, root)) from None


def contract_template(facts: ToolFacts | None = None) -> str:
    """A commented contract that parses: what ``assay contract init`` writes, its validators
    those ``facts`` (what was found where it runs) say run there; None: nothing found."""
    return render_template(facts)


def contract_to_yaml(contract: Contract) -> str:
    """The contract as YAML that :func:`parse_contract` reads back to an equal contract."""
    data = contract.model_dump(mode="json", exclude_defaults=True)
    data["halt_classes"] = contract.halt_document()["halt_classes"]
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=100)


# An ``id=`` prefix names a validator; lower case only, so ``FOO=1 make test`` stays a command.
_NAMED_VALIDATOR = re.compile(r"^([a-z][a-z0-9_.-]*)=(.+)$", re.DOTALL)
_UNNAMED_COMMAND = re.compile(r"^[a-z][a-z0-9_.-]*=\s*$")  # ``tests=``: a name, no command


def contract_from_flags(
    instruction: str,
    *,
    coder: str | None = None,
    coder_command: str | None = None,
    model: str | None = None,
    base_url: str | None = None,
    api_key_env: str | None = None,
    validators: Sequence[str] | None = None,
    land: LandMode | str = LandMode.BRANCH,
    seats: int = 1,
    judges: int = 0,
    max_attempts: int = 3,
    max_recovery: int = 2,
    policy: PolicyMode | str = PolicyMode.UNANIMOUS,
    scope_allow: Sequence[str] | None = None,
    scope_protect: Sequence[str] | None = None,
    spending: Mapping[str, Any] | None = None,
) -> Contract:
    """The contract ``assay run "instruction"`` uses when no contract file is given.

    ``coder`` is a kind, optionally with a model (``claude:claude-sonnet-4-5``, the same as
    ``model``); without it, ``coder_command`` selects the ``command`` coder, and with neither
    the coder is ``claude``. ``base_url`` and ``api_key_env`` name its endpoint. Each
    validator is a shell command (ids ``v1``, ``v2``… by position) or ``id=command``.
    The seven canonical halts are always included.
    """
    kind, _, shorthand = (coder or "").partition(":")
    if model and shorthand and model != shorthand:
        raise ValueError(f"--coder {coder} and --model {model} name different models")
    coder_data: dict[str, Any] = {
        "kind": kind or (CoderKind.COMMAND.value if coder_command else CoderKind.CLAUDE.value)
    }
    settings = {
        "model": model or shorthand,
        "command": coder_command,
        "base_url": base_url,
        "api_key_env": api_key_env,
    }
    coder_data.update({key: value for key, value in settings.items() if value})
    specs: list[dict[str, Any]] = []
    for position, text in enumerate(validators or (), start=1):
        named = _NAMED_VALIDATOR.match(text.strip())
        vid, run = (named.group(1), named.group(2)) if named else (f"v{position}", text)
        if not run.strip() or _UNNAMED_COMMAND.match(text.strip()):
            raise ValueError(
                f'--validator {text!r} gives no command to run: e.g. --validator "pytest -q",'
                ' or named, --validator tests="pytest -q"'
            )
        specs.append({"id": vid, "kind": ValidatorKind.COMMAND.value, "run": run.strip()})
    data: dict[str, Any] = {
        "task": instruction,
        "coder": coder_data,
        "validators": specs,
        "land": str(land),
        "seats": seats,
        "judges": judges,
        "budgets": {
            "max_attempts": max_attempts,
            "max_recovery": max_recovery,
            **{k: v for k, v in (spending or {}).items() if v is not None},
        },
        "policy": str(policy),
        "scope": {
            "allow": list(scope_allow or ["**"]),
            "protect": list(DEFAULT_PROTECT if scope_protect is None else scope_protect),
        },
    }
    try:
        return Contract.model_validate(data)
    except ValidationError as exc:
        problems = validation_problems(exc, Contract, data=data)
        raise ContractError("command-line flags", problems) from None
