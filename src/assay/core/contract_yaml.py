"""Reading a contract's YAML text and explaining what is wrong with it, line by line.

A contract is written by hand, so an error that only says "invalid" wastes the author's time:
every problem names the key path (``validators[1].on_fail``) and the line it sits on. The YAML
node graph (``yaml.compose``) keeps the positions that the plain data loses; pydantic's error
locations are walked through it to find them.
"""

from __future__ import annotations

import difflib
import functools
import re
from dataclasses import dataclass
from typing import Any, get_args, get_origin

import yaml
from pydantic import BaseModel, ValidationError
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

Loc = tuple[int | str, ...]


@dataclass(frozen=True, slots=True)
class ContractProblem:
    """One thing wrong with a contract: where (key path, line) and what."""

    key: str
    message: str
    line: int | None = None
    column: int | None = None

    def render(self) -> str:
        where = f"line {self.line}" if self.line is not None else ""
        if self.column is not None:
            where += f", column {self.column}"
        parts = [p for p in (where, self.key, self.message) if p]
        return ": ".join(parts)


class ContractError(ValueError):
    """A contract that cannot be used; ``str()`` names every problem's key and line."""

    def __init__(self, source: str, problems: list[ContractProblem]) -> None:
        self.source = source
        self.problems = tuple(problems) or (ContractProblem(key="", message="invalid contract"),)
        first = self.problems[0]
        self.line = first.line
        self.key = first.key
        if len(self.problems) == 1:
            message = f"{source}: {first.render()}"
        else:
            lines = [f"  {p.render()}" for p in self.problems]
            message = "\n".join([f"{source}: {len(self.problems)} problems", *lines])
        super().__init__(message)


class _Loader(yaml.SafeLoader):
    """SafeLoader whose value errors (a 30th of February) carry the node's position."""

    def construct_object(self, node: Node, deep: bool = False) -> Any:
        try:
            return super().construct_object(node, deep=deep)
        except (ValueError, TypeError, OverflowError) as exc:
            raise yaml.constructor.ConstructorError(
                None, None, f"cannot read this value: {exc}", node.start_mark
            ) from None


def load_mapping(text: str, source: str) -> tuple[dict[str, Any], MappingNode]:
    """The contract's top-level mapping and its node graph, or a ContractError."""
    loader: _Loader | None = None
    try:
        loader = _Loader(text)
        root = loader.get_single_node()
        data = loader.construct_document(root) if root is not None else None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        problem = " ".join(p for p in (exc.context, exc.problem) if p) or "invalid YAML"
        if not isinstance(exc, yaml.constructor.ConstructorError):
            problem = f"YAML syntax error: {problem}"
        raise ContractError(
            source,
            [
                ContractProblem(
                    key="",
                    message=problem,
                    line=mark.line + 1 if mark else 1,
                    column=mark.column + 1 if mark else None,
                )
            ],
        ) from None
    except yaml.reader.ReaderError as exc:
        line = text.count("\n", 0, exc.position) + 1
        code = exc.character if isinstance(exc.character, int) else ord(exc.character)
        message = f"the character U+{code:04X} is not allowed in YAML"
        raise ContractError(source, [ContractProblem("", message, line=line)]) from None
    except yaml.YAMLError as exc:
        raise ContractError(source, [ContractProblem("", f"not YAML: {exc}", line=1)]) from None
    except RecursionError:
        raise ContractError(source, [ContractProblem("", "nested too deeply", line=1)]) from None
    finally:
        if loader is not None:
            loader.dispose()
    if root is None:
        raise ContractError(source, [ContractProblem("", "the contract is empty", line=1)])
    if not isinstance(root, MappingNode) or not isinstance(data, dict):
        kind = {ScalarNode: "a scalar", SequenceNode: "a list"}.get(type(root), "not a mapping")
        raise ContractError(
            source,
            [
                ContractProblem(
                    key="",
                    message=f"the top level must be a mapping of keys (task, coder, …), not {kind}",
                    line=root.start_mark.line + 1,
                )
            ],
        )
    duplicates = _duplicate_keys(root)
    if duplicates:
        raise ContractError(source, duplicates)
    return data, root


