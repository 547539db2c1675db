"""Sealed histories: with $ASSAY_TEMPORAL_CODEC_KEY every payload Temporal stores is ciphertext
(a run's input, its contract's env: values among what the workflow passes), readable with the
key, refused with another, and a payload written before the key was set still reads."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from support.scripted_effects import TemporalEnv, queue_name
from temporalio.api.common.v1 import Payload
from temporalio.client import Client

from assay.adapters.assay_secrets import assay_secrets
from assay.adapters.envpolicy import child_environment
from assay.adapters.temporal_connection import (
    CODEC_KEY_ENV,
    ConnectionSettingsError,
    TemporalConnection,
)
from assay.core.contract_rules import env_problem, key_variable_problem
from assay.engine.temporal.calls import RunInput
from assay.engine.temporal.client import connect
from assay.engine.temporal.codec import ENCODING, SealedCodec
from assay.engine.temporal.workflow import RunWorkflow

KEY = "k" * 40
SECRET = "sk-live-do-not-store-me-0123456789"


def test_the_history_holds_ciphertext_and_the_key_reads_it(temporal_env: TemporalEnv) -> None:
    target = temporal_env.env.client.service_client.config.target_host

    async def scenario(_: Client) -> tuple[bytes, str, str]:
        sealed = await connect(TemporalConnection(target, "default"), {CODEC_KEY_ENV: KEY})
        workflow = f"assay-test-{uuid.uuid4().hex[:10]}"
        handle = await sealed.start_workflow(
            RunWorkflow.run,
            RunInput(task_id=SECRET, task_queue=queue_name("nobody-polls")),
            id=workflow,
            task_queue=queue_name("nobody-polls"),
        )
        plain = await connect(TemporalConnection(target, "default"), {})
        raw = await plain.get_workflow_handle(workflow).fetch_history()
        stored = b"".join(e.SerializeToString() for e in raw.events)
        described = await sealed.get_workflow_handle(workflow).fetch_history()
        started = described.events[0].workflow_execution_started_event_attributes
        [payload] = started.input.payloads
        opened = (await SealedCodec(KEY).decode([payload]))[0].data.decode()
        other = SealedCodec("o" * 40)
        with pytest.raises(ValueError, match="cannot be opened with key"):
            await other.decode([payload])
        await handle.terminate()
        return stored, opened, payload.metadata["encoding"].decode()

    stored, opened, encoding = temporal_env.run(scenario)
    assert SECRET.encode() not in stored  # what the server keeps
    assert SECRET in opened and encoding == ENCODING.decode()


def test_an_unsealed_payload_reads_and_an_altered_one_is_refused() -> None:
    codec = SealedCodec(KEY)
    old = Payload(metadata={"encoding": b"json/plain"}, data=b'"before the key"')
    assert asyncio.run(codec.decode([old])) == [old]
    [sealed] = asyncio.run(codec.encode([old]))
    assert asyncio.run(codec.decode([sealed])) == [old]
    altered = Payload(metadata=sealed.metadata, data=sealed.data[:-1] + b"\0")
    with pytest.raises(ValueError, match="was altered"):
        asyncio.run(codec.decode([altered]))


@pytest.mark.parametrize("kept", [0, 5, 11, 12, 27])
def test_a_sealed_payload_cut_short_is_refused_as_altered(kept: int) -> None:
    """Shorter than a nonce and a tag: said as altered, never as the cipher's own complaint
    about a nonce's length."""
    codec = SealedCodec(KEY)
    [sealed] = asyncio.run(codec.encode([Payload(data=b'"x"')]))
    cut = Payload(metadata=sealed.metadata, data=sealed.data[:kept])
    with pytest.raises(ValueError, match="was altered"):
        asyncio.run(codec.decode([cut]))


def test_a_short_key_is_refused_before_anything_connects() -> None:
    with pytest.raises(ConnectionSettingsError, match="at least 32"):
        TemporalConnection("127.0.0.1:7233", "default").credentials({CODEC_KEY_ENV: "short"})


def test_the_key_is_never_handed_to_a_coder_validator_or_judge() -> None:
    operator = {CODEC_KEY_ENV: KEY, "PATH": "/usr/bin"}
    asked = {"X": f"${CODEC_KEY_ENV}"}
    assert env_problem(asked) is not None and key_variable_problem(CODEC_KEY_ENV) is not None
    handed = child_environment(operator, credentials=[CODEC_KEY_ENV], declared=asked)
    assert KEY not in handed.values() and CODEC_KEY_ENV not in handed
    assert assay_secrets(operator).leak(f"--token={KEY}") is not None  # under another name
