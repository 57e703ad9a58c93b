//! Mobilize as a source: a supporter opting out of an organization's texts on Mobilize,
//! read back from the sandbox's fake (its people listing, its pages, its errors as it words
//! them), recorded once, carried to the service and Action Network; and what Mobilize may
//! say wrongly (a date in 2100, a number without its country code, a link to another host,
//! a listing that never ends) believed no further than the trust rules allow.

use outreach_sync::settings::{SourceSettings, SourceSystem};
use outreach_sync_sandbox::{DEFAULT_MOBILIZE_KEY, MOBILIZE_ORGANIZATION_ID, RunningSandbox};
use serde_json::Value;

use super::faults::{fails, reading};
use super::{
    compliance_item, counted, entries_from, opted_out_at_service, writing_to_action_network,
};
use crate::common::{Backend, on_both_backends};
use crate::destinations::once::{opted_in_with_van_id, writes_of};

/// The sandbox's Mobilize organization as source `mobilize-main`, read every second.
pub(crate) fn mobilize_source(sandbox: &RunningSandbox) -> SourceSettings {
    let mut source = SourceSettings::new(
        "mobilize-main",
        SourceSystem::Mobilize(outreach_sync::settings::kinds::mobilize::MobilizeSettings {
            organization_id: Some(MOBILIZE_ORGANIZATION_ID),
        }),
        &sandbox.mobilize_url(),
        DEFAULT_MOBILIZE_KEY,
    );
    source.requests_per_second = 1_000;
    source.every_secs = 1;
    source
}

fn with_opt_ins(sandbox: &RunningSandbox) -> SourceSettings {
    SourceSettings {
        opt_ins: true,
        ..mobilize_source(sandbox)
    }
}

on_both_backends!(
    a_supporter_opting_out_on_mobilize_reaches_the_service_and_action_network_once,
    flavor = "multi_thread",
    worker_threads = 2
);
async fn a_supporter_opting_out_on_mobilize_reaches_the_service_and_action_network_once(
    backend: Backend,
) {
    let Some((sandbox, app)) = writing_to_action_network(backend, mobilize_source).await else {
        return;
    };
    let (lead, van_id) = opted_in_with_van_id(&sandbox);
    let (person, made) = sandbox
        .mobilize_opt_out(&lead.phone_number)
        .expect("opted out");
    assert!(!made, "the lead's number is a person of Mobilize's already");

    let view = counted(&app, "mobilize-main", "optOuts", 1).await;
    assert_eq!(
        (view["kind"].as_str(), view["optOuts"].as_i64()),
        (Some("mobilize"), Some(1)),
        "read again by each run's overlap, recorded once: {view}"
    );
    let entries = entries_from(&app, "mobilize", &lead.phone_number).await;
    assert!(
        entries.iter().any(|(org, _)| org == "*")
            && entries.iter().any(|(org, _)| *org == lead.organization_id),
        "held account-wide and in the lead's organization: {entries:?}"
    );
    assert_eq!(entries.len(), 2, "{entries:?}");
    let evidence: Value = serde_json::from_str(&entries[0].1).expect("evidence");
    let stands_on = &evidence["standsOn"];
    assert_eq!(
        (
            evidence["actor"].as_str(),
            stands_on["personId"].as_str(),
            stands_on["modifiedDate"].as_i64(),
            stands_on["person"]["sms_opt_in_status"].as_str(),
        ),
        (
            Some("mobilize-main"),
            Some(person.id.to_string().as_str()),
            Some(person.modified_date),
            Some("OPT_OUT")
        ),
        "{evidence}"
    );
    opted_out_at_service(&sandbox, &lead).await;
    app.settle().await;
    assert_eq!(
        writes_of(&sandbox, van_id, &lead.phone_number).2,
        1,
        "Action Network had the opt-out once"
    );
    let (_, item) = compliance_item(&app, |i| {
        i["source"] == "mobilize" && i["phoneNumber"] == lead.phone_number.as_str()
    })
    .await;
    assert_eq!(item["readBy"], "mobilize-main", "{item}");
    // Each read asked for the organization's people since the watermark, a page of 100.
    let asked = sandbox.mobilize_truth().requests.recent;
    assert!(
        asked.iter().all(|r| r
            .path
            .contains(&format!("/organizations/{MOBILIZE_ORGANIZATION_ID}/people"))),
        "{asked:?}"
    );
    app.stop().await;
    sandbox.shutdown().await;
}

