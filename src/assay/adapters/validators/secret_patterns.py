"""Our own patterns for the provider detectors whose installed patterns match inside longer text.

detect-secrets 1.5's provider patterns are mostly unanchored: its Telegram pattern
(``\\d{8,10}:[0-9A-Za-z_-]{35}``) finds a "Telegram Bot Token" in the AWS ARN
``arn:aws:sns:us-east-1:123456789012:order-service-notifications-production`` (the last ten
digits of the account id, then 35 characters of the topic name), its GitHub pattern one in
``weighs_the_average_...`` (``ghs_`` inside a word), its Artifactory pattern one in any quoted
word beginning ``AP`` and a hex digit (``"APDUCommand"``), its Discord pattern one in a dotted
Java name. A provider's finding blocks a change, so each of these is a false hold on real code.

Each pattern here is the installed one (:data:`INSTALLED` pins them: a newer detect-secrets is
reviewed again, on purpose) with what the credential really is around it: the token starts and
ends at a word's edge, and where the provider's format says more (a Telegram token's secret part
starts with ``A``, Twilio and Mailchimp ids are hex, an Artifactory password is named as one),
that too. Capture groups stay where detect-secrets has them, so a finding's ``hashed_secret``
is the one a ``.secrets.baseline`` lists.

Every lookaround here is either a negative one of a single character class that cannot match a
line end, or a positive lookbehind of fixed text: a pattern run over joined lines reads each
line as it reads it alone (:mod:`secret_scan`'s gate).

:func:`plausible` then drops the few values whose pattern cannot say they are no credential: a
git commit id where an AWS secret key would be, a Discord "token" whose first part is not a
user id, an IBM Cloud "key" that is an identifier, an integrity hash.
"""

from __future__ import annotations

import base64
import binascii
import re

# The edges of a token: no letter or digit (or, where the token's own alphabet has them, no
# underscore or dash) right before or after it.
_START = r"(?<![A-Za-z0-9])"
_END = r"(?![A-Za-z0-9])"
_WORD_START = r"(?<![A-Za-z0-9_])"
_TOKEN_START = r"(?<![A-Za-z0-9_-])"
_TOKEN_END = r"(?![A-Za-z0-9_-])"

INSTALLED: dict[str, tuple[str, ...]] = {
    "AWSKeyDetector": (
        r"(?:A3T[A-Z0-9]|ABIA|ACCA|AKIA|ASIA)[0-9A-Z]{16}",
        r"aws.{0,20}?(?:key|pwd|pw|password|pass|token).{0,20}?[\'\"]([0-9a-zA-Z/+]{40})[\'\"]",
    ),
    "ArtifactoryDetector": (
        r'(?:\s|=|:|"|^)AKC[a-zA-Z0-9]{10,}(?:\s|"|$)',
        r'(?:\s|=|:|"|^)AP[\dABCDEF][a-zA-Z0-9]{8,}(?:\s|"|$)',
    ),
    "DiscordBotTokenDetector": (r"[MNO][a-zA-Z\d_-]{23,25}\.[a-zA-Z\d_-]{6}\.[a-zA-Z\d_-]{27}",),
    "GitHubTokenDetector": (r"(ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9_]{36}",),
    "GitLabTokenDetector": (
        r"(glpat|gldt|glft|glsoat|glrt)-[A-Za-z0-9_\-]{20,50}(?!\w)",
        r"GR1348941[A-Za-z0-9_\-]{20,50}(?!\w)",
        r"glcbt-([0-9a-fA-F]{2}_)?[A-Za-z0-9_\-]{20,50}(?!\w)",
        r"glimt-[A-Za-z0-9_\-]{25}(?!\w)",
        r"glptt-[A-Za-z0-9_\-]{40}(?!\w)",
        r"glagent-[A-Za-z0-9_\-]{50,1024}(?!\w)",
        r"gloas-[A-Za-z0-9_\-]{64}(?!\w)",
    ),
    "MailchimpDetector": (r"[0-9a-z]{32}-us[0-9]{1,2}",),
    "SendGridDetector": (r"SG\.[a-zA-Z0-9_-]{22}\.[a-zA-Z0-9_-]{43}",),
    "SlackDetector": (
        r"xox(?:a|b|p|o|s|r)-(?:\d+-)+[a-z0-9]+",
        r"https://hooks\.slack\.com/services/T[a-zA-Z0-9_]+/B[a-zA-Z0-9_]+/[a-zA-Z0-9_]+",
    ),
    "SquareOAuthDetector": (r"sq0csp-[0-9A-Za-z\\\-_]{43}",),
    "StripeDetector": (r"(?:r|s)k_live_[0-9a-zA-Z]{24}",),
    "TelegramBotTokenDetector": (r"\d{8,10}:[0-9A-Za-z_-]{35}",),
    "TwilioKeyDetector": (r"AC[a-z0-9]{32}", r"SK[a-z0-9]{32}"),
}
"""The installed detect-secrets' patterns that :data:`PATTERNS` replaces, as reviewed."""

