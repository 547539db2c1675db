"""The provider detectors find credentials, not text that contains their shape: our own patterns
(pinned against the installed detect-secrets) over a corpus of realistic non-secrets and one of
real-format credentials, each under several file names.

Fake credentials are assembled at run time so that this file itself holds none.
"""

from __future__ import annotations

import base64
import hashlib
import re
import uuid
from pathlib import Path

import pytest
from support.repo import git

from assay.adapters.validators import secret_scan
from assay.adapters.validators.base import ValidationContext
from assay.adapters.validators.secret_rules import detector
from assay.adapters.validators.secret_scan import OUTPUT_SOURCE, ScanSource, scan
from assay.adapters.validators.secrets import SecretsValidator
from assay.core.changes import ChangeSet
from assay.core.vocab import Severity

SNS_ARN = "arn:aws:sns:us-east-1:123456789012:order-service-notifications-production"

NOT_SECRETS = [
    SNS_ARN,
    'TOPIC = "arn:aws:sns:eu-west-1:210987654321:payments-events-dead-letter-queue-prod"',
    "arn:aws:sqs:us-west-2:123456789012:inventory-reconciliation-worker-queue",
    "arn:aws:lambda:us-east-1:123456789012:function:image-thumbnail-generator-v2",
    "arn:aws:iam::123456789012:role/service-role/codebuild-deploy-pipeline-role",
    "arn:aws:kms:us-east-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab",
    "arn:aws:execute-api:us-east-1:123456789012:a1b2c3d4e5/prod/GET/orders",
    f'NAMESPACE = uuid.UUID("{uuid.UUID(int=0x6BA7B8109DAD11D180B400C04FD430C8)}")',
    "commit f311314a9b2c3d4e5f60718293a4b5c6d7e8f901",
    "aws_sdk_token_commit = 'f311314a9b2c3d4e5f60718293a4b5c6d7e8f901'",
    'aws_key_fixture_sha = "0123456789ABCDEF0123456789ABCDEF01234567"',
    '"integrity": "sha512-' + base64.b64encode(hashlib.sha512(b"left-pad").digest()).decode() + '"',
    '<script src="x.js" integrity="sha384-'
    + base64.b64encode(hashlib.sha384(b"x.js").digest()).decode()
    + '" crossorigin="anonymous"></script>',
    "https://registry.npmjs.org:443/@types/node/-/node-18.0.0.tgz",
    "git+https://github.com:443/pallets/flask@2.3.0#egg=flask",
    "ws://127.0.0.1:9222/devtools/browser/6ba7b810-9dad-11d1-80b4-00c04fd430c8",
    'version = "1.2.3-beta.4+build.5678"',
    "def test_it_laughs_at_the_extremely_long_identifier_name_here(): pass",
    "weighs_the_average_value_of_something_long_enough_here = 1",
    "desk_live_ConfigurationOverridesForTesting = None",
    "the_glpat-prefix_is_documented_here_in_prose_for_users",
    "PACKAGE_ACabcdefabcdefabcdefabcdefabcdef12 = 1",
    "MASKabcdefabcdefabcdefabcdefabcdef12 = 2",
    "THISISALONGCONSTANTNAMEAKIA0123456789ABCDEF = 3",
    "xoxoxo-1-abc",
    'HANDLERS = ["APDUCommand", "APE3ServiceClient"]',
    "    APACHEConfig ",
    "NotificationServiceFactory.create.AbstractSingletonProxyFactoryBean",
    'sort_key = "created_at_desc_then_name_asc_then_id_desc_x"',
    "ts=1700000000:abcdefghijklmnopqrstuvwxyzABCDEFGHIJ",
]


