"""Which detect-secrets detector finds what, where it looks, and whether its finding blocks.

One closed table, one row per detector of detect-secrets 1.5 (a test pins it to the installed
version, so a new detector is classified on purpose):

- **provider** detectors recognise a credential by its own format (an ``AKIA`` key id, a
  ``ghp_`` token, a PEM private key, a JWT, ...). A new one blocks and fires
  ``halt-secret-exposure``; so does the exact value of a credential-like variable of the
  environment (:data:`ENV_VALUE_PREFIX`).
- **generic** detectors guess from the surroundings or the look of a string (a
  ``password = "..."`` keyword, a high-entropy string, ``user:pass@`` in a URL). Real code and
  test fixtures are full of these, so a new one is a warning, unless the contract says
  ``secrets: strict``.

``diff`` and ``output`` say whether a detector scans the lines the change adds and the coder's
captured output. Hex strings (hashes, digests, commit ids) and public IP addresses are not
credentials: scanned nowhere. Output (JSON event streams full of random-looking ids) is
scanned without the keyword and entropy detectors.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Detector:
    plugin: str  # detect-secrets' class name
    generic: bool
    diff: bool = True
    output: bool = True


DETECTORS: dict[str, Detector] = {
    row.plugin: row
    for row in (
        # provider: a credential by its format
        Detector("AWSKeyDetector", generic=False),
        Detector("ArtifactoryDetector", generic=False),
        Detector("AzureStorageKeyDetector", generic=False),
        Detector("CloudantDetector", generic=False),
        Detector("DiscordBotTokenDetector", generic=False),
        Detector("GitHubTokenDetector", generic=False),
        Detector("GitLabTokenDetector", generic=False),
        Detector("IbmCloudIamDetector", generic=False),
        Detector("IbmCosHmacDetector", generic=False),
        Detector("JwtTokenDetector", generic=False),
        Detector("MailchimpDetector", generic=False),
        Detector("NpmDetector", generic=False),
        Detector("OpenAIDetector", generic=False),
        Detector("PrivateKeyDetector", generic=False),
        Detector("PypiTokenDetector", generic=False),
        Detector("SendGridDetector", generic=False),
        Detector("SlackDetector", generic=False),
        Detector("SoftlayerDetector", generic=False),
        Detector("SquareOAuthDetector", generic=False),
        Detector("StripeDetector", generic=False),
        Detector("TelegramBotTokenDetector", generic=False),
        Detector("TwilioKeyDetector", generic=False),
        # generic: a guess from the surroundings or the look of a string
        Detector("KeywordDetector", generic=True, output=False),
        Detector("Base64HighEntropyString", generic=True, output=False),
        Detector("BasicAuthDetector", generic=True),
        Detector("HexHighEntropyString", generic=True, diff=False, output=False),
        Detector("IPPublicDetector", generic=True, diff=False, output=False),
    )
}

ENV_VALUE_PREFIX = "value of the variable "
"""The type of a finding that is the exact value of a credential-like environment variable."""

# Files whose lines only the provider detectors read: lock files and API descriptions are full
# of integrity hashes and example values (detect-secrets skips them whole; a provider's key
# there still blocks), and the baseline file lists hashes of secrets, not secrets.
PROVIDER_ONLY_FILES = frozenset({".secrets.baseline"})


def detector(plugin: str) -> Detector:
    """The row of ``plugin``; one this table does not know (a newer detect-secrets) is treated
    as a provider's: it scans everything and blocks."""
    return DETECTORS.get(plugin) or Detector(plugin, generic=False)
