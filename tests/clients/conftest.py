"""The sandbox's fakes driven by the client libraries campaign data teams use.

Each test starts from the `outreach-sync` binary (`OUTREACH_SYNC_BIN`, else the repository's
`target/debug/outreach-sync`): the sandbox as a process of its own, and where a test needs
it, the daemon beside it, configured to write to the sandbox's VAN and BigQuery and to hear
a Twilio number. Nothing here reaches the internet.
"""

import json
import os
import pathlib
import socket
import subprocess
import tempfile
import time

import pytest
import requests

REPOSITORY = pathlib.Path(__file__).resolve().parents[2]
SANDBOX_TESTDATA = REPOSITORY / "crates" / "sandbox" / "testdata"

VAN_KEY = "sandbox-van-key"
ACTION_NETWORK_KEY = "sandbox-an-key"
MOBILIZE_KEY = "sandbox-mobilize-key"
MOBILIZE_ORGANIZATION_ID = 4242
MOBILE_COMMONS_PASSWORD = "sandbox-mobile-commons-password"
MOBILE_COMMONS_TOKEN = "sandbox-mobile-commons-token"
TWILIO_TOKEN = "sandbox-twilio-auth-token"
TWILIO_PUBLIC_URL = "https://sync.example.org/sources/twilio"
WEBHOOK_SECRET = "clients-webhook-secret"
ADMIN_TOKEN = "clients-admin-token"
BIGQUERY_PROJECT = "sandbox-project"
BIGQUERY_DATASET = "consent"


def binary() -> pathlib.Path:
    given = os.environ.get("OUTREACH_SYNC_BIN")
    path = pathlib.Path(given) if given else REPOSITORY / "target" / "debug" / "outreach-sync"
    if not path.is_file():
        pytest.skip(f"no outreach-sync binary at {path} (cargo build, or set OUTREACH_SYNC_BIN)")
    return path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(url: str, what: str, process: subprocess.Popen, log: pathlib.Path, headers=None):
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{what} exited: {log.read_text()}")
        try:
            if requests.get(url, headers=headers, timeout=2).status_code < 500:
                return
        except requests.RequestException:
            pass
        time.sleep(0.1)
    raise RuntimeError(f"{what} did not answer at {url}: {log.read_text()}")


def eventually(check, what: str, within: float = 30.0):
    """`check()`'s first truthy answer, asked again until `within` seconds pass."""
    deadline = time.monotonic() + within
    while True:
        found = check()
        if found:
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"waited {within} s for {what}, in vain")
        time.sleep(0.2)


class Sandbox:
    def __init__(self, base: str):
        self.base = base

    @property
    def van(self) -> str:
        return f"{self.base}/van/v4"

    @property
    def action_network(self) -> str:
        return f"{self.base}/actionnetwork/api/v2"

    @property
    def mobilize(self) -> str:
        return f"{self.base}/mobilize/v1"

    @property
    def mobile_commons(self) -> str:
        return f"{self.base}/mobile_commons/api"

    @property
    def bigquery_token(self) -> str:
        return f"{self.base}/bigquery/oauth2/token"

    def control(self, method: str, path: str, body=None):
        answer = requests.request(method, f"{self.base}/_control/{path}", json=body, timeout=10)
        answer.raise_for_status()
        return answer.json() if answer.content else None

    def truth(self):
        return self.control("GET", "truth")

    def bigquery(self):
        return self.control("GET", "bigquery")

    def van_truth(self):
        return self.control("GET", "van")


class Daemon:
    def __init__(self, ingest: str, admin: str):
        self.ingest = ingest
        self.admin = admin

    def get(self, path: str):
        answer = requests.get(
            f"{self.admin}{path}", headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}, timeout=10
        )
        answer.raise_for_status()
        return answer.json()


@pytest.fixture(scope="session")
def work_dir():
    with tempfile.TemporaryDirectory(prefix="outreach-sync-clients-") as path:
        yield pathlib.Path(path)


@pytest.fixture(scope="session")
def ports():
    return {"sandbox": free_port(), "ingest": free_port(), "admin": free_port()}


