"""The dispatch contract: parsing from YAML text, errors with key and line, the template, flags."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from assay.core.contract import (
    DEFAULT_PROTECT,
    CoderSpec,
    Contract,
    ContractError,
    HaltClass,
    JudgeSpec,
    PullRequestSettings,
    Scope,
    contract_from_flags,
    contract_template,
    contract_to_yaml,
    parse_contract,
)
from assay.core.contract_yaml import placeholder_problem, placeholder_task
from assay.core.halts import CANONICAL_HALTS
from assay.core.vocab import (
    CoderKind,
    HaltSeverity,
    JudgeKind,
    LandMode,
    OnFail,
    PolicyMode,
    SecretsMode,
)

SEVEN = {name.value: sev for name, sev in CANONICAL_HALTS.items()}


def halts_yaml(overrides: dict[str, str] | None = None, extra: str = "") -> str:
    severities = {name: sev.value for name, sev in SEVEN.items()} | (overrides or {})
    lines = [f"  - {{name: {name}, severity: {sev}}}\n" for name, sev in severities.items()]
    return "halt_classes:\n" + "".join(lines) + extra


def refused(text: str) -> ContractError:
    with pytest.raises(ContractError) as info:
        parse_contract(text, "c.yaml")
    error = info.value
    assert str(error).startswith("c.yaml"), error
    assert error.line is not None
    return error


def assert_names(error: ContractError, key: str, line: int) -> None:
    assert (error.key, error.line) == (key, line), str(error)
    assert key in str(error) and f"line {line}" in str(error), str(error)


# --- parsing -------------------------------------------------------------------------------


def test_the_design_example_parses() -> None:
    text = """\
task: |
  Make slugify() keep digits; tests/test_slug.py::test_digits must pass.
anchors: [src/slug.py, "src/slug.py::slugify"]
scope: {allow: ["src/**", "tests/**"], protect: [".github/**"]}
coder: {kind: claude, model: claude-sonnet-4-5, timeout_seconds: 1800, max_turns: 40}
seats: 1
judges: 0
validators:
  - {id: tests, kind: command, run: "pytest -q"}
  - {id: lint, kind: command, run: "ruff check .", on_fail: warn}
  - {id: review, kind: judge, model: gpt-5-mini, criteria: ["public API unchanged"]}
