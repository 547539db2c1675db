"""Blind judging, the pure part: seeded labels, each judge's order, and redaction."""

from __future__ import annotations

import random
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from assay.core.blind import (
    BRANCH_MARK,
    IDENTITY_MARK,
    WORKTREE_MARK,
    blind_candidates,
    blind_labels,
    is_tool_artefact,
    judge_order,
    label_for,
    needs_deliberation,
    redact,
)
from assay.core.changes import ChangeSet, FileDelta
from assay.core.vocab import FileChangeKind

seats_st = st.lists(
    st.integers(min_value=1, max_value=10_000), min_size=1, max_size=30, unique=True
)
seeds = st.text(min_size=1, max_size=40)


# --- labels and orders -----------------------------------------------------------------------


@given(seats_st, seeds)
def test_labels_are_a_bijection_onto_a_b_c(seats: list[int], seed: str) -> None:
    labels = blind_labels(seats, seed)
    assert set(labels) == set(seats)
    assert sorted(labels.values(), key=lambda s: (len(s), s)) == [
        label_for(i) for i in range(len(seats))
    ]


@given(seats_st, seeds, st.randoms())
def test_same_seed_same_labels_whatever_the_input_order(
    seats: list[int], seed: str, rnd: random.Random
) -> None:
    shuffled = list(seats)
    rnd.shuffle(shuffled)
    assert blind_labels(seats, seed) == blind_labels(shuffled, seed)


@given(st.lists(st.sampled_from("ABCDEFGHIJKLMNOP"), unique=True), seeds, st.integers(0, 50))
def test_every_judge_order_is_a_permutation(labels: list[str], seed: str, judge: int) -> None:
    order = judge_order(labels, seed, judge)
    assert sorted(order) == sorted(labels)
    assert order == judge_order(list(reversed(labels)), seed, judge)


def test_the_seed_moves_the_labels_and_judges_see_different_orders() -> None:
    firsts = {blind_labels([1, 2, 3], f"run-{n}")[1] for n in range(40)}
    assert firsts == {"A", "B", "C"}
    orders = {tuple(judge_order(["A", "B", "C"], "run-1", j)) for j in range(12)}
    assert len(orders) > 1


@given(st.integers(0, 5000), st.integers(0, 5000))
def test_label_for_is_injective(a: int, b: int) -> None:
    assert (label_for(a) == label_for(b)) == (a == b)
    assert re.fullmatch(r"[A-Z]+", label_for(a))


def test_label_edges_and_bad_input() -> None:
    assert [label_for(i) for i in (0, 1, 25, 26, 27, 701, 702)] == [
        "A",
        "B",
        "Z",
        "AA",
        "AB",
        "ZZ",
        "AAA",
    ]
    with pytest.raises(ValueError):
        label_for(-1)
    with pytest.raises(ValueError):
        blind_labels([1, 1], "s")


def test_needs_deliberation_only_when_usable_first_choices_split() -> None:
    labels = ["A", "B"]
    assert needs_deliberation([["A", "B"], ["B", "A"]], labels)
    assert not needs_deliberation([["A", "B"], ["A", "B"], None], labels)
    assert not needs_deliberation([["A", "B"], ["B"], ["B", "B"]], labels)  # unusable ones
    assert not needs_deliberation([], labels)


# --- redaction -------------------------------------------------------------------------------

PATCH = """\
From 0123456789abcdef0123456789abcdef01234567 Mon Sep 17 00:00:00 2001
From: Claude <noreply@anthropic.com>
Subject: [PATCH] slugify keeps digits

Co-Authored-By: Claude <noreply@anthropic.com>
---
 src/slug.py | 3 ++-
diff --git a/src/slug.py b/src/slug.py
index 1111111..2222222 100644
--- a/src/slug.py
+++ b/src/slug.py
@@ -1,2 +1,5 @@
+# Generated with Claude Code (branch assay/r-42/2)
+# \N{ROBOT FACE} beep
+// written by codex
 def slugify(text):
-    return text.lower()
+    return text.lower().replace(" ", "-")
@@ -10,2 +13,3 @@ def other():
     pass
+    note = "Co-authored-by: stays, this is code"
     return 1
diff --git a/.aider.chat.history.md b/.aider.chat.history.md
new file mode 100644
index 0000000..3333333
--- /dev/null
+++ b/.aider.chat.history.md
@@ -0,0 +1,2 @@
+# aider chat started
+> /add src/slug.py
diff --git a/README.md b/README.md
--- a/README.md
+++ b/README.md
@@ -1 +1,3 @@
 # demo
+Generated with [Claude Code](https://claude.com/claude-code)
+Usage: slugify("a b") gives "a-b".
--\x20
2.43.0
"""


