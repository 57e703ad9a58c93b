//! Sharing opt-outs across accounts follows the person's latest act: three accounts, each
//! its own sandbox with the same people, the daemon between them, and a person saying STOP
//! and START where they like while webhooks are lost, sent twice, late and reordered.
//!
//! What "right" is: an account ends at the state of the latest of its own acts and of the
//! opt-outs given in the others (an opt-in holds only where it was given), both in the
//! daemon's ledger and at its service.

use std::time::Duration;

use outreach_sync::ledger;
use outreach_sync::reconcile::{PassRequest, Reconciler};
use outreach_sync::settings::{AccountSettings, Settings, WebhookSettings};
use outreach_sync_sandbox::wire::{Scope, WebhookConfig};
use outreach_sync_sandbox::{DeliveryFaults, RunningSandbox, Sandbox, SandboxConfig};
use secrecy::SecretString;
use tokio_util::sync::CancellationToken;

use crate::common::{self, Backend, TestApp, eventually, on_both_backends};

pub(crate) const ACCOUNTS: [&str; 3] = ["party", "candidate", "coalition"];
/// How long the daemon may take to take in and pass on one act.
const QUIET_WITHIN: Duration = Duration::from_secs(30);

/// Three accounts sharing their opt-outs, each on a sandbox of its own whose webhooks
/// reach the daemon on the account's path.
pub(crate) struct Trio {
    pub(crate) app: TestApp,
    pub(crate) sandboxes: Vec<RunningSandbox>,
    pub(crate) organization: String,
    pub(crate) phone: String,
}

fn secret(account: &str) -> String {
    format!("{account}-webhook-secret")
}

fn account(name: &str, sandbox: &RunningSandbox) -> AccountSettings {
    AccountSettings {
        name: name.to_owned(),
        base_url: sandbox.base_url(),
        client_id: sandbox.config().client_id.clone(),
        client_secret: Some(SecretString::from(sandbox.config().client_secret.clone())),
        requests_per_second: Some(1000),
        webhook: WebhookSettings {
            secrets: vec![SecretString::from(secret(name))],
            ..WebhookSettings::default()
        },
        ..AccountSettings::default()
    }
}

/// The first sandbox's leads whose number is opted in in every sandbox, those with a
/// person in its VAN first.
fn opted_in_everywhere(sandboxes: &[RunningSandbox]) -> Vec<outreach_sync_sandbox::wire::Lead> {
    let van_ids = crate::destinations::van_ids(&sandboxes[0]);
    let mut leads: Vec<_> = sandboxes[0]
        .leads()
        .into_iter()
        .filter(|l| {
            sandboxes.iter().all(|s| {
                s.leads()
                    .iter()
                    .any(|t| t.phone_number == l.phone_number && !t.global_opted_out)
            })
        })
        .collect();
    leads.sort_by_key(|l| (!van_ids.contains_key(&l.id), l.id.clone()));
    leads
}

impl Trio {
    /// The trio, with the mirror of each account filled by a pass, and the number of a
    /// lead opted in everywhere.
    async fn start(backend: Backend) -> Option<Self> {
        Self::start_with(backend, |_, _| {}).await
    }

