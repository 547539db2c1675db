"""Workflow histories sealed: every payload Temporal stores (a run's plan and contract, its
``env:`` values among them, the calls and their answers) and every failure's message,
encrypted with AES-GCM under a key only the workers and submitters hold.

The key is ``$ASSAY_TEMPORAL_CODEC_KEY`` (at least 32 characters; hashed to 256 bits), read by
every command that talks to Temporal; the server, its database and its UI see ciphertext (the
UI shows it as ``binary/encrypted``). A payload sealed under another key is refused with the
key ids named, never decoded as garbage; an unsealed one (written before the key was set) is
read as it is.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
from collections.abc import Sequence

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from temporalio.api.common.v1 import Payload
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.converter import (
    DataConverter,
    DefaultFailureConverterWithEncodedAttributes,
    PayloadCodec,
)

ENCODING = b"binary/encrypted"
KEY_ID = "encryption-key-id"
_NONCE_BYTES = 12
_TAG_BYTES = 16


class SealedCodec(PayloadCodec):
    """AES-256-GCM over each whole payload (its metadata too), a fresh nonce each time; the
    key's id (a hash, not the key) rides with it."""

    def __init__(self, secret: str) -> None:
        digest = hashlib.sha256(secret.encode()).digest()
        self._aead = AESGCM(digest)
        self.key_id = hashlib.sha256(b"assay-key-id:" + digest).hexdigest()[:16]

    async def encode(self, payloads: Sequence[Payload]) -> list[Payload]:
        return [self._seal(p) for p in payloads]

    async def decode(self, payloads: Sequence[Payload]) -> list[Payload]:
        return [self._open(p) for p in payloads]

    def _seal(self, payload: Payload) -> Payload:
        nonce = os.urandom(_NONCE_BYTES)
        sealed = self._aead.encrypt(nonce, payload.SerializeToString(), self.key_id.encode())
        metadata = {"encoding": ENCODING, KEY_ID: self.key_id.encode()}
        return Payload(metadata=metadata, data=nonce + sealed)

    def _open(self, payload: Payload) -> Payload:
        if payload.metadata.get("encoding") != ENCODING:
            return payload  # written before the key was set: read as it is
        key_id = payload.metadata.get(KEY_ID, b"").decode(errors="replace")
        if key_id != self.key_id:
            raise ValueError(
                f"a payload sealed under key {key_id or '(none)'} cannot be opened with key "
                f"{self.key_id}: every worker and submitter needs the same "
                "$ASSAY_TEMPORAL_CODEC_KEY"
            )
        data = payload.data
        try:
            if len(data) < _NONCE_BYTES + _TAG_BYTES:  # cut short: no nonce, or no tag
                raise InvalidTag
            plain = self._aead.decrypt(data[:_NONCE_BYTES], data[_NONCE_BYTES:], key_id.encode())
        except InvalidTag:
            raise ValueError(f"a payload sealed under key {key_id} was altered") from None
        return Payload.FromString(plain)


def data_converter(secret: str | None) -> DataConverter:
    """Pydantic's converter; with ``secret``, every payload and failure sealed."""
    if secret is None:
        return pydantic_data_converter
    return dataclasses.replace(
        pydantic_data_converter,
        payload_codec=SealedCodec(secret),
        failure_converter_class=DefaultFailureConverterWithEncodedAttributes,
    )
