use super::*;

/// `text` loaded as the configuration file, with `env` as the environment.
fn load_with(text: &str, env: &[(&str, &str)]) -> Result<Settings, SettingsError> {
    let dir = tempfile::tempdir().expect("temporary directory");
    let path = dir.path().join("config.toml");
    std::fs::write(&path, text).expect("write the file");
    let env: Vec<(String, String)> = env
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    Settings::load_from(Some(&path), &env)
}

pub(crate) fn load(text: &str) -> Result<Settings, SettingsError> {
    load_with(text, &[])
}

/// An `[[account]]` named `name` with `extra` keys and its own webhook secret.
fn account(name: &str, extra: &str) -> String {
    account_signed(name, extra, &[&format!("whsec-{name}")])
}

/// An `[[account]]` whose `[account.webhook]` has `secrets`.
fn account_signed(name: &str, extra: &str, secrets: &[&str]) -> String {
    format!(
        "[[account]]\nname = {name:?}\nbase_url = \"https://api.example.org\"\nclient_id = \"{name}@example.org\"\nclient_secret = \"TOPSECRET-{name}\"\n{extra}\n[account.webhook]\nsecrets = {secrets:?}\n\n"
    )
}

/// The error loading `text` gives, which must name `key` and quote no secret.
pub(crate) fn refused(text: &str, key: &str) -> String {
    let error = load(text).expect_err("refused").to_string();
    assert!(error.contains(&format!("`{key}`")), "{key}: {error}");
    for secret in ["TOPSECRET", "hunter2"] {
        assert!(!error.contains(secret), "{error}");
    }
    error
}

const WEBHOOK: &str = "[webhook]\nsecrets = [\"s\"]\n";

#[test]
fn ingest_paths_the_router_cannot_take_or_a_client_cannot_reach_are_refused_naming_the_key() {
    for path in [
        "/webhooks/:x",
        "/webhooks/{",
        "/webhooks/{x}",
        "/webhooks/{*rest}",
        "/webhooks/*",
        "/webhooks/café",
        "/webhooks/a%20b",
        "/webhooks/a b",
        "/webhooks//x",
        "/webhooks/",
        "/webhooks/../x",
        "webhooks",
        "/",
        "/healthz",
        "/readyz",
        "/sources",
        "/sources/twilio-main",
    ] {
        let error = refused(
            &account("party", &format!("ingest_path = {path:?}")),
            "account.ingest_path",
        );
        assert!(error.contains("account \"party\""), "{path}: {error}");
        let error = refused(
            &format!("{WEBHOOK}[ingest]\npath = {path:?}\n"),
            "ingest.path",
        );
        assert!(!error.contains("account \""), "{path}: {error}");
    }
    let long = format!("/{}", "a".repeat(MAX_INGEST_PATH_CHARS));
    refused(
        &format!("{WEBHOOK}[ingest]\npath = {long:?}\n"),
        "ingest.path",
    );
    // Two parameters the router would take as one route (it panicked).
    refused(
        &(account("party", "ingest_path = \"/webhooks/{a}\"")
            + &account("candidate", "ingest_path = \"/webhooks/{b}\"")),
        "account.ingest_path",
    );
    // The second account may not take what the first may not.
    for path in ["/healthz", "/", "/readyz", "/sources/twilio-main"] {
        let error = refused(
            &(account("party", "") + &account("candidate", &format!("ingest_path = {path:?}"))),
            "account.ingest_path",
        );
        assert!(error.contains("\"candidate\""), "{error}");
    }
    // What a client sends as it is routes.
    let settings =
        load(&(account("party", "ingest_path = \"/hooks/Party.v1~x_y-z\"") + &account("b", "")))
            .expect("a path of unreserved characters");
    assert_eq!(
        settings.accounts().expect("well-formed names")[0].ingest_path,
        "/hooks/Party.v1~x_y-z"
    );
}

#[test]
fn a_name_longer_than_an_id_is_refused_for_accounts_subscribers_and_destinations() {
    let long = "a".repeat(5_000);
    let error = refused(&account(&long, ""), "account.name");
    assert!(error.contains("at most 200 characters"), "{error}");
    assert!(error.len() < 400, "the name is quoted bounded: {error}");
    let at_most = "a".repeat(crate::model::MAX_ID_CHARS);
    load(&account(&at_most, "")).expect("200 characters is an id");
    let subscriber = format!(
        "{WEBHOOK}[[subscriber]]\nname = {long:?}\nurl = \"https://crm.example.org/hooks\"\nsecret = \"whsec_c2VjcmV0\"\n"
    );
    refused(&subscriber, "subscriber.name");
    let destination = format!(
        "{WEBHOOK}[[destination]]\nname = {long:?}\nkind = \"action_network\"\nbase_url = \"https://actionnetwork.org/api/v2\"\napi_key = \"k\"\n"
    );
    refused(&destination, "destination.name");
}