    /// [`Trio::start`], with `configure` given the settings and the sandboxes before the
    /// daemon starts; the number chosen has a person in the first sandbox's VAN.
    pub(crate) async fn start_with(
        backend: Backend,
        configure: impl FnOnce(&mut Settings, &[RunningSandbox]),
    ) -> Option<Self> {
        let mut sandboxes = Vec::new();
        for name in ACCOUNTS {
            // The same seed: the same organizations and numbers in every account.
            let sandbox = Sandbox::spawn(SandboxConfig {
                leads: 6,
                organizations: 1,
                client_id: format!("{name}-client"),
                client_secret: format!("{name}-client-secret"),
                ..SandboxConfig::default()
            })
            .await
            .expect("sandbox");
            sandboxes.push(sandbox);
        }
        let accounts: Vec<AccountSettings> = ACCOUNTS
            .iter()
            .zip(&sandboxes)
            .map(|(name, sandbox)| account(name, sandbox))
            .collect();
        let app = common::spawn_app_on(backend, |settings: &mut Settings| {
            settings.account = accounts;
            settings.consent.share_across_accounts = true;
            settings.reconcile.schedule = "".into();
            settings.reconcile.on_start = false;
            configure(settings, &sandboxes);
        })
        .await?;
        let consent = WebhookConfig::ConsentUpdate {
            scope: Scope::Account,
            include_opt_out: true,
            include_opt_in: true,
        };
        for (name, sandbox) in ACCOUNTS.iter().zip(&sandboxes) {
            let url = app.url(&format!("/webhooks/{name}"));
            sandbox
                .register_webhook(&url, &secret(name), consent.clone())
                .expect("a registration");
        }
        let lead = opted_in_everywhere(&sandboxes)
            .into_iter()
            .next()
            .expect("a number opted in in every account");
        let trio = Self {
            app,
            sandboxes,
            organization: lead.organization_id,
            phone: lead.phone_number,
        };
        for i in 0..ACCOUNTS.len() {
            trio.pass(i).await;
        }
        Some(trio)
    }

    /// One reconciliation pass of account `i`.
    pub(crate) async fn pass(&self, i: usize) {
        let client =
            outreach_sync::client::ServiceClient::new(common::client_config(&self.sandboxes[i]))
                .expect("client");
        Reconciler::new(self.app.pool.clone(), client, &self.app.settings.reconcile)
            .with_account(&common::served(&self.app.settings, ACCOUNTS[i]))
            .run_pass(&PassRequest::default(), &CancellationToken::new())
            .await
            .expect("a pass");
    }

    /// The person texts STOP (or START) to account `i`'s number; whether that changed
    /// anything there (a STOP to a number opted out already is announced by nobody).
    pub(crate) fn act(&self, i: usize, opted_out: bool) -> bool {
        let sandbox = &self.sandboxes[i];
        let changed = if opted_out {
            sandbox.text_stop(&self.organization, &self.phone)
        } else {
            sandbox.text_start(&self.organization, &self.phone)
        };
        !changed.expect("the sandbox takes the text").is_empty()
    }

    /// Waits until the daemon took in what account `i` announced (a pass makes up for a
    /// webhook dropped since `dropped` were), shared it and pushed every change it queued.
    pub(crate) async fn taken_in(&self, i: usize, dropped: u64) {
        let sandbox = &self.sandboxes[i];
        assert!(sandbox.settle(QUIET_WITHIN).await, "deliveries pending");
        if sandbox.delivery_counts().dropped > dropped {
            self.pass(i).await;
        }
        self.app.drain().await;
        self.passed_on().await;
    }

    /// Waits until every opt-out was shared and every push was answered.
    pub(crate) async fn passed_on(&self) {
        let app = &self.app;
        eventually("sharing and pushes done", QUIET_WITHIN, async || {
            app.drain().await;
            let shared_up_to = app
                .texts("SELECT value FROM daemon_state WHERE key = 'share_cursor'")
                .await
                .first()
                .and_then(|v| v.parse::<i64>().ok())
                .unwrap_or(0);
            let last = app
                .count(
                    "SELECT COALESCE(MAX(seq), 0) FROM ledger
                     WHERE opted_out AND event_ref NOT LIKE 'shared:%'",
                )
                .await;
            let pending = app
                .count("SELECT COUNT(*) FROM pushes WHERE state = 'pending'")
                .await;
            shared_up_to >= last && pending == 0
        })
        .await;
    }

    /// Every delivery delivered, one pass per account, and all of it passed on.
    pub(crate) async fn quiet(&self) {
        for sandbox in &self.sandboxes {
            assert!(sandbox.settle(QUIET_WITHIN).await, "deliveries pending");
        }
        self.app.drain().await;
        self.passed_on().await;
        for i in 0..ACCOUNTS.len() {
            self.pass(i).await;
        }
        self.app.drain().await;
        self.passed_on().await;
    }