def _duplicate_keys(root: Node) -> list[ContractProblem]:
    """YAML keeps the last of two equal keys silently; in a contract that hides a mistake."""
    problems: list[ContractProblem] = []
    seen_nodes: set[int] = set()
    stack: list[tuple[Node, str]] = [(root, "")]
    while stack:
        node, path = stack.pop()
        if id(node) in seen_nodes:
            continue
        seen_nodes.add(id(node))
        if isinstance(node, MappingNode):
            first_line: dict[str, int] = {}
            for key_node, value_node in node.value:
                name = str(key_node.value) if isinstance(key_node, ScalarNode) else "?"
                key = f"{path}.{name}" if path else name
                line = key_node.start_mark.line + 1
                if isinstance(key_node, ScalarNode) and name in first_line:
                    problems.append(
                        ContractProblem(
                            key, f"key appears twice (first on line {first_line[name]})", line
                        )
                    )
                first_line.setdefault(name, line)
                stack.append((value_node, key))
        elif isinstance(node, SequenceNode):
            stack.extend((item, f"{path}[{i}]") for i, item in enumerate(node.value))
    return sorted(problems, key=lambda p: p.line or 0)


def validation_problems(
    exc: ValidationError, model: type[BaseModel], root: Node | None = None, *, data: Any = None
) -> list[ContractProblem]:
    """pydantic's errors, each mapped onto the key path and line it came from. Without a node
    graph, ``data`` (what was validated) tells the union member that was meant."""
    kept: list[ContractProblem] = []
    fallback: list[ContractProblem] = []
    for error in exc.errors(include_url=False):
        loc: Loc = tuple(error["loc"])
        path, line, consistent = _locate(loc, root)
        if root is None and data is not None:
            consistent &= _shape_matches(loc, data)
        problem = ContractProblem(
            key=_render_path(path), message=_describe(error, path, model), line=line
        )
        (kept if consistent else fallback).append(problem)
    problems = kept or fallback[:1]
    unique = list(dict.fromkeys(problems))
    return sorted(unique, key=lambda p: p.line or 0)


# The union members pydantic names by their type alone (``str | list[str]``: "str").
_SCALAR_TAGS = frozenset({"str", "int", "float", "bool"})


def _is_union_tag(part: int | str) -> bool:
    # pydantic names the union member it tried ("CoderSpec", "list[CoderSpec]", "str"); field
    # names are lower case, never contain brackets and are never a bare type's name.
    return isinstance(part, str) and ("[" in part or part[:1].isupper() or part in _SCALAR_TAGS)


def _tag_shape(part: int | str) -> type[Node]:
    """The YAML node a union member ``part`` reads: a sequence, a scalar or a mapping."""
    if str(part).startswith("list["):
        return SequenceNode
    return ScalarNode if part in _SCALAR_TAGS else MappingNode


def _locate(loc: Loc, root: Node | None) -> tuple[list[int | str], int | None, bool]:
    """Walk ``loc`` through the node graph: the clean key path, its line, and whether every
    union member named on the way matches the YAML's shape (other members' errors are noise)."""
    node = root
    line = root.start_mark.line + 1 if root is not None else None
    path: list[int | str] = []
    consistent = True
    for index, part in enumerate(loc):
        child: Node | None = None
        if isinstance(node, MappingNode):
            for key_node, value_node in node.value:
                if isinstance(key_node, ScalarNode) and str(key_node.value) == str(part):
                    line = key_node.start_mark.line + 1
                    child = value_node
                    break
        elif (
            isinstance(node, SequenceNode) and isinstance(part, int) and 0 <= part < len(node.value)
        ):
            child = node.value[part]
            line = child.start_mark.line + 1
        if child is None and _is_union_tag(part):
            if node is not None:
                consistent &= isinstance(node, _tag_shape(part))
            continue
        path.append(part)
        if child is None:
            path.extend(p for p in loc[index + 1 :] if not _is_union_tag(p))
            break
        node = child
    return path, line, consistent


def _shape_matches(loc: Loc, data: Any) -> bool:
    """Whether every union member named in ``loc`` matches the shape of ``data`` there (a
    list for ``list[...]``, a mapping for a model), as :func:`_locate` checks the YAML's."""
    value = data
    for part in loc:
        if _is_union_tag(part):
            if value is not None:
                shape = _tag_shape(part)
                if shape is ScalarNode and isinstance(value, list | dict):
                    return False
                wanted = list if shape is SequenceNode else dict
                if shape is not ScalarNode and not isinstance(value, wanted):
                    return False
            continue
        if isinstance(value, dict):
            value = value.get(part)
        elif isinstance(value, list) and isinstance(part, int) and 0 <= part < len(value):
            value = value[part]
        else:
            value = None
    return True


def _render_path(path: list[int | str]) -> str:
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