#[test]
fn one_webhook_secret_in_two_accounts_is_refused_naming_both_never_the_secret() {
    let error = refused(
        &(account_signed("party", "", &["TOPSECRET-shared"])
            + &account_signed("candidate", "", &["TOPSECRET-shared"])),
        "account.webhook.secrets",
    );
    assert!(
        error.contains("\"party\"") && error.contains("\"candidate\""),
        "{error}"
    );
    // The same key, once as HMAC text and once as a Standard Webhooks secret.
    let candidate = account_signed("candidate", "", &["whsec_VE9QU0VDUkVULXNoYXJlZA=="]).replace(
        "[account.webhook]\n",
        "[account.webhook]\nscheme = \"standard-webhooks\"\n",
    );
    refused(
        &(account_signed("party", "", &["TOPSECRET-shared"]) + &candidate),
        "account.webhook.secrets",
    );
    // A rotation keeps two secrets in one account: that is no sharing.
    load(
        &(account_signed("party", "", &["one", "two", "one"])
            + &account_signed("candidate", "", &["three"])),
    )
    .expect("each account its own secrets");
}

#[test]
fn sections_a_configuration_with_accounts_does_not_read_are_refused_saying_where_they_go() {
    let error = refused(&format!("{WEBHOOK}{}", account("party", "")), "webhook");
    assert!(error.contains("[account.webhook]"), "{error}");
    let error = refused(
        &format!("[ingest]\npath = \"/webhooks\"\n{}", account("party", "")),
        "ingest.path",
    );
    assert!(error.contains("ingest_path"), "{error}");
    let error = refused(
        &format!(
            "[reconcile]\norganizations = [\"org_1\"]\n{}",
            account("party", "")
        ),
        "reconcile.organizations",
    );
    assert!(error.contains("`organizations`"), "{error}");
    let public = "[ingest]\npublic_url = \"https://hooks.example.org/in\"\n";
    let error = refused(
        &format!("{public}{}{}", account("party", ""), account("b", "")),
        "ingest.public_url",
    );
    assert!(error.contains("`public_url`"), "{error}");
    // A lone account without its own public URL reads it, as before.
    let settings = load(&format!("{public}{}", account("party", ""))).expect("read");
    assert_eq!(settings.ingest.public_url, "https://hooks.example.org/in");
    // From the environment too (a systemd unit's Environment= line).
    let error = load_with(
        &account("party", ""),
        &[("OUTREACH_SYNC__WEBHOOK__SECRETS", "hunter2")],
    )
    .expect_err("refused")
    .to_string();
    assert!(error.contains("`webhook`"), "{error}");
    assert!(!error.contains("hunter2"), "{error}");
}

#[test]
fn credentials_over_plain_http_to_a_host_not_loopback_are_refused_unless_allowed() {
    let service = |url: &str, extra: &str| {
        format!("{WEBHOOK}[service]\nbase_url = {url:?}\nclient_secret = \"TOPSECRET\"\n{extra}\n")
    };
    let error = refused(&service("http://api.example.org", ""), "service.base_url");
    assert!(error.contains("allow_insecure_http"), "{error}");
    load(&service(
        "http://api.example.org",
        "allow_insecure_http = true",
    ))
    .expect("allowed");
    for loopback in [
        "http://127.0.0.1:9090",
        "http://localhost:9090",
        "http://[::1]:9",
    ] {
        load(&service(loopback, "")).expect(loopback);
    }
    // Without a client secret nothing secret goes there.
    load(&format!(
        "{WEBHOOK}[service]\nbase_url = \"http://api.example.org\"\n"
    ))
    .expect("no secret");

    let error = refused(
        &account("party", "").replace("https://api.example.org", "http://api.example.org"),
        "account.base_url",
    );
    assert!(error.contains("\"party\""), "{error}");
    load(
        &account("party", "allow_insecure_http = true")
            .replace("https://api.example.org", "http://api.example.org"),
    )
    .expect("allowed for the account");

    let destination = |extra: &str| {
        format!(
            "{WEBHOOK}[[destination]]\nname = \"an\"\nkind = \"action_network\"\nbase_url = \"http://actionnetwork.org/api/v2\"\napi_key = \"TOPSECRET\"\n{extra}\n"
        )
    };
    refused(&destination(""), "destination.base_url");
    load(&destination("allow_insecure_http = true")).expect("allowed");
    let subscriber = |extra: &str| {
        format!(
            "{WEBHOOK}[[subscriber]]\nname = \"crm\"\nurl = \"http://crm.example.org/hooks\"\nsecret = \"whsec_c2VjcmV0\"\n{extra}\n"
        )
    };
    refused(&subscriber(""), "subscriber.url");
    load(&subscriber("allow_insecure_http = true")).expect("allowed");
}