def _real() -> dict[str, list[str]]:
    """One line (or several) per detector, each holding a credential in its real format."""
    telegram = "123456789:" + "AA" + "Hdq" + "TcvCH1vGWJxfSe1ofSAs0K5PALDsaw"
    discord_id = base64.b64encode(b"198622483471925248").decode().rstrip("=")
    return {
        "AWS Access Key": [
            "AWS_ACCESS_KEY_ID=" + "AKIA" + "Z7QX4MB2LPWV9KDT",
            'aws_secret_access_key = "' + "wJalrXUtnFEMI/K7MDENG/bPxRfiCY" + 'EXAMPLEKEY"',
        ],
        "GitHub Token": [
            "git push https://x:" + "ghp_" + "R8fT2kLw9QzX4vB7nM1cY6pD3sH5jA0eKu2G@gh"
        ],
        "GitLab Token": ["token: " + "glpat-" + "xY7zQ9wVbN3mK5tR8pLs"],
        "Slack Token": [
            "SLACK = '" + "xoxb-" + "123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx'",
            "https://hooks.slack.com/" + "services/T0123ABCD/B0123ABCD/abcdEFGHijklMNOPqrst1234",
        ],
        "Stripe Access Key": ["stripe.api_key = '" + "sk_live_" + "4eC39HqLyjWDarjtT1zdp7dc'"],
        "Telegram Bot Token": [
            f'TELEGRAM_TOKEN = "{telegram}"',
            f"curl https://api.telegram.org/bot{telegram}/getMe",
        ],
        "Twilio API Key": ["TWILIO_SID=" + "AC" + "0123456789abcdef0123456789abcdef"],
        "SendGrid API Key": [
            "SG." + "ngeVfQFYQlKU0ufo8x5d1A.TwL2iGABf9DHoTf-09kqeF8tAmbihYzrnopKc-1s5cr"
        ],
        "Mailchimp Access Key": ["MC = '" + "0123456789abcdef0123456789abcdef" + "-us12'"],
        "Discord Bot Token": [f"{discord_id}." + "Cl2FMQ.ZnCjm1XVW7vRze4b7Cq4se7kKWs"],
        "Artifactory Credentials": [
            "X-JFrog-Art-Api: "
            + "AKCp"
            + "8jQ2kLw9QzX4vB7nM1cY6pD3sH5jA0eKu2GR8fT2kLw9QzX4vB7nM1cY6pD3sH5jA0e",
            "artifactory_password: " + "AP6" + "xq9ZrT4mWp2",
        ],
        "Private Key": ["-----BEGIN RSA " + "PRIVATE KEY-----"],
        "JSON Web Token": [
            "Authorization: Bearer "
            + "eyJhbGciOiJIUzI1NiJ9."
            + "eyJzdWIiOiIxMjM0NTY3ODkwIn0."
            + "dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"
        ],
    }


# The detectors whose installed patterns we replace (secret_patterns.INSTALLED).
REVIEWED = (
    "AWSKeyDetector",
    "ArtifactoryDetector",
    "DiscordBotTokenDetector",
    "GitHubTokenDetector",
    "GitLabTokenDetector",
    "MailchimpDetector",
    "SendGridDetector",
    "SlackDetector",
    "SquareOAuthDetector",
    "StripeDetector",
    "TelegramBotTokenDetector",
    "TwilioKeyDetector",
)
NAMES = ("src/app.py", "config.yml", "deploy/.env", "README.md", OUTPUT_SOURCE)


def _hits(lines: list[str]) -> list[tuple[str, int, str, str]]:
    numbered = list(enumerate(lines, 1))
    hits = scan([ScanSource(name, numbered) for name in NAMES])
    return [(h.source, h.line, h.type, h.plugin) for h in hits]


def test_no_provider_detector_finds_a_credential_in_realistic_non_secrets() -> None:
    found = [
        f"{source}:{line} {kind}: {NOT_SECRETS[line - 1]}"
        for source, line, kind, plugin in _hits(NOT_SECRETS)
        if not detector(plugin).generic
    ]
    assert not found, "\n".join(found)


def test_no_detector_at_all_finds_an_arn_or_an_integrity_hash() -> None:
    clean = [
        line for line in NOT_SECRETS if "arn:aws" in line or "sha384-" in line or "sha512-" in line
    ]
    assert _hits(clean) == []