on_both_backends!(
    a_mobilize_opt_in_is_taken_only_with_opt_ins,
    flavor = "multi_thread",
    worker_threads = 2
);
async fn a_mobilize_opt_in_is_taken_only_with_opt_ins(backend: Backend) {
    let Some((sandbox, app, reader)) = reading(backend, mobilize_source).await else {
        return;
    };
    let now = chrono::Utc::now().timestamp();
    sandbox.mobilize_add_person("+12025550121", "OPT_IN", now);
    sandbox.mobilize_add_person("+12025550122", "UNSPECIFIED", now);
    let report = reader.run_once(&app.pool).await.expect("reads");
    assert_eq!(report.counts.opt_outs, 0, "{report:?}");
    assert_eq!(report.counts.opt_ins, 0, "{report:?}");
    assert!(report.counts.ignored >= 2, "{report:?}");
    assert_eq!(
        app.count("SELECT COUNT(*) FROM ledger WHERE source = 'mobilize'")
            .await,
        0
    );
    let served = app.settings.account_ids().expect("accounts");
    // A source of its own name, so that it reads from its own first watermark.
    let settings = SourceSettings {
        name: "mobilize-opt-ins".to_owned(),
        ..with_opt_ins(&sandbox)
    };
    let taking = outreach_sync::sources::Reader::new(&settings, &served).expect("reader");
    let report = taking.run_once(&app.pool).await.expect("reads");
    assert!(report.counts.opt_ins >= 1, "{report:?}");
    let numbers = app
        .texts(
            "SELECT DISTINCT phone_number FROM ledger WHERE source = 'mobilize' AND NOT opted_out",
        )
        .await;
    assert!(numbers.contains(&"+12025550121".to_owned()), "{numbers:?}");
    assert!(
        !numbers.contains(&"+12025550122".to_owned()),
        "UNSPECIFIED is no opt-in: {numbers:?}"
    );
    app.stop().await;
    sandbox.shutdown().await;
}

on_both_backends!(
    a_mobilize_date_in_2100_neither_outranks_a_later_opt_out_nor_moves_the_watermark,
    flavor = "multi_thread",
    worker_threads = 2
);
async fn a_mobilize_date_in_2100_neither_outranks_a_later_opt_out_nor_moves_the_watermark(
    backend: Backend,
) {
    let Some((sandbox, app, reader)) = reading(backend, with_opt_ins).await else {
        return;
    };
    // 2100-01-01: opted in, as the fake's hostile person says.
    sandbox.mobilize_add_person("+12025550131", "OPT_IN", 4_102_444_800);
    let first = reader.run_once(&app.pool).await.expect("reads");
    assert_eq!(first.counts.future, 1, "{first:?}");
    let after_first = chrono::Utc::now();
    let watermark: Vec<(Option<outreach_sync::model::Timestamp>,)> = app
        .rows("SELECT watermark FROM source_state WHERE source = 'mobilize-main'")
        .await;
    assert!(
        watermark[0].0.expect("a watermark").0 <= after_first,
        "the watermark stays behind the read's start"
    );
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    sandbox.mobilize_opt_out("+12025550131").expect("opted out");
    let second = reader.run_once(&app.pool).await.expect("reads");
    assert_eq!(second.counts.opt_outs, 1, "{second:?}");
    let entries: Vec<(bool, bool)> = app
        .rows(
            "SELECT opted_out, superseded FROM ledger
             WHERE phone_number = '+12025550131' AND source = 'mobilize' ORDER BY seq",
        )
        .await;
    assert_eq!(
        entries,
        vec![(false, false), (true, false)],
        "the opt-in at its reading, the later opt-out in force"
    );
    app.stop().await;
    sandbox.shutdown().await;
}