#[test]
fn user_info_in_any_configured_url_is_refused_without_being_shown() {
    let with_user = "https://van:TOPSECRET@api.securevan.com/v4";
    refused(
        &format!(
            "{WEBHOOK}[[destination]]\nname = \"van\"\nkind = \"van\"\nbase_url = {with_user:?}\napi_key = \"k\"\n"
        ),
        "destination.base_url",
    );
    refused(
        &format!(
            "{WEBHOOK}[[subscriber]]\nname = \"crm\"\nurl = {with_user:?}\nsecret = \"whsec_c2VjcmV0\"\n"
        ),
        "subscriber.url",
    );
    refused(
        &format!("{WEBHOOK}[service]\nbase_url = {with_user:?}\n"),
        "service.base_url",
    );
    refused(
        &format!("{WEBHOOK}[ingest]\npublic_url = {with_user:?}\n"),
        "ingest.public_url",
    );
    refused(
        &account("party", &format!("public_url = {with_user:?}")),
        "account.public_url",
    );
    refused(
        &account("party", "").replace("https://api.example.org", "https://party@api.example.org"),
        "account.base_url",
    );
    // Nor when the URL is not one at all.
    refused(
        &format!("{WEBHOOK}[service]\nbase_url = \"ftp://me:TOPSECRET@host/x\"\n"),
        "service.base_url",
    );
}

/// A twilio source: its token and `public_url` required, the read kinds' keys refused, its
/// tokens read from the file one a line, and none of them printed.
#[test]
fn a_twilio_source_takes_a_token_and_the_url_set_at_twilio_and_nothing_a_read_takes() {
    let base = "[webhook]\nsecrets = [\"whsec-1\"]\n[[source]]\nname = \"tw\"\nkind = \"twilio\"\n";
    let url = "public_url = \"https://sync.example.org/sources/tw\"\n";
    let error = refused(&format!("{base}{url}"), "source.auth_token");
    assert!(error.contains("auth token is required"), "{error}");
    let error = refused(
        &format!("{base}auth_token = \"hunter2\"\n"),
        "source.public_url",
    );
    assert!(error.contains("tw"), "{error}");
    for extra in [
        "base_url = \"https://api.twilio.com\"\n",
        "api_key = \"hunter2\"\n",
        "since = \"2026-01-01T00:00:00Z\"\n",
    ] {
        let key = extra.split(' ').next().unwrap_or_default();
        let error = refused(
            &format!("{base}{url}auth_token = \"hunter2\"\n{extra}"),
            "source.kind",
        );
        assert!(error.contains(key), "{key}: {error}");
    }
    let dir = tempfile::tempdir().expect("dir");
    let file = dir.path().join("tokens");
    std::fs::write(&file, "hunter2-new\n\nhunter2-old\n").expect("tokens");
    let settings = load(&format!(
        "{base}{url}auth_token_file = {:?}\n",
        file.display().to_string()
    ))
    .expect("valid");
    let crate::settings::SourceSystem::Twilio(twilio) = &settings.source[0].system else {
        panic!("a twilio source");
    };
    assert_eq!(twilio.accepted().len(), 2);
    assert!(!format!("{settings:?}").contains("hunter2"));
    assert!(!settings.redacted_toml().contains("hunter2"));
}