    /// Whether account `i` has the number opted out: at its service, and in the ledger.
    pub(crate) async fn opted_out(&self, i: usize) -> (bool, Option<bool>) {
        let service = self.sandboxes[i]
            .leads()
            .into_iter()
            .find(|l| l.organization_id == self.organization && l.phone_number == self.phone)
            .is_some_and(|l| l.global_opted_out);
        let records = ledger::current(&self.app.pool, &self.phone, Some(&self.organization))
            .await
            .expect("current consent");
        let ledger = records
            .iter()
            .find(|r| r.account_id == ACCOUNTS[i])
            .map(|r| r.opted_out);
        (service, ledger)
    }

    /// Plays `acts` (account, opted out) in order, then checks every account against the
    /// latest act's state.
    async fn play(&self, acts: &[(usize, bool)]) {
        let mut expected = [false; ACCOUNTS.len()];
        for &(i, opted_out) in acts {
            let dropped = self.sandboxes[i].delivery_counts().dropped;
            if !self.act(i, opted_out) {
                // Nothing changed at the service, so nothing is announced: not an act
                // anyone but the person knows of.
                continue;
            }
            for (k, state) in expected.iter_mut().enumerate() {
                // An opt-out holds everywhere; an opt-in only where it was given.
                if k == i || opted_out {
                    *state = opted_out;
                }
            }
            self.taken_in(i, dropped).await;
        }
        self.quiet().await;
        for (i, want) in expected.iter().enumerate() {
            let (service, ledger) = self.opted_out(i).await;
            let history = ledger::history(&self.app.pool, &self.phone, None)
                .await
                .expect("history");
            let told: Vec<String> = history
                .iter()
                .map(|e| {
                    format!(
                        "#{} {} {} {} {} {}",
                        e.seq,
                        e.account_id,
                        e.organization_id,
                        if e.opted_out { "out" } else { "in" },
                        e.event_ref,
                        if e.superseded { "superseded" } else { "" }
                    )
                })
                .collect();
            assert_eq!(
                (service, ledger),
                (*want, Some(*want)),
                "{} after {acts:?}: (service, ledger)\n{}",
                ACCOUNTS[i],
                told.join("\n")
            );
        }
    }

    pub(crate) async fn stop(self) {
        self.app.stop().await;
        for sandbox in self.sandboxes {
            sandbox.shutdown().await;
        }
    }
}

on_both_backends!(
    after_a_shared_opt_out_and_opt_ins_a_later_opt_out_is_shared_again,
    flavor = "multi_thread",
    worker_threads = 2
);
async fn after_a_shared_opt_out_and_opt_ins_a_later_opt_out_is_shared_again(backend: Backend) {
    let Some(trio) = Trio::start(backend).await else {
        return;
    };
    // STOP at the party (shared with all), START at the party, START at the candidate,
    // STOP at the candidate: that STOP, the latest act, holds everywhere.
    trio.play(&[(0, true), (0, false), (1, false), (1, true)])
        .await;
    trio.stop().await;
}

on_both_backends!(
    a_stop_after_a_start_is_no_echo_of_the_shared_push_before_them,
    flavor = "multi_thread",
    worker_threads = 2
);
async fn a_stop_after_a_start_is_no_echo_of_the_shared_push_before_them(backend: Backend) {
    let Some(trio) = Trio::start(backend).await else {
        return;
    };
    // The candidate's service echoes nothing of the opt-out sharing pushes there...
    trio.sandboxes[1].set_delivery_faults(DeliveryFaults {
        drop_rate: 1.0,
        ..DeliveryFaults::default()
    });
    assert!(trio.act(0, true));
    trio.sandboxes[0].settle(QUIET_WITHIN).await;
    trio.app.drain().await;
    trio.passed_on().await;
    assert!(trio.sandboxes[1].settle(QUIET_WITHIN).await);
    trio.sandboxes[1].set_delivery_faults(DeliveryFaults::default());
    // ... when the person texts START, then STOP, to the candidate, within the echo's
    // window: the STOP is the person's, recorded at its own time, and it holds.
    trio.play(&[(1, false), (1, true)]).await;
    let history = ledger::history(&trio.app.pool, &trio.phone, None)
        .await
        .expect("history");
    let last = history
        .iter()
        .rfind(|e| e.account_id == "candidate" && e.source == outreach_sync::model::Source::Webhook)
        .expect("the candidate's STOP");
    assert!(last.opted_out && !last.superseded, "{last:?}");
    trio.stop().await;
}

