//! Mobile Commons as a source: a person texting STOP to a Mobile Commons campaign, read
//! back from the sandbox's fake (its XML, its pages until an empty one, its login), recorded
//! once, carried to the service and Action Network; and what Mobile Commons may say wrongly
//! (a number without its country code, an `updated_at` in 2100, a status with control
//! characters, pages that never come back empty) believed no further than the trust rules
//! allow. What it reads is never written back to a Mobile Commons destination of the same
//! login, and what that destination wrote, read back, is no news.

use outreach_sync::settings::kinds::mobile_commons::MobileCommonsSettings;
use outreach_sync::settings::{SourceSettings, SourceSystem};
use outreach_sync_sandbox::{
    DEFAULT_MOBILE_COMMONS_PASSWORD, DEFAULT_MOBILE_COMMONS_TOKEN, DEFAULT_MOBILE_COMMONS_USERNAME,
    RunningSandbox,
};
use serde_json::{Value, json};

use super::faults::{fails, reading};
use super::{
    compliance_item, counted, entries_from, opted_out_at_service, reading_into,
    writing_to_action_network,
};
use crate::common::{Backend, on_both_backends};
use crate::destinations::once::{opted_in_with_van_id, writes_of};

/// The sandbox's Mobile Commons as source `mc-main`, read every second.
pub(crate) fn mobile_commons_source(sandbox: &RunningSandbox) -> SourceSettings {
    let mut source = SourceSettings::new(
        "mc-main",
        SourceSystem::MobileCommons(MobileCommonsSettings {
            username: DEFAULT_MOBILE_COMMONS_USERNAME.to_owned(),
            password: Some(DEFAULT_MOBILE_COMMONS_PASSWORD.to_owned().into()),
            ..MobileCommonsSettings::default()
        }),
        &sandbox.mobile_commons_url(),
        "",
    );
    source.api_key = None;
    source.requests_per_second = 1_000;
    source.every_secs = 1;
    source
}

on_both_backends!(
    a_stop_texted_to_mobile_commons_reaches_the_service_and_action_network_once,
    flavor = "multi_thread",
    worker_threads = 2
);
async fn a_stop_texted_to_mobile_commons_reaches_the_service_and_action_network_once(
    backend: Backend,
) {
    let Some((sandbox, app)) = writing_to_action_network(backend, mobile_commons_source).await
    else {
        return;
    };
    let (lead, van_id) = opted_in_with_van_id(&sandbox);
    let (profile, made) = sandbox
        .mobile_commons_stop(&lead.phone_number)
        .expect("texted STOP");
    assert!(
        !made,
        "the lead's number is a profile of Mobile Commons already"
    );

    let view = counted(&app, "mc-main", "optOuts", 1).await;
    assert_eq!(
        (view["kind"].as_str(), view["optOuts"].as_i64()),
        (Some("mobile_commons"), Some(1)),
        "read again by each run's overlap, recorded once: {view}"
    );
    let entries = entries_from(&app, "mobile_commons", &lead.phone_number).await;
    assert!(
        entries.iter().any(|(org, _)| *org == lead.organization_id),
        "{entries:?}"
    );
    let evidence: Value = serde_json::from_str(&entries[0].1).expect("evidence");
    assert_eq!(
        (
            evidence["actor"].as_str(),
            evidence["standsOn"]["profile"]["id"].as_str(),
            evidence["standsOn"]["profile"]["status"].as_str(),
        ),
        (
            Some("mc-main"),
            Some(profile.id.to_string().as_str()),
            Some("Texted a STOP word")
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
        i["source"] == "mobile_commons" && i["phoneNumber"] == lead.phone_number.as_str()
    })
    .await;
    assert_eq!(item["readBy"], "mc-main", "{item}");
    app.stop().await;
    sandbox.shutdown().await;
}