#[test]
fn a_since_in_the_future_a_region_that_is_none_and_a_tolerance_past_a_day_are_refused() {
    let source = "[[source]]\nname = \"an\"\nkind = \"action_network\"\nbase_url = \"https://actionnetwork.org/api/v2\"\napi_key = \"hunter2\"\n";
    let error = refused(
        &format!("{WEBHOOK}{source}since = \"2099-01-01T00:00:00Z\"\n"),
        "source.since",
    );
    assert!(error.contains("is in the future"), "{error}");
    assert!(
        load(&format!(
            "{WEBHOOK}{source}since = \"2026-01-01T00:00:00Z\"\n"
        ))
        .is_ok()
    );
    let error = refused(
        &format!("{WEBHOOK}[consent]\ndefault_region = \"XX\"\n"),
        "consent.default_region",
    );
    assert!(error.contains("`XX` is not a region"), "{error}");
    refused(
        &format!("{WEBHOOK}[consent]\nfuture_tolerance_secs = 86401\n"),
        "consent.future_tolerance_secs",
    );
    let settings = load(&format!(
        "{WEBHOOK}[consent]\ndefault_region = \"gb\"\nfuture_tolerance_secs = 0\n"
    ))
    .expect("valid");
    let trust = settings.consent.trust();
    assert_eq!(trust.region, "GB".parse().unwrap());
    assert_eq!(trust.future_tolerance, chrono::TimeDelta::zero());
    let defaults = load(WEBHOOK).expect("valid").consent.trust();
    assert_eq!(defaults, crate::model::trust::Trust::default());
}

#[test]
fn a_twilio_sources_own_words_are_a_few_short_ones() {
    let base = "[webhook]\nsecrets = [\"whsec-1\"]\n[[source]]\nname = \"tw\"\nkind = \"twilio\"\nauth_token = \"hunter2\"\npublic_url = \"https://sync.example.org/sources/tw\"\n";
    let settings =
        load(&format!("{base}opt_out_words = [\"halt\", \"ne plus\"]\n")).expect("valid");
    assert_eq!(settings.source[0].opt_out_words, ["halt", "ne plus"]);
    for bad in [
        "\"\"",
        "\"!!\"",
        "\"a\\u001bb\"",
        &format!("\"{}\"", "x".repeat(41)),
    ] {
        refused(
            &format!("{base}opt_out_words = [{bad}]\n"),
            "source.opt_out_words",
        );
    }
    let many: Vec<String> = (0..51).map(|i| format!("\"w{i}\"")).collect();
    refused(
        &format!("{base}opt_out_words = [{}]\n", many.join(", ")),
        "source.opt_out_words",
    );
}

#[test]
fn a_source_the_daemon_reads_takes_no_words_of_replies() {
    let base = "[webhook]\nsecrets = [\"whsec-1\"]\n[[source]]\nname = \"an\"\nkind = \"action_network\"\nbase_url = \"https://actionnetwork.org/api/v2\"\napi_key = \"hunter2\"\n";
    load(base).expect("valid");
    let error = refused(
        &format!("{base}opt_out_words = [\"halt\"]\n"),
        "source.opt_out_words",
    );
    assert!(error.contains("posted replies"), "{error}");
}

