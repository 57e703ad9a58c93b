use super::*;

#[tokio::test]
async fn profile_opt_out_opts_out_and_is_recorded_and_an_unknown_number_is_error_5() {
    let sandbox = sandbox(4).await;
    let target = sandbox.mobile_commons_truth().profiles[1].clone();
    let written = format!("+{}", target.phone_number);
    let (status, answer) = opt_out(&sandbox, &[("phone_number", &written)]).await;
    assert_eq!(status, 200);
    assert_eq!(answer.success, Some(true));
    let profile = &answer.profiles[0];
    assert_eq!(profile["id"], target.id.to_string());
    assert_eq!(profile["status"], NO_SUBSCRIPTIONS);
    assert_eq!(profile["opted_out_source"], OPT_OUT_FROM_API);
    assert!(!profile["opted_out_at"].is_empty());
    let truth = sandbox.mobile_commons_truth();
    let after = &truth.profiles[1];
    assert_eq!(after.status, NO_SUBSCRIPTIONS);
    assert!(after.updated_at >= target.updated_at);
    assert_eq!(truth.opt_out_calls.len(), 1, "written once");
    assert_eq!(truth.opt_out_calls[0].phone_number, written);
    assert_eq!(truth.opt_out_calls[0].profile_id, Some(target.id));
    let listed = profiles(&sandbox, &format!("?phone_number={}", target.phone_number)).await;
    assert_eq!(listed.profiles[0]["status"], NO_SUBSCRIPTIONS);

    // Parsons sends the parameters in the query string of its POST.
    let url = format!(
        "{}/profile_opt_out?phone_number=19995550100",
        sandbox.mobile_commons_url()
    );
    let response = with_login(reqwest::Client::new().post(&url), Login::Sandbox)
        .send()
        .await
        .expect("an answer");
    assert_eq!(response.status().as_u16(), 200, "errors come with 200");
    let refused = read(&response.text().await.expect("a body"));
    assert_eq!(refused.success, Some(false));
    assert_eq!(
        refused.error,
        Some(("5".to_owned(), INVALID_PHONE_NUMBER.to_owned()))
    );
    let (_, missing) = opt_out(&sandbox, &[]).await;
    assert_eq!(missing.error.map(|e| e.0), Some("5".to_owned()));
    let calls = sandbox.mobile_commons_truth().opt_out_calls;
    assert_eq!(calls.len(), 3);
    assert_eq!(calls[1].error_id, Some(5));
    assert_eq!(calls[1].profile_id, None);
    sandbox.shutdown().await;
}

#[test]
fn an_opt_out_of_another_campaign_leaves_the_subscription() {
    let at = Utc::now();
    let mut fake = MobileCommons::new("u".into(), "p".into(), &[], at);
    let made = fake.add_profile("15555550100", ACTIVE_SUBSCRIBER, at);
    let other = fake
        .opt_out("15555550100", Some("1"), None, at)
        .expect("the profile");
    assert_eq!(other.status, ACTIVE_SUBSCRIBER);
    assert!(other.opted_out_at.is_none());
    let campaign = super::super::MOBILE_COMMONS_CAMPAIGN_ID.to_string();
    let ours = fake
        .opt_out("5555550100", Some(&campaign), None, at)
        .expect("the profile");
    assert_eq!(ours.status, NO_SUBSCRIPTIONS);
    assert_eq!(ours.id, made.id);
    assert_eq!(fake.opt_out("15555550199", None, None, at), Err(5));
}

#[tokio::test]
async fn endless_pages_never_come_back_empty() {
    let sandbox = sandbox(10).await;
    let (status, _) = reqwest::Client::new()
        .put(format!(
            "{}/_control/mobile_commons/endless",
            sandbox.base_url()
        ))
        .json(&json!({"on": true}))
        .send()
        .await
        .map(|r| (r.status().as_u16(), ()))
        .expect("an answer");
    assert_eq!(status, 204);
    let last = profiles(&sandbox, "?limit=4&page=3").await;
    for page in [4, 5, 50, 5_000] {
        let answer = profiles(&sandbox, &format!("?limit=4&page={page}")).await;
        assert_eq!(answer.page, Some(page));
        assert!(answer.num.is_some_and(|n| n > 0), "page {page}");
        let ids: Vec<&String> = answer.profiles.iter().map(|p| &p["id"]).collect();
        let last_ids: Vec<&String> = last.profiles.iter().map(|p| &p["id"]).collect();
        assert_eq!(ids, last_ids);
    }
    assert!(sandbox.mobile_commons_truth().endless);
    sandbox.mobile_commons_endless(false);
    assert_eq!(profiles(&sandbox, "?limit=4&page=4").await.num, Some(0));
    sandbox.shutdown().await;
}

#[tokio::test]
async fn hostile_a_national_number_a_future_date_a_control_character_and_faults() {
    let sandbox = sandbox(6).await;
    let status = "Active\u{7} Subscriber\u{1b}[31m";
    let (code, body) = control(
        &sandbox,
        "/profile",
        json!({"number": "4155550100", "updatedAt": "2100-01-01T00:00:00Z", "status": status}),
    )
    .await;
    assert_eq!(code, 201, "{body}");
    let answer = profiles(&sandbox, "?from=2099-01-01").await;
    assert_eq!(answer.profiles.len(), 1);
    let profile = &answer.profiles[0];
    assert_eq!(profile["phone_number"], "4155550100");
    assert_eq!(profile["updated_at"], "2100-01-01 00:00:00 UTC");
    assert_eq!(profile["status"], status);
    let (code, _) = control(
        &sandbox,
        "/profile",
        json!({"number": "1", "updatedAt": "soon"}),
    )
    .await;
    assert_eq!(code, 400);
    sandbox.fake_fail_next(
        Fake::MobileCommons,
        1,
        FakeFault::Status {
            status: 503,
            retry_after_secs: None,
        },
    );
    let (code, _, body) = profiles_raw(&sandbox, "", Login::Sandbox).await;
    assert_eq!(code, 503);
    let injected = read(&body);
    assert_eq!(injected.success, Some(false));
    assert!(injected.error.is_some_and(|(_, m)| m.contains("injected")));
    assert_eq!(sandbox.mobile_commons_truth().requests.injected_faults, 1);
    sandbox.shutdown().await;
}

#[test]
fn a_hundred_thousand_profiles_list_quickly() {
    let at = Utc::now();
    let mut fake = MobileCommons::new("u".into(), "p".into(), &[], at);
    fake.seed(100_000, at);
    let query = HashMap::from([("limit".to_owned(), "1000".to_owned())]);
    let mut params = super::super::listing::params(&query).expect("valid");
    let started = std::time::Instant::now();
    let mut seen = 0;
    loop {
        let page = super::super::listing::page(&fake.profiles, &params, false);
        if page.is_empty() {
            break;
        }
        let mut out = String::new();
        for p in &page {
            p.write_xml(&mut out, 4, super::super::Include::ALL);
        }
        seen += page.len();
        params.page += 1;
    }
    assert_eq!(seen, 100_000);
    assert!(
        started.elapsed() < std::time::Duration::from_secs(20),
        "{:?}",
        started.elapsed()
    );
    let (profile, created) = fake.stop("13126050000", at).expect("a number");
    assert!(!created);
    assert_eq!(profile.phone_number, "13126050000");
}
