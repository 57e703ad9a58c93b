"""Google's `google-cloud-bigquery` client against the sandbox's BigQuery, with a service
account key whose `token_uri` is the fake's: the token, a table of the daemon's schema,
rows streamed with row ids, the table read back, a row of the wrong type as the client
reports it. Then the views the daemon made, run by DuckDB over rows with repeats."""

import datetime
import json
import re

import duckdb
import pytest
from google.api_core.client_options import ClientOptions
from google.auth.transport.requests import Request
from google.cloud import bigquery
from google.oauth2 import service_account

from conftest import (
    BIGQUERY_DATASET,
    BIGQUERY_PROJECT,
    eventually,
    free_port,
    start_daemon,
    stop,
)


@pytest.fixture(scope="module")
def credentials(bigquery_key):
    return service_account.Credentials.from_service_account_file(
        str(bigquery_key), scopes=["https://www.googleapis.com/auth/bigquery"]
    )


@pytest.fixture(scope="module")
def client(sandbox, credentials):
    return bigquery.Client(
        project=BIGQUERY_PROJECT,
        credentials=credentials,
        client_options=ClientOptions(api_endpoint=sandbox.base),
    )


def test_the_service_account_gets_a_token_from_the_fakes_endpoint(credentials):
    credentials.refresh(Request())
    assert credentials.token
    assert credentials.valid


def daemons_schema(sandbox, daemon):
    """The columns of the table the daemon made in the fake, as the fake holds them."""

    def made():
        truth = sandbox.bigquery()
        for table in truth.get("tables", []):
            if table.get("view") is None and table["tableId"] == "consent_events":
                return table
        return None

    table = eventually(made, "the daemon's table in the fake")
    return [
        bigquery.SchemaField(f["name"], f["type"], mode=f.get("mode", "NULLABLE"))
        for f in table["schema"]
    ]


def test_a_table_of_the_daemons_schema_takes_rows_by_id_and_reports_a_wrong_one(
    sandbox, daemon, client
):
    schema = daemons_schema(sandbox, daemon)
    names = [f.name for f in schema]
    assert names[:3] == ["seq", "accountId", "organizationId"], names
    table_id = f"{BIGQUERY_PROJECT}.{BIGQUERY_DATASET}.client_copy"
    client.create_table(bigquery.Table(table_id, schema=schema))
    row = {
        "seq": 1,
        "accountId": "default",
        "organizationId": "org_1",
        "leadId": None,
        "phoneNumber": "+15550101010",
        "optedOut": True,
        "source": "webhook",
        "actor": None,
        "occurredAt": "2026-12-01T10:00:00.000Z",
        "recordedAt": "2026-12-01T10:00:01.000Z",
        "entryHash": None,
    }
    assert client.insert_rows_json(table_id, [row, {**row, "seq": 2}], row_ids=["1", "2"]) == []
    table = client.get_table(table_id)
    assert [f.name for f in table.schema] == names
    assert table.num_rows == 2 or table.streaming_buffer is not None
    wrong = {**row, "seq": "not a number"}
    errors = client.insert_rows_json(table_id, [wrong], row_ids=["3"])
    assert len(errors) == 1 and errors[0]["index"] == 0, errors
    assert errors[0]["errors"][0]["reason"] == "invalid", errors


def views(sandbox):
    """The daemon's `_once` and `_current` views, as the fake holds their SQL."""

    def made():
        found = {
            t["tableId"]: t["view"]["query"]
            for t in sandbox.bigquery().get("tables", [])
            if t.get("view")
        }
        return found if {"consent_events_once", "consent_events_current"} <= set(found) else None

    return eventually(made, "the daemon's views in the fake")


def run_view(sql: str, rows) -> list:
    """`sql` as the daemon sent it, its table's BigQuery path mapped to DuckDB's table."""
    db = duckdb.connect()
    db.execute(
        """CREATE TABLE consent_events (seq BIGINT, accountId TEXT, organizationId TEXT,
           leadId TEXT, phoneNumber TEXT, optedOut BOOLEAN, source TEXT, actor TEXT,
           occurredAt TIMESTAMP, recordedAt TIMESTAMP, entryHash TEXT)"""
    )
    db.executemany("INSERT INTO consent_events VALUES (?,?,?,?,?,?,?,?,?,?,?)", rows)
    mapped, n = re.subn(r"`[^`]+\.consent_events`", "consent_events", sql)
    assert n == 1, sql
    return db.execute(mapped + " ORDER BY seq").fetchall()


def entry(seq, phone, opted_out, occurred, recorded, organization="org_1"):
    at = lambda s: datetime.datetime.fromisoformat(s)
    return (seq, "default", organization, None, phone, opted_out, "webhook", None,
            at(occurred), at(recorded), None)


def test_the_daemons_views_give_each_entry_once_and_each_numbers_current_state(
    sandbox, daemon
):
    sql = views(sandbox)
    rows = [
        entry(1, "+15550100001", True, "2026-12-01 10:00:00", "2026-12-01 10:00:01"),
        # Entry 1 sent again (a retried batch): the same seq, a later arrival.
        entry(1, "+15550100001", True, "2026-12-01 10:00:00", "2026-12-01 10:05:00"),
        entry(2, "+15550100001", False, "2026-12-01 11:00:00", "2026-12-01 11:00:01"),
        # Recorded after entry 2 but older: superseded, not the current state.
        entry(3, "+15550100001", True, "2026-12-01 09:00:00", "2026-12-01 12:00:00"),
        # Two acts at the same instant: the opt-out holds, whichever was recorded last.
        entry(4, "+15550100002", True, "2026-12-01 10:00:00", "2026-12-01 10:00:01"),
        entry(5, "+15550100002", False, "2026-12-01 10:00:00", "2026-12-01 10:00:02"),
        entry(6, "+15550100003", True, "2026-12-01 10:00:00", "2026-12-01 10:00:01", "org_2"),
    ]
    once = run_view(sql["consent_events_once"], rows)
    assert [r[0] for r in once] == [1, 2, 3, 4, 5, 6]
    assert once[0][9] == datetime.datetime(2026, 12, 1, 10, 0, 1), "the first arrival"
    current = run_view(sql["consent_events_current"], rows)
    state = {(r[2], r[4]): (r[0], r[5]) for r in current}
    assert state == {
        ("org_1", "+15550100001"): (2, False),
        ("org_1", "+15550100002"): (4, True),
        ("org_2", "+15550100003"): (6, True),
    }, current


def test_a_view_an_earlier_daemon_made_otherwise_is_mended_at_the_next_start(
    work_dir, sandbox, daemon, client, bigquery_key
):
    sql = views(sandbox)
    current = f"{BIGQUERY_PROJECT}.{BIGQUERY_DATASET}.consent_events_current"
    view = client.get_table(current)
    assert view.view_query == sql["consent_events_current"]
    # As the daemon made it before the views ranked an opt-out first at the same instant.
    view.view_query = sql["consent_events_current"].replace("optedOut DESC, ", "")
    client.update_table(view, ["view_query"])
    assert client.get_table(current).view_query != sql["consent_events_current"]
    # The daemon upgraded: a daemon of this version starting on the same dataset.
    process, _ = start_daemon(work_dir, "upgraded", free_port(), sandbox, bigquery_key)
    try:
        eventually(
            lambda: client.get_table(current).view_query == sql["consent_events_current"],
            "the daemon's view mended",
        )
    finally:
        stop(process)
