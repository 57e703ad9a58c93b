"""Parsons, the library campaign data teams use for Mobilize and Mobile Commons, pointed at the
sandbox's fakes: Parsons reads the people and profiles the fakes list, across their pages, and
sees an opt-out the test made there (a supporter opting out in Mobilize, a person texting STOP
to Mobile Commons) as the systems show one.

Parsons 6.1.0's Mobile Commons connector has no opt-out call (only `get_broadcasts`,
`get_campaign_subscribers`, `get_profiles` and `create_profile`), so nothing here reaches the
fake's `profile_opt_out`. It sends its key as `Authorization: Bearer`, as a company whose
logins moved to Upland's credential manager is reached: the fake takes the company's API
token so, beside the login as HTTP Basic, and Parsons is used as shipped, its URL alone
changed."""

import datetime
import math
import time

import pytest
import requests

from parsons import MobileCommons, MobilizeAmerica
from parsons.utilities.api_connector import APIConnector

from conftest import (
    MOBILE_COMMONS_PASSWORD,
    MOBILE_COMMONS_TOKEN,
    MOBILIZE_KEY,
    MOBILIZE_ORGANIZATION_ID,
)

MOBILIZE_PER_PAGE = 25  # Parsons asks for none: Mobilize's default
MOBILE_COMMONS_PER_PAGE = 1000  # Parsons' `limit` when none is given
TEXTED_STOP = "Texted a STOP word"


@pytest.fixture(scope="module")
def mobilize(sandbox):
    client = MobilizeAmerica(api_key=MOBILIZE_KEY)
    client.uri = f"{sandbox.mobilize}/"
    return client


def parsons_mobile_commons(sandbox, key: str) -> MobileCommons:
    """Parsons' Mobile Commons as shipped (its key a bearer), pointed at the sandbox."""
    client = MobileCommons(api_key=key)
    client.client = APIConnector(sandbox.mobile_commons, headers=client.client.headers)
    return client


@pytest.fixture(scope="module")
def mobile_commons(sandbox):
    return parsons_mobile_commons(sandbox, MOBILE_COMMONS_TOKEN)


def next_second() -> int:
    """The next whole Unix second, once it has come: what is changed from now on is changed
    at or after it, what was changed before is not."""
    second = int(time.time()) + 1
    time.sleep(max(0.0, second - time.time()))
    return second


def iso(second: int) -> str:
    """`2026-11-28T07:05:28+00:00`: the ISO date Parsons takes for `updated_since`."""
    return datetime.datetime.fromtimestamp(second, datetime.timezone.utc).isoformat()


def test_mobilize_lists_a_supporter_opted_out_since_a_date(sandbox, mobilize):
    people = sandbox.control("GET", "mobilize")["people"]
    person = next(p for p in people if p["sms_opt_in_status"] == "OPT_IN")
    number = person["phone_numbers"][0]["number"]
    since = next_second()
    sandbox.control("POST", "mobilize/opt-out", {"phoneNumber": number})

    everyone = mobilize.get_people(MOBILIZE_ORGANIZATION_ID)
    truth = sandbox.control("GET", "mobilize")["people"]
    assert sorted(everyone["id"]) == sorted(p["id"] for p in truth)

    recent = mobilize.get_people(MOBILIZE_ORGANIZATION_ID, updated_since=iso(since))
    assert sorted(recent["id"]) == sorted(p["id"] for p in truth if p["modified_date"] >= since)
    assert 0 < recent.num_rows < everyone.num_rows
    mine = [row for row in recent if row["id"] == person["id"]]
    assert len(mine) == 1, list(recent)
    assert mine[0]["sms_opt_in_status"] == "OPT_OUT", mine
    assert mine[0]["phone_numbers"][0]["number"] == number, mine
    assert mine[0]["modified_date"] >= since, mine