on_both_backends!(
    what_mobile_commons_says_wrongly_is_believed_no_further_than_the_trust_rules,
    flavor = "multi_thread",
    worker_threads = 2
);
async fn what_mobile_commons_says_wrongly_is_believed_no_further_than_the_trust_rules(
    backend: Backend,
) {
    let Some((sandbox, app, reader)) = reading(backend, mobile_commons_source).await else {
        return;
    };
    let now = chrono::Utc::now();
    let in_2100 = chrono::DateTime::parse_from_rfc3339("2100-01-01T00:00:00Z")
        .expect("a time")
        .to_utc();
    sandbox.mobile_commons_add_profile("4155550100", "Texted a STOP word", now);
    sandbox.mobile_commons_add_profile("442079460958", "Texted a STOP word", now);
    sandbox.mobile_commons_add_profile("12025550141", "Texted a STOP word", in_2100);
    sandbox.mobile_commons_add_profile("12025550142", "Texted a\u{1b}[2J STOP word", now);
    sandbox.mobile_commons_add_profile("555", "Texted a STOP word", now);
    let report = reader.run_once(&app.pool).await.expect("reads");
    assert_eq!(report.counts.opt_outs, 3, "{report:?}");
    let at: Vec<(outreach_sync::model::Timestamp,)> = app
        .rows("SELECT occurred_at FROM ledger WHERE phone_number = '+12025550141'")
        .await;
    assert!(
        at.iter().all(|(at,)| at.0 <= chrono::Utc::now()),
        "nothing of a profile updated in 2100 ranks in the future: {at:?}"
    );
    let numbers = app
        .texts(
            "SELECT DISTINCT phone_number FROM ledger WHERE source = 'mobile_commons' ORDER BY 1",
        )
        .await;
    assert_eq!(
        numbers,
        ["+12025550141", "+14155550100", "+442079460958"],
        "a national number is the region's; a status that is not Mobile Commons' is nothing"
    );
    let watermark: Vec<(Option<outreach_sync::model::Timestamp>,)> = app
        .rows("SELECT watermark FROM source_state WHERE source = 'mc-main'")
        .await;
    assert!(
        watermark[0].0.expect("a watermark").0 <= chrono::Utc::now(),
        "an updated_at in 2100 does not move the watermark past the read"
    );
    // Pages that never come back empty end the run at max_pages, what they held recorded.
    sandbox.mobile_commons_endless(true);
    let bounded = SourceSettings {
        max_pages: 5,
        ..mobile_commons_source(&sandbox)
    };
    let served = app.settings.account_ids().expect("accounts");
    let endless = outreach_sync::sources::Reader::new(&bounded, &served).expect("reader");
    let error = fails(&app, &endless).await;
    assert!(
        error.error.contains("goes on past max_pages (5)"),
        "{}",
        error.error
    );
    app.stop().await;
    sandbox.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mobile_commons_check_reads_a_page_and_a_wrong_password_is_refused_unshown() {
    let Some((sandbox, app, reader)) = reading(Backend::Sqlite, mobile_commons_source).await else {
        return;
    };
    let found = reader.check().await.expect("checked");
    assert_eq!(
        found,
        ["the login reads the profiles (a page of one profile answered)"]
    );
    let served = app.settings.account_ids().expect("accounts");
    let wrong = SourceSettings {
        system: SourceSystem::MobileCommons(MobileCommonsSettings {
            username: DEFAULT_MOBILE_COMMONS_USERNAME.to_owned(),
            password: Some("not-the-password".to_owned().into()),
            ..MobileCommonsSettings::default()
        }),
        ..mobile_commons_source(&sandbox)
    };
    let error = outreach_sync::sources::Reader::new(&wrong, &served)
        .expect("reader")
        .check()
        .await
        .expect_err("refused");
    let said = error.to_string();
    assert!(said.contains("401"), "{said}");
    assert!(!said.contains("not-the-password"), "{said}");
    // The company's API token instead of the login: sent as a bearer, and read with.
    let by_token = SourceSettings {
        system: SourceSystem::MobileCommons(MobileCommonsSettings {
            token: Some(DEFAULT_MOBILE_COMMONS_TOKEN.to_owned().into()),
            ..MobileCommonsSettings::default()
        }),
        ..mobile_commons_source(&sandbox)
    };
    let found = outreach_sync::sources::Reader::new(&by_token, &served)
        .expect("reader")
        .check()
        .await
        .expect("checked with the token");
    assert_eq!(
        found,
        ["the token reads the profiles (a page of one profile answered)"]
    );
    app.stop().await;
    sandbox.shutdown().await;
}

on_both_backends!(
    what_mobile_commons_says_is_never_written_back_to_it_and_its_own_writes_read_back_are_no_news,
    flavor = "multi_thread",
    worker_threads = 2
);
async fn what_mobile_commons_says_is_never_written_back_to_it_and_its_own_writes_read_back_are_no_news(
    backend: Backend,
) {
    let Some((sandbox, app)) = reading_into(
        backend,
        mobile_commons_source,
        crate::destinations::mobile_commons,
    )
    .await
    else {
        return;
    };
    // The campaign's opt-outs, written into Mobile Commons at the daemon's start, are read
    // back by its runs since: each its own write, nothing recorded.
    let truth = sandbox.mobile_commons_truth();
    let written: Vec<String> = truth
        .opt_out_calls
        .iter()
        .map(|c| format!("+{}", c.phone_number))
        .collect();
    assert!(!written.is_empty(), "the campaign starts with opt-outs");
    let view = counted(&app, "mc-main", "confirmed", written.len() as i64).await;
    assert_eq!(view["optOuts"], 0, "{view}");
    for phone in &written {
        let entries = entries_from(&app, "mobile_commons", phone).await;
        assert_eq!(entries, vec![], "{phone}: its own write read back");
    }
    // A person texts STOP to Mobile Commons: recorded, and written nowhere back there.
    let (lead, _) = opted_in_with_van_id(&sandbox);
    sandbox
        .mobile_commons_stop(&lead.phone_number)
        .expect("texted STOP");
    counted(&app, "mc-main", "optOuts", 1).await;
    assert!(
        !entries_from(&app, "mobile_commons", &lead.phone_number)
            .await
            .is_empty()
    );
    opted_out_at_service(&sandbox, &lead).await;
    app.settle().await;
    let digits = lead.phone_number.trim_start_matches('+');
    let calls = sandbox.mobile_commons_truth().opt_out_calls;
    assert!(
        calls.iter().all(|c| c.phone_number != digits),
        "what Mobile Commons said is not written back to it: {calls:?}"
    );
    let view = crate::destinations::view(&app, "mc-dest").await;
    assert_eq!(view["sent"], json!(written.len()), "{view}");
    app.stop().await;
    sandbox.shutdown().await;
}