#[test]
fn a_callers_members_are_accounts_served_each_of_one_caller_and_its_date_a_day() {
    use crate::model::caller::{Binds, Member};
    let accounts = format!("{}{}", account("party", ""), account("candidate", ""));
    let caller =
        |name: &str, members: &str| format!("[[caller]]\nname = {name:?}\nmembers = {members}\n");
    let settings = load(&format!(
        "{accounts}{}",
        caller("senate", r#"["party/org_2", "candidate"]"#)
    ))
    .expect("valid");
    let callers = settings.callers().expect("callers");
    let party = crate::model::AccountId::new("party").expect("id");
    assert_eq!(
        callers[0].members,
        vec![
            Member::Organization(party, "org_2".into()),
            Member::Account(crate::model::AccountId::new("candidate").expect("id")),
        ]
    );
    // Midnight in the compliance zone (New York: 05:00 UTC in winter).
    assert_eq!(
        callers[0].binds,
        Binds::From("2027-01-31T05:00:00Z".parse().expect("a time"))
    );
    let never = load(&format!(
        "[consent]\nrevoke_all_from = \"\"\n{accounts}{}",
        caller("senate", r#"["party", "candidate"]"#)
    ))
    .expect("valid");
    assert_eq!(never.callers().expect("callers")[0].binds, Binds::Never);

    for (extra, key) in [
        (caller("senate", r#"["party", "union"]"#), "caller.members"),
        (
            caller("senate", r#"["party", "party/org_1"]"#),
            "caller.members",
        ),
        (
            format!(
                "{}{}",
                caller("senate", r#"["party/org_1", "candidate"]"#),
                caller("house", r#"["party"]"#)
            ),
            "caller.members",
        ),
        (
            caller("senate", r#"["party/", "candidate"]"#),
            "caller.members",
        ),
        (caller("senate", r#"["party/org_1"]"#), "caller.members"),
        (caller("Senate!", r#"["party"]"#), "caller.name"),
        (
            format!(
                "{}{}",
                caller("senate", r#"["party"]"#),
                caller("senate", r#"["candidate"]"#)
            ),
            "caller.name",
        ),
    ] {
        refused(&format!("{accounts}{extra}"), key);
    }
    refused(
        &format!(
            "[consent]\nrevoke_all_from = \"31/01/2027\"\n{accounts}{}",
            caller("senate", r#"["party", "candidate"]"#)
        ),
        "consent.revoke_all_from",
    );
    refused(
        &format!(
            "[consent]\nshare_across_accounts = true\n{accounts}{}",
            caller("senate", r#"["party", "candidate"]"#)
        ),
        "consent.share_across_accounts",
    );
}

#[test]
fn a_van_source_takes_the_keys_it_reads_with_and_refuses_a_destinations_and_another_kinds() {
    let source = "[[source]]\nname = \"van\"\nkind = \"van\"\nbase_url = \"https://api.securevan.com/v4\"\napi_key = \"hunter2\"\n";
    let settings = load(&format!(
        "{WEBHOOK}{source}result_code = \"Wrong Number\"\ndatabase_mode = 0\n"
    ))
    .expect("valid");
    let crate::settings::SourceSystem::Van(van) = &settings.source[0].system else {
        panic!("a van source");
    };
    assert_eq!(
        (van.result_code(), van.database_mode()),
        ("Wrong Number", 0)
    );
    for (extra, key) in [
        ("van_id_field = \"VanID\"\n", "van_id_field"),
        ("actions = [\"phone_status\"]\n", "actions"),
        ("dataset = \"consent\"\n", "dataset"),
    ] {
        let error = refused(&format!("{WEBHOOK}{source}{extra}"), "source.kind");
        assert!(
            error.contains(&format!("`{key}` is not a key of a van source")),
            "{error}"
        );
    }
    let error = refused(
        &format!("{WEBHOOK}{source}database_mode = 2\n"),
        "source.database_mode",
    );
    assert!(error.contains("MyVoters"), "{error}");
    let unknown = refused(
        &format!("{WEBHOOK}{source}no_such_key = 1\n"),
        "source.kind",
    );
    assert!(
        unknown.contains("`no_such_key` is not a key of a van source"),
        "{unknown}"
    );
}

/// The keys every table shares (`Scope`, `Feed`) are read at the table's top level, as
/// before they were one struct; a key no table takes is still refused by name.
#[test]
fn the_shared_keys_read_at_the_top_of_each_table_and_a_stranger_is_refused() {
    let base = format!(
        "{WEBHOOK}[[subscriber]]\nname = \"crm\"\nurl = \"https://crm.example.org/hooks\"\nsecret = \"whsec_c2VjcmV0LXNoYXJlZC13aXRoLXRoZS1jcm0=\"\naccounts = [\"default\"]\norganizations = [\"org_1\"]\nsources = [\"webhook\"]\nmax_backoff_secs = 60\n"
    );
    let settings = load(&base).expect("valid");
    let subscriber = &settings.subscriber[0];
    assert_eq!(
        (
            subscriber.scope.accounts.as_slice(),
            subscriber.scope.organizations.as_slice(),
            subscriber.feed.sources.as_slice(),
            subscriber.feed.max_backoff_secs
        ),
        (
            &["default".to_owned()][..],
            &["org_1".to_owned()][..],
            &[crate::model::Source::Webhook][..],
            60
        )
    );
    let error = refused(&format!("{base}batchsize = 5\n"), "subscriber");
    assert!(error.contains("unknown field `batchsize`"), "{error}");
    refused(
        &base.replace("accounts = [\"default\"]", "accounts = [\"elsewhere\"]"),
        "subscriber.accounts",
    );
    refused(
        &base.replace("max_backoff_secs = 60", "max_backoff_secs = 0"),
        "subscriber.max_backoff_secs",
    );
}
