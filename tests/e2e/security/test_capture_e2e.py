"""What lands is what was checked, and the host runs nothing the coder planted, through the
real `assay run`: a coder that hides part of its change from the host's git (`refs/replace`,
`--skip-worktree`), rigs the validator's home (`usercustomize.py`), writes files git ignores or
converts (a `.gitignore`, the operator's global ignore, CRLF under `* text=auto`), plants a
nested repository whose fsmonitor hook would run on the host, or makes a tree too deep or a file
too big to handle. Every test asserts outcomes only (the exit code, what main holds, the
payload, the progress lines, files outside the sandbox), never how the engine gets there."""

from __future__ import annotations

import json
import random
import re
import string
import subprocess
import sys
import time
from typing import TYPE_CHECKING, Any

import pytest
from support.repo import git

if TYPE_CHECKING:
    from conftest import World

GOOD = "good\n"
# A check script of the base: it fails on anything but the good a.txt.
CHECK = 'grep -qx good a.txt || { echo "a.txt is broken"; exit 1; }\n'


def command(run: str, vid: str = "check") -> str:
    """The contract's ``validators:`` with one command validator (JSON is YAML's flow style,
    so any quoting in ``run`` survives)."""
    return json.dumps([{"id": vid, "kind": "command", "run": run}])


def aws_key() -> tuple[list[str], str]:
    """An AWS access key id the secret check knows, as shell words that `printf '%s%s'` joins
    (so the contract, which assay copies into the run folder and the ledger, holds only the
    pieces) and as the joined value to look for."""
    key_id = "".join(random.choices(string.ascii_uppercase + "234567", k=16))
    return ["AKIA", key_id], f"AKIA{key_id}"


def landed_candidate(payload: dict[str, Any]) -> dict[str, Any]:
    """The payload's entry of the seat whose candidate was merged (the one viable seat)."""
    viable: list[dict[str, Any]] = [c for c in payload["candidates"] if c["viable"]]
    assert len(viable) == 1, payload["candidates"]
    return viable[0]


def assert_no_traceback(done: subprocess.CompletedProcess[str]) -> None:
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    assert done.returncode != 4, f"internal error: {done.stderr[-3000:]}"


def test_refs_replace_in_the_seat_cannot_smuggle_a_workflow_and_a_key_onto_main(
    world: World,
) -> None:
    """A replace ref makes the seat's git read the base as a fake commit that already holds a
    workflow edit and an AWS key: a diff taken through the seat's git shows only `a.txt`, but
    the candidate's tree carries all three. Held for the key or the workflow, or merged with
    exactly the files the payload names; never the workflow edit nor the key on main."""
    workflow = ".github/workflows/x.yml"
    world.commit({"a.txt": GOOD, workflow: "on: push\n"})
    pieces, key = aws_key()
    contract = world.contract(
        "replace.yaml",
        [
            "BASE=$(git rev-parse HEAD)",
            "printf 'on: pull_request_target\\njobs: {x: {runs-on: ubuntu-latest}}\\n' "
            f"> {workflow}",
            f"printf 'AWS_ACCESS_KEY_ID = \"%s%s\"\\n' {' '.join(pieces)} > settings.py",
            "git add -A",
            "FAKE=$(git -c user.name=x -c user.email=x@x commit-tree $(git write-tree) -m base)",
            'git replace "$BASE" "$FAKE" && git reset -q && echo "REPLACED-$((2+3))"',
            "echo changed > a.txt",
            "git status --porcelain",
        ],
        land="merge",
    )
    done = world.run(contract)
    world.assert_coder_ran()
    assert world.logged("REPLACED-5"), "the replace ref was not planted: the test proves nothing"
    payload = world.payload(done)
    assert_no_traceback(done)
    main = world.tree("main")
    base = world.tree(world.base)
    assert main.get(workflow) == base[workflow], f"the workflow edit landed on main: {payload}"
    history = git(world.root, "log", "-p", "--format=%H", "main")
    assert key not in history and "settings.py" not in main, f"the key landed on main: {payload}"
    if done.returncode == 3:
        assert payload["task_status"] == "held", payload
        world.assert_git_unchanged(merged=False)
    else:
        assert done.returncode == 0 and payload["status"] == "merged", (done.returncode, payload)
        # What the payload (as printed, and as stored for judges and the dashboard) says
        # changed is exactly what main received.
        changed = {p for p in set(main) | set(base) if main.get(p) != base.get(p)}
        for shown in (payload, world.stored_payload(payload["run_id"])):
            assert changed == set(landed_candidate(shown)["files_changed"]), (changed, shown)
        world.assert_git_unchanged(merged=True)


