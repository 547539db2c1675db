"""The one-pass scan: detect-secrets set up once, lines fed in memory, plugins gated by their
own patterns with exactly the results of running every plugin on every line; the table of
detectors; a private key's lines.

Fake credentials are assembled at run time so that this file itself holds none.
"""

from __future__ import annotations

import random
import re
import string
import tempfile

import pytest

from assay.adapters.validators import secret_scan
from assay.adapters.validators.secret_rules import DETECTORS, detector
from assay.adapters.validators.secret_scan import OUTPUT_SOURCE, Hit, ScanSource, scan
from assay.adapters.validators.secret_values import private_key_body

AWS_KEY = "AKIA" + "Z7QX4MB2LPWV9KDT"
GITHUB_TOKEN = "ghp_" + "R8fT2kLw9QzX4vB7nM1cY6pD3sH5jA0eKu2G"
SLACK_TOKEN = "xoxb-" + "123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx"
STRIPE_KEY = "sk_live_" + "4eC39HqLyjWDarjtT1zdp7dc"
JWT = (
    "eyJhbGciOiJIUzI1NiJ9."
    + "eyJzdWIiOiIxMjM0NTY3ODkwIn0."
    + "dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"
)
GITLAB_TOKEN = "glpat-" + "xY7zQ9wVbN3mK5tR8pLs"
HEADER = "-----BEGIN RSA " + "PRIVATE KEY-----"
FOOTER = "-----END RSA " + "PRIVATE KEY-----"
BODY = ["MIIEowIBAAKCAQEAw3nP0cG4kX2Hh0Zr1mB3o7cQd9sV", "Zp4xk1y9Vq3o2HtU8dLrFj5GmP7sNc0aBh+/=="]

