"""The preflight's pure part: which key each coder kind reads, the program words of a shell
line, and how each problem is said."""

from __future__ import annotations

import pytest

from assay.core.egress_providers import LITELLM_PROVIDERS
from assay.core.preflight import (
    PROGRAMS,
    dirty_problem,
    install_hint,
    key_problem,
    login_asked,
    missing_program,
    needed_keys,
    program_words,
)


def test_every_litellm_provider_has_its_host_and_key() -> None:
    for provider in LITELLM_PROVIDERS.values():
        assert "." in provider.host and provider.key.endswith("_KEY")


def test_every_program_kind_has_an_install_hint() -> None:
    assert set(PROGRAMS) == {"claude", "codex", "aider", "mini"}
    assert install_hint("claude") == "npm install -g @anthropic-ai/claude-code"
    assert install_hint("command") == ""
    assert missing_program("aider", install_hint("aider")) == (
        "aider not found on PATH: install it with `pip install aider-chat`"
    )


@pytest.mark.parametrize(
    ("kind", "settings", "env", "names"),
    [
        ("claude", {}, {}, ["ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN"]),
        ("claude", {}, {"CLAUDE_CODE_USE_BEDROCK": "1"}, []),  # the cloud's own credentials
        ("claude", {}, {"CLAUDE_CODE_USE_VERTEX": "true"}, []),
        ("claude", {}, {"CLAUDE_CODE_USE_BEDROCK": "0"}, ["ANTHROPIC_API_KEY"]),
        ("codex", {}, {}, ["OPENAI_API_KEY"]),
        ("codex", {"api_key_env": "GW_KEY"}, {}, ["OPENAI_API_KEY"]),  # no base URL: ignored
        ("codex", {"api_key_env": "GW_KEY", "base_url": "https://gw/v1"}, {}, ["GW_KEY"]),
        ("codex", {"api_key_env": "GW_KEY"}, {"OPENAI_BASE_URL": "https://gw/v1"}, ["GW_KEY"]),
        ("aider", {}, {}, ["ANTHROPIC_API_KEY", "OPENAI_API_KEY"]),
        ("aider", {"model": "claude-sonnet-4-5"}, {}, ["ANTHROPIC_API_KEY"]),
        ("aider", {"model": "gpt-5"}, {}, ["OPENAI_API_KEY"]),
        ("aider", {}, {"AIDER_MODEL": "openrouter/qwen"}, ["OPENROUTER_API_KEY"]),
        ("mini", {"model": "gemini/gemini-2.5-pro"}, {}, ["GEMINI_API_KEY"]),
        ("mini", {}, {"MSWEA_MODEL_NAME": "deepseek/deepseek-chat"}, ["DEEPSEEK_API_KEY"]),
        ("mini", {"model": "ollama/llama3"}, {}, []),  # a provider assay cannot place
        ("llm", {"model": "m"}, {}, []),  # assay's own client says what it reads
        ("command", {"command": "x"}, {}, []),
        ("replay", {}, {}, []),
    ],
)
def test_the_key_each_kind_reads(
    kind: str, settings: dict[str, object], env: dict[str, str], names: list[str]
) -> None:
    found = needed_keys(kind, settings, env)
    assert found[: len(names)] == names and (bool(found) == bool(names))


def test_a_key_that_is_set_is_no_problem() -> None:
    assert key_problem("coder claude", "claude", {}, {"ANTHROPIC_AUTH_TOKEN": "t"}) is None
    assert key_problem("coder aider", "aider", {}, {"OPENAI_API_KEY": "k"}) is None
    assert key_problem("coder codex", "codex", {}, {"OPENAI_API_KEY": "  "}) is not None


def test_claude_without_a_key_is_told_what_to_set_and_that_no_login_is_used() -> None:
    said = key_problem("coder claude", "claude", {}, {})
    assert said is not None and said.startswith("coder claude: no API key: set ANTHROPIC_API_KEY")
    assert "ANTHROPIC_AUTH_TOKEN" in said and "CLAUDE_CODE_USE_BEDROCK" in said
    assert "a `claude login` on this machine is never used" in said
    assert "/login" not in said


def test_a_key_the_environment_policy_does_not_pass_says_how_to_pass_it() -> None:
    said = key_problem(
        "coder aider",
        "aider",
        {"model": "openrouter/qwen"},
        {},
        passed={"OPENAI_API_KEY", "ANTHROPIC_API_KEY"},
    )
    assert said == (
        "coder aider: no API key for model openrouter/qwen: set OPENROUTER_API_KEY, and pass it "
        "to the coder with `env: {OPENROUTER_API_KEY: $OPENROUTER_API_KEY}` in the contract"
    )


def test_a_program_that_asked_for_a_login_is_never_told_to_log_in() -> None:
    said = login_asked("claude")
    assert said.startswith("claude: no usable API key (it asked for a login): set ANTHROPIC")
    assert "/login" not in said and "run" not in said.split(":")[1]
    assert "never uses" in login_asked("codex")


def test_every_dirty_file_is_named_up_to_a_bound() -> None:
    said = dirty_problem("main", ["README", "src/a.py"])
    assert "main" in said and "README, src/a.py:" in said and "--land branch" in said
    many = dirty_problem("main", [f"f{i}" for i in range(13)])
    assert "f9 and 3 more" in many and "f10" not in many


@pytest.mark.parametrize(
    ("line", "words"),
    [
        ("pytest -q", ["pytest"]),
        ("ruff check . && pytest", ["ruff", "pytest"]),
        ("python3 -m pytest 2>&1 | tee out.log", ["python3", "tee"]),
        ("FOO=1 BAR=2 ./fix.sh {prompt_file}", ["./fix.sh"]),
        ("(cd sub && make);lint", ["make", "lint"]),
        ("make && for f in a b; do lint $f; done", ["make"]),  # a loop may not run
        ("pytest; if [ -f x ]; then ruff; fi", ["pytest"]),
        ("command -v ruff >/dev/null && ruff check .", []),  # an optional tool
        ("which ruff && ruff check . ; pytest", ["pytest"]),
        ("ruff check . || echo no ruff", []),  # a fallback
        ("! grep -q TODO src", []),
        ("[ -x ./fix.sh ] && ./fix.sh", []),
        ("time make test", ["make"]),
        ("exec /opt/tool/bin/run", ["/opt/tool/bin/run"]),
        ("echo 'a; b' > out.txt", []),  # a builtin, its quoted text no command
        ("$HOME/bin/x --y", []),  # expanded by the shell: not looked up
        ("~/bin/x", []),
        ("f() { x; }; f", []),  # a function: nothing of the line is looked up
        ("pytest 'unbalanced", []),  # the shell says it
        ("pytest # ruff", ["pytest"]),
        ("echo $$ > $(dirname $ASSAY_REPORT_PATH)/started; sleep 6", ["dirname", "sleep"]),
        ("x=$(git rev-parse HEAD) && make", ["git", "make"]),
        ("echo $((1+2)) && make", ["make"]),
        ("{\n  echo a\n  for n in 1 2; do head -c 4 /dev/urandom; done\n} > k\ncat k", []),
        ("ruff check .\npytest -q \\\n  --maxfail 1\n", ["ruff", "pytest"]),
        ("cat <<EOF > x\nnot a command\nEOF", []),
    ],
)
def test_the_program_words_of_a_shell_line(line: str, words: list[str]) -> None:
    assert program_words(line) == words
