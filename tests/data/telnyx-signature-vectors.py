#!/usr/bin/env python3
"""Writes telnyx-signature-vectors.json beside this file: Telnyx webhook signatures
(Ed25519 over the bytes `{telnyx-timestamp}|{raw body}`, base64) made with Python's
`cryptography` package, apart from the sandbox's signer (Rust, ed25519-dalek), which a unit
test of crates/sandbox/src/telnyx.rs checks against them.

Run it with cryptography 50.0.2, the version tests/clients/requirements.txt pins:

    python3 -m venv /tmp/telnyx-vectors
    /tmp/telnyx-vectors/bin/pip install cryptography==50.0.2
    /tmp/telnyx-vectors/bin/python tests/data/telnyx-signature-vectors.py

Ed25519 is deterministic: the same key, timestamp and body give the same signature, so the
file it writes is the same each run.
"""

import base64
import hashlib
import json
import pathlib

import cryptography
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import (
    Ed25519PrivateKey,
    Ed25519PublicKey,
)
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

VERSION = "50.0.2"
# The sandbox's published test key (DEFAULT_TELNYX_SEED) and a second one.
SANDBOX_SEED = hashlib.sha256(b"outreach-sync sandbox telnyx test key").digest()
SECOND_SEED = hashlib.sha256(b"outreach-sync sandbox telnyx second test key").digest()
TIMESTAMP = "1767225600"  # 2026-01-01T00:00:00Z


def public_key(seed: bytes) -> str:
    raw = (
        Ed25519PrivateKey.from_private_bytes(seed)
        .public_key()
        .public_bytes(Encoding.Raw, PublicFormat.Raw)
    )
    return base64.b64encode(raw).decode()


def sign(seed: bytes, timestamp: str, body: str) -> str:
    signed = f"{timestamp}|".encode() + body.encode()
    return base64.b64encode(Ed25519PrivateKey.from_private_bytes(seed).sign(signed)).decode()


def verifies(public_key_b64: str, timestamp: str, body: str, signature: str) -> bool:
    key = Ed25519PublicKey.from_public_bytes(base64.b64decode(public_key_b64))
    try:
        key.verify(base64.b64decode(signature), f"{timestamp}|".encode() + body.encode())
    except InvalidSignature:
        return False
    return True


def event(event_type: str, direction: str, text: str, sender: str, recipient: str) -> dict:
    """A Telnyx messaging event in the documented shape (Messaging API v2)."""
    at = "2026-01-01T00:00:00.000Z"
    status = "webhook_delivered" if direction == "inbound" else "delivered"
    return {
        "data": {
            "event_type": event_type,
            "id": "b2c3d4e5-0000-4000-8000-000000000001",
            "occurred_at": at,
            "payload": {
                "id": "7ee4241c-0000-4000-8000-000000000002",
                "record_type": "message",
                "direction": direction,
                "type": "SMS",
                "messaging_profile_id": "40017e11-5a4d-4b0c-8a3e-000000000001",
                "from": {"phone_number": sender, "carrier": "T-MOBILE USA, INC.", "line_type": "Wireless"},
                "to": [{"phone_number": recipient, "status": status, "carrier": "TELNYX LLC", "line_type": "VoIP"}],
                "text": text,
                "media": [],
                "encoding": "GSM-7" if text.isascii() else "UCS-2",
                "parts": 1,
                "received_at": at,
            },
            "record_type": "event",
        },
        "meta": {"attempt": 1, "delivered_to": "https://sync.example.org/sources/telnyx-main"},
    }


def compact(value: dict) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


RECEIVED = compact(event("message.received", "inbound", "STOP", "+14155550100", "+15005550006"))
ACCENTS = compact(
    event("message.received", "inbound", "Arrêtez, s'il vous plaît 🙏 ça suffit", "+33612345678", "+15005550006")
)
PRETTY = json.dumps(
    event("message.finalized", "outbound", "Reply STOP to opt out", "+15005550006", "+14155550100"),
    indent=2,
    ensure_ascii=False,
) + "\n"
PIPE = compact(event("message.received", "inbound", "1767225600|STOP | stop", "+14155550100", "+15005550006"))