_I = re.IGNORECASE
PATTERNS: dict[str, tuple[re.Pattern[str], ...]] = {
    "AWSKeyDetector": (
        re.compile(_START + r"(?:A3T[A-Z0-9]|ABIA|ACCA|AKIA|ASIA)[0-9A-Z]{16}" + _END),
        re.compile(INSTALLED["AWSKeyDetector"][1], _I),  # named by its variable: kept
    ),
    "ArtifactoryDetector": (
        # An API key is "AKCp" and 69 more characters; an encrypted password ("AP" and a hex
        # digit) is only told from a word by the name Artifactory or JFrog before it.
        re.compile(_START + r"AKCp[a-zA-Z0-9]{40,}" + _END),
        re.compile(r"(?i:artif|jfrog).{0,80}?" + _START + r"(AP[\dABCDEF][a-zA-Z0-9]{8,})" + _END),
    ),
    "DiscordBotTokenDetector": (
        re.compile(
            _TOKEN_START
            + r"[MNO][a-zA-Z0-9_-]{23,25}\.[a-zA-Z0-9_-]{6}\.[a-zA-Z0-9_-]{27,38}"
            + _TOKEN_END
        ),
    ),
    "GitHubTokenDetector": (
        re.compile(_WORD_START + r"(ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9_]{36}(?![A-Za-z0-9_])"),
    ),
    "GitLabTokenDetector": tuple(
        re.compile(_WORD_START + pattern) for pattern in INSTALLED["GitLabTokenDetector"]
    ),
    "MailchimpDetector": (re.compile(_START + r"[0-9a-f]{32}-us[0-9]{1,2}" + _END),),
    "SendGridDetector": (
        re.compile(
            _TOKEN_START + r"SG\.[a-zA-Z0-9_-]{22}\.[a-zA-Z0-9_-]{43}" + _TOKEN_END,
        ),
    ),
    "SlackDetector": (
        re.compile(_START + r"xox(?:a|b|p|o|s|r)-(?:\d+-)+[a-z0-9]+", _I),
        re.compile(INSTALLED["SlackDetector"][1], _I | re.VERBOSE),  # a whole URL: kept
    ),
    "SquareOAuthDetector": (re.compile(_START + r"sq0csp-[0-9A-Za-z\\\-_]{43}"),),
    "StripeDetector": (re.compile(_START + r"(?:r|s)k_live_[0-9a-zA-Z]{24}"),),
    "TelegramBotTokenDetector": (
        # A bot token alone, or in the Bot API's URL (".../bot<token>/getMe"); its secret part
        # starts with "A". Not digits inside a longer number, nor after a colon (an ARN's
        # account id), nor a longer name after the colon.
        re.compile(r"(?:(?<=/bot)|(?<![A-Za-z0-9_:]))[0-9]{8,10}:A[0-9A-Za-z_-]{34}" + _TOKEN_END),
    ),
    "TwilioKeyDetector": (
        re.compile(_WORD_START + r"AC[a-f0-9]{32}" + _END),
        re.compile(_WORD_START + r"SK[a-f0-9]{32}" + _END),
    ),
}
"""Our pattern for each detector named in :data:`INSTALLED`, used in place of its own."""

