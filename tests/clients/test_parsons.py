"""Parsons, the library campaign data teams use for VAN and Action Network, pointed at the
sandbox's fakes: what it asks and reads, the fakes answer as the systems do."""

import datetime

import pytest
import requests

import parsons.ngpvan.changed_entities as changed_entities
from parsons import VAN, ActionNetwork
from parsons.utilities.api_connector import APIConnector

from conftest import ACTION_NETWORK_KEY, VAN_KEY, eventually


@pytest.fixture(scope="module")
def van(sandbox, monkeypatch_module):
    # Parsons polls an export job every 10 s; the fake's jobs finish within a second.
    monkeypatch_module.setattr(changed_entities, "RETRY_RATE", 0.2)
    client = VAN(api_key=VAN_KEY, db="MyVoters")
    client.connection.uri = f"{sandbox.van}/"
    client.connection.api.uri = f"{sandbox.van}/"
    return client


@pytest.fixture(scope="module")
def monkeypatch_module():
    patch = pytest.MonkeyPatch()
    yield patch
    patch.undo()


@pytest.fixture(scope="module")
def action_network(sandbox):
    client = ActionNetwork(api_token=ACTION_NETWORK_KEY)
    client.api_url = sandbox.action_network
    client.api = APIConnector(sandbox.action_network, headers=client.headers)
    return client


def test_van_lists_its_changed_entity_resources_and_the_contacts_fields(van):
    assert set(van.get_changed_entity_resources()) >= {"ContactHistory", "Contacts"}
    fields = {row["fieldName"]: row for row in van.get_changed_entity_resource_fields("Contacts")}
    status = fields["PhoneOptInStatusID"]
    names = {v["name"] for v in status["availableValues"]}
    assert {"Opt-In", "Opt-Out"} <= names, status


def test_van_exports_a_phone_bankers_do_not_text_to_its_csv_rows(sandbox, van):
    person = sandbox.van_truth()["people"][0]
    marked = requests.post(
        f"{sandbox.base}/_control/van/mark",
        json={"apiKey": VAN_KEY, "vanId": person["vanId"], "mark": "doNotText"},
        timeout=10,
    )
    marked.raise_for_status()
    yesterday = (datetime.date.today() - datetime.timedelta(days=1)).isoformat()
    rows = list(van.get_changed_entities("ContactHistory", date_from=yesterday))
    mine = [r for r in rows if r["VanID"] == str(person["vanId"])]
    assert mine, rows
    do_not_text = marked.json()["what"]["resultCodeId"]
    assert mine[-1]["ResultID"] == str(do_not_text), mine
    codes = {c["resultCodeId"] for c in van.get_canvass_responses_result_codes()}
    assert do_not_text in codes


def test_van_shows_a_persons_phone_opted_out_after_the_daemon_wrote_it(sandbox, daemon, van):
    """A STOP at the service reaches the daemon by webhook, and the daemon writes it into
    VAN: Parsons reads the person's phone there as opted out."""
    people = sandbox.van_truth()["people"]
    leads = {lead["id"]: lead for lead in sandbox.truth()["leads"]}
    person = next(
        p for p in people[1:] if p.get("leadId") in leads and not leads[p["leadId"]]["globalOptedOut"]
    )
    lead = leads[person["leadId"]]
    stopped = requests.post(
        f"{sandbox.base}/_control/stop",
        json={"organizationId": lead["organizationId"], "phoneNumber": lead["phoneNumber"]},
        timeout=10,
    )
    stopped.raise_for_status()

    def opted_out():
        phones = van.get_person(person["vanId"], expand_fields=["phones"]).get("phones") or []
        return [p for p in phones if p.get("phoneOptInStatus") in ("O", "Opt-Out", 3)]

    phones = eventually(opted_out, "the daemon's opt-out in VAN, read by Parsons")
    assert phones[0]["phoneNumber"] in lead["phoneNumber"], phones


def test_action_network_people_are_listed_by_modified_date_and_page(sandbox, action_network):
    requests.post(
        f"{sandbox.base}/_control/actionnetwork/seed", json={"count": 60}, timeout=10
    ).raise_for_status()
    everyone = action_network.get_people(per_page=25)
    assert everyone.num_rows >= 60
    half_an_hour_ago = (
        datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(minutes=30)
    ).strftime("%Y-%m-%dT%H:%M:%SZ")
    recent = action_network.get_people(
        per_page=25, filter=f"modified_date gt '{half_an_hour_ago}'"
    )
    assert 0 < recent.num_rows < everyone.num_rows
    assert all(row["modified_date"] > half_an_hour_ago for row in recent)


def test_action_network_upserts_a_person_and_reads_them_back(action_network):
    made = action_network.upsert_person(
        email_address="ada@example.org",
        given_name="Ada",
        mobile_number="+15550107070",
        mobile_status="subscribed",
    )
    identifier = next(i for i in made["identifiers"] if i.startswith("action_network:"))
    person = action_network.get_person(identifier.split(":", 1)[1])
    assert person["given_name"] == "Ada"
    numbers = [p["number"] for p in person["phone_numbers"]]
    assert "15550107070" in numbers or "+15550107070" in numbers, person