def hunks_are_consistent(diff: str) -> bool:
    """Every hunk header's counts match the lines under it."""
    lines = diff.splitlines()
    i = 0
    while i < len(lines):
        match = re.match(r"^@@ -\d+(?:,(\d+))? \+\d+(?:,(\d+))? @@", lines[i])
        i += 1
        if not match:
            continue
        old = int(match.group(1) or 1)
        new = int(match.group(2) or 1)
        while old > 0 or new > 0:
            tag = lines[i][:1]
            old -= tag in " -"
            new -= tag in " +"
            i += 1
        if old or new:
            return False
    return True


def test_redaction_removes_what_reveals_the_coder_and_keeps_the_code() -> None:
    out = redact(PATCH, secrets_of_identity=["r-42"])
    for gone in (
        "Claude",
        "claude",
        "codex",
        "aider",
        "Co-Authored-By",
        "Subject:",
        "From ",
        "\N{ROBOT FACE}",
        "assay/r-42/2",
        "2.43.0",
    ):
        assert gone not in out, gone
    assert '+    return text.lower().replace(" ", "-")' in out
    assert '+    note = "Co-authored-by: stays, this is code"' in out
    assert '+Usage: slugify("a b") gives "a-b".' in out
    assert out.startswith("diff --git a/src/slug.py b/src/slug.py\n")
    assert "@@ -1,2 +1,2 @@" in out and "@@ -10,2 +10,3 @@ def other():" in out
    assert "@@ -1 +1,2 @@" in out
    assert hunks_are_consistent(out)


def test_identity_strings_branches_and_worktrees_are_masked_everywhere() -> None:
    diff = (
        "diff --git a/notes.txt b/notes.txt\n--- a/notes.txt\n+++ b/notes.txt\n@@ -1 +1,3 @@\n"
        " keep\n"
        "+path = '/repo/.assay/worktrees/run-9f/3/src'\n"
        "+ref = 'assay/run-9f/seat-3' + 'claude-sonnet-4-5' + 'RUN-9F'\n"
    )
    out = redact(diff, secrets_of_identity=["run-9f", "claude-sonnet-4-5", "ab", ""])
    assert WORKTREE_MARK in out and BRANCH_MARK in out
    assert "run-9f" not in out.lower() and "claude-sonnet" not in out
    assert out.count(IDENTITY_MARK) == 2
    assert "ref = " in out  # two-letter identities are ignored: they would erase code


@pytest.mark.parametrize(
    "line",
    [
        "# Co-authored-by: Claude <noreply@anthropic.com>",
        "Signed-off-by: Codex Bot <codex@openai.com>",
        "// Generated by OpenAI Codex",
        "/* Written with Claude */",
        "-- produced by aider",
        "<!-- made with mini-swe-agent -->",
        "# claude: tightened the loop",
        "   * \N{ROBOT FACE} Generated with [Claude Code](https://claude.com/claude-code)",
        "; Implemented by GPT-5",
    ],
)
def test_attribution_lines_are_dropped(line: str) -> None:
    diff = f"--- a/x.c\n+++ b/x.c\n@@ -1 +1,2 @@\n keep\n+{line}\n"
    assert redact(diff) == "--- a/x.c\n+++ b/x.c\n@@ -1 +1,1 @@\n keep\n"