CORPUS = [
    f'AWS_ACCESS_KEY_ID = "{AWS_KEY}"',
    'aws_secret_access_key = "' + "wJalrXUtnFEMI/K7MDENG/bPxRfiCY" + "EXAMPLEKEY" + '"',
    f"git push https://x:{GITHUB_TOKEN}@github.com/o/r",
    f"SLACK = '{SLACK_TOKEN}'",
    f"stripe.api_key = '{STRIPE_KEY}'",
    f"Authorization: Bearer {JWT}",
    f"token: {GITLAB_TOKEN}",
    f"{GITLAB_TOKEN}x",
    "AKC" + "p8jUs2kLw9QzX4vB7nM1",  # its pattern may match from the line break before it
    HEADER,
    *BODY,
    FOOTER,
    'password = "hunter2-horse-battery"',
    "db_password: s3cr3t-value",
    'if ("letmein-please" == user_password) {',
    'api_key := "abcd1234efgh"',
    'secret.assign("abcdefgh",8);',
    'conn = "postgres://admin:Sup3rS3cret@db.internal:5432/app"',
    'BLOB = "aGVsbG8gd29ybGQgdGhpcyBpcyBhIHRlc3Qgb2YgZW50cm9weQ=="',
    "integrity sha512-Zm9vYmFyYmF6cXV4cXV1eGNvcmdlZ3JhdWx0Z2FycGx5d2FsZG8=",
    'key = "k1"  # a short value',
    "password = get_password()  # an indirect reference",
    f"KEY = '{AWS_KEY}'  # pragma: allowlist secret",
    "# pragma: allowlist nextline secret",
    f"OTHER = '{AWS_KEY}'",
    "def slugify(text):",
    '    return re.sub(r"[^a-z0-9]+", "-", text.lower())',
    "",
    "secret",
    "PASSWORD",
    'x = "' + "'" + 'abc"',
    # Detectors keyed by a name and an assignment (case-insensitive patterns, gated by needles
    # and the value's shape), and case folding outside ASCII (the long s, the Kelvin sign),
    # which a lowercased copy of the line does not follow.
    'ibm_cloud_iam_api_key = "' + "Zm9vYmFyYmF6cXV4cXV1eGNvcmdlZ3JhdWx0Z2FycGx5" + '"',
    'API_KEY: "' + "Q3EGT7Z2LMXW5RPNq3egt7z2lmxw5rpnQ3EGT7Z2LMXW" + '"',
    "cloudant_password = '" + "0123456789abcdef" * 4 + "'",
    "CL_KEY: abcdefghijklmnopqrstuvwx",
    "https://user:" + "0123456789abcdef" * 4 + "@acct.cloudant.com",
    'softlayer_api_key = "' + "a1b2c3d4" * 8 + '"',
    "https://api.softlayer.com/soap/v3/" + "a1b2c3d4" * 8,
    'cos_hmac_secret_access_key = "' + "0123456789abcdef" * 3 + '"',
    "HTTPS://HOOKS.SLACK.COM/services/" + "T0123ABCD/B0123ABCD/abcdEFGHijklMNOPqrst1234",
    'AWS_SECRET_ACCESS_KEY = "' + "wJalrXUtnFEMI/K7MDENG/bPxRfiCY" + 'EXAMPLEKEY"',
    'pa\u017fsword = "hunter2-horse-battery"',
    'api_\u212aey = "hunter2-horse-battery"',
    "TELEGRAM = '123456789:" + "AAHdqTcvCH1vGWJxfSe1ofSAs0K5PALDsaw'",
    "artifactory_password: " + "AP6xq9ZrT4mWp2",
    "MTk4NjIyNDgzNDcxOTI1MjQ4." + "Cl2FMQ.ZnCjm1XVW7vRze4b7Cq4se7kKWs",
    "MC = '" + "0123456789abcdef0123456789abcdef" + "-us12'",
    "SG." + "ngeVfQFYQlKU0ufo8x5d1A.TwL2iGABf9DHoTf-09kqeF8tAmbihYzrnopKc-1s5cr",
    "sq0csp-" + "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefg",
    "TWILIO_SID=AC" + "0123456789abcdef0123456789abcdef",
    "X-JFrog-Art-Api: AKCp" + "8jQ2kLw9QzX4vB7nM1cY6pD3sH5jA0eKu2GR8fT2kLw9QzX4vB7nM1cY6pD3sH5jA0e",
]


def _random_lines(count: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    alphabet = string.ascii_letters + string.digits + " =:'\"_-/+.@"
    pieces = [*CORPUS, "password", "secret = ", "://u:", "@h", "AKIA", "ghp_", "'", '"']
    lines = []
    for _ in range(count):
        parts = [rng.choice(pieces) if rng.random() < 0.3 else "" for _ in range(3)]
        noise = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 60)))
        lines.append("".join(p + noise[: rng.randint(0, 20)] for p in parts) + noise)
    return lines


def _sources(lines: list[str]) -> list[ScanSource]:
    numbered = list(enumerate(lines, 1))
    return [
        ScanSource(name, numbered)
        for name in ("settings.py", "config.yml", "main.go", "app.cfg", "README.md", OUTPUT_SOURCE)
    ]


def _key(hit: Hit) -> tuple[object, ...]:
    return (hit.source, hit.line, hit.type, hit.plugin, hit.secret_hash, sorted(hit.values))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_gated_plugins_find_exactly_what_every_plugin_on_every_line_finds(seed: int) -> None:
    lines = [*CORPUS, *_random_lines(400, seed)]
    random.Random(seed).shuffle(lines)
    gated = sorted(map(_key, scan(_sources(lines))))
    everything = sorted(map(_key, scan(_sources(lines), gated=False)))
    assert gated == everything
    assert len({k[3] for k in gated}) >= 8, "the corpus no longer exercises the detectors"


