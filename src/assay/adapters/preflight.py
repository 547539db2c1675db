"""The preflight: whether this machine can run a contract's settings, said before anything runs.

One check for every caller: ``assay run`` and ``assay task add`` refuse (exit 2) a contract
this machine cannot run, ``assay serve`` and a Temporal worker hold such a task instead of
running it, and a dispatch that meets the same problem mid-run (a worker on another machine,
a program removed since) says it in the same words and is held, never refunded and retried.

It looks without starting anything: every coder program in use and every CLI judge's is on
the PATH the process will get and visible *inside* the sandbox (resolved against the very
mounts :mod:`assay.adapters.sandbox` makes: its private ``/tmp``, the hidden home and
repository); every API key they read is set in the environment they will get; every command
validator's programs resolve the same way; and a ``land: merge`` finds its base branch
clean. The words of each problem (and which key a kind reads) are :mod:`assay.core.preflight`.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path

from assay.adapters import git, github
from assay.adapters.assay_exe import with_assay_on_path
from assay.adapters.envpolicy import (
    agent_environment,
    credential_variables,
    model_environment,
    validator_environment,
)
from assay.adapters.process import SHELL
from assay.adapters.repo_tools import repo_tool_roots
from assay.adapters.sandbox import bwrap_problem, confines, hidden_by
from assay.adapters.sandbox_paths import declared_paths, hidden_paths
from assay.adapters.sandbox_spec import SandboxSpec
from assay.core.contract import CoderSpec, Contract, JudgeSpec, ValidatorSpec
from assay.core.preflight import (
    PROGRAMS,
    dirty_problem,
    install_hint,
    key_problem,
    missing_program,
    program_words,
)
from assay.core.vocab import (
    CoderKind,
    JudgeKind,
    LandMode,
    NetworkMode,
    OnFail,
    SandboxMode,
    ValidatorKind,
)

__all__ = ["advisory_problems", "check", "command_problem", "program_problem"]

_NO_SANDBOX = "run without the sandbox (--sandbox none, or `sandbox: none` in the contract)"
# A line that changes folder first runs a relative path from somewhere this check cannot see.
_CHANGES_FOLDER = re.compile(r"(^|[\s;&|(])(cd|pushd)(\s|$)")


def check(
    contract: Contract,
    *,
    repo: Path,
    home: Path,
    env: Mapping[str, str] | None = None,
    landing: bool = True,
) -> list[str]:
    """Every problem this machine has with ``contract``, one line each ([] when it can run it):
    the sandbox, each coder in use and each judge (its program, its key), each validator, and,
    with ``landing``, a base branch a ``land: merge`` would find dirty. ``repo`` and ``home``
    are where the run would happen; ``env`` the operator's environment (default: this
    process's)."""
    operator_env = os.environ if env is None else env
    problems: list[str] = []
    if contract.sandbox is SandboxMode.BWRAP and (problem := bwrap_problem(operator_env)):
        problems.append(f"{problem} (on the command line: --sandbox none)")
    view = _View(contract, repo, home, operator_env)
    for who, seat, spec in _coders(contract):
        problems += view.coder(who, seat, spec)
    for who, judge in _judges(contract):
        problems += view.judge(who, judge)
    for validator in contract.validators:
        if validator.on_fail is OnFail.BLOCK:
            problems += _validator_problems(view, validator)
    if contract.land is LandMode.PR:
        base = git.current_branch(repo) if landing else "-"  # the base is the run's to find
        try:
            github.pull_target(repo, contract.pr, base, operator_env)
        except github.TargetMissing as exc:
            problems.append(f"land: pr: {exc}")
    if landing and (problem := _dirty_base(contract, repo)):
        problems.append(problem)
    return list(dict.fromkeys(problems))


