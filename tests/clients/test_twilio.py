"""Twilio's own `RequestValidator` against the daemon's verifier and the sandbox's signer:
what one accepts the other accepts, on the published vectors and on generated forms."""

import json
import random
import string
import subprocess
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, HTTPServer

import requests
from twilio.request_validator import RequestValidator

from conftest import REPOSITORY, TWILIO_PUBLIC_URL, TWILIO_TOKEN, binary, eventually

VECTORS = REPOSITORY / "tests" / "data" / "twilio-signature-vectors.json"


class Form:
    """Parameters as Twilio posts them, a name given more than once kept each time: what
    `RequestValidator` reads through `getall`."""

    def __init__(self, pairs):
        self.pairs = list(pairs)

    def __iter__(self):
        return iter(dict.fromkeys(name for name, _ in self.pairs))

    def getall(self, name):
        return [value for key, value in self.pairs if key == name]

    def __getitem__(self, name):
        return self.getall(name)[0]


def test_the_validator_accepts_every_published_vector():
    cases = json.loads(VECTORS.read_text())["cases"]
    assert len(cases) >= 2
    for case in cases:
        validator = RequestValidator(case["auth_token"])
        form = Form(case["params"]) if "params" in case else Form(
            urllib.parse.parse_qsl(case["form"], keep_blank_values=True)
        )
        assert validator.validate(case["url"], form, case["signature"]), case["name"]
        assert not validator.validate(case["url"] + "x", form, case["signature"]), case["name"]


def generated_form(rng: random.Random, n: int):
    """A reply as Twilio posts one, with a body of anything a person may write."""
    alphabet = string.ascii_letters + string.digits + " !?.,'&=+%/é☃🛑"
    body = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 60)))
    pairs = [
        ("MessageSid", f"SM{n:032x}"),
        ("AccountSid", "AC" + "0" * 32),
        ("From", f"+1555{rng.randint(1000000, 9999999)}"),
        ("To", "+15005550006"),
        ("Body", body),
        ("NumMedia", "0"),
    ]
    if rng.random() < 0.3:
        pairs.append(("OptOutType", rng.choice(["STOP", "START", "HELP"])))
    return pairs


def test_a_hundred_forms_are_accepted_by_both_or_by_neither(daemon):
    validator = RequestValidator(TWILIO_TOKEN)
    rng = random.Random(7)
    url = f"{daemon.ingest}/sources/twilio"
    for n in range(100):
        pairs = generated_form(rng, n)
        form = Form(pairs)
        good = validator.compute_signature(TWILIO_PUBLIC_URL, form)
        other = validator.compute_signature(TWILIO_PUBLIC_URL + "/other", form)
        assert validator.validate(TWILIO_PUBLIC_URL, form, good)
        assert not validator.validate(TWILIO_PUBLIC_URL, form, other)
        body = urllib.parse.urlencode(pairs)
        headers = {"Content-Type": "application/x-www-form-urlencoded"}
        accepted = requests.post(
            url, data=body, headers={**headers, "X-Twilio-Signature": good}, timeout=10
        )
        assert accepted.status_code == 200, (pairs, accepted.text)
        refused = requests.post(
            url, data=body, headers={**headers, "X-Twilio-Signature": other}, timeout=10
        )
        assert refused.status_code in (401, 403), (pairs, refused.status_code, refused.text)


class Captured(BaseHTTPRequestHandler):
    posts = []

    def do_POST(self):
        length = int(self.headers.get("Content-Length", "0"))
        body = self.rfile.read(length).decode()
        Captured.posts.append((self.headers.get("X-Twilio-Signature"), body))
        self.send_response(200)
        self.send_header("Content-Type", "text/xml")
        self.end_headers()
        self.wfile.write(b"<Response/>")

    def log_message(self, *args):
        pass


def test_the_sandboxs_signer_signs_what_the_validator_accepts(work_dir, sandbox):
    server = HTTPServer(("127.0.0.1", 0), Captured)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_port}/sources/twilio"
        for body in ["STOP", "please stop texting me about the rally", "ＳＴＯＰ 🛑 & more=1"]:
            subprocess.run(
                [
                    str(binary()),
                    "sandbox",
                    "twilio-send",
                    "--config",
                    str(work_dir / "sandbox.toml"),
                    "--url",
                    url,
                    "--public-url",
                    TWILIO_PUBLIC_URL,
                    "--auth-token",
                    TWILIO_TOKEN,
                    "--from",
                    "+15550104444",
                    "--body",
                    body,
                ],
                check=True,
                capture_output=True,
            )
        eventually(lambda: len(Captured.posts) >= 3, "the sandbox's three posts")
    finally:
        server.shutdown()
    validator = RequestValidator(TWILIO_TOKEN)
    for signature, body in Captured.posts:
        form = Form(urllib.parse.parse_qsl(body, keep_blank_values=True))
        assert signature, body
        assert validator.validate(TWILIO_PUBLIC_URL, form, signature), body
        assert not validator.validate(url, form, signature), "signed for the public URL only"