def _describe(error: Any, path: list[int | str], model: type[BaseModel]) -> str:
    kind = error["type"]
    if kind == "extra_forbidden":
        allowed = _allowed_keys(model, path[:-1])
        hint = difflib.get_close_matches(str(path[-1]), allowed, n=1) if allowed else []
        text = f"unknown key `{path[-1]}`"
        if hint:
            text += f" (did you mean `{hint[0]}`?)"
        if allowed:
            text += f"; allowed here: {', '.join(allowed)}"
        return text
    if kind == "missing":
        return f"the required key `{path[-1]}` is missing" if path else "a required key is missing"
    message = str(error["msg"]).removeprefix("Value error, ")
    # pydantic's Python words for a YAML mapping ("a valid dictionary or instance of CoderSpec")
    message = _PYTHON_MAPPING.sub("a mapping (key: value)", message)
    value = error.get("input")
    if isinstance(value, bool) and kind in ("int_type", "float_type"):
        return (
            f"expected a number, got the boolean `{str(value).lower()}` (booleans are not numbers)"
        )
    if isinstance(value, bool) and kind not in ("value_error", "assertion_error"):
        # Quoting helps where text was wanted (a string, one of some words), nowhere else.
        quote = f": {_BOOLEAN_WORDS}" if kind in ("string_type", "enum", "literal_error") else ""
        message += f" (got the YAML boolean {str(value).lower()}{quote})"
    elif isinstance(value, str) and kind in _NUMBER_KINDS and (number := _yaml_number(value)):
        # YAML 1.1 reads 1e3 (no dot) as text: a number the user wrote, refused as text.
        message += f" (got {value!r}, which YAML reads as text: write it as {number})"
    elif isinstance(value, str | int | float) and kind not in (
        "value_error",
        "assertion_error",
    ):
        message += f" (got {value!r})"
    return message


_NUMBER_KINDS = ("int_type", "int_parsing", "float_type", "float_parsing")


_EXPONENT = re.compile(r"([+-]?\d+)[eE]([+-]?)(\d{1,4})")


def _yaml_number(text: str) -> str | None:
    """``1e3`` as YAML reads it as a number (``1000``, else ``1.0e+3``); None when ``text`` is
    not a number YAML took for text."""
    found = _EXPONENT.fullmatch(text)
    if found is None:
        return None
    plain = f"{float(text):g}"
    return plain if "e" not in plain else f"{found[1]}.0e{found[2] or '+'}{found[3]}"


_PYTHON_MAPPING = re.compile(r"a valid dictionary( or instance of \w+)?")
_BOOLEAN_WORDS = "an unquoted yes, no, on, off, true or false is one; quote it to give it as text"


def _allowed_keys(model: type[BaseModel], path: list[int | str]) -> list[str]:
    """The field names of the model found at ``path`` (through lists and unions)."""
    current: Any = model
    for part in path:
        if isinstance(part, int):
            args = get_args(_member(current, want_list=True))
            current = args[0] if args else None
            continue
        found = _member(current, want_list=False)
        field = found.model_fields.get(part) if found is not None else None
        if field is None:
            return []
        current = field.annotation
    found = _member(current, want_list=False)
    return sorted(found.model_fields) if found is not None else []


def _member(annotation: Any, *, want_list: bool) -> Any:
    """``annotation``, or the member of its union, that is a list (or a model class)."""
    for candidate in (annotation, *get_args(annotation)):
        if want_list and get_origin(candidate) is list:
            return candidate
        if want_list or get_origin(candidate) is not None:
            continue
        if isinstance(candidate, type) and issubclass(candidate, BaseModel):
            return candidate
    return None


# The commented contract ``assay contract init`` writes; the line ``@VALIDATORS@`` is filled
# with the validators found to run where it was written (:mod:`assay.core.contract_template`).
# Where the template's validators go: contract_template renders them from what was found.
VALIDATORS_MARK = "@VALIDATORS@"