mod property {
    use super::*;
    use proptest::prelude::*;

    fn faults(drop: bool, twice: bool, late: bool) -> DeliveryFaults {
        DeliveryFaults {
            drop_rate: if drop { 0.3 } else { 0.0 },
            duplicate_rate: if twice { 0.3 } else { 0.0 },
            reorder: late,
            max_delay_ms: if late { 300 } else { 0 },
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig {
            cases: 8,
            failure_persistence: None,
            ..ProptestConfig::default()
        })]

        /// Random STOP and START in three accounts, with webhooks lost (then a pass), sent
        /// twice, late and reordered (the echoes of sharing's pushes too): every account
        /// ends at the latest act's state, in the ledger and at its service.
        #[test]
        fn every_account_ends_at_the_latest_acts_state(
            acts in proptest::collection::vec((0..3usize, any::<bool>()), 1..7),
            drop in any::<bool>(),
            twice in any::<bool>(),
            late in any::<bool>(),
        ) {
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .expect("a runtime");
            runtime.block_on(async {
                let trio = Trio::start(Backend::Sqlite).await.expect("SQLite");
                for sandbox in &trio.sandboxes {
                    sandbox.set_delivery_faults(faults(drop, twice, late));
                }
                trio.play(&acts).await;
                trio.stop().await;
            });
        }
    }
}

on_both_backends!(
    an_opt_out_announced_in_whole_seconds_outranks_a_pass_in_the_same_second,
    flavor = "multi_thread",
    worker_threads = 2
);
/// The service's event times carry whole seconds, a pass's observation milliseconds: a
/// pass sees a lead opted in at 12:00:00.900 and the person's STOP is announced at
/// 12:00:00. At the precision the two share they are the same instant, and the opt-out
/// wins the tie: it is not recorded superseded, and the mirror says opted out.
async fn an_opt_out_announced_in_whole_seconds_outranks_a_pass_in_the_same_second(
    backend: Backend,
) {
    let Some(app) = common::spawn_app_on(backend, |_| {}).await else {
        return;
    };
    let phone = "+15550001234";
    let seen: chrono::DateTime<chrono::Utc> = "2026-11-21T12:00:00.900Z".parse().expect("time");
    let lead: outreach_sync::model::Lead = serde_json::from_value(serde_json::json!({
        "id": "lead_1", "organizationId": "org_1", "phoneNumber": phone,
        "globalOptedOut": false}))
    .expect("a lead");
    let mut tx = app.pool.begin_write().await.expect("begin");
    outreach_sync::apply::lead_page(
        &mut tx,
        &common::account("default"),
        "pass_1",
        &[lead],
        seen,
    )
    .await
    .expect("a page");
    tx.commit().await.expect("commit");
    let stop = serde_json::json!({
        "type": "consentUpdate-v1", "id": "evt_stop", "createdAt": "2026-11-21T12:00:00Z",
        "data": {"id": "lead_1", "organizationId": "org_1", "phoneNumber": phone,
                 "globalOptedOut": true}})
    .to_string();
    assert_eq!(app.post_signed(&stop).await.status(), 200);
    app.drain().await;
    let history = ledger::history(&app.pool, phone, None)
        .await
        .expect("history");
    let entry = history
        .iter()
        .find(|e| e.event_ref == "event:evt_stop")
        .unwrap_or_else(|| panic!("the STOP in the ledger: {history:?}"));
    assert!(entry.opted_out && !entry.superseded, "{entry:?}");
    let current = ledger::current(&app.pool, phone, Some("org_1"))
        .await
        .expect("current");
    assert!(current.first().is_some_and(|r| r.opted_out), "{current:?}");
    app.stop().await;
}