_HEX_ONLY = re.compile(r"[0-9a-f]+|[0-9A-F]+")
_INTEGRITY = re.compile(r"sha(?:1|256|384|512)-")  # Subresource Integrity, package-lock.json


def plausible(plugin: str, value: str) -> bool:
    """Whether ``value``, as ``plugin`` found it, can be a credential at all."""
    if plugin == "AWSKeyDetector" and len(value) == 40:
        return not _HEX_ONLY.fullmatch(value)  # a git commit id, a SHA-1: not a secret key
    if plugin == "DiscordBotTokenDetector":
        return _decodes_to_digits(value.split(".", 1)[0])  # the bot's user id, in base64
    if plugin == "IbmCloudIamDetector":
        # 44 random characters hold both cases; an identifier (snake_case, kebab-case) does not.
        return any(c.isupper() for c in value) and any(c.islower() for c in value)
    if plugin == "Base64HighEntropyString":
        return not _INTEGRITY.match(value)  # a digest of a published file
    return True


def _decodes_to_digits(part: str) -> bool:
    try:
        decoded = base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))
    except (binascii.Error, ValueError):
        return False
    return decoded.isdigit() and decoded.isascii()


NEEDLES: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    # detector: (texts one of which every match of its patterns holds as written, and texts one
    # of which it holds in any case): what the scan looks for first, at C speed, before it runs
    # the detector's patterns (case-insensitive ones, or ones starting with a lookbehind, cost
    # a pass over every character) on the few lines that hold one.
    "AWSKeyDetector": (("A3T", "ABIA", "ACCA", "AKIA", "ASIA"), ("aws",)),
    "ArtifactoryDetector": (("AKCp",), ("artif", "jfrog")),
    "CloudantDetector": ((), ("key", "pw", "pass", "token", "cloudant")),
    "GitHubTokenDetector": (("ghp_", "gho_", "ghu_", "ghs_", "ghr_"), ()),
    "GitLabTokenDetector": (
        (
            "glpat-",
            "gldt-",
            "glft-",
            "glsoat-",
            "glrt-",
            "GR1348941",
            "glcbt-",
            "glimt-",
            "glptt-",
            "glagent-",
            "gloas-",
        ),
        (),
    ),
    "IbmCloudIamDetector": ((), ("key", "pwd", "pass", "token")),
    "IbmCosHmacDetector": ((), ("secret",)),
    "KeywordDetector": ((), ("key", "pass", "pwd", "secret", "contrasena")),
    "MailchimpDetector": (("-us",), ()),
    "SendGridDetector": (("SG.",), ()),
    "SlackDetector": ((), ("xox", "hooks.slack.com")),
    "SoftlayerDetector": ((), ("key", "pwd", "pass", "token", "softlayer")),
    "SquareOAuthDetector": (("sq0csp-",), ()),
    "StripeDetector": (("k_live_",), ()),
    "TelegramBotTokenDetector": ((":A",), ()),
    "TwilioKeyDetector": (("AC", "SK"), ()),
}


SHAPES: dict[str, tuple[str, ...]] = {
    # detector: patterns one of which every match of its patterns holds (case-sensitive,
    # starting on plain text, so fast): the value's own shape, or a run of literals. Lines that
    # are not ASCII skip this step (case folding there is not ASCII's).
    "CloudantDetector": (r"[0-9a-fA-F]{64}", r"[a-zA-Z]{24}"),
    "DiscordBotTokenDetector": (r"\.[a-zA-Z0-9_-]{6}\.",),
    "IbmCloudIamDetector": (r"[a-zA-Z0-9_\-]{44}",),
    "IbmCosHmacDetector": (r"[a-fA-F0-9]{48}",),
    "SoftlayerDetector": (r"[a-zA-Z0-9]{64}",),
}