policy: unanimous
budgets: {max_attempts: 3, max_recovery: 2}
land: branch
"""
    contract = parse_contract(text + halts_yaml())
    assert contract.task.startswith("Make slugify()")
    assert contract.anchors == ["src/slug.py", "src/slug.py::slugify"]
    assert contract.coder_for_seat(1).kind is CoderKind.CLAUDE
    assert contract.coder_for_seat(1).max_turns == 40
    assert [v.id for v in contract.validators] == ["tests", "lint", "review"]
    assert contract.validators[1].on_fail is OnFail.WARN
    assert contract.land is LandMode.BRANCH
    assert contract.scope.protect == [".github/**"]


def test_a_minimal_contract_gets_the_defaults_and_the_seven_halts() -> None:
    contract = parse_contract("task: fix it\n")
    assert {h.name: h.severity for h in contract.halt_classes} == SEVEN
    assert contract.seats == 1 and contract.land is LandMode.BRANCH
    assert contract.policy is PolicyMode.UNANIMOUS
    assert contract.halt_document()["halt_classes"][0] == {
        "name": "halt-anchor-resolution-failure",
        "severity": "block",
    }


def test_coder_shorthand_and_lists_cycle_over_seats() -> None:
    assert parse_contract("task: x\ncoder: codex\n").coder_for_seat(1).kind is CoderKind.CODEX
    contract = parse_contract("task: x\nseats: 3\ncoder: [claude, {kind: aider}]\n")
    kinds = [contract.coder_for_seat(seat).kind for seat in (1, 2, 3)]
    assert kinds == [CoderKind.CLAUDE, CoderKind.AIDER, CoderKind.CLAUDE]


def test_judges_parse_with_shorthand_and_cycle() -> None:
    contract = parse_contract(
        "task: t\njudges: 3\ndeliberate_rounds: 1\n"
        "judge: [claude, {kind: llm, model: m, base_url: 'http://h/v1', max_turns: 2}]\n"
    )
    assert contract.deliberate_rounds == 1
    kinds = [spec.kind for spec in (contract.judge_for(i) for i in range(3)) if spec]
    assert kinds == [JudgeKind.CLAUDE, JudgeKind.LLM, JudgeKind.CLAUDE]
    second = contract.judge_for(1)
    assert second is not None and (second.model, second.max_turns) == ("m", 2)
    assert parse_contract("task: t\njudge: codex\n").judge == JudgeSpec(kind=JudgeKind.CODEX)
    default = parse_contract("task: t\n")
    assert (default.judge, default.deliberate_rounds, default.judge_for(0)) == (None, 0, None)
    assert parse_contract(contract_to_yaml(contract)) == contract


def test_bad_judges_are_refused_on_their_line() -> None:
    assert_names(refused("task: t\njudge: {kind: llm}\n"), "judge", 2)
    assert_names(refused("task: t\njudge: {kind: gemini}\n"), "judge.kind", 2)
    assert_names(refused("task: t\njudge: []\n"), "judge", 2)
    assert_names(refused("task: t\njudge: {kind: codex, args: [x]}\n"), "judge.args", 2)
    assert_names(refused("task: t\ndeliberate_rounds: -1\n"), "deliberate_rounds", 2)


def test_halts_may_be_added_and_raised() -> None:
    text = "task: x\n" + halts_yaml(
        {"halt-verification-gap": "block"}, extra="  - {name: halt-own, severity: log}\n"
    )
    contract = parse_contract(text)
    by_name = {h.name: h.severity for h in contract.halt_classes}
    assert by_name["halt-verification-gap"] is HaltSeverity.BLOCK
    assert by_name["halt-own"] is HaltSeverity.LOG
    assert len(by_name) == 8


# --- errors name the key and the line -------------------------------------------------------


def test_unknown_top_level_key() -> None:
    error = refused("task: x\nseats: 2\nlnad: merge\n")
    assert_names(error, "lnad", 3)
    assert "unknown key `lnad`" in str(error) and "did you mean `land`" in str(error)


def test_unknown_nested_key_in_a_list_item() -> None:
    text = "task: x\nvalidators:\n  - id: a\n    run: b\n  - id: c\n    run: d\n    on_fial: warn\n"
    error = refused(text)
    assert_names(error, "validators[1].on_fial", 7)
    assert "on_fail" in str(error)


def test_bad_enum_value_in_a_flow_mapping() -> None:
    text = "task: x\nvalidators:\n  - {id: a, run: b}\n  - {id: c, run: d, on_fail: explode}\n"
    error = refused(text)
    assert_names(error, "validators[1].on_fail", 4)
    assert "'explode'" in str(error)


def test_secrets_is_standard_unless_the_contract_says_strict() -> None:
    assert parse_contract("task: x\n").secrets is SecretsMode.STANDARD
    assert parse_contract("task: x\nsecrets: strict\n").secrets is SecretsMode.STRICT
    error = refused("task: x\nsecrets: lax\n")
    assert_names(error, "secrets", 2)
    assert "'lax'" in str(error)


def test_bad_coder_setting_reports_only_the_matching_shape() -> None:
    error = refused("task: x\ncoder:\n  kind: claude\n  max_turn: 3\n")
    assert_names(error, "coder.max_turn", 4)
    assert len(error.problems) == 1  # not the list[CoderSpec] branch's noise
    error = refused("task: x\ncoder:\n  - kind: claude\n  - kind: nope\n")
    assert_names(error, "coder[1].kind", 4)
    assert len(error.problems) == 1


def test_nested_mapping_value() -> None:
    assert_names(refused("task: x\nbudgets:\n  max_attempts: 0\n"), "budgets.max_attempts", 3)
    assert_names(refused("task: x\nenv:\n  PORT: 8080\n"), "env.PORT", 3)
    assert_names(refused("task: x\nscope:\n  allw: []\n"), "scope.allw", 3)


def test_missing_task_points_at_the_top() -> None:
    error = refused("\n\nseats: 2\n")
    assert error.key == "task" and "missing" in str(error)
    assert error.line == 3  # the mapping starts on line 3


def test_blank_task_is_refused() -> None:
    assert_names(refused("seats: 1\ntask: '   '\n"), "task", 2)


@pytest.mark.parametrize("key", ["coder", "judge"])
def test_an_empty_list_of_coders_or_judges_is_refused(key: str) -> None:
    error = refused(f"task: t\n{key}: []\n")
    assert_names(error, key, 2)
    assert f"the list of {key}s is empty" in str(error)


def test_command_validator_without_run() -> None:
    error = refused("task: x\nvalidators:\n  - id: t\n    kind: command\n")
    assert_names(error, "validators[0]", 3)
    assert "needs `run`" in str(error)


def test_duplicate_validator_ids() -> None:
    error = refused("task: x\nvalidators:\n  - {id: t, run: a}\n  - {id: t, run: b}\n")
    assert_names(error, "validators", 2)
    assert "used twice" in str(error)


def test_several_problems_are_all_reported_in_line_order() -> None:
    error = refused("task: x\nseats: 0\njudges: -1\nland: sideways\n")
    assert [(p.key, p.line) for p in error.problems] == [
        ("seats", 2),
        ("judges", 3),
        ("land", 4),
    ]
    assert "3 problems" in str(error)


def test_duplicate_keys_are_refused() -> None:
    error = refused("task: x\nseats: 1\ncoder:\n  kind: claude\n  kind: codex\n")
    assert_names(error, "coder.kind", 5)
    assert "first on line 4" in str(error)


def test_yaml_syntax_error_gives_line_and_column() -> None:
    error = refused("task: x\nvalidators: [\n  {id: a\nseats: 1\n")
    assert error.line is not None and error.line >= 3
    assert "YAML syntax error" in str(error) and "column" in str(error)
    error = refused("task: x\n  bad: [\n")
    assert error.line == 2 and error.problems[0].column == 6


def test_a_value_yaml_cannot_construct_names_its_line() -> None:
    error = refused("task: x\nenv:\n  A: 2020-02-30\n")
    assert error.line == 3 and "day is out of range" in str(error)


@pytest.mark.parametrize(
    ("text", "shape"),
    [("- a\n- b\n", "a list"), ("just words\n", "a scalar"), ("", "empty"), ("# c\n", "empty")],
)
def test_top_level_must_be_a_mapping(text: str, shape: str) -> None:
    error = refused(text)
    assert shape in str(error) and error.line == 1


# --- halt classes ---------------------------------------------------------------------------


def test_a_lowered_canonical_severity_is_refused_on_its_line() -> None:
    error = refused("task: x\n" + halts_yaml({"halt-scope-breach": "warn"}))
    assert_names(error, "halt_classes[1]", 4)
    assert "never lowered" in str(error)
    error = refused("task: x\n" + halts_yaml({"halt-budget-exhausted": "log"}))
    assert_names(error, "halt_classes[5]", 8)


def test_a_halt_of_ones_own_is_added_without_restating_the_seven() -> None:
    text = "task: x\nhalt_classes:\n  - {name: halt-db-migration, severity: block}\n"
    contract = parse_contract(text, "c.yaml")
    armed = [(h.name, h.severity) for h in contract.halt_classes]
    assert armed == [*SEVEN.items(), ("halt-db-migration", HaltSeverity.BLOCK)]
    assert {h.name for h in parse_contract("task: x\nhalt_classes: []\n").halt_classes} == set(
        SEVEN
    )


def test_a_canonical_halt_listed_alone_keeps_its_raised_severity_and_the_rest_are_added() -> None:
    text = "task: x\nhalt_classes:\n  - {name: halt-verification-gap, severity: block}\n"
    armed = {h.name: h.severity for h in parse_contract(text).halt_classes}
    assert armed == SEVEN | {"halt-verification-gap": HaltSeverity.BLOCK}
    lowered = "task: x\nhalt_classes:\n  - {name: halt-scope-breach, severity: log}\n"
    assert "never lowered" in str(refused(lowered))


def test_a_contract_listing_all_seven_arms_exactly_its_list() -> None:
    reordered = dict(reversed(list(SEVEN.items())))
    lines = "".join(f"  - {{name: {n}, severity: {s.value}}}\n" for n, s in reordered.items())
    contract = parse_contract("task: x\nhalt_classes:\n" + lines)
    assert [(h.name, h.severity) for h in contract.halt_classes] == list(reordered.items())


@pytest.mark.parametrize(
    ("typo", "meant"),
    [
        ("halt-scope-breech", "halt-scope-breach"),
        ("halt-verification-gaps", "halt-verification-gap"),
        ("halt-budget-exausted", "halt-budget-exhausted"),
    ],
)
def test_a_halt_a_typo_away_from_a_canonical_one_is_refused_naming_it(
    typo: str, meant: str
) -> None:
    error = refused(f"task: x\nhalt_classes:\n  - {{name: {typo}, severity: block}}\n")
    assert_names(error, "halt_classes", 2)
    assert f"did you mean {meant}?" in str(error)


def test_a_halt_of_ones_own_with_a_name_near_a_canonical_one_is_kept() -> None:
    text = "task: x\nhalt_classes:\n  - {name: halt-budget-exceeded, severity: warn}\n"
    assert parse_contract(text).halt_classes[-1].name == "halt-budget-exceeded"


def test_a_halt_listed_twice_is_refused() -> None:
    extra = "  - {name: halt-scope-breach, severity: block}\n"
    assert "twice" in str(refused("task: x\n" + halts_yaml(extra=extra)))


def test_halt_class_model_enforces_the_floor() -> None:
    with pytest.raises(ValueError, match="never lowered"):
        HaltClass(name="halt-secret-exposure", severity=HaltSeverity.LOG)
    assert HaltClass(name="halt-own", severity=HaltSeverity.LOG).severity is HaltSeverity.LOG


# --- the pr settings (land: pr) --------------------------------------------------------------


def test_pr_settings_default_and_parse() -> None:
    assert parse_contract("task: x\n").pr == PullRequestSettings()
    defaults = PullRequestSettings()
    assert (defaults.remote, defaults.base, defaults.repo, defaults.api_base) == (
        "origin", None, None, None,
    )  # fmt: skip
    assert (defaults.draft, defaults.title, defaults.body) == (False, "{title}", None)
    contract = parse_contract(
        "task: x\nland: pr\npr:\n  remote: upstream\n  base: develop\n"
        "  api_base: https://ghe.example.com/api/v3\n  repo: octo/slug.py\n  draft: true\n"
        '  title: "assay: {title}"\n  body: "{task} ({run_id} on {branch} into {base})"\n'
    )
    assert contract.land is LandMode.PR
    pr = contract.pr
    assert (pr.remote, pr.base, pr.repo, pr.draft) == ("upstream", "develop", "octo/slug.py", True)
    assert pr.api_base == "https://ghe.example.com/api/v3"
    fields = {"title": "T", "task": "do", "run_id": "r1", "branch": "b", "base": "main"}
    assert pr.render(pr.title, fields) == "assay: T"
    assert pr.render(pr.body or "", fields) == "do (r1 on b into main)"
    assert parse_contract(contract_to_yaml(contract)) == contract


@pytest.mark.parametrize(
    ("line", "key", "said"),
    [
        ("  reop: o/r", "pr.reop", "did you mean `repo`"),
        ("  repo: just-a-name", "pr.repo", "pattern"),
        ("  api_base: ftp://x", "pr.api_base", "pattern"),
        ("  draft: maybe", "pr.draft", "bool"),
        ('  title: "{titel}"', "pr.title", "unknown placeholder(s) titel"),
        ('  body: "{task.upper}"', "pr.body", "unknown placeholder"),
        ('  title: "{title:d}"', "pr.title", "not a valid template"),
        ('  title: "{title"', "pr.title", "not a valid template"),
        ("  remote: ''", "pr.remote", "at least 1"),
    ],
)
def test_bad_pr_settings_are_refused_on_their_line(line: str, key: str, said: str) -> None:
    error = refused(f"task: x\nland: pr\npr:\n{line}\n")
    assert_names(error, key, 4)
    assert said in str(error), str(error)


# --- template and YAML output ---------------------------------------------------------------


def test_the_template_parses_and_explains_every_key() -> None:
    text = contract_template()
    contract = parse_contract(text, "template")
    assert {h.name: h.severity for h in contract.halt_classes} == SEVEN
    data = yaml.safe_load(text)
    assert set(data) == set(Contract.model_fields)
    lines = text.splitlines()
    top_level = [i for i, ln in enumerate(lines) if ln[:1].isalpha()]
    for key in Contract.model_fields:
        at = next(i for i in top_level if lines[i].startswith(f"{key}:"))
        above = at - 1
        while above in top_level:  # keys that share one comment (policy, threshold)
            above -= 1
        assert lines[above].startswith("#"), f"{key} has no comment above it"
        comment = []
        while above >= 0 and lines[above].startswith("#"):
            comment.append(lines[above])
            above -= 1
        assert at - 1 not in top_level or key in " ".join(comment), key
    for key in CoderSpec.model_fields:
        assert f"{key}:" in text, f"coder setting {key} is not explained"


def test_contract_to_yaml_round_trips() -> None:
    contract = parse_contract(contract_template())
    assert parse_contract(contract_to_yaml(contract)) == contract
    built = contract_from_flags("do: it\n", coder="claude:m", validators=["pytest -q"])
    assert parse_contract(contract_to_yaml(built)) == built


@pytest.mark.parametrize(
    ("text", "protect"),
    [
        ("task: x\n", [".github/**"]),
        ("task: x\nscope: {allow: ['src/**']}\n", [".github/**"]),
        ("task: x\nscope: {protect: []}\n", []),
        ("task: x\nscope: {protect: ['docs/**']}\n", ["docs/**"]),
    ],
)
def test_protect_defaults_to_github_unless_the_contract_sets_it(
    text: str, protect: list[str]
) -> None:
    assert parse_contract(text).scope.protect == protect


def test_the_templates_task_is_the_placeholder_a_run_refuses() -> None:
    task = parse_contract(contract_template()).task
    assert " ".join(task.split()) == placeholder_task() and placeholder_task().endswith(".")
    assert placeholder_problem(task) is not None
    shouting = "  " + placeholder_task().upper().replace(" ", "\n  ") + "\n\nAlso fix add().\n"
    assert placeholder_problem(shouting) is not None  # the placeholder kept, words added
    assert placeholder_problem("Fix add(); tests/test_add.py must pass.") is None
    assert placeholder_problem("Describe the change in CHANGELOG.md.") is None


def test_the_template_default_and_readme_agree_on_protect() -> None:
    template = yaml.safe_load(contract_template())["scope"]
    assert template["protect"] == list(DEFAULT_PROTECT) == Scope().protect == [".github/**"]
    assert template["allow"] == Scope().allow
    readme = (Path(__file__).resolve().parents[3] / "README.md").read_text(encoding="utf-8")
    assert 'protect` defaults to `[".github/**"]`' in readme
    assert "`protect: []`" in readme


@pytest.mark.parametrize(
    ("text", "allowed"),
    [
        ("task: x\n", False),
        ("task: x\nscope: {allow: ['src/**']}\n", False),
        ("task: x\nscope: {allow_type_changes: true}\n", True),
        ("task: x\nscope: {allow_type_changes: false}\n", False),
    ],
)
def test_type_changes_are_refused_unless_the_contract_allows_them(text: str, allowed: bool) -> None:
    assert parse_contract(text).scope.allow_type_changes is allowed


@pytest.mark.parametrize("value", ["'yes'", "1", "'true'", "[true]"])
def test_allow_type_changes_is_a_boolean_never_coerced(value: str) -> None:
    with pytest.raises(ContractError) as caught:
        parse_contract(f"task: x\nscope:\n  allow_type_changes: {value}\n")
    assert "scope.allow_type_changes" in str(caught.value)
    assert "line 3" in str(caught.value)


def test_the_template_says_type_changes_are_refused_by_default() -> None:
    template = yaml.safe_load(contract_template())["scope"]
    assert template["allow_type_changes"] is False is Scope().allow_type_changes
    assert "allow_type_changes: true" in contract_template()
    readme = (Path(__file__).resolve().parents[3] / "README.md").read_text(encoding="utf-8")
    assert "`scope: {allow_type_changes: true}`" in readme
    assert "`candidates[].type_changes: [{path, before, after}]`" in readme


# --- built from flags -----------------------------------------------------------------------


def test_contract_from_flags() -> None:
    contract = contract_from_flags(
        "Fix the bug",
        coder_command="./agent.sh {prompt_file}",
        validators=["pytest -q", "lint=ruff check .", "FOO=1 make test"],
        land="merge",
        seats=2,
        judges=1,
        max_attempts=4,
        max_recovery=1,
        policy=PolicyMode.MAJORITY,
        scope_allow=["src/**"],
        scope_protect=["secrets/**"],
    )
    spec = contract.coder_for_seat(1)
    assert spec.kind is CoderKind.COMMAND and spec.command == "./agent.sh {prompt_file}"
    assert [(v.id, v.run) for v in contract.validators] == [
        ("v1", "pytest -q"),
        ("lint", "ruff check ."),
        ("v3", "FOO=1 make test"),
    ]
    assert contract.land is LandMode.MERGE and contract.policy is PolicyMode.MAJORITY
    assert (contract.seats, contract.judges) == (2, 1)
    assert (contract.budgets.max_attempts, contract.budgets.max_recovery) == (4, 1)
    assert contract.scope.allow == ["src/**"] and contract.scope.protect == ["secrets/**"]
    assert {h.name: h.severity for h in contract.halt_classes} == SEVEN


def test_contract_from_flags_defaults_and_coder_model() -> None:
    contract = contract_from_flags("Fix it")
    assert contract_from_flags("Fix it", validators=None, scope_allow=None) == contract
    assert contract.coder_for_seat(1).kind is CoderKind.CLAUDE
    assert contract.validators == [] and contract.scope.allow == ["**"]
    assert contract.scope.protect == [".github/**"]  # `assay run "..."` is protected too
    assert contract_from_flags("x", scope_protect=[]).scope.protect == []
    assert len(contract.halt_classes) == 7
    spec = contract_from_flags("x", coder="codex:gpt-5-codex").coder_for_seat(1)
    assert (spec.kind, spec.model) == (CoderKind.CODEX, "gpt-5-codex")


def test_contract_from_flags_names_the_llm_endpoint() -> None:
    url = "http://localhost:8000/v1"
    built = contract_from_flags("x", coder="llm", model="m", base_url=url, api_key_env="MY_KEY")
    spec = built.coder_for_seat(1)
    assert (spec.kind, spec.model, spec.base_url, spec.api_key_env) == (
        CoderKind.LLM,
        "m",
        url,
        "MY_KEY",
    )
    assert contract_from_flags("x", coder="llm:m", model="m").coder_for_seat(1).model == "m"
    with pytest.raises(ValueError, match="different models"):
        contract_from_flags("x", coder="llm:a", model="b")


def test_an_llm_coder_without_a_model_is_one_problem_never_a_union_member() -> None:
    with pytest.raises(ContractError) as info:
        contract_from_flags("x", coder="llm")
    assert [p.key for p in info.value.problems] == ["coder"]
    assert "needs `model`" in str(info.value) and "valid list" not in str(info.value)


@pytest.mark.parametrize(
    ("kwargs", "key"),
    [
        ({"coder": "wizard"}, "coder.kind"),
        ({"land": "sideways"}, "land"),
        ({"seats": 0}, "seats"),
        ({"validators": ["a=x", "a=y"]}, "validators"),
    ],
)
def test_contract_from_flags_refuses_bad_values(kwargs: dict[str, Any], key: str) -> None:
    with pytest.raises(ContractError) as info:
        contract_from_flags("x", **kwargs)
    assert info.value.key == key and str(info.value).startswith("command-line flags")


# --- nothing but ContractError ----------------------------------------------------------------

_scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=8))
_keys = st.sampled_from([*Contract.model_fields, "id", "run", "kind", "name", "severity", "x"])
_values = st.recursive(
    _scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_keys, inner, max_size=4),
    max_leaves=12,
)


def _only_contract_errors(text: str) -> None:
    try:
        result = parse_contract(text, "h.yaml")
    except ContractError as error:
        assert error.problems and all(p.line is not None for p in error.problems), str(error)
    else:
        assert isinstance(result, Contract)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(max_size=200))
def test_arbitrary_text_raises_only_contract_errors(text: str) -> None:
    _only_contract_errors(text)


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(_keys, _values, max_size=6), st.booleans())
def test_arbitrary_yaml_documents_raise_only_contract_errors(
    data: dict[str, Any], flow: bool
) -> None:
    _only_contract_errors(yaml.safe_dump(data, default_flow_style=flow))


@pytest.mark.parametrize(
    "text",
    [
        "task: &a [*a]\n",
        "a: &x {b: *x}\ntask: y\n",
        "[" * 5000 + "]" * 5000,
        "task: !!python/object:os.system echo\n",
        "task: x\n? [a]\n: b\n",
        "task: x\n1: 2\n",
        "task: x\n---\ntask: y\n",
        "\x00",
        "task: x\nenv: {A: !!binary aGVsbG8=}\nseats: [1]\n",
    ],
)
def test_hostile_yaml_raises_only_contract_errors(text: str) -> None:
    with pytest.raises(ContractError):
        parse_contract(text)


@pytest.mark.parametrize(
    ("validators", "verified"),
    [
        ("[]", False),
        ("[{id: s, kind: scope}, {id: x, kind: secrets}]", False),
        ('[{id: t, kind: command, run: "true"}]', True),
        ("[{id: r, kind: judge, model: m}]", True),
        # A check that only warns never stops a failing change: it verifies nothing.
        ('[{id: t, kind: command, run: "false", on_fail: warn}]', False),
        ("[{id: r, kind: judge, model: m, on_fail: warn}]", False),
        ('[{id: l, kind: command, run: "x", on_fail: warn}, {id: t, kind: command, run: y}]', True),
    ],
)
def test_only_a_command_or_judge_validator_verifies(validators: str, verified: bool) -> None:
    contract = parse_contract(f"task: x\nvalidators: {validators}\n")
    assert contract.verified is verified
    assert contract.land_unverified is False


def test_land_unverified_is_a_strict_boolean() -> None:
    assert parse_contract("task: x\nland_unverified: true\n").land_unverified is True
    for value in ("1", '"true"', "0", "[]"):
        error = refused(f"task: x\nland_unverified: {value}\n")
        assert_names(error, "land_unverified", 2)


# --- budgets.max_refunds ----------------------------------------------------------------------


def test_max_refunds_defaults_to_three_and_is_in_the_template() -> None:
    assert Contract(task="x").budgets.max_refunds == 3
    assert parse_contract(contract_template()).budgets.max_refunds == 3
    assert "max_refunds:" in contract_template()
    assert parse_contract("task: x\nbudgets: {max_refunds: 7}\n").budgets.max_refunds == 7


@pytest.mark.parametrize("value", ["0", "-1", "true", "'3'", "2.5", "null"])
def test_max_refunds_is_a_strict_positive_integer(value: str) -> None:
    with pytest.raises(ContractError, match="max_refunds"):
        parse_contract(f"task: x\nbudgets: {{max_refunds: {value}}}\n")


# --- booleans are not numbers; text must be storable ------------------------------------------


@pytest.mark.parametrize(
    ("text", "key", "line"),
    [
        ("task: x\njudges: true\n", "judges", 2),
        ("task: x\nseats: false\n", "seats", 2),
        ("task: x\nbudgets:\n  max_attempts: true\n", "budgets.max_attempts", 3),
        ("task: x\nbudgets: {max_recovery: false}\n", "budgets.max_recovery", 2),
        ("task: x\ncoder: {kind: claude, max_turns: true}\n", "coder.max_turns", 2),
        ("task: x\ncoder: {kind: claude, timeout_seconds: true}\n", "coder.timeout_seconds", 2),
        ("task: x\nthreshold: true\n", "threshold", 2),
        ("task: x\ndeliberate_rounds: true\n", "deliberate_rounds", 2),
    ],
)
def test_a_boolean_is_not_a_number(text: str, key: str, line: int) -> None:
    error = refused(text)
    assert_names(error, key, line)
    assert "expected a number, got the boolean" in str(error)


def test_only_a_number_yaml_took_for_text_is_said_to_be_one() -> None:
    assert "write it as 1.0e+308)" in str(refused("task: x\nthreshold: 1e308\n"))
    assert "write it as 0.5)" in str(refused("task: x\nthreshold: 5e-1\n"))
    quoted = str(refused('task: x\nseats: "2"\n'))  # the user's own quotes: no such hint
    assert "(got '2')" in quoted and "YAML reads" not in quoted


@pytest.mark.parametrize(
    ("text", "key", "line", "said"),
    [
        # An unquoted yes/no/on/off/true/false is a YAML boolean: said in YAML's words, with
        # the way out, never as Python's True / False.
        ("task: x\nsandbox: off\n", "sandbox", 2, "(got the YAML boolean false"),
        ("task: x\nland: yes\n", "land", 2, "(got the YAML boolean true"),
        ("task: true\n", "task", 1, "(got the YAML boolean true"),
        ("task: x\nnetwork: {mode: off}\n", "network.mode", 2, "(got the YAML boolean false"),
        (
            "task: x\nvalidators: [{id: t, kind: command, run: true}]\n",
            "validators[0].run",
            2,
            "(got the YAML boolean true",
        ),
        # A union member's name (str, list[str], CoderSpec) is not a key of the contract.
        (
            "task: x\ncoder: {kind: command, command: true}\n",
            "coder.command",
            2,
            "(got the YAML boolean true",
        ),
        ("task: x\ncoder: {kind: command, command: 123}\n", "coder.command", 2, "(got 123)"),
        ("task: x\ncoder: {kind: command, command: [ls, 1]}\n", "coder.command[1]", 2, "(got 1)"),
        ("task: x\ncoder: 5\n", "coder", 2, "(got 5)"),
        # YAML 1.1 reads an exponent without a dot as text: said so, with the spelling it reads.
        (
            "task: x\ncoder: {kind: claude, timeout_seconds: 1e3}\n",
            "coder.timeout_seconds",
            2,
            "(got '1e3', which YAML reads as text: write it as 1000)",
        ),
        # Where text would not do either, quoting is not suggested.
        (
            "task: x\nscope: yes\n",
            "scope",
            2,
            "should be a mapping (key: value) (got the YAML boolean true)",
        ),
    ],
)
def test_what_a_wrong_value_was_is_said_in_yaml_words(
    text: str, key: str, line: int, said: str
) -> None:
    error = refused(text)
    assert_names(error, key, line)
    message = str(error)
    assert said in message
    assert ("quote it" in message) is ("YAML boolean" in said and "mapping" not in said)
    for internal in ("True", "False", ".str", "CoderSpec", "instance of", "list[str]"):
        assert internal not in message, message


@pytest.mark.parametrize(
    ("text", "key", "line"),
    [
        (
            "task: x\ncoder: {kind: llm, model: m, base_url: 'http://h:port/v1'}\n",
            "coder.base_url",
            2,
        ),
        ("task: x\ncoder: {kind: claude, base_url: 'http:///v1'}\n", "coder.base_url", 2),
        ("task: x\ncoder: {kind: llm, model: m, base_url: localhost:8000}\n", "coder.base_url", 2),
        (
            "task: x\njudges: 1\njudge: {kind: llm, model: m, base_url: 'ftp://h'}\n",
            "judge.base_url",
            3,
        ),
        (
            "task: x\nvalidators: [{id: r, kind: judge, model: m, base_url: 'http://h:0/v1'}]\n",
            "validators[0].base_url",
            2,
        ),
    ],
)
def test_an_endpoint_url_no_client_can_read_is_refused_at_its_key(
    text: str, key: str, line: int
) -> None:
    error = refused(text)
    assert_names(error, key, line)
    assert "e.g. http://localhost:8000/v1 (got '" in str(error)


def test_an_endpoint_url_hides_its_password_when_refused() -> None:
    error = refused("task: x\ncoder: {kind: llm, model: m, base_url: 'http://u:pw@h:x/v1'}\n")
    assert "pw" not in str(error) and "(got 'http://***@h:x/v1')" in str(error)


def test_an_integer_timeout_is_still_a_number() -> None:
    contract = parse_contract("task: x\ncoder: {kind: claude, timeout_seconds: 60}\n", "c.yaml")
    assert contract.coder_for_seat(1).timeout_seconds == 60.0


@pytest.mark.parametrize(
    ("text", "key", "line", "why"),
    [
        ('task: "\\ud800"\n', "task", 1, "U+D800, a lone surrogate"),
        ('task: x\nanchors: ["a\\udfff"]\n', "anchors", 2, "U+DFFF"),
        ('task: "fix\\0it"\n', "task", 1, "NUL character"),
        ('task: x\nenv: {"K\\0": v}\n', "env", 2, "NUL character"),
        (
            'task: x\ncoder: {kind: command, command: "echo \\ud800"}\n',
            "coder.command",
            2,
            "U+D800",
        ),
    ],
)
def test_text_that_cannot_be_stored_is_refused_with_key_and_line(
    text: str, key: str, line: int, why: str
) -> None:
    error = refused(text)
    assert error.line == line and error.key.startswith(key), str(error)
    assert why in str(error)


def test_flags_with_unstorable_text_are_refused() -> None:
    with pytest.raises(ContractError) as info:
        contract_from_flags("fix \udcff it")
    assert "U+DCFF" in str(info.value)


# --- what parses can run: budgets are bounded, coders and judges have what they need ---------


@pytest.mark.parametrize(
    ("text", "key", "line"),
    [
        ("task: x\nbudgets:\n  max_recovery: 21\n", "budgets.max_recovery", 3),
        ("task: x\nbudgets:\n  max_recovery: 99999999999999999999\n", "budgets.max_recovery", 3),
        ("task: x\nbudgets:\n  max_attempts: 101\n", "budgets.max_attempts", 3),
        ("task: x\nbudgets:\n  max_refunds: 99999999999999999999\n", "budgets.max_refunds", 3),
    ],
)
def test_budgets_are_bounded(text: str, key: str, line: int) -> None:
    assert_names(refused(text), key, line)


def test_the_largest_budgets_parse() -> None:
    budgets = parse_contract(
        "task: x\nbudgets: {max_recovery: 20, max_attempts: 100, max_refunds: 100}\n"
    ).budgets
    assert (budgets.max_recovery, budgets.max_attempts, budgets.max_refunds) == (20, 100, 100)


@pytest.mark.parametrize(
    ("text", "key", "line", "said"),
    [
        ("task: x\nenv:\n  A=B: a\n", "env", 2, "'A=B' is not a valid environment variable"),
        ('task: x\nenv:\n  "": a\n', "env", 2, "must not be empty"),
        ('task: x\nenv:\n  A: "a\\0b"\n', "env", 2, "NUL"),
        ("task: x\nenv:\n  U: $ASSAY_DATABASE_URL\n", "env", 2, "holds assay's own secret"),
        ("task: x\nenv: {T: $ASSAY_WEB_TOKEN}\n", "env", 2, "holds assay's own secret"),
        (
            "task: x\ncoder: {kind: claude, api_key_env: ASSAY_DATABASE_URL}\n",
            "coder.api_key_env",
            2,
            "ASSAY_DATABASE_URL holds assay's own secret",
        ),
        (
            "task: x\njudge: {kind: llm, model: m, api_key_env: ASSAY_TEMPORAL_TLS_KEY}\n",
            "judge.api_key_env",
            2,
            "holds assay's own secret",
        ),
        (
            "task: x\nvalidators:\n"
            "  - {id: j, kind: judge, model: m, api_key_env: ASSAY_WEB_TOKEN}\n",
            "validators[0].api_key_env",
            3,
            "holds assay's own secret",
        ),
        ("task: x\ncoder: {kind: llm}\n", "coder", 2, "kind llm needs `model`"),
        ("task: x\ncoder:\n  kind: command\n", "coder", 2, "kind command needs `command`"),
        ("task: x\ncoder: {kind: command, command: '  '}\n", "coder", 2, "needs `command`"),
        ("task: x\ncoder: {kind: command, command: []}\n", "coder", 2, "needs `command`"),
        ("task: x\ncoder: {kind: replay, steps: []}\n", "coder", 2, "kind replay needs `steps`"),
        ("task: x\ncoder: replay\n", "coder", 2, "kind replay needs `steps`"),
        (
            "task: x\ncoder: {kind: replay, steps: [{diffs: a.patch}]}\n",
            "coder",
            2,
            "unknown key(s) diffs",
        ),
        (
            "task: x\nvalidators:\n  - {id: j, kind: judge}\n",
            "validators[0]",
            3,
            "kind judge needs `model`",
        ),
        ("task: x\nscope:\n  allow: ['[z-a]']\n", "scope.allow", 3, "not a valid glob"),
        ("task: x\nscope:\n  protect: ['a\\']\n", "scope.protect", 3, "not a valid glob"),
    ],
)
def test_what_a_run_would_refuse_is_refused_on_its_line(
    text: str, key: str, line: int, said: str
) -> None:
    error = refused(text)
    assert error.key is not None and error.key.startswith(key), str(error)
    assert f"line {line}" in str(error) and said in str(error), str(error)


def test_runnable_coders_parse() -> None:
    contract = parse_contract(
        "task: x\ncoder:\n"
        "  - {kind: llm, model: gpt-5-mini}\n"
        "  - {kind: command, command: [my-agent, --go]}\n"
        "  - {kind: replay, steps: [{diff: a.patch}, {script: ./fix.sh, summary: done}]}\n"
        "  - claude\n"
        "validators: [{id: j, kind: judge, model: gpt-5-mini}]\n"
        "scope: {allow: ['src/**', '['], protect: ['!x']}\n"
        "env: {A_B: 'c=d'}\n"
    )
    assert [contract.coder_for_seat(s).kind for s in range(1, 5)] == [
        CoderKind.LLM,
        CoderKind.COMMAND,
        CoderKind.REPLAY,
        CoderKind.CLAUDE,
    ]


def test_a_contract_without_a_coder_runs_claude_as_the_cli_does() -> None:
    assert parse_contract("task: x\n").coder_for_seat(1).kind is CoderKind.CLAUDE
    assert contract_from_flags("x").coder_for_seat(1).kind is CoderKind.CLAUDE


def test_flags_naming_the_command_coder_without_a_command_are_refused() -> None:
    with pytest.raises(ContractError, match="needs `command`"):
        contract_from_flags("x", coder="command")
