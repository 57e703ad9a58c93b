//! Mobile Commons as a destination: each opt-out written as the profile's opt-out
//! (`profile_opt_out`, every campaign) once per person, its answer read in Mobile Commons'
//! words (a refusal answered with a 200), an opt-out it holds already `already` with nothing
//! written, and what its own source read never written back to it.

use std::time::Duration;

use outreach_sync::settings::SystemSettings;
use outreach_sync::settings::kinds::mobile_commons::MobileCommonsSettings;
use outreach_sync_sandbox::destinations::{Fake, FakeFault, MobileCommonsOptOutCall};
use outreach_sync_sandbox::{
    DEFAULT_MOBILE_COMMONS_PASSWORD, DEFAULT_MOBILE_COMMONS_TOKEN, RunningSandbox,
};
use serde_json::json;

use super::once::{opt_out_in, outcomes};
use super::{campaign, check_finds_nothing_wrong, mobile_commons, opt_outs, view, writing_to};
use crate::common::{Backend, eventually, on_both_backends};
use crate::sources::compliance_item;

/// The `profile_opt_out` calls Mobile Commons received for `phone`.
fn calls_of(sandbox: &RunningSandbox, phone: &str) -> Vec<MobileCommonsOptOutCall> {
    let digits = phone.trim_start_matches('+');
    sandbox
        .mobile_commons_truth()
        .opt_out_calls
        .into_iter()
        .filter(|c| c.phone_number == digits)
        .collect()
}

on_both_backends!(
    every_opt_out_reaches_mobile_commons_once_and_what_it_holds_or_lacks_is_said_in_its_words,
    flavor = "multi_thread",
    worker_threads = 2
);
async fn every_opt_out_reaches_mobile_commons_once_and_what_it_holds_or_lacks_is_said_in_its_words(
    backend: Backend,
) {
    let Some((sandbox, app)) = campaign(backend).await else {
        return;
    };
    let opted_out = opt_outs(&app).await;
    assert!(opted_out.len() >= 3, "the sandbox starts some opted out");
    // One person texted STOP to Mobile Commons before the daemon wrote anything there.
    let held = opted_out[0].2.clone();
    sandbox.mobile_commons_stop(&held).expect("texted STOP");
    // A number Mobile Commons has no profile of.
    let organization = sandbox.leads()[0].organization_id.clone();
    let stranger = "+12025550999";
    let stranger_seq = opt_out_in(&app, stranger, &organization).await;

    let app = writing_to(app, vec![mobile_commons(&sandbox)]).await;
    check_finds_nothing_wrong(&app).await;
    app.settle().await;

    // Each opt-out it did not hold: one call, the number's digits, every campaign; the
    // profile now subscribed to nothing, opted out by the API.
    let truth = sandbox.mobile_commons_truth();
    for (_, _, phone) in opted_out.iter().skip(1) {
        let calls = calls_of(&sandbox, phone);
        assert_eq!(calls.len(), 1, "{phone}: {calls:?}");
        assert_eq!(
            (calls[0].campaign_id.as_ref(), calls[0].error_id),
            (None, None)
        );
        let digits = phone.trim_start_matches('+');
        let profile = truth
            .profiles
            .iter()
            .find(|p| p.phone_number == digits)
            .expect("a profile of every lead");
        assert_eq!(
            (profile.status.as_str(), profile.opted_out_source.as_deref()),
            ("Profiles with no Subscriptions", Some("Opt-out from API")),
            "{phone}"
        );
    }
    // What it held already: nothing written, `already` in Mobile Commons' terms.
    assert_eq!(
        calls_of(&sandbox, &held),
        vec![],
        "nothing written of {held}"
    );
    let already = outcomes(&app, "mc-dest", "already").await;
    let item = already
        .iter()
        .find(|o| o["phoneNumber"] == held.as_str())
        .unwrap_or_else(|| panic!("{held} is `already`: {already:?}"));
    let reason = item["reason"].as_str().expect("a reason");
    assert!(
        reason.contains("holds it already") && reason.contains("Texted a STOP word"),
        "{reason}"
    );
    // The number it lacks: refused, in its words (a 200 with success="false").
    let refused = outcomes(&app, "mc-dest", "refused").await;
    assert_eq!(refused.len(), 1, "{refused:?}");
    assert_eq!(refused[0]["seq"], stranger_seq);
    let reason = refused[0]["reason"].as_str().expect("a reason");
    assert!(reason.contains("5 Invalid phone number"), "{reason}");
    assert_eq!(calls_of(&sandbox, stranger)[0].error_id, Some(5));

    let shown = view(&app, "mc-dest").await;
    assert_eq!(
        (
            &shown["kind"],
            &shown["state"],
            &shown["sent"],
            &shown["refused"]
        ),
        (
            &json!("mobile_commons"),
            &json!("active"),
            &json!(opted_out.len() - 1),
            &json!(1)
        ),
        "{shown}"
    );

    // The same person opted out again in another organization: told once already.
    let written = &opted_out[1].2;
    let again = opt_out_in(&app, written, "org_elsewhere").await;
    app.settle().await;
    assert_eq!(
        calls_of(&sandbox, written).len(),
        1,
        "{written} written once"
    );
    let already = outcomes(&app, "mc-dest", "already").await;
    let item = already
        .iter()
        .find(|o| o["seq"] == again)
        .unwrap_or_else(|| panic!("the second opt-out is `already`: {already:?}"));
    assert!(
        item["reason"]
            .as_str()
            .is_some_and(|r| r.starts_with("told by entry")),
        "{item}"
    );

    // The compliance report names it among each opt-out's destinations.
    for (phone, honoured) in [
        (&held, true),
        (written, true),
        (&stranger.to_owned(), false),
    ] {
        let (_, item) = compliance_item(&app, |i| i["phoneNumber"] == phone.as_str()).await;
        let had = item["destinations"]
            .as_array()
            .and_then(|d| d.iter().find(|d| d["name"] == "mc-dest").cloned())
            .unwrap_or_else(|| panic!("{phone} names mc-dest: {item}"));
        assert_eq!(had["honouredAt"].is_string(), honoured, "{item}");
        if !honoured {
            assert_eq!(had["outcome"], "refused", "{item}");
        }
    }
    app.stop().await;
    sandbox.shutdown().await;
}

