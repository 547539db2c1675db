#!/usr/bin/env bash
# Install the real agent programs the interop tests drive, at pinned versions, into .cache/
# (ignored by git): Claude Code and Codex from the npm registry into a local prefix, aider and
# mini-swe-agent from PyPI into a virtualenv each (their dependency pins would fight the
# project's own). Each program gets a link in .cache/agents/bin, the one folder the tests put
# on PATH.
#
# The programs install side by side, each into its own folder (the two npm ones share a
# prefix, so they go one after the other): on a fresh clone, 33 s where one at a time took 89.
#
# Idempotent: a program already installed at its pinned version is reused, so a second run
# takes a moment. It never fails the build: what could not be installed, and why, is written
# to .cache/agents/status.json, and the interop tests of that program skip with that reason.
set -uo pipefail
cd "$(dirname "$0")/.."
root="$(pwd)"

CLAUDE_VERSION=2.1.332   # @anthropic-ai/claude-code
CODEX_VERSION=0.171.0    # @openai/codex
AIDER_VERSION=0.86.2     # aider-chat
MINI_VERSION=2.4.6       # mini-swe-agent

cache="$root/.cache"
bin="$cache/agents/bin"
status="$cache/agents/status.json"
python="${AGENTS_PYTHON:-$(command -v python3.11 || command -v python3 || true)}"
mkdir -p "$bin"
rows="$(mktemp -d)"  # one file per program: name|installed|version|source|reason
trap 'rm -rf "$rows"' EXIT

# One install at a time in this checkout (two `make test` at once share the cache).
if command -v flock >/dev/null 2>&1; then
  exec 9>"$cache/agents/.lock"
  flock 9
fi

record() { printf '%s\n' "$1|$2|$3|$4|$5" >"$rows/$1"; }
tail_of_log() {  # the last lines of an install log, on one line, without pip's index noise
  grep -v '^WARNING: Location' "$1" | tail -n 3 | tr '\n|"\\' "    " | cut -c1-400
}

done_with() {  # done_with NAME VERSION SOURCE TARGET: link the entry point and record it
  if [ -x "$4" ]; then
    ln -sfn "$4" "$bin/$1"
    record "$1" true "$2" "$3" ""
  else
    rm -f "$bin/$1"
    record "$1" false "$2" "$3" "installed, but $4 is missing"
  fi
}

npm_program() {  # npm_program NAME PACKAGE VERSION
  local name=$1 package=$2 version=$3 prefix="$cache/npm"
  local manifest="$prefix/node_modules/$package/package.json" source="npm: $package@$version"
  local entry="$prefix/node_modules/.bin/$name" log="$cache/agents/install-$1.log"
  if ! grep -q "\"version\": \"$version\"" "$manifest" 2>/dev/null || [ ! -x "$entry" ]; then
    if ! command -v npm >/dev/null 2>&1; then
      rm -f "$bin/$name"
      record "$name" false "$version" "$source" "npm is not on PATH (install Node.js and npm)"
      return
    fi
    echo "installing $package@$version (npm, into .cache/npm)"
    mkdir -p "$prefix"
    : >"$log"
    if ! npm install --prefix "$prefix" --no-audit --no-fund --loglevel=error \
      "$package@$version" >>"$log" 2>&1; then
      rm -f "$bin/$name"
      record "$name" false "$version" "$source" "npm install failed: $(tail_of_log "$log")"
      return
    fi
    if ! "$entry" --version >>"$log" 2>&1; then
      rm -f "$bin/$name"
      record "$name" false "$version" "$source" \
        "installed, but \`$name --version\` failed: $(tail_of_log "$log")"
      return
    fi
  fi
  done_with "$name" "$version" "$source" "$entry"
}

pip_program() {  # pip_program NAME DISTRIBUTION VERSION
  local name=$1 dist=$2 version=$3 venv="$cache/$1-venv" log="$cache/agents/install-$1.log"
  local source="pip: $dist==$version (.cache/$name-venv)" wheel_name="${2//-/_}"
  if ! compgen -G "$venv/lib/python*/site-packages/$wheel_name-$version.dist-info" >/dev/null \
    || [ ! -x "$venv/bin/$name" ]; then
    if [ -z "$python" ]; then
      rm -f "$bin/$name"
      record "$name" false "$version" "$source" "no python3.11 or python3 on PATH"
      return
    fi
    echo "installing $dist==$version (pip, into .cache/$name-venv)"
    : >"$log"
    if ! { [ -x "$venv/bin/python" ] || "$python" -m venv "$venv"; } >>"$log" 2>&1 \
      || ! "$venv/bin/python" -m pip install -q "$dist==$version" >>"$log" 2>&1; then
      rm -f "$bin/$name"
      record "$name" false "$version" "$source" "pip install failed: $(tail_of_log "$log")"
      return
    fi
  fi
  done_with "$name" "$version" "$source" "$venv/bin/$name"
}

# The two npm programs share one prefix, so they install one after the other.
{
  npm_program claude @anthropic-ai/claude-code "$CLAUDE_VERSION"
  npm_program codex @openai/codex "$CODEX_VERSION"
} &
pip_program aider aider-chat "$AIDER_VERSION" &
pip_program mini mini-swe-agent "$MINI_VERSION" &
wait

# status.json, written with whichever Python there is (the rows hold no '|' or newline).
cat "$rows"/claude "$rows"/codex "$rows"/aider "$rows"/mini | "${python:-python3}" -c '
import json, sys
programs = {}
for line in sys.stdin.read().splitlines():
    name, installed, version, source, reason = line.split("|", 4)
    programs[name] = {
        "installed": installed == "true",
        "version": version,
        "source": source,
        "bin": f".cache/agents/bin/{name}" if installed == "true" else None,
        "reason": reason or None,
    }
with open(sys.argv[1], "w") as out:
    json.dump({"schema": 1, "programs": programs}, out, indent=2)
    out.write("\n")
' "$status" || echo "could not write $status" >&2

for name in claude codex aider mini; do
  IFS='|' read -r name installed version _ reason <"$rows/$name"
  if [ "$installed" = true ]; then echo "agents: $name $version ready"
  else echo "agents: $name $version NOT installed: $reason" >&2; fi
done
exit 0