def test_the_corpus_finds_every_kind_it_was_written_for() -> None:
    hits = scan([ScanSource("settings.py", list(enumerate(CORPUS, 1)))])
    found = {(h.line, h.type) for h in hits if not h.allowlisted}
    types = {t for _, t in found}
    for kind in (
        "AWS Access Key",
        "GitHub Token",
        "Slack Token",
        "Stripe Access Key",
        "JSON Web Token",
    ):
        assert kind in types, types
    assert {"Private Key", "Secret Keyword", "Basic Auth Credentials"} <= types
    pragma = CORPUS.index(f"KEY = '{AWS_KEY}'  # pragma: allowlist secret") + 1
    assert not any(line in (pragma, pragma + 2) for line, _ in found), "a pragma was ignored"
    # A provider's key on an allowlisted line is still reported, marked: the coder may have
    # written the pragma itself.
    marked = {(h.line, h.type) for h in hits if h.allowlisted}
    assert marked == {(pragma, "AWS Access Key"), (pragma + 2, "AWS Access Key")}


def test_every_installed_detector_is_classified_once() -> None:
    from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class

    installed = {cls.__name__ for cls in get_mapping_from_secret_type_to_class().values()}
    assert set(DETECTORS) == installed
    generic = {name for name, row in DETECTORS.items() if row.generic}
    assert generic == {
        "KeywordDetector",
        "Base64HighEntropyString",
        "BasicAuthDetector",
        "HexHighEntropyString",
        "IPPublicDetector",
    }
    assert detector("SomeFutureDetector").generic is False  # unknown: blocks


def test_every_keyword_pattern_holds_the_keyword_list_the_gate_looks_for() -> None:
    from detect_secrets.plugins import keyword

    alternation = "|".join(keyword.DENYLIST)
    patterns = {
        pattern
        for table in [
            keyword.QUOTES_REQUIRED_DENYLIST_REGEX_TO_GROUP,
            *keyword.REGEX_BY_FILETYPE.values(),
        ]
        for pattern in table
    }
    assert patterns and all(alternation in p.pattern for p in patterns)