def program_problem(
    program: str,
    env: Mapping[str, str],
    sandbox: SandboxSpec | None,
    *,
    who: str = "",
    install: str = "",
    argv: Sequence[str] | None = None,
    cwd: Path | None = None,
    fix: str = "",
    declared_shown: bool = False,
) -> str | None:
    """Why ``program`` cannot be started with ``env`` (its PATH) in ``sandbox`` (None:
    unconfined), or None. ``argv``: the command line it is started with (what the sandbox binds
    back for it; default ``[program]``); ``cwd``: where a relative path is looked up (None: it
    is not looked up); ``fix``: the setting that names it, for the advice;
    ``declared_shown``: the contract's ``env:`` can show a hidden path (a coder's sandbox)."""
    prefix = f"{who}: " if who else ""
    advice = f" (or fix {fix})" if fix else ""
    if "/" in program:
        if os.path.isabs(program):
            path = Path(program)
        elif cwd is not None:
            path = cwd / program
        else:
            return None
        if not path.exists():
            return f"{prefix}{program} does not exist{advice}"
        if path.is_dir() or not os.access(path, os.X_OK):
            return f"{prefix}{program} is not an executable file (chmod +x it){advice}"
        found = str(path)
    else:
        search = env.get("PATH", os.defpath)
        located = shutil.which(program, path=search)
        if located is None:
            present = _on_path(program, search)
            if present is not None:
                return f"{prefix}{program} is on PATH at {present} but is not executable{advice}"
            return f"{prefix}{missing_program(program, install)}{advice}"
        found = located
    if not confines(sandbox):
        return None
    cover = hidden_by(Path(found), sandbox, argv or [program], env)
    if cover is None:
        return None
    named = program if found == program else f"{program} ({found})"
    return (
        f"{prefix}{named} cannot be seen inside the sandbox: "
        f"{_why_hidden(cover, env)}; {_remedy(declared_shown)}"
    )


def command_problem(
    who: str,
    command: str | Sequence[str],
    env: Mapping[str, str],
    sandbox: SandboxSpec | None,
    *,
    fix: str,
    repo: Path | None = None,
    declared_shown: bool = False,
    written: bool = False,
) -> list[str]:
    """What keeps a command line (a shell string run by ``sh -c``, or an argv list) from
    finding its programs. A relative path (``./fix.sh``) is looked up in ``repo``'s HEAD
    commit, which is what a seat starts from (no ``repo``: not looked up); ``written``: the
    line runs on a candidate, which may add the file, so only one left uncommitted here (or
    committed without its executable bit) is named."""
    if isinstance(command, str):
        argv: list[str] = [SHELL, "-c", command]
        words = program_words(command)
        moves = _CHANGES_FOLDER.search(command) is not None
    else:
        argv = [str(part) for part in command]
        words = argv[:1]
        moves = False
    problems = []
    for word in words:
        if "/" in word and not os.path.isabs(word):
            problem = None if moves or repo is None else _committed(who, word, repo, fix, written)
        else:
            problem = program_problem(
                word, env, sandbox, who=who, argv=argv, fix=fix, declared_shown=declared_shown
            )
        if problem is not None:
            problems.append(problem)
    return problems


def advisory_problems(
    contract: Contract, *, repo: Path, home: Path, env: Mapping[str, str] | None = None
) -> list[str]:
    """What keeps a warn-only validator (``on_fail: warn``) from running here, one line each:
    never a refusal (such a check only warns, and says so in the run), only a heads-up."""
    view = _View(contract, repo, home, os.environ if env is None else env)
    found: list[str] = []
    for validator in contract.validators:
        if validator.on_fail is OnFail.WARN:
            found += _validator_problems(view, validator)
    return list(dict.fromkeys(found))


def _validator_problems(view: _View, validator: ValidatorSpec) -> list[str]:
    """What keeps one validator from running here: a command's programs, a judge's key."""
    contract, operator_env, repo = view.contract, view.operator_env, view.repo
    who = f"validator {validator.id}"
    if validator.kind is ValidatorKind.COMMAND and validator.run:
        env_of = validator_environment(operator_env, contract.env, repo=repo)
        sandbox = view.sandbox(contract.network.validators, tools=True)
        return command_problem(
            who, validator.run, env_of, sandbox, fix="`run`", repo=repo, written=True
        )
    if validator.kind is ValidatorKind.JUDGE:
        settings = validator.model_dump(mode="json")
        environ = {
            **model_environment(operator_env, "llm", settings),
            **validator_environment(operator_env, contract.env),
        }
        return _endpoint_problem(who, settings, environ, role="judge")
    return []


