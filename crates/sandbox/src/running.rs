//! Starting a sandbox in process, and the handle tests and `demo` drive it with.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use secrecy::SecretString;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::config::{ApiFaults, DeliveryFaults, SandboxConfig};
use super::control::Truth;
use super::deliver::{Deliverer, DeliveryCounts, DeliveryRecord};
use super::destinations::{
    ActionNetworkPerson, ActionNetworkTruth, BigQueryTruth, Fake, FakeFault, FakeFaults, Fakes,
    VanChange, VanExportSettings, VanMark, VanTarget, VanTruth,
};
use super::shared::{ApiRequest, Shared, StatsSnapshot};
use super::wire::{
    CreateWebhookRegistration, Lead, MessageType, WebhookConfig, WebhookRegistration,
};
use super::world::{PHONE_NUMBERS, Refusal, SandboxMessage, SeedPlan, World};

/// What a test does to the fakes the daemon reads back (Mobilize, Mobile Commons).
mod read_back;

/// The sandbox, as a constructor.
pub struct Sandbox;

/// A sandbox serving on `addr()`. Dropping it does not stop it; call `shutdown`.
pub struct RunningSandbox {
    addr: SocketAddr,
    shared: Arc<Shared>,
    fakes: Arc<Fakes>,
    cancel: CancellationToken,
    /// Stops the generated activity alone.
    activity: CancellationToken,
    server: JoinHandle<()>,
}

impl Sandbox {
    /// Seeds the account, binds, and serves `/v3`, `/v2`, the fake VAN (`/van/v4`), Action
    /// Network (`/actionnetwork/api/v2`), BigQuery (`/bigquery/v2`, tokens from
    /// `/bigquery/oauth2/token`), Mobilize (`/mobilize/v1`) and Mobile Commons
    /// (`/mobile_commons/api`), and `/_control` in the background.
    pub async fn spawn(config: SandboxConfig) -> anyhow::Result<RunningSandbox> {
        let per_organization = config.leads.div_ceil(config.organizations.max(1));
        if per_organization > PHONE_NUMBERS as usize {
            anyhow::bail!(
                "{} leads over {} organizations: at most {PHONE_NUMBERS} numbers per organization",
                config.leads,
                config.organizations.max(1)
            );
        }
        let cancel = CancellationToken::new();
        let mut world = World::new(config.seed, config.account_sync);
        world.seed(SeedPlan {
            leads: config.leads,
            organizations: config.organizations,
        });
        let van_people = world.seed_van_ids();
        let leads: Vec<Lead> = world.leads.values().cloned().collect();
        let fakes = Arc::new(Fakes::new(&config, &van_people, &leads, cancel.clone()));
        let deliverer = Deliverer::start(
            config.signing.clone(),
            config.delivery_faults.clone(),
            config.delivery_attempts,
            config.delivery_backoff,
            config.seed,
            cancel.clone(),
        );
        let deliver_to = config.deliver_to.clone();
        let activity = config.activity_interval;
        let shared = Arc::new(Shared::new(config, world, deliverer));
        if let Some(target) = deliver_to {
            for config in [WebhookConfig::all_consent(), WebhookConfig::all_messages()] {
                shared
                    .with_world(|w| {
                        w.create_registration(CreateWebhookRegistration {
                            target_url: target.url.clone(),
                            secret_for_hmac: SecretString::from(target.secret.clone()),
                            config,
                        })
                    })
                    .map_err(|r| anyhow::anyhow!("--deliver-to: {}", r.message))?;
            }
        }
        let listener = tokio::net::TcpListener::bind(shared.config.bind).await?;
        let addr = listener.local_addr()?;
        let app = super::api::router(shared.clone())
            .merge(super::control::routes().with_state(shared.clone()))
            .merge(super::destinations::router(fakes.clone()));
        let stop = cancel.clone();
        let server = tokio::spawn(async move {
            let served = axum::serve(listener, app)
                .with_graceful_shutdown(async move { stop.cancelled().await })
                .await;
            if let Err(e) = served {
                tracing::error!(error = %e, "sandbox server stopped");
            }
        });
        let activity_stop = cancel.child_token();
        if let Some(interval) = activity {
            tokio::spawn(activity_loop(
                shared.clone(),
                interval,
                activity_stop.clone(),
            ));
        }
        Ok(RunningSandbox {
            addr,
            shared,
            fakes,
            cancel,
            activity: activity_stop,
            server,
        })
    }
}