on_both_backends!(
    three_accounts_sharing_write_each_person_once_to_each_destination_with_nothing_unreachable,
    flavor = "multi_thread",
    worker_threads = 2
);
/// The hostile run of three accounts sharing, with the party's VAN committee (scoped to the
/// party) and an Action Network (every account): a STOP at the party and a local opt-out
/// in the candidate account, each with its echoes, shared copies and suppressions, give
/// each person one canvass response, one phone update and one Action Network request; the
/// report finds neither unreachable.
async fn three_accounts_sharing_write_each_person_once_to_each_destination_with_nothing_unreachable(
    backend: Backend,
) {
    use outreach_sync::settings::{DestinationSettings, SystemSettings};
    use outreach_sync_sandbox::{DEFAULT_ACTION_NETWORK_KEY, DEFAULT_VAN_KEY};
    let configure = |settings: &mut Settings, sandboxes: &[RunningSandbox]| {
        let party = &sandboxes[0];
        let mut van = DestinationSettings::new(
            "van-party",
            SystemSettings::Van(Default::default()),
            &party.van_url(),
            DEFAULT_VAN_KEY,
        );
        van.scope.accounts = vec![ACCOUNTS[0].to_owned()];
        van.requests_per_second = Some(1_000);
        let mut an = DestinationSettings::new(
            "action-network",
            SystemSettings::ActionNetwork(Default::default()),
            &party.action_network_url(),
            DEFAULT_ACTION_NETWORK_KEY,
        );
        an.requests_per_second = Some(1_000);
        settings.destination = vec![van, an];
        common::with_admin_token(settings);
    };
    let Some(trio) = Trio::start_with(backend, configure).await else {
        return;
    };
    let van_ids = crate::destinations::van_ids(&trio.sandboxes[0]);
    let people: Vec<(String, u64)> = opted_in_everywhere(&trio.sandboxes)
        .into_iter()
        .filter_map(|l| Some((l.phone_number, *van_ids.get(&l.id)?)))
        .take(2)
        .collect();
    assert_eq!(
        people.len(),
        2,
        "two people with a VAN ID opted in everywhere"
    );
    assert_eq!(people[0].0, trio.phone);
    // A STOP texted to the party, checked in every account and at every service.
    trio.play(&[(0, true)]).await;
    // A local opt-out of the other person, made in the candidate account.
    let change = serde_json::json!({"phoneNumber": people[1].0,
        "organizationId": trio.organization, "optedOut": true, "accountId": ACCOUNTS[1]});
    assert_eq!(
        trio.app.admin_post("/v1/consent", &change).await.status(),
        202
    );
    trio.quiet().await;
    trio.app.settle().await;
    for (phone, van_id) in &people {
        let writes = crate::destinations::once::writes_of(&trio.sandboxes[0], *van_id, phone);
        assert_eq!(
            writes,
            (1, 1, 1),
            "{phone}: (canvass responses, phone updates, Action Network requests)"
        );
    }
    let report: serde_json::Value = trio
        .app
        .admin_get("/v1/compliance?since=2000-01-01")
        .await
        .json()
        .await
        .expect("the report");
    let items = report["items"].as_array().cloned().unwrap_or_default();
    for (phone, _) in &people {
        let theirs: Vec<&serde_json::Value> = items
            .iter()
            .filter(|i| i["phoneNumber"] == *phone)
            .collect();
        assert!(!theirs.is_empty(), "{phone} in the report: {report}");
        for item in theirs {
            assert_ne!(item["state"], "unreachable", "{item}");
        }
    }
    trio.stop().await;
}