@pytest.mark.parametrize("kind", sorted(_real()))
def test_each_real_credential_is_still_found_wherever_it_is(kind: str) -> None:
    lines = _real()[kind]
    hits = _hits(lines)
    for name in NAMES:
        for number in range(1, len(lines) + 1):
            assert any(h[:3] == (name, number, kind) for h in hits), (name, lines[number - 1], hits)


def test_the_sns_arn_commit_passes_the_secrets_check(tmp_path: Path) -> None:
    """detect-secrets' own commit adding an SNS topic ARN to a test: no "Telegram Bot Token"."""
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    (repo / "t.py").write_text("CASES = [\n]\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "base")
    (repo / "t.py").write_text(f"CASES = [\n    ('{SNS_ARN}', False),\n]\n")
    git(repo, "add", "-A")
    diff = git(repo, "diff", "--cached", "HEAD", strip=False)
    context = ValidationContext(
        worktree=repo,
        change=ChangeSet(base_commit=git(repo, "rev-parse", "HEAD"), diff=diff),
        task="t",
        env={},
        settings={"id": "secrets"},
        log_dir=tmp_path / "logs",
    )
    outcome = SecretsValidator().validate(context)
    assert outcome.result.severity is Severity.PASS, outcome.result
    assert outcome.fire is None


def test_our_patterns_replace_exactly_the_installed_ones_we_reviewed() -> None:
    """A newer detect-secrets that changes one of these patterns is reviewed again."""
    from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class

    from assay.adapters.validators.secret_patterns import INSTALLED, PATTERNS

    installed = {c.__name__: c for c in get_mapping_from_secret_type_to_class().values()}
    assert set(PATTERNS) == set(INSTALLED) == set(REVIEWED)
    for name, patterns in INSTALLED.items():
        assert tuple(p.pattern for p in installed[name].denylist) == patterns, name


@pytest.mark.parametrize("name", REVIEWED)
def test_our_patterns_keep_the_one_pass_gate(name: str) -> None:
    """Each pattern reads joined lines as single ones: the plugin is still gated."""
    from assay.adapters.validators.secret_patterns import PATTERNS

    with secret_scan._imported() as ds:
        plugin = next(c for c in ds.plugin_classes().values() if c.__name__ == name)()
        assert secret_scan._gate(secret_scan._pinned(plugin), ds) is not None
    for pattern in PATTERNS[name]:
        assert secret_scan._line_safe(pattern.pattern), pattern.pattern
    assert not secret_scan._line_safe(r"(?<![A-Za-z\s])x")  # \s holds the line end
    assert not secret_scan._line_safe(r"(?![^a])x")


def test_plausible_drops_values_whose_pattern_cannot_tell() -> None:
    from assay.adapters.validators.secret_patterns import plausible

    assert not plausible("AWSKeyDetector", "f311314a9b2c3d4e5f60718293a4b5c6d7e8f901")
    assert plausible("AWSKeyDetector", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY")
    assert not plausible("DiscordBotTokenDetector", "NotificationServiceFactor.create.Abc")
    assert not plausible("IbmCloudIamDetector", "created_at_desc_then_name_asc_then_id_desc_x")
    assert not plausible("Base64HighEntropyString", "sha256-" + "A" * 43)
    assert plausible("GitHubTokenDetector", "ghp")


def test_a_pattern_run_over_joined_lines_finds_what_it_finds_line_by_line() -> None:
    from assay.adapters.validators.secret_patterns import PATTERNS

    lines = [*NOT_SECRETS, *[line for group in _real().values() for line in group]]
    joined = "\n".join(lines)
    starts = secret_scan._line_starts(lines)
    for name, patterns in PATTERNS.items():
        gate = [re.compile(p.pattern, p.flags | re.MULTILINE) for p in patterns]
        alone = {n for n, line in enumerate(lines) if any(p.search(line) for p in patterns)}
        assert secret_scan._touched(gate, joined, starts) == alone, name