class _View:
    """What the processes of a run would get on this machine: environments and sandboxes."""

    def __init__(
        self, contract: Contract, repo: Path, home: Path, operator_env: Mapping[str, str]
    ) -> None:
        self.contract = contract
        self.repo = repo
        self.home = home
        self.operator_env = operator_env
        self.hidden = hidden_paths(repo, home, operator_env)

    def sandbox(
        self, network: NetworkMode, seat: int | None = None, *, tools: bool = False
    ) -> SandboxSpec | None:
        """The sandbox a process gets (None: unconfined); a coder's shows what the contract
        names by absolute path, a validator's (``tools``) the repository's tool folders."""
        if self.contract.sandbox is not SandboxMode.BWRAP:
            return None
        shown: tuple[Path, ...] = ()
        if seat is not None:
            shown = tuple(
                declared_paths(
                    self.contract,
                    seat,
                    repo_root=self.repo,
                    home=self.home,
                    operator_env=self.operator_env,
                )
            )
        if tools:
            shown = (*shown, *repo_tool_roots(self.repo))
        return SandboxSpec(
            mode=SandboxMode.BWRAP, network=network, readable=shown, hidden=self.hidden
        )

    def coder(self, who: str, seat: int, spec: CoderSpec) -> list[str]:
        kind = spec.kind.value
        settings = spec.model_dump(mode="json")
        declared = self.contract.env
        if spec.kind is CoderKind.LLM:  # a model assay calls itself: no program, its key
            environ = model_environment(self.operator_env, kind, settings, declared=declared)
            return _endpoint_problem(who, settings, environ, role="llm coder")
        env = with_assay_on_path(
            agent_environment(self.operator_env, kind, settings, declared=declared)
        )
        network = (
            NetworkMode.HOST if self.contract.network.mode is NetworkMode.HOST else NetworkMode.ON
        )
        sandbox = self.sandbox(network, seat)
        problems: list[str] = []
        if spec.kind is CoderKind.COMMAND and spec.command:
            problems += command_problem(
                who,
                spec.command,
                env,
                sandbox,
                fix="`coder.command` (--coder-command)",
                repo=self.repo,
                declared_shown=True,
            )
        elif kind in PROGRAMS:
            program = PROGRAMS[kind][0]
            found = program_problem(
                program, env, sandbox, who=who, install=install_hint(kind), declared_shown=True
            )
            problems += [found] if found else []
            passed = credential_variables(kind, settings)
            if (key := key_problem(who, kind, settings, env, passed=passed)) is not None:
                problems.append(key)
        return problems

    def judge(self, who: str, judge: JudgeSpec) -> list[str]:
        kind = judge.kind.value
        settings = judge.model_dump(mode="json")
        declared = self.contract.env
        if judge.kind is JudgeKind.LLM:
            environ = model_environment(self.operator_env, kind, settings, declared=declared)
            return _endpoint_problem(who, settings, environ, role="judge")
        env = agent_environment(self.operator_env, kind, settings, declared=declared)
        host = self.contract.network.mode is NetworkMode.HOST
        sandbox = self.sandbox(NetworkMode.HOST if host else NetworkMode.ON)
        problems: list[str] = []
        program = PROGRAMS[kind][0]
        found = program_problem(program, env, sandbox, who=who, install=install_hint(kind))
        problems += [found] if found else []
        passed = credential_variables(kind, settings)
        if (key := key_problem(who, kind, settings, env, passed=passed)) is not None:
            problems.append(key)
        return problems