@pytest.mark.parametrize("protected", [True, False], ids=["check-protected", "unprotected"])
def test_skip_worktree_cannot_hide_a_rewritten_check_from_what_lands(
    world: World, protected: bool
) -> None:
    """The coder rewrites the base's check script to `exit 0`, hides that from the index with
    `--skip-worktree`, and breaks `a.txt`. The validator must run on the candidate as it will
    land: with the script protected by scope, the rewrite is a breach and nothing merges;
    unprotected, whatever lands passes its own check on main."""
    world.commit({"a.txt": GOOD, "check.sh": CHECK})
    contract = world.contract(
        "skip_worktree.yaml",
        [
            "echo 'exit 0' > check.sh",
            "git update-index --skip-worktree check.sh",
            "echo broken > a.txt",
            "git status --porcelain",
        ],
        validators=command("sh check.sh"),
        land="merge",
        extra="scope: {protect: [check.sh]}\n" if protected else "",
    )
    done = world.run(contract)
    world.assert_coder_ran()
    payload = world.payload(done)
    assert_no_traceback(done)
    if protected:
        assert done.returncode in (1, 3), f"exit {done.returncode}: {payload['reason']}"
        assert payload["status"] != "merged", payload
        world.assert_git_unchanged(merged=False)
        return
    if payload["status"] != "merged":
        world.assert_git_unchanged(merged=False)
        return
    # Merged: main is exactly what the validator passed, so its check passes on main.
    checkout = world.tmp / "main-checkout"
    checkout.mkdir()
    archive = subprocess.run(
        ["git", "archive", "main"], cwd=world.root, capture_output=True, check=True
    )
    subprocess.run(["tar", "-x"], cwd=checkout, input=archive.stdout, check=True)
    check = subprocess.run(
        ["sh", "check.sh"], cwd=checkout, capture_output=True, text=True, check=False
    )
    assert check.returncode == 0, f"main fails the check that passed: {check.stdout}{payload}"


def test_a_usercustomize_in_the_seats_home_does_not_reach_the_validator(world: World) -> None:
    """The coder's home holds a `usercustomize.py` that turns every `sys.exit` into success;
    the validator, a Python check of `a.txt` (run by an interpreter that loads the user site),
    must not run with it: the broken `a.txt` is not merged."""
    world.commit({"a.txt": GOOD})
    python = _user_site_python()
    check = f'{python} -c \'import sys; sys.exit(0 if open("a.txt").read() == "good\\n" else 1)\''
    contract = world.contract(
        "usercustomize.yaml",
        [
            f'site="$({python} -m site --user-site)"',
            'mkdir -p "$site"',
            "printf 'import os, sys\\nsys.exit = lambda *a: os._exit(0)\\n' "
            '> "$site/usercustomize.py"',
            # Armed: in the seat's home, a Python exiting 1 now exits 0.
            f"{python} -c 'import sys; sys.exit(1)' && echo \"RIGGED-$((3+4))\"",
            "echo broken > a.txt",
        ],
        validators=command(check),
        land="merge",
    )
    done = world.run(contract)
    world.assert_coder_ran()
    assert world.logged("RIGGED-7"), "usercustomize.py did not load: the test proves nothing"
    payload = world.payload(done)
    assert_no_traceback(done)
    assert payload["status"] != "merged", f"the broken a.txt merged: {payload['reason']}"
    assert done.returncode in (1, 3), f"exit {done.returncode}: {payload['reason']}"
    world.assert_git_unchanged(merged=False)


def _user_site_python() -> str:
    """A Python that loads the user site (a venv's does not): the base interpreter of the one
    running the tests, which the sandbox shows (it is the installation assay runs on)."""
    return str(getattr(sys, "_base_executable", sys.executable))


def _names_as_ignored(done: subprocess.CompletedProcess[str], payload: Any, path: str) -> bool:
    """``path`` is named as left out of the candidate: on a progress line that says so (not a
    validator's own command line), or anywhere in the payload but the validators' results."""
    for line in done.stderr.splitlines():
        if path in line and "ignor" in line.replace(path, "") and "test -f" not in line:
            return True
    rest = {k: v for k, v in payload.items() if k not in ("validator_results", "task_spec")}
    return path in json.dumps(rest)