def test_mobilize_people_come_across_pages(sandbox, mobilize):
    since = next_second()
    sandbox.control("POST", "mobilize/seed", {"count": 2 * MOBILIZE_PER_PAGE + 5})
    served = sandbox.control("GET", "mobilize")["listingsServed"]

    recent = mobilize.get_people(MOBILIZE_ORGANIZATION_ID, updated_since=iso(since))
    truth = sandbox.control("GET", "mobilize")
    changed = [p for p in truth["people"] if p["modified_date"] >= since]
    assert len(changed) > 2 * MOBILIZE_PER_PAGE
    assert truth["listingsServed"] - served == math.ceil(len(changed) / MOBILIZE_PER_PAGE)
    assert recent.num_rows == len(set(recent["id"])) == len(changed)
    assert sorted(recent["id"]) == sorted(p["id"] for p in changed)
    assert set(recent["sms_opt_in_status"]) == {"OPT_OUT"}
    assert all(row["modified_date"] >= since for row in recent)


def test_mobilize_refuses_parsons_a_wrong_key(sandbox):
    client = MobilizeAmerica(api_key="not-the-sandbox-key")
    client.uri = f"{sandbox.mobilize}/"
    with pytest.raises(requests.HTTPError) as refused:
        client.get_people(MOBILIZE_ORGANIZATION_ID)
    assert refused.value.response.status_code == 403


def test_mobile_commons_lists_a_profile_that_texted_stop(sandbox, mobile_commons):
    profiles = sandbox.control("GET", "mobile_commons")["profiles"]
    profile = next(p for p in profiles if p["status"] == "Active Subscriber")
    number = profile["phone_number"]
    today = datetime.datetime.now(datetime.timezone.utc).date()
    sandbox.control("POST", "mobile_commons/stop", {"phoneNumber": f"+{number}"})

    by_number = mobile_commons.get_profiles(phones=[number], include_subscriptions=True)
    assert by_number.num_rows == 1, list(by_number)
    row = by_number[0]
    assert row["id"] == str(profile["id"])
    assert row["phone_number"] == number
    assert row["status"] == TEXTED_STOP
    assert row["opted_out_source"] == TEXTED_STOP
    assert row["opted_out_at"].endswith(" UTC"), row
    subscription = row["subscriptions"]["subscription"]
    assert subscription["status"] == "Opted-Out", subscription
    assert subscription["campaign_id"] == str(profile["subscriptions"][0]["campaign_id"])

    # Parsons sends dates alone (`%Y-%m-%d`): each is its midnight, UTC.
    last = today + datetime.timedelta(days=2)
    by_date = mobile_commons.get_profiles(first_date=today.isoformat(), last_date=last.isoformat())
    truth = sandbox.control("GET", "mobile_commons")["profiles"]
    within = [p for p in truth if today.isoformat() <= p["updated_at"][:10] < last.isoformat()]
    assert sorted(map(int, by_date["id"])) == sorted(p["id"] for p in within)
    mine = [r for r in by_date if r["id"] == str(profile["id"])]
    assert [r["status"] for r in mine] == [TEXTED_STOP], mine


def test_mobile_commons_profiles_come_across_pages_until_an_empty_one(sandbox, mobile_commons):
    sandbox.control("POST", "mobile_commons/seed", {"count": MOBILE_COMMONS_PER_PAGE})
    served = sandbox.control("GET", "mobile_commons")["listingsServed"]

    everyone = mobile_commons.get_profiles()
    truth = sandbox.control("GET", "mobile_commons")
    assert len(truth["profiles"]) > MOBILE_COMMONS_PER_PAGE
    # Every page of profiles, then the one with `num="0"` that tells Parsons to stop.
    pages = math.ceil(len(truth["profiles"]) / MOBILE_COMMONS_PER_PAGE)
    assert truth["listingsServed"] - served == pages + 1
    assert everyone.num_rows == len(set(everyone["id"])) == len(truth["profiles"])
    assert sorted(map(int, everyone["id"])) == sorted(p["id"] for p in truth["profiles"])
    stopped = [str(p["id"]) for p in truth["profiles"] if p["status"] == TEXTED_STOP]
    assert len(stopped) >= MOBILE_COMMONS_PER_PAGE
    assert sorted(r["id"] for r in everyone if r["status"] == TEXTED_STOP) == sorted(stopped)


def test_mobile_commons_refuses_parsons_a_key_that_is_not_the_token(sandbox):
    client = parsons_mobile_commons(sandbox, MOBILE_COMMONS_PASSWORD)
    with pytest.raises(requests.HTTPError) as refused:
        client.get_profiles(limit=1)
    assert "401" in str(refused.value), refused.value