on_both_backends!(
    an_answer_mobile_commons_garbles_is_sent_once_more_at_most_and_a_wrong_login_stops_it,
    flavor = "multi_thread",
    worker_threads = 2
);
async fn an_answer_mobile_commons_garbles_is_sent_once_more_at_most_and_a_wrong_login_stops_it(
    backend: Backend,
) {
    let Some((sandbox, app)) = campaign(backend).await else {
        return;
    };
    let mut mc = mobile_commons(&sandbox);
    mc.feed.max_backoff_secs = 1;
    let app = writing_to(app, vec![mc]).await;
    app.settle().await;
    let lead = sandbox
        .leads()
        .into_iter()
        .find(|l| !l.global_opted_out)
        .expect("an opted-in lead");
    // The lookup is answered (a fault of no delay); both writes of the entry are answered
    // with a 200 whose body is not Mobile Commons' XML: acted on, or not, nobody knows.
    sandbox.fake_fail_next(Fake::MobileCommons, 1, FakeFault::Late { after_ms: 0 });
    sandbox.fake_fail_next(Fake::MobileCommons, 2, FakeFault::Garbage);
    let before = sandbox.mobile_commons_truth().requests.total;
    let seq = opt_out_in(&app, &lead.phone_number, &lead.organization_id).await;
    let unconfirmed = eventually("the entry's end", Duration::from_secs(30), async || {
        app.settle().await;
        let items = outcomes(&app, "mc-dest", "unconfirmed").await;
        items.into_iter().find(|o| o["seq"] == seq)
    })
    .await;
    assert!(
        unconfirmed["reason"]
            .as_str()
            .is_some_and(|r| r.contains("profile_opt_out")),
        "{unconfirmed}"
    );
    let calls = calls_of(&sandbox, &lead.phone_number);
    assert!(
        calls.is_empty(),
        "the garbled answers came before the fake's own: {calls:?}"
    );
    let requests = sandbox.mobile_commons_truth().requests;
    let asked: Vec<(&str, &str)> = requests
        .recent
        .iter()
        .rev()
        .take(3)
        .rev()
        .map(|r| {
            (
                r.method.as_str(),
                r.path.rsplit('/').next().unwrap_or_default(),
            )
        })
        .collect();
    assert_eq!(
        (requests.total - before, asked),
        (
            3,
            vec![
                ("GET", "profiles"),
                ("POST", "profile_opt_out"),
                ("POST", "profile_opt_out")
            ]
        ),
        "looked up once, written once and once more, not again"
    );

    // A login that does not work: stopped, in Mobile Commons' own words.
    let mut wrong = mobile_commons(&sandbox);
    wrong.api_key = Some("not-the-password".to_owned().into());
    let http = outreach_sync::sender::http_client().expect("client");
    let checked = outreach_sync::sender::destinations::check(&[wrong], None, &http)
        .await
        .expect("checked");
    let problem = checked[0].problem.clone().expect("a problem");
    assert!(
        problem.starts_with("credentials:") && problem.contains("HTTP Basic: Access denied."),
        "{problem}"
    );
    assert!(!problem.contains("not-the-password"), "{problem}");
    // A company whose logins moved to Upland's credential manager: its API token, a bearer.
    let mut by_token = mobile_commons(&sandbox);
    by_token.system = SystemSettings::MobileCommons(MobileCommonsSettings {
        token: Some(DEFAULT_MOBILE_COMMONS_TOKEN.to_owned().into()),
        ..MobileCommonsSettings::default()
    });
    by_token.api_key = Some(DEFAULT_MOBILE_COMMONS_TOKEN.to_owned().into());
    let checked = outreach_sync::sender::destinations::check(&[by_token.clone()], None, &http)
        .await
        .expect("checked");
    assert_eq!(checked[0].problem, None, "the token is taken as a bearer");
    by_token.api_key = Some(DEFAULT_MOBILE_COMMONS_PASSWORD.to_owned().into());
    let checked = outreach_sync::sender::destinations::check(&[by_token], None, &http)
        .await
        .expect("checked");
    assert!(
        checked[0]
            .problem
            .as_deref()
            .is_some_and(|p| p.starts_with("credentials:")),
        "{checked:?}"
    );
    app.stop().await;
    sandbox.shutdown().await;
}