@pytest.mark.parametrize(
    "line",
    [
        "client = anthropic.Anthropic()",
        'MODEL = "claude-sonnet-4-5"  # generated config',
        "# use the openai client with retries",
        "x = generated_by(claude)",
        "print('\N{ROBOT FACE}')",
        "--verbose \\",
        "*args, **kwargs",
    ],
)
def test_code_is_never_rewritten(line: str) -> None:
    diff = f"--- a/x.py\n+++ b/x.py\n@@ -1 +1,2 @@\n keep\n+{line}\n"
    assert redact(diff) == diff


def test_text_that_is_not_a_diff_is_filtered_as_prose() -> None:
    text = "Fixed the slug.\n\nGenerated with Claude Code\nCo-authored-by: Claude <c@a.com>\n"
    assert redact(text) == "Fixed the slug.\n\n"


def test_tool_artefacts() -> None:
    for path in (".aider.chat.history.md", "sub/.aider.tags.cache.v4/x", ".claude/settings.json"):
        assert is_tool_artefact(path), path
    for path in ("src/aider.py", "claude.md", "docs/codex.md", ""):
        assert not is_tool_artefact(path), path
    assert is_tool_artefact("logs/mini.traj.json")


code_lines = st.from_regex(r"[a-z_]{1,12} = [a-z0-9_().]{1,20}", fullmatch=True)


@given(st.lists(code_lines, min_size=1, max_size=8), st.integers(1, 50))
def test_a_diff_of_plain_code_is_left_exactly_as_it_is(added: list[str], start: int) -> None:
    body = "".join(f"+{line}\n" for line in added)
    diff = (
        "diff --git a/m.py b/m.py\nindex 1..2 100644\n--- a/m.py\n+++ b/m.py\n"
        f"@@ -{start},1 +{start},{len(added) + 1} @@\n ctx\n{body}"
    )
    assert redact(diff) == diff


@given(st.text(max_size=400))
def test_redaction_is_total_and_idempotent(text: str) -> None:
    once = redact(text, secrets_of_identity=["run-1"])
    assert redact(once, secrets_of_identity=["run-1"]) == once


def test_blind_candidates_are_labelled_redacted_and_sorted() -> None:
    def change(path: str, line: str) -> ChangeSet:
        diff = f"--- a/{path}\n+++ b/{path}\n@@ -1 +1,2 @@\n keep\n+{line}\n"
        files = [
            FileDelta(path=path, kind=FileChangeKind.MODIFIED),
            FileDelta(path=".aider.input.history", kind=FileChangeKind.CREATED),
        ]
        return ChangeSet(base_commit="0" * 40, files=files, diff=diff)

    changes = {
        3: change("a.py", "x = 3"),
        1: change("b.py", "# Generated with Claude Code"),
        2: change("c.py", "y = 'run-7'"),
    }
    found = blind_candidates(changes, "run-7", secrets_of_identity=["run-7"])
    labels = blind_labels([3, 1, 2], "run-7")
    assert [c.label for c in found] == ["A", "B", "C"]
    by_seat = {seat: next(c for c in found if c.label == labels[seat]) for seat in changes}
    assert by_seat[3].files == ["a.py"]
    assert "Claude" not in by_seat[1].diff
    assert "run-7" not in by_seat[2].diff and IDENTITY_MARK in by_seat[2].diff


def _moded(path: str, old: str, new: str) -> FileDelta:
    return FileDelta(path=path, kind=FileChangeKind.MODIFIED, old_mode=old, new_mode=new)


def test_blind_candidates_carry_the_type_changes_but_no_tool_artefacts_or_identity() -> None:
    files = [
        _moded("lib/x.py", "120000", "100644"),
        _moded("run-7.sh", "100644", "100755"),
        _moded(".aider.tags", "120000", "100644"),
        _moded("same.py", "100644", "100644"),
    ]
    change = ChangeSet(base_commit="0" * 40, files=files)
    [found] = blind_candidates({1: change}, "run-7", secrets_of_identity=["run-7"])
    assert [c.describe() for c in found.type_changes] == [
        "lib/x.py symlink → file",
        f"{IDENTITY_MARK}.sh file → executable",
    ]