async fn activity_loop(shared: Arc<Shared>, interval: Duration, cancel: CancellationToken) {
    let mut ticker = tokio::time::interval(interval.max(Duration::from_millis(10)));
    loop {
        tokio::select! {
            _ = cancel.cancelled() => return,
            _ = ticker.tick() => {}
        }
        // Checked under the world's lock, so no step starts after `stop_activity` returns.
        let Some(step) = shared.with_world(|w| (!cancel.is_cancelled()).then(|| w.activity_step()))
        else {
            return;
        };
        for (lead, opted_out) in &step.consent {
            tracing::info!(lead = %lead, opted_out, "sandbox: consent changed");
        }
        tracing::debug!(sent = ?step.sent, advanced = step.advanced, "sandbox: activity");
    }
}

impl RunningSandbox {
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The service's `{base_url}`, without `/v3`: clients append the version.
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn config(&self) -> &SandboxConfig {
        &self.shared.config
    }

    /// A person texts STOP to an organization: the lead with that number opts out (and,
    /// with account sync, every lead of the account with the number). Returns the leads
    /// that changed.
    pub fn text_stop(&self, organization_id: &str, phone: &str) -> Result<Vec<Lead>, Refusal> {
        self.shared.text(organization_id, phone, true)
    }

    /// A person texts START: the opposite of [`RunningSandbox::text_stop`].
    pub fn text_start(&self, organization_id: &str, phone: &str) -> Result<Vec<Lead>, Refusal> {
        self.shared.text(organization_id, phone, false)
    }

    pub fn send_message(
        &self,
        lead_id: &str,
        kind: MessageType,
    ) -> Result<SandboxMessage, Refusal> {
        self.shared.send_message(lead_id, kind)
    }

    /// Moves the named messages (every one still moving, if none named) one status on.
    pub fn advance_messages(&self, ids: &[String]) -> Vec<SandboxMessage> {
        self.shared.advance_messages(ids)
    }

    /// Stops the generated activity (if any): from now on only the caller changes the
    /// account. Deliveries already queued still go out.
    pub fn stop_activity(&self) {
        self.activity.cancel();
        // Waits for a step in progress: steps run under the world's lock.
        self.shared.read(|_| ());
    }

    /// One step of generated activity.
    pub fn activity_step(&self) {
        self.shared.with_world(|w| w.activity_step());
    }

    /// Registers a webhook target directly (no token needed).
    pub fn register_webhook(
        &self,
        target_url: &str,
        secret: &str,
        config: WebhookConfig,
    ) -> Result<WebhookRegistration, Refusal> {
        self.shared.with_world(|w| {
            w.create_registration(CreateWebhookRegistration {
                target_url: target_url.to_owned(),
                secret_for_hmac: SecretString::from(secret.to_owned()),
                config,
            })
        })
    }

    pub fn set_api_faults(&self, faults: ApiFaults) {
        self.shared.set_api_faults(faults);
    }

    /// The next resource requests get these statuses, in order.
    pub fn fail_next(&self, statuses: &[u16]) {
        self.shared.fail_next(statuses);
    }

    pub fn set_delivery_faults(&self, faults: DeliveryFaults) {
        self.shared.deliverer.set_faults(faults);
    }

    /// Every token stops being accepted, as if it had expired.
    pub fn revoke_tokens(&self) {
        self.shared.revoke_tokens();
    }

    pub fn truth(&self) -> Truth {
        self.shared.truth()
    }

    pub fn leads(&self) -> Vec<Lead> {
        self.shared.read(|w| w.leads.values().cloned().collect())
    }

    pub fn messages(&self) -> Vec<SandboxMessage> {
        self.shared.read(|w| w.messages.values().cloned().collect())
    }

    pub fn stats(&self) -> StatsSnapshot {
        self.shared.stats()
    }

    /// The most recent resource requests (up to 10,000), oldest first: which endpoints,
    /// of which version, a client used.
    pub fn requests(&self) -> Vec<ApiRequest> {
        self.shared.requests()
    }

    /// The most recent delivery records, attempt by attempt, oldest first: at most
    /// [`DELIVERY_RECORDS_KEPT`](super::DELIVERY_RECORDS_KEPT). For totals, see
    /// [`RunningSandbox::delivery_counts`].
    pub fn deliveries(&self) -> Vec<DeliveryRecord> {
        self.shared.deliverer.records()
    }