def valid(name: str, seed: bytes, body: str, timestamp: str = TIMESTAMP) -> dict:
    return {
        "name": name,
        "seed_hex": seed.hex(),
        "public_key": public_key(seed),
        "timestamp": timestamp,
        "body": body,
        "signature": sign(seed, timestamp, body),
        "valid": True,
    }


def invalid(base: dict, name: str, why: str, **changed) -> dict:
    case = dict(base, name=name, valid=False, why=why)
    case.update(changed)
    return case


def main() -> None:
    assert cryptography.__version__ == VERSION, cryptography.__version__
    received = valid("a message.received event, signed with the sandbox's test key", SANDBOX_SEED, RECEIVED)
    cases = [
        received,
        valid("non-ASCII text (accents, an emoji), signed as its UTF-8 bytes", SANDBOX_SEED, ACCENTS),
        valid("an empty JSON object", SANDBOX_SEED, "{}"),
        valid("a body with '|' in it (a timestamp and a bar in the text)", SANDBOX_SEED, PIPE),
        valid("a pretty-printed message.finalized event ending in a newline, the second key", SECOND_SEED, PRETTY),
        valid("a message.received event, the second key, another timestamp", SECOND_SEED, RECEIVED, "1767229200"),
        invalid(
            received,
            "the body with one byte changed",
            "the text STOP is STOQ: not the body that was signed",
            body=RECEIVED.replace('"text":"STOP"', '"text":"STOQ"'),
        ),
        invalid(
            received,
            "another timestamp",
            "the timestamp is one second later than the one signed with the body",
            timestamp="1767225601",
        ),
        invalid(
            received,
            "another key's public key",
            "signed with the sandbox's test key, verified with the second key's public key",
            public_key=public_key(SECOND_SEED),
        ),
        invalid(
            received,
            "the body re-serialized",
            "the same JSON written with spaces after ',' and ':': other bytes than those signed",
            body=json.dumps(json.loads(RECEIVED), ensure_ascii=False),
        ),
        invalid(
            received,
            "the body signed without the timestamp",
            "the signature is of the body alone, not of '{timestamp}|{body}'",
            signature=base64.b64encode(
                Ed25519PrivateKey.from_private_bytes(SANDBOX_SEED).sign(RECEIVED.encode())
            ).decode(),
        ),
    ]
    for case in cases:
        got = verifies(case["public_key"], case["timestamp"], case["body"], case["signature"])
        assert got == case["valid"], case["name"]
    about = (
        "Telnyx webhook signatures: telnyx-signature-ed25519 is base64 of the Ed25519 signature of "
        "the bytes '{telnyx-timestamp}|{raw body}', checked with the account's public key (base64 of "
        "its 32 raw bytes). Made by tests/data/telnyx-signature-vectors.py with Python's cryptography "
        f"{VERSION} (the version tests/clients/requirements.txt pins): "
        "base64.b64encode(Ed25519PrivateKey.from_private_bytes(bytes.fromhex(seed_hex))"
        ".sign(f'{timestamp}|'.encode() + body.encode())), the public key "
        "base64.b64encode(key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)). "
        "Two keys: the sandbox's published test key (DEFAULT_TELNYX_SEED, the SHA-256 of "
        "'outreach-sync sandbox telnyx test key') and a second (the SHA-256 of "
        "'outreach-sync sandbox telnyx second test key'). body is the exact raw body, signed as its "
        "UTF-8 bytes. A case with valid false changes one thing of a valid case (its why says which) "
        "and keeps the signature unless that is the change; its seed_hex is the key that signed. "
        "Every case was verified with Ed25519PublicKey.verify when written. No example key, "
        "signature and payload published by Telnyx was found: its webhook documentation gives "
        "none, and the webhook tests of its SDKs sign with a key generated at each run "
        "(team-telnyx/telnyx-python tests/test_webhook.py, telnyx-node test/Webhook.spec.js, "
        "telnyx-ruby test/telnyx/lib/webhooks_ed25519_test.rb), so there is no published case here."
    )
    out = pathlib.Path(__file__).with_suffix(".json")
    out.write_text(json.dumps({"about": about, "cases": cases}, indent=2, ensure_ascii=False) + "\n")
    print(f"{out}: {len(cases)} cases")


if __name__ == "__main__":
    main()