@pytest.fixture(scope="session")
def sandbox(work_dir, ports):
    """The sandbox, its webhooks delivered to the daemon's port (which may not listen)."""
    log = work_dir / "sandbox.log"
    # Its own (empty) configuration, never the machine's /etc/outreach-sync/config.toml.
    config = work_dir / "sandbox.toml"
    config.write_text("")
    with open(log, "w") as out:
        process = subprocess.Popen(
            [
                str(binary()),
                "sandbox",
                "--config",
                str(config),
                "--bind",
                f"127.0.0.1:{ports['sandbox']}",
                "--leads",
                "20",
                "--organizations",
                "1",
                "--activity-ms",
                "0",
                "--deliver-to",
                f"http://127.0.0.1:{ports['ingest']}/webhooks",
                "--secret",
                WEBHOOK_SECRET,
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=work_dir,
        )
    base = f"http://127.0.0.1:{ports['sandbox']}"
    try:
        wait_for(f"{base}/_control/stats", "the sandbox", process, log)
        yield Sandbox(base)
    finally:
        stop(process)


@pytest.fixture(scope="session")
def bigquery_key(work_dir, sandbox) -> pathlib.Path:
    """The sandbox's test service account key, its `token_uri` the fake's token endpoint."""
    key = json.loads((SANDBOX_TESTDATA / "bigquery-service-account.json").read_text())
    key["token_uri"] = sandbox.bigquery_token
    path = work_dir / "bigquery-key.json"
    path.write_text(json.dumps(key))
    return path


def start_daemon(work_dir, name, ingest_port, sandbox, bigquery_key):
    """`outreach-sync serve` (its database `{name}.db`): the sandbox's service, its VAN and
    BigQuery written, a Twilio number heard. The process and the daemon's addresses."""
    admin_port = free_port()
    config = work_dir / f"{name}.toml"
    (work_dir / "van-key").write_text(VAN_KEY)
    config.write_text(
        f"""
[database]
url = "sqlite://{work_dir / (name + '.db')}"

[ingest]
bind = "127.0.0.1:{ingest_port}"

[webhook]
secrets = ["{WEBHOOK_SECRET}"]

[service]
base_url = "{sandbox.base}"
client_id = "sandbox@example.org"
client_secret = "sandbox-secret"
requests_per_second = 1000

[reconcile]
schedule = ""
on_start = true

[admin]
bind = "127.0.0.1:{admin_port}"
tokens = ["clients:{ADMIN_TOKEN}"]

[[destination]]
name = "van"
kind = "van"
base_url = "{sandbox.van}"
api_key_file = "{work_dir / 'van-key'}"

[[destination]]
name = "warehouse"
kind = "bigquery"
project = "{BIGQUERY_PROJECT}"
dataset = "{BIGQUERY_DATASET}"
credentials_file = "{bigquery_key}"
base_url = "{sandbox.base}/bigquery/v2"

[[source]]
name = "twilio"
kind = "twilio"
auth_token = "{TWILIO_TOKEN}"
public_url = "{TWILIO_PUBLIC_URL}"
"""
    )
    log = work_dir / f"{name}.log"
    with open(log, "w") as out:
        process = subprocess.Popen(
            [str(binary()), "--config", str(config), "serve"],
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=work_dir,
        )
    admin = f"http://127.0.0.1:{admin_port}"
    try:
        wait_for(f"{admin}/healthz", name, process, log)
    except Exception:
        process.terminate()
        raise
    return process, Daemon(f"http://127.0.0.1:{ingest_port}", admin)


def stop(process: subprocess.Popen):
    process.terminate()
    process.wait(timeout=15)


@pytest.fixture(scope="session")
def daemon(work_dir, ports, sandbox, bigquery_key):
    """The daemon the sandbox delivers its webhooks to."""
    process, daemon = start_daemon(work_dir, "daemon", ports["ingest"], sandbox, bigquery_key)
    try:
        yield daemon
    finally:
        stop(process)