def _coders(contract: Contract) -> list[tuple[str, int, CoderSpec]]:
    """Each coder the seats use, once, named for the problem lines, with its first seat."""
    listed = contract.coder if isinstance(contract.coder, list) else [contract.coder]
    used = min(len(listed), contract.seats)
    several = len(listed) > 1
    return [
        (
            f"coder {spec.kind.value}" + (f" (seat {index + 1})" if several else ""),
            index + 1,
            spec,
        )
        for index, spec in enumerate(listed[:used])
    ]


def _judges(contract: Contract) -> list[tuple[str, JudgeSpec]]:
    """Each blind judge that can be asked (judging needs two seats), once."""
    if contract.judges == 0 or contract.seats < 2 or contract.judge is None:
        return []
    listed = contract.judge if isinstance(contract.judge, list) else [contract.judge]
    used = listed[: min(len(listed), contract.judges)]
    return [(f"judge {i + 1} ({j.kind.value})", j) for i, j in enumerate(used)]


def _endpoint_problem(
    who: str, settings: Mapping[str, object], environ: Mapping[str, str], *, role: str
) -> list[str]:
    """What assay's own model client would refuse before its first call (no key, no model)."""
    from assay.adapters.llm_client import LlmError, resolve_endpoint

    try:
        resolve_endpoint(settings, environ, timeout=1.0, role=role)
    except LlmError as exc:
        return [f"{who}: {exc.detail}"]
    return []


def _dirty_base(contract: Contract, repo: Path) -> str | None:
    """A ``land: merge`` (one that will merge: a verified contract, or ``land_unverified``)
    into a checked-out branch with uncommitted changes, which landing never touches."""
    if contract.land is not LandMode.MERGE:
        return None
    if not (contract.verified or contract.land_unverified):
        return None  # it leaves a branch instead (halt-verification-gap)
    branch = git.current_branch(repo)
    if branch is None:
        return None
    dirty = git.uncommitted(repo)
    return dirty_problem(branch, dirty) if dirty else None


def _committed(who: str, word: str, repo: Path, fix: str, written: bool = False) -> str | None:
    """A program named by a path inside the repository must be in its HEAD commit, and
    executable there: a seat is a fresh checkout of that commit. ``written``: a candidate may
    add it, so only a file left uncommitted here is missing for sure."""
    path = os.path.normpath(word)
    if path.startswith(".."):
        return None  # outside the repository: the seat's neighbourhood, not looked up
    mode = git.file_mode(repo, "HEAD", path)
    if mode is None:
        if written and not (repo / path).exists():
            return None
        where = "is not committed" if (repo / path).exists() else "is not in the repository"
        return (
            f"{who}: {word} {where}: a seat is a fresh checkout of the HEAD commit "
            f"(commit it, or fix {fix})"
        )
    if mode == "100644":
        return (
            f"{who}: {word} is committed without its executable bit "
            f"(git update-index --chmod=+x {path}, then commit)"
        )
    return None


def _on_path(program: str, search: str) -> str | None:
    """A file called ``program`` in a PATH folder, executable or not."""
    for folder in search.split(os.pathsep):
        candidate = Path(folder or ".") / program
        if candidate.is_file():
            return str(candidate)
    return None


def _why_hidden(cover: Path, env: Mapping[str, str]) -> str:
    """What the sandbox does at ``cover``, the mount that hides a program, in words."""
    text = str(cover)
    if text in ("/tmp", "/var/tmp"):
        return f"the sandbox has a private {text} of its own"
    home = env.get("HOME", "")
    if home and os.path.isabs(home) and Path(home).resolve() == cover:
        return f"the sandbox hides your home folder ({text})"
    if (cover / ".git").exists():
        return f"the sandbox hides the repository ({text}); a seat works in a fresh checkout"
    return f"the sandbox hides {text}"


def _remedy(declared_shown: bool) -> str:
    options = ["commit it to the repository and name it by its path there (./name)"]
    if declared_shown:
        options.append("name its absolute path in the contract's `env:` to show it read-only")
    options.append(_NO_SANDBOX)
    return ", or ".join(options)