    /// What became of every event since the start: dropped, delivered, waiting...
    pub fn delivery_counts(&self) -> DeliveryCounts {
        self.shared.deliverer.counts()
    }

    /// Deliveries not yet done (delivered, dropped or given up on).
    pub fn pending_deliveries(&self) -> usize {
        self.shared.deliverer.pending()
    }

    /// Waits until no delivery is pending; `false` if `timeout` passed first.
    pub async fn settle(&self, timeout: Duration) -> bool {
        self.shared.deliverer.settle(timeout).await
    }

    /// The fake VAN's base URL (`.../van/v4`), as a destination's `base_url`.
    pub fn van_url(&self) -> String {
        format!("http://{}/van/v4", self.addr)
    }

    /// The fake Action Network's base URL (`.../actionnetwork/api/v2`).
    pub fn action_network_url(&self) -> String {
        format!("http://{}/actionnetwork/api/v2", self.addr)
    }

    /// Everything the fake VAN holds: committees, people and their phones, canvass
    /// responses, request counts.
    pub fn van_truth(&self) -> VanTruth {
        self.fakes.van_truth()
    }

    /// Everything the fake Action Network holds: people, signups, request counts.
    pub fn action_network_truth(&self) -> ActionNetworkTruth {
        self.fakes.action_network_truth()
    }

    /// The fake BigQuery's base URL (`.../bigquery/v2`), as a client's API root.
    pub fn bigquery_url(&self) -> String {
        format!("http://{}/bigquery/v2", self.addr)
    }

    /// The fake BigQuery's OAuth 2.0 token endpoint (`.../bigquery/oauth2/token`): a service
    /// account key file's `token_uri`, and its JWTs' `aud`.
    pub fn bigquery_token_url(&self) -> String {
        format!("http://{}/bigquery/oauth2/token", self.addr)
    }

    /// Everything the fake BigQuery holds: datasets, tables and views with their rows in
    /// order, the accounts whose keys it knows, its settings, counts and request counts.
    pub fn bigquery_truth(&self) -> BigQueryTruth {
        self.fakes.bigquery_truth()
    }

    /// A BigQuery dataset exists from now on (any project). `false` if it did already.
    pub fn bigquery_add_dataset(&self, project: &str, dataset: &str) -> bool {
        self.fakes.bigquery_add_dataset(project, dataset)
    }

    /// The `expires_in` (and lifetime) of the BigQuery access tokens issued from now on
    /// (3599 by default): a short one makes a client renew its token.
    pub fn bigquery_set_token_lifetime(&self, secs: u64) {
        self.fakes.bigquery_set_token_lifetime(secs);
    }

    /// How long BigQuery remembers a stored row's `insertId` to drop a repeat (60 s by
    /// default; zero: never).
    pub fn bigquery_set_dedup_window(&self, window: Duration) {
        self.fakes.bigquery_set_dedup_window(window);
    }

    /// BigQuery's `insertAll` answers rows whose `field` equals `value` with a per-row error
    /// of `reason` (`invalid`, say), though they are valid.
    pub fn bigquery_refuse_rows(&self, field: &str, value: &str, reason: &str) {
        self.fakes.bigquery_refuse_rows(field, value, reason);
    }

    /// No row refused any more.
    pub fn bigquery_clear_refusals(&self) {
        self.fakes.bigquery_clear_refusals();
    }

    /// Hostile: a data team deletes table `table` of the default dataset with its rows (as
    /// `bq rm` does); `false` if there was none.
    pub fn bigquery_drop_table(&self, table: &str) -> bool {
        self.fakes.bigquery_drop_table(table)
    }

    /// BigQuery's token endpoint accepts JWTs of `client_email` signed with the RSA key of
    /// `public_key_pem` (the test key's account is known from the start). `Err` if the PEM
    /// is not an RSA public key.
    pub fn bigquery_add_key(&self, client_email: &str, public_key_pem: &str) -> Result<(), String> {
        self.fakes.bigquery_add_key(client_email, public_key_pem)
    }

    /// The next `count` requests to `fake` get `fault` (after any already queued).
    pub fn fake_fail_next(&self, fake: Fake, count: usize, fault: FakeFault) {
        self.fakes.board(fake).push(count, fault);
    }