TEMPLATE = """\
# assay dispatch contract. Every key but `task` is optional; the values shown are the defaults
# unless the comment says otherwise. Unknown keys are errors, so a typo never goes unnoticed.

# What to do, in plain words, with the check that says it is done.
task: |
  Describe the change. Name the test or command that must pass when it is done.

# Paths and symbols the task relies on ("path" or "path::symbol"). Each is resolved against the
# base commit before any coder runs; one that does not resolve fires
# halt-anchor-resolution-failure.
anchors: []

# Which paths the change may touch (gitignore-style patterns). A path outside `allow`, or
# inside `protect`, fires halt-scope-breach, and so does a symlink whose target leaves the
# tree. `protect` defaults to [".github/**"] even when `scope` is left out; `protect: []`
# lets the coder touch the CI workflows. A symlink replaced by a regular file or a folder is a
# breach too unless `allow_type_changes: true`; every type change (a symlink made a file, an
# executable bit flipped) is listed per candidate in the payload either way.
scope:
  allow: ["**"]
  protect: [".github/**"]
  allow_type_changes: false

# Who writes the code: one coder, or a list cycled over the seats. Kinds: command, replay,
# claude, codex, aider, mini, llm. `coder: claude` is short for `coder: {kind: claude}`.
# A setting the chosen kind does not honour is reported as a warning when the run starts.
coder:
  kind: claude
  model: null              # the coder's own default when null
  timeout_seconds: 1800    # the whole process group is killed after this; its work is kept
  max_turns: 40            # null: no turn limit of ours
  # command: "my-agent --prompt-file {prompt_file}"   # kind command: the command line
  # prompt_via: file       # kind command: how the prompt is passed: file | stdin | env
  # steps: [{diff: fix.patch}, {script: "./fix.sh"}]  # kind replay: one step per attempt
  # base_url: http://localhost:8000/v1   # the model endpoint (llm: OpenAI-compatible; claude,
  #                                      # codex, aider, mini: passed to the tool as its API base)
  # api_key_env: OPENAI_API_KEY          # kind llm and codex: the variable that holds the key
  # args: []               # extra arguments for CLI coders

# Competing implementations per attempt, each in its own git worktree (1-16).
seats: 1

# Blind judges that rank the candidates when more than one passes validation (0-9).
judges: 0

# Who the judges are: one judge, or a list cycled over the `judges`. Kinds: llm (an
# OpenAI-compatible model answering through a forced `rank` call; needs `model`), claude or
# codex (the CLI run read-only over the candidates' diffs). `judge: claude` is short for
# `judge: {kind: claude}`. Judges see labels A, B, C..., never which coder wrote what.
#   judge: {kind: llm, model: gpt-5-mini, base_url: null, api_key_env: OPENAI_API_KEY,
#           max_turns: 3, timeout_seconds: 600}
judge: null

# When the judges' first choices split: rounds in which each judge reads the others' reasons
# once and ranks again (0-3).
deliberate_rounds: 0

# Checks that do not depend on the coder. kind: command (exit code 0 passes), scope, secrets,
# judge (a model answering through a verdict schema). on_fail: block (the attempt fails and is
# recovered) or warn (reported only, also when the check cannot run at all). Ids are unique.
# A command runs at the top of a fresh checkout of the change, with this repository's own
# .venv/bin, venv/bin and node_modules/.bin (those that exist) first on its PATH.
@VALIDATORS@

# How validator results combine: unanimous | majority | quorum | any. Only pass counts as a
# vote for; any block stops the wave. `threshold` is the share `quorum` needs (0-1].
policy: unanimous
threshold: 0.67

# max_attempts: runs of this task before it is held for a human (1-100).
# max_recovery: recovery waves inside one run after a blocked attempt (0-20); a wave that
#   fails exactly as the one before it ends the run early ("stuck").
# max_refunds: refunded runs in a row (quota, provider fault, interruption, environment error)
#   before the task is held for a human (1-100); `assay task release` starts the count again.
# max_files, max_bytes, max_file_bytes, max_depth: a candidate's bounds, checked while it is
#   captured: new files, bytes of new or resized files, the largest such file, path depth.
#   Over one: halt-scope-breach with the figure, the task held for a human.
# max_cost_usd, max_tokens: caps on what one run spends (every coder and judge of it), checked
#   as the programs report their usage; task_max_cost_usd, task_max_tokens: the same across
#   all the task's runs (a refunded run's spending counts). Spent: halt-budget-exhausted fires
#   with the figures, and by default (on_exhausted: hold) the coders are stopped and the task
#   is held for a human; on_exhausted: warn only warns. Unset: no cap. A cost cap cannot stop
#   a coder whose program reports no cost (codex; an llm endpoint that gives no usage.cost):
#   a warning says so; cap its tokens instead.
budgets:
  max_attempts: 3
  max_recovery: 2
  max_refunds: 3
  max_files: 20000
  max_bytes: 104857600
  max_file_bytes: 10485760
  max_depth: 64
  # max_cost_usd: 5.00
  # max_tokens: 2000000
  # task_max_cost_usd: 20.00
  # on_exhausted: hold

# Where a passing change goes: merge (one squashed commit on the base branch, with Assay-Task,
# Assay-Run and Assay-Attempts trailers; never into a dirty checkout; if the branch moved, the
# change is validated again on its new tip first), branch (left on assay/<run>/<seat>, status
# ready), pr (pushed, pull request), none.
land: branch

# land: merge needs a validator that verifies the change (a command or judge validator). With
# only the built-in scope and secret checks the run fires halt-verification-gap and leaves the
# branch instead (status ready). true: merge such a change anyway.
land_unverified: false

# For land: pr. The branch is pushed to `remote` and a pull request opened through the GitHub
# REST API with the token in GITHUB_TOKEN. Optional: repo (owner/name; default: read from the
# remote's URL), base (default: the branch the run started from), api_base (default:
# $ASSAY_GITHUB_API or https://api.github.com; set it for GitHub Enterprise), body. title and
# body may use {title} {task} {task_id} {run_id} {branch} {base}. A run the validators still
# block is left as a draft PR titled "[blocked] ..." and its task is held for a human.
pr:
  remote: origin
  draft: false
  title: "{title}"

# Variables passed to coders and validators on top of a small allowlist (PATH, HOME, locale,
# the coder's own credentials). Nothing else from your shell reaches them.
env: {}

# Every process of a seat (the coder, its tools, command validators, CLI judges) runs in a
# bubblewrap sandbox: only the seat's own folder, a private $HOME and /tmp are writable; the
# operator's home and this repository are not visible; /proc shows the sandbox only. `none`
# turns that off (recorded in the payload). Needs `bwrap` (Debian/Ubuntu: apt-get install
# bubblewrap).
sandbox: bwrap

# Every seat has a network of its own: nothing on this machine (its loopback, the ledger, the
# dashboard, Temporal, local sockets) is reachable from it. `on`: out only through assay's
# allowlisting proxy, to the coder's model provider (from its settings or base_url) and the
# hosts listed under `allow` (`host`, `host:port`, `*.domain` or a URL; a bare host means ports
# 443 and 80). `none`: nothing for command coders (an agent still reaches its model, nothing
# else). `host`: this machine's network, loopback included (warned about, in the payload).
# Command validators get no network unless `validators` is `on` (the coder's allowlist).
network:
  mode: "on"
  allow: []
  validators: none

# What the built-in secret check does with a finding of a generic detector (a password-like
# keyword, a high-entropy string, credentials in a URL) that is new in the change or in the
# coder's output: standard warns (reported in the payload, the change may land), strict blocks
# and fires halt-secret-exposure like a provider's credential (AWS, GitHub, private keys, ...)
# always does. A value already in the base commit or listed in its .secrets.baseline is never a
# finding; on a new line marked `# pragma: allowlist secret` a generic finding is dropped and a
# provider's credential only warns (the coder may have written the pragma itself).
secrets: standard

# Halts the run arms. The seven canonical classes are armed whether listed or not: a halt of
# your own is added by listing just it (e.g. `halt_classes: [{name: halt-db-migration,
# severity: block}]`). A canonical severity may be raised (warn -> block), never lowered.
# Severities: block, warn, log. (`assay halt arm --contract` wants all seven listed, as here.)
halt_classes:
  - {name: halt-anchor-resolution-failure, severity: block}
  - {name: halt-scope-breach, severity: block}
  - {name: halt-secret-exposure, severity: block}
  - {name: halt-spec-contradiction, severity: block}
  - {name: halt-irreversible-action, severity: block}
  - {name: halt-budget-exhausted, severity: warn}
  - {name: halt-verification-gap, severity: warn}
"""


@functools.cache
def placeholder_task() -> str:
    """The template's ``task:``, words joined by one space, which a contract must replace
    before it runs (read from the template itself, so the two never drift)."""
    loaded = yaml.safe_load(TEMPLATE.replace(VALIDATORS_MARK, ""))
    return " ".join(str(loaded["task"]).split())


def placeholder_problem(task: str) -> str | None:
    """Why ``task`` cannot be run as it is: it still holds the template's placeholder (with
    or without words added around it), or None."""
    if placeholder_task().casefold() in " ".join(task.split()).casefold():
        return (
            "the task is still the template's placeholder; replace it with the change you "
            "want and the test or command that must pass when it is done"
        )
    return None