def test_a_file_the_repository_ignores_is_named_and_never_checked_without_landing(
    world: World,
) -> None:
    """The coder writes a `.gitignore` that ignores one of its own files: the candidate lacks
    that file, so a validator that needs it fails (it runs on exactly the candidate), and the
    run names the file as ignored instead of dropping it silently."""
    contract = world.contract(
        "ignored.yaml",
        [
            "mkdir -p data",
            "echo ignored.py > data/.gitignore",
            "echo 'x = 1' > data/ignored.py",
            "echo 'y = 2' > data/kept.py",
        ],
        validators=command("test -f data/ignored.py", vid="has-ignored"),
        land="merge",
    )
    done = world.run(contract, args=["--progress", "always"])
    world.assert_coder_ran()
    payload = world.payload(done)
    assert_no_traceback(done)
    assert payload["status"] != "merged", f"merged without data/ignored.py: {payload}"
    world.assert_git_unchanged(merged=False)
    assert _names_as_ignored(done, payload, "data/ignored.py"), (
        f"data/ignored.py dropped silently:\n{done.stderr}\n{json.dumps(payload)[:3000]}"
    )


def test_the_operators_global_git_ignore_does_not_drop_a_coders_file(world: World) -> None:
    """The operator's own `core.excludesFile` (in the HOME of the `assay` process) ignores
    `*.gen`: that is the operator's taste, not the repository's, so the coder's `x.gen` is in
    the candidate, passes its validator and lands."""
    (world.home / ".gitignore_global").write_text("*.gen\n")
    (world.home / ".gitconfig").write_text(
        f"[user]\n\tname = Ada Operator\n[core]\n\texcludesFile = {world.home}/.gitignore_global\n"
    )
    world.commit({"a.txt": GOOD})  # takes the operator's home again, with its ignore
    contract = world.contract(
        "global_ignore.yaml",
        ["echo generated > x.gen"],
        validators=command("test -f x.gen"),
        land="merge",
    )
    done = world.run(contract, args=["--progress", "always"])
    world.assert_coder_ran()
    payload = world.payload(done)
    assert_no_traceback(done)
    assert done.returncode == 0 and payload["status"] == "merged", (
        f"exit {done.returncode}: {payload['reason']}\n{done.stderr}"
    )
    assert "x.gen" in world.tree("main"), f"merged without x.gen: {payload}"
    assert world.blob("main", "x.gen") == b"generated\n"
    world.assert_git_unchanged(merged=True)


def test_crlf_lines_land_as_the_validator_saw_them_under_text_auto(world: World) -> None:
    """Under `* text=auto` git would turn a new file's CRLF into LF when it adds the file: the
    validator checks the CRLF file the coder wrote, so main must hold those very bytes."""
    world.commit({".gitattributes": "* text=auto\n"})
    written = b"one\r\ntwo\r\n"
    contract = world.contract(
        "crlf.yaml",
        ["printf 'one\\r\\ntwo\\r\\n' > crlf.txt"],
        # Two carriage returns, i.e. the bytes written (tr keeps only the CRs).
        validators=command("test \"$(tr -dc '\\r' < crlf.txt | wc -c)\" -eq 2 && test -s crlf.txt"),
        land="merge",
    )
    done = world.run(contract)
    world.assert_coder_ran()
    payload = world.payload(done)
    assert_no_traceback(done)
    assert done.returncode == 0 and payload["status"] == "merged", (done.returncode, payload)
    assert world.blob("main", "crlf.txt") == written, "main's crlf.txt is not what was checked"
    world.assert_git_unchanged(merged=True)


def test_a_nested_repositorys_fsmonitor_hook_never_runs_on_the_host(world: World) -> None:
    """A nested repository whose `core.fsmonitor` is a hook that touches a file outside the
    sandbox (the test's folder, which the sandbox hides: only a process on the host can make
    it). Any git status inside it on the host runs the hook; a nested repository in a
    candidate is a scope breach by rule."""
    marker = world.tmp / "fsmonitor-ran-on-the-host"
    contract = world.contract(
        "nested.yaml",
        [
            "echo note > NOTE.md",
            "git init -q sub",
            "echo inner > sub/inner.txt",
            "git -C sub -c user.name=x -c user.email=x@x commit -q --allow-empty -m x",
            f"printf '#!/bin/sh\\ntouch {marker}\\n' > sub/.git/hook.sh",
            "git -C sub config core.fsmonitor 'sh .git/hook.sh'",
        ],
        land="merge",
    )
    done = world.run(contract)
    world.assert_coder_ran()
    assert not marker.exists(), "the coder's fsmonitor hook ran on the host"
    payload = world.payload(done)
    assert_no_traceback(done)
    assert done.returncode == 3, f"exit {done.returncode}: {payload['reason']}"
    assert "halt-scope-breach" in world.fired(payload), payload
    assert payload["task_status"] == "held", payload
    world.assert_git_unchanged(merged=False)


