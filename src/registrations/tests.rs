//! Planning the account's registrations: what is kept, updated, created.

use super::*;

const URL: &str = "https://hooks.example.org/webhooks";

/// The one account of the default settings.
fn account_of(settings: &crate::settings::Settings) -> Account {
    let mut accounts = settings.accounts().expect("the default account");
    accounts.remove(0)
}

fn target(organizations: &[&str]) -> Target {
    let mut settings = crate::settings::Settings::default();
    settings.ingest.public_url = URL.into();
    settings.webhook.secrets = vec![SecretString::from("s3cret")];
    let organizations: Vec<String> = organizations.iter().map(|o| o.to_string()).collect();
    Target::of(&account_of(&settings), None, &organizations).expect("a target")
}

fn registration(id: &str, url: &str, config: WebhookConfig) -> WebhookRegistration {
    WebhookRegistration {
        id: id.into(),
        kind: "webhook_registration".into(),
        target_url: url.into(),
        config,
        created_at: "2026-11-25T00:00:00Z".into(),
        secret_for_hmac: true,
    }
}

#[test]
fn an_empty_account_gets_both_registrations() {
    let planned = plan(&[], &target(&[]));
    let kinds: Vec<(EventKind, Change)> = planned.into_iter().map(|p| (p.kind, p.change)).collect();
    assert_eq!(
        kinds,
        vec![
            (EventKind::ConsentUpdate, Change::Create),
            (EventKind::MessageStatus, Change::Create)
        ]
    );
}

#[test]
fn what_is_right_is_unchanged_and_other_urls_are_left_alone() {
    let existing = [
        registration("whr_1", URL, WebhookConfig::all_consent()),
        registration("whr_2", "https://HOOKS.example.org:443/webhooks", {
            WebhookConfig::all_messages()
        }),
        registration("whr_3", "https://elsewhere.example.org/", {
            WebhookConfig::all_messages()
        }),
    ];
    let changes: Vec<Change> = plan(&existing, &target(&[]))
        .into_iter()
        .map(|p| p.change)
        .collect();
    assert_eq!(
        changes,
        vec![
            Change::Unchanged { id: "whr_1".into() },
            Change::Unchanged { id: "whr_2".into() }
        ]
    );
}

#[test]
fn a_wrong_config_or_missing_secret_is_updated_and_a_second_one_removed() {
    let mut no_secret = registration("whr_2", URL, WebhookConfig::all_messages());
    no_secret.secret_for_hmac = false;
    let existing = [
        registration(
            "whr_1",
            URL,
            WebhookConfig::ConsentUpdate {
                scope: Scope::Account,
                include_opt_out: true,
                include_opt_in: false,
            },
        ),
        no_secret,
        registration("whr_3", URL, WebhookConfig::all_messages()),
    ];
    let planned = plan(&existing, &target(&[]));
    let changes: Vec<&Change> = planned.iter().map(|p| &p.change).collect();
    assert_eq!(
        changes,
        vec![
            &Change::Update {
                id: "whr_1".into(),
                config: vec!["includeOptIn is false".into()],
                secret: false
            },
            // The one with a secret and the right config is the one kept.
            &Change::Unchanged { id: "whr_3".into() },
            &Change::Remove {
                id: "whr_2".into(),
                kept: "whr_3".into()
            },
        ]
    );
    assert_eq!(
        problem(&planned[0], URL).as_deref(),
        Some("the consentUpdate-v1 registration whr_1: includeOptIn is false")
    );
}

#[test]
fn named_organizations_are_the_scope_in_any_order() {
    let scoped = WebhookConfig::MessageStatus {
        scope: Scope::Organizations {
            organization_ids: vec!["org_2".into(), "org_1".into()],
        },
    };
    let existing = [registration("whr_1", URL, scoped)];
    let planned = plan(&existing, &target(&["org_1", "org_2", "org_1"]));
    assert_eq!(planned[1].change, Change::Unchanged { id: "whr_1".into() });
    let account = plan(&existing, &target(&[]));
    assert_eq!(
        account[1].change,
        Change::Update {
            id: "whr_1".into(),
            config: vec!["its scope is organizations org_1, org_2, not account".into()],
            secret: false
        }
    );
}

#[test]
fn without_a_public_url_the_error_names_the_key() {
    let account = account_of(&crate::settings::Settings::default());
    let error = Target::of(&account, None, &[]).unwrap_err().to_string();
    assert!(error.contains("ingest.public_url"), "{error}");
    assert!(error.contains("--target-url"), "{error}");
}