on_both_backends!(
    mobilizes_numbers_without_a_country_code_are_the_regions_and_invalid_ones_are_ignored,
    flavor = "multi_thread",
    worker_threads = 2
);
async fn mobilizes_numbers_without_a_country_code_are_the_regions_and_invalid_ones_are_ignored(
    backend: Backend,
) {
    let Some((sandbox, app, reader)) = reading(backend, mobilize_source).await else {
        return;
    };
    let now = chrono::Utc::now().timestamp();
    for written in [
        "4155550100",
        "(415) 555-0101",
        "+442079460958",
        "555",
        "call me\u{1b}[2J",
    ] {
        sandbox.mobilize_add_person(written, "OPT_OUT", now);
    }
    let report = reader.run_once(&app.pool).await.expect("reads");
    assert_eq!(report.counts.opt_outs, 3, "{report:?}");
    let numbers = app
        .texts("SELECT DISTINCT phone_number FROM ledger WHERE source = 'mobilize' ORDER BY 1")
        .await;
    assert_eq!(
        numbers,
        ["+14155550100", "+14155550101", "+442079460958"],
        "a national number is the region's, never another country's"
    );
    app.stop().await;
    sandbox.shutdown().await;
}

on_both_backends!(
    a_mobilize_link_to_another_host_or_back_to_a_page_read_ends_the_run_with_an_error,
    flavor = "multi_thread",
    worker_threads = 2
);
async fn a_mobilize_link_to_another_host_or_back_to_a_page_read_ends_the_run_with_an_error(
    backend: Backend,
) {
    let Some((sandbox, app, reader)) = reading(backend, mobilize_source).await else {
        return;
    };
    sandbox.mobilize_seed(3);
    let people =
        format!("/mobilize/v1/organizations/{MOBILIZE_ORGANIZATION_ID}/people?per_page=100");
    sandbox.mobilize_next_href(Some(&format!("http://127.0.0.2:9{people}")));
    let error = fails(&app, &reader).await;
    assert!(
        error.error.contains("leads away from the API's host"),
        "{}",
        error.error
    );
    assert_eq!(
        error.recorded.read, 100,
        "the first page's people are recorded before its link is refused: {error:?}"
    );
    // A relative `next` is followed on the API's own host; this one leads back to a page
    // read before (it is the first page again), a listing that never ends.
    sandbox.mobilize_next_href(Some(&people));
    let error = fails(&app, &reader).await;
    assert!(error.error.contains("does not end"), "{}", error.error);
    // The link given again by the fake's own pages: the listing is read to its end, and
    // each person recorded once however often read.
    sandbox.mobilize_next_href(None);
    let report = reader.run_once(&app.pool).await.expect("reads to its end");
    assert_eq!(report.counts.opt_outs, 3, "{report:?}");
    assert_eq!(
        app.count("SELECT COUNT(*) FROM ledger WHERE source = 'mobilize'")
            .await,
        3
    );
    app.stop().await;
    sandbox.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mobilize_check_says_what_its_key_reads_and_mobilizes_refusals_in_its_words() {
    let Some((sandbox, app, reader)) = reading(Backend::Sqlite, mobilize_source).await else {
        return;
    };
    let people = sandbox.mobilize_truth().people.len();
    let found = reader.check().await.expect("checked");
    assert_eq!(
        found,
        [format!(
            "the key reads organization {MOBILIZE_ORGANIZATION_ID}'s people ({people} people)"
        )]
    );
    let served = app.settings.account_ids().expect("accounts");
    let wrong_key = SourceSettings {
        api_key: Some("not-the-key".to_owned().into()),
        ..mobilize_source(&sandbox)
    };
    let error = outreach_sync::sources::Reader::new(&wrong_key, &served)
        .expect("reader")
        .check()
        .await
        .expect_err("refused");
    let said = error.to_string();
    assert!(said.contains("403"), "{said}");
    assert!(!said.contains("not-the-key"), "{said}");
    let mut other = mobilize_source(&sandbox);
    other.system =
        SourceSystem::Mobilize(outreach_sync::settings::kinds::mobilize::MobilizeSettings {
            organization_id: Some(1),
        });
    let error = outreach_sync::sources::Reader::new(&other, &served)
        .expect("reader")
        .check()
        .await
        .expect_err("no such organization");
    assert!(error.to_string().contains("Not found."), "{error}");
    app.stop().await;
    sandbox.shutdown().await;
}