    /// Every answer of `fake` waits this long first (zero: none, the default).
    pub fn fake_latency(&self, fake: Fake, latency: Duration) {
        self.fakes.board(fake).set_latency(latency);
    }

    /// No fault queued and no latency for `fake`.
    pub fn fake_clear_faults(&self, fake: Fake) {
        self.fakes.board(fake).clear();
    }

    pub fn fake_faults(&self, fake: Fake) -> FakeFaults {
        self.fakes.board(fake).faults()
    }

    /// The VAN committee of `api_key` answers every request with `status` (401 or 403)
    /// until called again with `None`. `false` if no committee has the key.
    pub fn van_revoke(&self, api_key: &str, status: Option<u16>) -> bool {
        self.fakes.van_revoke(api_key, status)
    }

    /// The VAN committee of `api_key` lists the contact type "SMS Text" (`true`, the
    /// default) or lacks it. `false` if no committee has the key.
    pub fn van_set_sms_text(&self, api_key: &str, present: bool) -> bool {
        self.fakes.van_sms_text(api_key, present)
    }

    /// A new VAN person with this number (E.164), tied to no lead; returns the VAN ID.
    pub fn van_add_person(&self, phone: &str) -> u64 {
        self.fakes.van_add_person(phone)
    }

    /// A user of the VAN committee of `api_key` (a phone banker, by name) marks a person:
    /// "Do Not Text" as a canvass response, or the phone's opt-in status out or in. A phone
    /// nobody in VAN has makes a new person. Returns the change logged, which the committee's
    /// export jobs read (never left out by `excludeChangesFromSelf`).
    pub fn van_mark(
        &self,
        api_key: &str,
        target: &VanTarget,
        mark: VanMark,
        user: &str,
    ) -> Result<VanChange, String> {
        self.fakes.van_mark(api_key, target, mark, user)
    }

    /// `count` changes by a user in the VAN committee of `api_key`, spread over the last
    /// hour: phone opt-outs (`Contacts`), or "Do Not Text" canvass responses
    /// (`ContactHistory`). Kept as one range, made row by row as files are served. Returns
    /// the first seeded VAN ID (the others follow it), or `None` if no committee has the key.
    pub fn van_seed_changes(&self, api_key: &str, count: u64, do_not_text: bool) -> Option<u64> {
        self.fakes.van_seed(api_key, count, do_not_text)
    }

    /// How the export jobs of the VAN committee of `api_key` behave from now on (polls
    /// before `Complete`, rows per file, and the faults). `false` if no committee has the key.
    pub fn van_set_export(&self, api_key: &str, settings: VanExportSettings) -> bool {
        self.fakes.van_set_export(api_key, settings)
    }

    /// A supporter unsubscribes their mobile number in Action Network (status
    /// `unsubscribed`, `modified_date` now; a person is made when nobody has the number).
    /// Returns the person and whether it was made; `None` if `phone` is not a number.
    pub fn action_network_unsubscribe(&self, phone: &str) -> Option<(ActionNetworkPerson, bool)> {
        self.fakes.action_network_unsubscribe(phone)
    }

    /// `count` subscribed supporters in Action Network, a mobile number each, modified over
    /// the last hour.
    pub fn action_network_seed(&self, count: u64) {
        self.fakes.action_network_seed(count);
    }

    /// The fault of Action Network's people listing whose `next` never ends (`true`), or
    /// none (`false`, the default).
    pub fn action_network_endless_next(&self, on: bool) {
        self.fakes.action_network_endless_next(on);
    }

    /// Hostile: the first page of Action Network's people listing gives `href` as its
    /// `next` link, exactly as given (`None`: the listing's own links again).
    pub fn action_network_next_href(&self, href: Option<&str>) {
        self.fakes.action_network_next_href(href.map(str::to_owned));
    }

    /// Hostile: an Action Network person with one mobile number written as `number` (no
    /// country code, `00`-prefixed, not a number), `status`, and `modified_date`, as given
    /// (one in 2099).
    pub fn action_network_add_person(
        &self,
        number: &str,
        status: &str,
        modified_date: &str,
    ) -> ActionNetworkPerson {
        self.fakes
            .action_network_add_person(number, status, modified_date)
    }

    /// Stops serving and delivering, and waits for the server to finish.
    pub async fn shutdown(self) {
        self.cancel.cancel();
        let _ = self.server.await;
    }
}
