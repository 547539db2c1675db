"""Resolving a tree's symlinks from their text alone: what escapes, what stays inside."""

from __future__ import annotations

import pytest

from assay.core.links import MAX_HOPS, escape_reason


@pytest.mark.parametrize(
    ("links", "path", "why"),
    [
        ({"leak": "/etc/passwd"}, "leak", "absolute path /etc/passwd"),
        ({"up": "../../.."}, "up", "outside the tree"),
        ({"up": ".."}, "up", "outside the tree"),
        ({"a/b/up": "../../.."}, "a/b/up", "outside the tree"),
        ({"a/b/x": "../../../etc/passwd"}, "a/b/x", "outside the tree"),
        # chain: hop -> d/parent/.. where d/parent -> .. (the tree's root): one level too far
        ({"d/parent": "..", "hop": "d/parent/.."}, "hop", "outside the tree"),
        # chain through an absolute link
        ({"a": "b", "b": "/tmp"}, "a", "through b -> /tmp"),
        ({"sub/here": "..", "escape": "sub/here/../etc"}, "escape", "outside the tree"),
        ({"x": ".git/config"}, "x", ".git folder"),
        ({"x": "sub/.GIT/hooks"}, "x", ".git folder"),
        ({"a": "b", "b": "a"}, "a", "loop"),
    ],
)
def test_an_escaping_link_is_named(links: dict[str, str], path: str, why: str) -> None:
    reason = escape_reason(path, links)
    assert reason is not None and why in reason


@pytest.mark.parametrize(
    ("links", "path"),
    [
        ({"l": "src/slug.py"}, "l"),
        ({"docs/r": "../README.md"}, "docs/r"),
        ({"a/b/c": "../../x"}, "a/b/c"),
        ({"d/parent": ".."}, "d/parent"),  # the tree's root itself is inside
        ({"sub/here": "..", "ok": "sub/here/src"}, "ok"),
        ({"a": "b", "b": "c/./d//e"}, "a"),
        ({"dangling": "no/such/file"}, "dangling"),
        ({"x": "./gitignore.git"}, "x"),
    ],
)
def test_a_link_that_stays_inside_is_fine(links: dict[str, str], path: str) -> None:
    assert escape_reason(path, links) is None


def test_a_long_chain_inside_is_fine_up_to_the_kernel_limit() -> None:
    links = {f"l{i}": f"l{i + 1}" for i in range(MAX_HOPS)}
    links[f"l{MAX_HOPS}"] = "file"
    assert escape_reason(f"l{MAX_HOPS - 1}", links) is None  # 1 hop followed, then the file
    assert escape_reason("l0", links) is None  # exactly MAX_HOPS hops
    links = {f"l{i}": f"l{i + 1}" for i in range(MAX_HOPS + 2)}
    assert "loop" in (escape_reason("l0", links) or "")
