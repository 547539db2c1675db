"""Attack (rule 3, defense in depth): ``origin._said`` keeps the last 600 characters of what
git printed and only then removes ``scheme://user:password@``. When the cut falls inside a
URL's ``scheme://`` (the remote or a remote helper said more than 600 characters after it),
what is left starts with ``user:password@host`` and the pattern, which needs the scheme, no
longer matches: the password reaches the :class:`OriginError`, hence the run's reason, the
worker's log and the ledger. git itself anonymizes the URLs it prints, so this needs a URL
with credentials in the output from elsewhere (a remote helper such as git-remote-gcrypt or
git-remote-codecommit, a hook's ``remote:`` lines, a proxy's error), but the sanitizer exists
for exactly those; redacting before cutting closes it.
"""

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