def _deepest(top: Any) -> int:
    """How many levels deep the deepest folder under ``top`` is (`find` walks any depth)."""
    done = subprocess.run(
        ["find", str(top), "-mindepth", "1000", "-type", "d", "-print", "-quit"],
        capture_output=True,
        text=True,
        check=False,
    )
    return len(done.stdout.strip().split("/")) if done.stdout.strip() else 0


def test_a_deep_tree_in_the_seats_git_and_a_key_are_held_without_a_crash(
    world: World, request: pytest.FixtureRequest
) -> None:
    """1,100 nested folders inside the seat's `.git` and an AWS key in the candidate: the run
    is held for the key (exit 3), nothing crashes, and the seat's folders are gone after."""
    # pytest's own clean-up recurses; rm does not.
    request.addfinalizer(lambda: subprocess.run(["rm", "-rf", str(world.tmp)], check=False))
    pieces, key = aws_key()
    contract = world.contract(
        "deep.yaml",
        [
            'd=.git/deep; i=0; while [ $i -lt 1100 ]; do d="$d/d"; i=$((i+1)); done',
            'mkdir -p "$d" && echo "DEEP-$((5+5))"',
            f"printf 'AWS_ACCESS_KEY_ID = \"%s%s\"\\n' {' '.join(pieces)} > settings.py",
        ],
        land="merge",
    )
    done = world.run(contract)
    world.assert_coder_ran()
    assert world.logged("DEEP-10"), "the deep tree was not made: the test proves nothing"
    assert_no_traceback(done)
    payload = world.payload(done)
    assert done.returncode == 3, f"exit {done.returncode}: {payload['reason']}"
    assert "halt-secret-exposure" in world.fired(payload), payload
    assert payload["task_status"] == "held", payload
    assert key not in git(world.root, "log", "-p", "--all", "--format=%H")
    assert _deepest(world.tmp) == 0, "the seat's deep tree was left behind"
    world.assert_git_unchanged(merged=False)


# 11 MiB: just over the default budget for a candidate's largest file (10 MiB).
BIG = 11 * 1024 * 1024
_SIZE = re.compile(r"(?<![\w.])(\d[\d,]*(?:\.\d+)?)\s*([KkMm]i?B|bytes|B)?\b")
_UNITS = {"": 1, "b": 1, "bytes": 1, "kb": 1000, "kib": 1024, "mb": 1000**2, "mib": 1024**2}


def _figures(text: str) -> list[float]:
    """Every size written in ``text``, in bytes (`11534336`, `11,534,336`, `11 MiB`, `11.5MB`)."""
    found = []
    for number, unit in _SIZE.findall(text):
        found.append(float(number.replace(",", "")) * _UNITS[unit.lower()])
    return found


def test_a_file_over_the_size_budget_is_held_quickly_with_its_figure(world: World) -> None:
    """An 11 MiB text file in the candidate: over the default budget for one file, so the run
    is held (exit 3) with the size or the limit in its reason, within seconds, no crash."""
    contract = world.contract(
        "big.yaml",
        [
            f"yes 'a line of generated text, over and over' | head -c {BIG} > big.txt",
            'echo "BIG-$(wc -c < big.txt)"',
        ],
        land="merge",
    )
    started = time.monotonic()
    done = world.run(contract)
    elapsed = time.monotonic() - started
    world.assert_coder_ran()
    assert world.logged(f"BIG-{BIG}"), "the big file was not written: the test proves nothing"
    assert_no_traceback(done)
    payload = world.payload(done)
    assert done.returncode == 3, f"exit {done.returncode}: {payload['reason']}"
    assert payload["task_status"] == "held", payload
    reasons = " ".join([payload["reason"], *(json.dumps(h) for h in payload["halts"]["fired"])])
    limit = 10 * 1024 * 1024
    assert any(abs(f - size) <= size * 0.1 for f in _figures(reasons) for size in (BIG, limit)), (
        f"neither the size nor the limit in the reason: {reasons}"
    )
    assert elapsed < 30, f"the run took {elapsed:.0f} s"
    assert "big.txt" not in world.tree("main")
    world.assert_git_unchanged(merged=False)
