"""Text from outside made safe to show: no escape sequence or control character survives."""

from __future__ import annotations

import re
import unicodedata

from hypothesis import assume, example, given
from hypothesis import strategies as st

from assay.core.text import address_shown, one_line_title, printable, shown

_UNSAFE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff]")


def test_escape_sequences_are_dropped_and_controls_shown() -> None:
    assert printable("a\x1b[31mred\x1b[0m \x1b]0;title\x07b\x07") == "ared b\\x07"
    assert printable("x\udcffy\r\nz\tw") == "x\ufffdy\nz\tw"


def test_a_title_is_the_first_non_blank_printable_line() -> None:
    assert one_line_title("\n \x1b[2J fix\tthe\x00  bug\r\nmore") == "fix the\\x00 bug"
    assert one_line_title("\x1b[2J\n") == "(untitled)"
    assert one_line_title("a" * 200, 80) == "a" * 80


@given(st.text())
def test_nothing_unsafe_survives(text: str) -> None:
    shown = printable(text)
    assert _UNSAFE.search(shown) is None
    shown.encode("utf-8")
    title = one_line_title(text)
    assert "\n" not in title and _UNSAFE.search(title) is None and 0 < len(title) <= 80


# --- shown: names and coder text on a screen -------------------------------------------------

BIDI = "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c"
_HIDDEN_CATEGORIES = {"Cc", "Cf", "Cs", "Zl", "Zp"}
# Characters that matter here, mixed into any text hypothesis draws.
_TRICKY = [*BIDI, "\n", "\t", "\r", "\x00", "\x1b", "\x7f", "\x85", "\x9b", "\ud800", "\udcff"]
_TRICKY += ["\\", '"', "<", "U", "+", ">", "x", "3", "c", "\u200b", "\u2028", "\ufeff", "\xa0"]
names = st.text(st.one_of(st.characters(), st.sampled_from(_TRICKY)))


def unshown(text: str) -> str:
    """The inverse of :func:`shown`: that it exists proves no two names are shown the same."""
    if not (len(text) > 1 and text[0] == '"' == text[-1]):
        return text
    body, out, at = text[1:-1], [], 0
    singles = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", '"': '"'}
    while at < len(body):
        if body[at] == "\\":
            kind = body[at + 1]
            if kind in singles:
                out.append(singles[kind])
                at += 2
            else:
                width = {"x": 2, "u": 4}[kind]
                out.append(chr(int(body[at + 2 : at + 2 + width], 16)))
                at += 2 + width
        elif body.startswith("<U+", at):
            end = body.index(">", at)
            out.append(chr(int(body[at + 3 : end], 16)))
            at = end + 1
        else:
            assert body[at] != '"', text  # an inner quote is always escaped
            out.append(body[at])
            at += 1
    return "".join(out)


def test_a_forged_line_is_shown_on_one_line() -> None:
    assert shown("evil\nFAKE  decision: land (seat 9)") == '"evil\\nFAKE  decision: land (seat 9)"'
    assert shown("photo\u202egnp.exe") == '"photo<U+202E>gnp.exe"'
    assert shown("\x1b[31mred\x85\x7f\udcff") == '"\\x1b[31mred\\u0085\\x7f\\udcff"'
    assert shown('a\\b"\t\n') == '"a\\\\b\\"\\t\\n"'


def test_plain_names_are_shown_as_they_are() -> None:
    for name in ("src/slug.py", 'say "hi".txt', "a\\b", "naïve/日本.md", "nbsp\xa0x", '"'):
        assert shown(name) == name
    assert shown('"quoted"') == '"\\"quoted\\""'  # else it would read as an escaped name


def test_lines_keep_their_newlines_and_tabs_only() -> None:
    block = "line 1\n\tline 2\r\n\x1b[2Jx\u202ey"
    assert shown(block, lines=True) == "line 1\n\tline 2\\r\n\\x1b[2Jx<U+202E>y"
    assert shown("a\nb", lines=True) == "a\nb"


def _hidden(text: str, kept: str = "") -> list[str]:
    return [c for c in text if unicodedata.category(c) in _HIDDEN_CATEGORIES and c not in kept]


@given(names)
def test_no_control_or_bidi_character_survives(name: str) -> None:
    assert _hidden(BIDI) == list(BIDI)  # every bidi control is one of the hidden categories
    one_line, block = shown(name), shown(name, lines=True)
    assert not _hidden(one_line), repr(one_line)
    assert not _hidden(block, kept="\n\t"), repr(block)
    assert block.count("\n") == name.count("\n")
    one_line.encode("utf-8")
    block.encode("utf-8")


@given(names)
@example("\n<U+0041>")  # a literal "<U+…>" in a name that needs escaping
@example("x\u202e<U+202E>")
@example('"\\x41"')
def test_two_different_names_are_never_shown_the_same(name: str) -> None:
    assert unshown(shown(name)) == name


@given(st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E)))
def test_printable_ascii_is_unchanged(name: str) -> None:
    looks_quoted = len(name) > 1 and name[0] == '"' == name[-1]
    assert (shown(name) == name) is not looks_quoted


def test_an_address_is_shown_without_its_secrets() -> None:
    assert (
        address_shown("postgresql+psycopg://bob:s3cret@db.example:5432/assay?sslmode=require")
        == "postgresql+psycopg://bob:***@db.example:5432/assay"
    )
    assert address_shown("postgresql://bob@db:5432/assay") == "postgresql://bob@db:5432/assay"
    assert address_shown("http://user:pw@127.0.0.1:9/v1") == "http://***@127.0.0.1:9/v1"
    assert address_shown("https://ghp_token@api.example/v3?key=k#f") == "https://***@api.example/v3"
    assert address_shown("https://api.openai.com/v1") == "https://api.openai.com/v1"
    assert address_shown("127.0.0.1:7233") == "127.0.0.1:7233"
    assert address_shown("user:pw@temporal:7233") == "temporal:7233"
    assert address_shown("http://[::1:9/v1?key=k") == "http://[::1:9/v1"


@given(st.text(), st.text(alphabet="abcdefghijklmnop", min_size=6))
def test_a_password_in_a_url_never_reaches_the_message(host: str, password: str) -> None:
    assume(password not in host)
    for scheme in ("http", "https", "postgresql", "postgresql+psycopg"):
        assert password not in address_shown(f"{scheme}://user:{password}@{host}:1/x?p={password}")
