"""What git said about a failed fetch or push is cut only after every ``user:password@`` is
removed: a cut never uncovers a credential."""

from __future__ import annotations

import subprocess

from assay.adapters import origin


def test_the_cut_never_uncovers_a_password() -> None:
    url = "https://bob:hunter2@git.example.com/org/repo.git"
    first = f"helper: cannot reach {url}"
    at = first.index("bob")  # where the cut must fall: just past the scheme
    for shift in range(-3, 4):  # wherever the cut falls near it
        filler = "remote: " + "x" * (600 + at + shift - len(first) - 2 - len("remote: "))
        done = subprocess.CompletedProcess(["git"], 1, b"", f"{first}\n{filler}".encode())
        said = origin._said(done)
        assert "hunter2" not in said, f"cut at {shift}: {said[:60]!r}"