def test_a_change_is_scanned_with_one_settings_set_up_and_no_file(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    scan([ScanSource("warm.py", [(1, "x = 1")])])  # detect-secrets imported
    loaded = secret_scan._LOADED[0]
    setups: list[object] = []
    real = loaded.transient_settings

    def counted(config: object) -> object:
        setups.append(config)
        return real(config)

    def no_file(*_args: object, **_kwargs: object) -> object:
        raise AssertionError("the scan wrote a temporary file")

    monkeypatch.setattr(loaded, "transient_settings", counted)
    for name in ("NamedTemporaryFile", "TemporaryDirectory", "mkstemp", "mkdtemp"):
        monkeypatch.setattr(tempfile, name, no_file)
    sources = [
        ScanSource(f"pkg/m{n}.py", [(1, f'API_KEY = "{AWS_KEY[:-2]}{n:02d}"')]) for n in range(50)
    ]
    hits = scan([*sources, ScanSource(OUTPUT_SOURCE, [(1, GITHUB_TOKEN)])])
    assert len(setups) == 1
    assert {h.source for h in hits} == {s.name for s in sources} | {OUTPUT_SOURCE}


def test_the_gate_reads_anchors_per_line_and_a_match_across_lines_touches_each() -> None:
    from detect_secrets.plugins.base import RegexBasedDetector

    class Anchored(RegexBasedDetector):
        secret_type = "Anchored"
        denylist = (re.compile(r"^tok\d+$"), re.compile(r"begin\s+end"))

    with secret_scan._imported() as ds:
        gate = secret_scan._gate(Anchored(), ds)
    assert gate is not None
    texts = ["a tok1", "tok2", "x", "begin", "", "end", "tok3"]
    joined = "\n".join(texts)
    starts = secret_scan._line_starts(texts)
    assert secret_scan._touched(gate.patterns, joined, starts) == {1, 3, 4, 5, 6}


def test_a_line_pattern_check_refuses_what_joined_lines_would_read_differently() -> None:
    assert secret_scan._line_safe(r"glpat-[A-Za-z0-9_\-]{20}(?!\w)")
    assert secret_scan._line_safe(r"(?:(?<=\W)|(?<=^))key")
    for unsafe in [r"(?![a-z\n])x", r"\Ax", r"x\Z", r"(?>a+)b", r"a*+b", r"(?<!\s)x"]:
        assert not secret_scan._line_safe(unsafe), unsafe
    assert re.compile("^x$", re.MULTILINE).search("a\nx\nb")


# --- a private key's lines ---------------------------------------------------------------------


def test_a_private_key_ends_at_the_first_line_that_is_not_key_material() -> None:
    lines = [HEADER, *BODY, "updated README.md", "abcdefgh12345678"]
    assert private_key_body(lines, 0) == set(BODY)


@pytest.mark.parametrize(
    "lines",
    [
        [
            "KEY = (",
            f'    "{HEADER}\\n"',
            f'    "{BODY[0]}\\n"',
            f'    "{BODY[1]}\\n"',
            f'    "{FOOTER}"',
        ],
        [
            f'const KEY = "{HEADER}\\n" +',
            f'  "{BODY[0]}\\n" +',
            f'  "{BODY[1]}\\n" +',
            f'  "{FOOTER}";',
        ],
        [HEADER, "Proc-Type: 4,ENCRYPTED", "DEK-Info: AES-128-CBC,0F1E2D", "", *BODY, FOOTER],
    ],
    ids=["python-literal", "js-concatenation", "encrypted-headers"],
)
def test_a_private_key_inside_a_source_file_hands_over_its_lines(lines: list[str]) -> None:
    at = next(n for n, line in enumerate(lines) if "PRIVATE KEY" in line)
    assert private_key_body(lines, at) == set(BODY)


def test_every_line_a_detector_finds_something_on_holds_its_needle_and_its_shape() -> None:
    """What the gate looks for first (secret_patterns.NEEDLES, SHAPES) is in every line the
    detector, run alone, finds something on: the gate never hides a line from it."""
    from assay.adapters.validators.secret_patterns import NEEDLES, SHAPES

    lines = [*CORPUS, *_random_lines(3000, 7)]
    names = ("settings.py", "config.yml", "main.go", "app.cfg", "README.md", "x.json")
    with secret_scan._imported() as ds:
        classes = {c.__name__: c for c in ds.plugin_classes().values()}
        for name in sorted(set(NEEDLES) | set(SHAPES)):
            plugin = secret_scan._pinned(classes[name]())
            needles, folded = NEEDLES.get(name, ((), ()))
            shapes = [re.compile(shape) for shape in SHAPES.get(name, ())]
            found = 0
            for line in lines:
                if not any(plugin.analyze_line(filename=f, line=line) for f in names):
                    continue
                found += 1
                if not line.isascii():
                    continue  # read unfiltered
                if needles or folded:
                    assert any(n in line for n in needles) or any(
                        n in line.lower() for n in folded
                    ), (name, line)
                if shapes:
                    assert any(shape.search(line) for shape in shapes), (name, line)
            assert found, f"the corpus no longer exercises {name}"


def test_the_scan_loaded_in_a_thread_is_loaded_once_and_leaves_warnings_alone() -> None:
    """The engine loads the scan while a coder works: one thread per process, and detect-secrets'
    import does not leave Python's warnings going to logging."""
    import warnings

    from assay.adapters import validators

    shown_before = warnings.showwarning
    validators.load_secret_scan()
    validators.load_secret_scan()
    assert len(validators._SECRET_SCAN_LOAD) == 1
    validators._SECRET_SCAN_LOAD[0].join(timeout=60)
    assert secret_scan._LOADED
    assert warnings.showwarning is shown_before
    assert scan([ScanSource("x.py", [(1, "print('hello')")])]) == []
