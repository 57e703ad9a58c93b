//! `outreach-sync sandbox`: the sandbox as a standalone process.

use std::net::SocketAddr;
use std::time::Duration;

use serde_json::{Value, json};

use super::config::{
    DEFAULT_CLIENT_ID, DEFAULT_CLIENT_SECRET, DEFAULT_TWILIO_AUTH_TOKEN, DEFAULT_VAN_KEY,
};
use super::{ApiFaults, DeliverTo, DeliveryFaults, Sandbox, SandboxConfig};

mod opt_out;
mod texting;
pub use opt_out::OptOutThere;
pub use texting::{BandwidthSend, TelnyxSend};

/// Flags of `outreach-sync sandbox` (the command-line contract).
#[derive(Debug, Clone, clap::Args)]
pub struct SandboxArgs {
    /// Address of the v3 API (served under /v3).
    #[arg(long, default_value = "127.0.0.1:9090")]
    pub bind: SocketAddr,
    #[arg(long, default_value = DEFAULT_CLIENT_ID)]
    pub client_id: String,
    #[arg(long, default_value = DEFAULT_CLIENT_SECRET)]
    pub client_secret: String,
    /// Register a webhook target for every event kind at start.
    #[arg(long)]
    pub deliver_to: Option<String>,
    /// Signing secret of the registration made by --deliver-to.
    #[arg(long)]
    pub secret: Option<String>,
    /// Leads to seed.
    #[arg(long, default_value_t = 100)]
    pub leads: usize,
    /// Organizations to seed the leads over.
    #[arg(long, default_value_t = 2)]
    pub organizations: usize,
    #[arg(long, default_value_t = 0.0)]
    pub drop_rate: f64,
    #[arg(long, default_value_t = 0.0)]
    pub duplicate_rate: f64,
    #[arg(long)]
    pub reorder: bool,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Each delivery waits up to this many milliseconds before its first attempt.
    #[arg(long, default_value_t = 0)]
    pub max_delay_ms: u64,
    /// Share of API requests answered 429.
    #[arg(long, default_value_t = 0.0)]
    pub rate_429: f64,
    /// Share of API requests answered 500/503.
    #[arg(long, default_value_t = 0.0)]
    pub rate_5xx: f64,
    /// Lifetime of minted tokens, in seconds.
    #[arg(long, default_value_t = 7200)]
    pub token_lifetime_secs: u64,
    /// Generated activity (messages, STOP/START) every this many milliseconds; 0 for none.
    #[arg(long, default_value_t = 1000)]
    pub activity_ms: u64,
    /// Opt-out and opt-in change only the lead addressed, not every lead with the number.
    #[arg(long)]
    pub no_account_sync: bool,
    /// Act on a running sandbox instead of starting one.
    #[command(subcommand)]
    pub command: Option<SandboxCommand>,
}

/// What a person does in the campaign's other systems, played on a running sandbox through
/// its controls.
#[derive(Debug, Clone, clap::Subcommand)]
pub enum SandboxCommand {
    /// A VAN user (a phone banker) marks a person "Do Not Text" (a canvass response), or
    /// sets their phone's opt-in status (--phone-status: out; --opt-in: back in).
    VanMark {
        /// The running sandbox (`http://127.0.0.1:9090`).
        #[arg(long, value_name = "SANDBOX_URL")]
        url: String,
        /// The committee's API key.
        #[arg(long, value_name = "KEY", default_value = DEFAULT_VAN_KEY)]
        api_key: String,
        #[arg(
            long,
            value_name = "N",
            conflicts_with = "phone",
            required_unless_present = "phone"
        )]
        van_id: Option<u64>,
        /// A number in E.164 (a person is made in VAN when nobody has it).
        #[arg(long, value_name = "P")]
        phone: Option<String>,
        /// Set the phone's opt-in status to opted out instead of marking "Do Not Text".
        #[arg(long)]
        phone_status: bool,
        /// Set the phone's opt-in status back to opted in.
        #[arg(long, conflicts_with = "phone_status")]
        opt_in: bool,
        /// The user's name, as VAN records who made the change.
        #[arg(long, default_value = "Phone banker")]
        user: String,
    },
    /// A supporter unsubscribes their mobile number in Action Network.
    AnUnsubscribe {
        #[arg(long, value_name = "SANDBOX_URL")]
        url: String,
        /// A number in E.164.
        #[arg(long, value_name = "P")]
        phone: String,
    },
    /// A supporter opts out of texts on Mobilize (`sms_opt_in_status` `OPT_OUT`).
    MobilizeOptOut(OptOutThere),
    /// A person texts STOP to a Mobile Commons campaign (status `Texted a STOP word`).
    MobileCommonsStop(OptOutThere),
    /// A person texts a campaign's Twilio number: the message posted as Twilio's messaging
    /// webhook posts it, form-encoded and signed (`X-Twilio-Signature`), to a daemon's
    /// twilio source. Needs no running sandbox.
    TwilioSend {
        /// Where to post: the source's URL (`http://127.0.0.1:8080/sources/twilio-main`).
        #[arg(long, value_name = "URL")]
        url: String,
        /// The URL the message is signed for, as given at Twilio (the source's
        /// `public_url`); default: --url.
        #[arg(long, value_name = "URL")]
        public_url: Option<String>,
        /// The auth token it is signed with.
        #[arg(long, value_name = "TOKEN", default_value = DEFAULT_TWILIO_AUTH_TOKEN)]
        auth_token: String,
        /// The person's number, in E.164.
        #[arg(long, value_name = "P")]
        from: String,
        /// The campaign's Twilio number.
        #[arg(long, value_name = "P", default_value = "+15005550006")]
        to: String,
        /// What the person wrote.
        #[arg(long)]
        body: String,
        /// The message's sid (default: a new one); the same sid twice is Twilio retrying.
        #[arg(long, value_name = "SID")]
        message_sid: Option<String>,
    },
    /// A person texts a campaign's Telnyx number: the `message.received` event posted as
    /// Telnyx's messaging webhook posts it, JSON signed with Ed25519
    /// (`telnyx-signature-ed25519`, `telnyx-timestamp`), to a daemon's telnyx source. Needs
    /// no running sandbox.
    TelnyxSend(TelnyxSend),
    /// A person texts a campaign's Bandwidth number: the `message-received` callback posted
    /// as Bandwidth posts it, a JSON array, with the application's callback credentials
    /// (HTTP Basic, once challenged), to a daemon's bandwidth source. Needs no running
    /// sandbox.
    BandwidthSend(BandwidthSend),
}

/// A new message sid, as Twilio writes them: `SM` and 32 hexadecimal digits.
pub fn new_message_sid() -> String {
    format!("SM{:032x}", rand::random::<u128>())
}

/// Posts `body` to the control `path` of the sandbox at `url`; prints the answer.
async fn control(url: &str, path: &str, body: Value) -> anyhow::Result<()> {
    let target = format!("{}/_control{path}", url.trim_end_matches('/'));
    let response = reqwest::Client::new()
        .post(&target)
        .json(&body)
        .send()
        .await
        .map_err(|e| anyhow::anyhow!("{target}: {e}"))?;
    let status = response.status();
    let text = response.text().await.unwrap_or_default();
    if !status.is_success() {
        anyhow::bail!("{target}: {status}: {text}");
    }
    println!("{text}");
    Ok(())
}

async fn play(command: SandboxCommand) -> anyhow::Result<()> {
    match command {
        SandboxCommand::VanMark {
            url,
            api_key,
            van_id,
            phone,
            phone_status,
            opt_in,
            user,
        } => {
            let mark = match (phone_status, opt_in) {
                (_, true) => "optIn",
                (true, false) => "optOut",
                (false, false) => "doNotText",
            };
            let mut body = json!({"apiKey": api_key, "mark": mark, "user": user});
            match (van_id, phone) {
                (Some(id), _) => body["vanId"] = json!(id),
                (None, Some(phone)) => body["phoneNumber"] = json!(phone),
                (None, None) => anyhow::bail!("--van-id or --phone is required"),
            }
            control(&url, "/van/mark", body).await
        }
        SandboxCommand::AnUnsubscribe { url, phone } => {
            control(
                &url,
                "/actionnetwork/unsubscribe",
                json!({"phoneNumber": phone}),
            )
            .await
        }
        SandboxCommand::TwilioSend {
            url,
            public_url,
            auth_token,
            from,
            to,
            body,
            message_sid,
        } => {
            let sid = message_sid.unwrap_or_else(new_message_sid);
            let params = super::twilio::inbound(&sid, &from, &to, &body);
            let target = super::twilio::Target {
                post_to: &url,
                signed_for: public_url.as_deref().unwrap_or(&url),
            };
            let (status, answer) =
                super::twilio::send(&reqwest::Client::new(), target, &auth_token, &params)
                    .await
                    .map_err(|e| anyhow::anyhow!("{url}: {e}"))?;
            if !(200..300).contains(&status) {
                anyhow::bail!("{url}: {status}: {answer}");
            }
            println!("{sid}: {status} {answer}");
            Ok(())
        }
        SandboxCommand::MobilizeOptOut(opt_out) => opt_out.run("/mobilize/opt-out").await,
        SandboxCommand::MobileCommonsStop(stop) => stop.run("/mobile_commons/stop").await,
        SandboxCommand::TelnyxSend(send) => send.run().await,
        SandboxCommand::BandwidthSend(send) => send.run().await,
    }
}

impl SandboxArgs {
    /// The in-process configuration these flags describe.
    pub(crate) fn to_config(&self) -> anyhow::Result<SandboxConfig> {
        for (name, rate) in [
            ("--drop-rate", self.drop_rate),
            ("--duplicate-rate", self.duplicate_rate),
            ("--rate-429", self.rate_429),
            ("--rate-5xx", self.rate_5xx),
        ] {
            if !(0.0..=1.0).contains(&rate) {
                anyhow::bail!("{name} must be between 0 and 1, got {rate}");
            }
        }
        let deliver_to = match (&self.deliver_to, &self.secret) {
            (Some(url), Some(secret)) => Some(DeliverTo {
                url: url.clone(),
                secret: secret.clone(),
            }),
            (Some(_), None) => anyhow::bail!("--deliver-to needs --secret (the signing secret)"),
            (None, Some(_)) => anyhow::bail!("--secret is only used with --deliver-to"),
            (None, None) => None,
        };
        Ok(SandboxConfig {
            bind: self.bind,
            client_id: self.client_id.clone(),
            client_secret: self.client_secret.clone(),
            token_lifetime: Duration::from_secs(self.token_lifetime_secs.max(1)),
            seed: self.seed,
            leads: self.leads,
            organizations: self.organizations.max(1),
            account_sync: !self.no_account_sync,
            delivery_faults: DeliveryFaults {
                drop_rate: self.drop_rate,
                duplicate_rate: self.duplicate_rate,
                reorder: self.reorder,
                max_delay_ms: self.max_delay_ms,
            },
            api_faults: ApiFaults {
                rate_429: self.rate_429,
                rate_5xx: self.rate_5xx,
                retry_after_secs: None,
            },
            deliver_to,
            activity_interval: (self.activity_ms > 0)
                .then(|| Duration::from_millis(self.activity_ms)),
            ..SandboxConfig::default()
        })
    }
}

/// Runs the sandbox until SIGINT/SIGTERM; or, with a subcommand, acts on a running one.
pub async fn run(args: SandboxArgs) -> anyhow::Result<()> {
    if let Some(command) = args.command {
        return play(command).await;
    }
    let config = args.to_config()?;
    let sandbox = Sandbox::spawn(config).await?;
    let truth = sandbox.truth();
    println!(
        "sandbox: serving the v3 API at {}/v3 (and the v2.1 reads and consent update at /v2)",
        sandbox.base_url()
    );
    println!(
        "sandbox: client_id {} (the client secret is the one given with --client-secret)",
        args.client_id
    );
    println!(
        "sandbox: seeded {} leads over {} organizations (seed {})",
        truth.leads.len(),
        truth.organizations.len(),
        args.seed
    );
    for org in &truth.organizations {
        println!("sandbox:   organization {} ({})", org.id, org.name);
    }
    print_fakes(&sandbox);
    match &args.deliver_to {
        Some(url) => println!("sandbox: delivering consentUpdate-v1 and messageStatus-v1 to {url}"),
        None => println!(
            "sandbox: no webhook target yet (POST /v3/webhook_registrations, or --deliver-to)"
        ),
    }
    println!(
        "sandbox: test controls under {}/_control (truth, stop, start, messages, faults)",
        sandbox.base_url()
    );
    let mut report = tokio::time::interval(REPORT_EVERY);
    report.tick().await;
    let stop = shutdown_signal();
    tokio::pin!(stop);
    loop {
        tokio::select! {
            _ = &mut stop => break,
            _ = report.tick() => print_summary(&sandbox),
        }
    }
    println!("sandbox: stopping");
    sandbox.shutdown().await;
    Ok(())
}

/// Where the fakes of the campaign's systems are, and their keys.
fn print_fakes(sandbox: &super::RunningSandbox) {
    let config = sandbox.config();
    println!(
        "sandbox: NGP VAN (API v4) at {} (Basic auth: any application name, password KEY|MODE with mode 0 or 1)",
        sandbox.van_url()
    );
    for committee in &config.van_committees {
        // Sandbox keys, printed so they can be pasted into a destination's configuration.
        println!(
            "sandbox:   committee {:?}: api key {}{}",
            committee.name,
            committee.api_key,
            if committee.sms_text {
                ""
            } else {
                " (no \"SMS Text\" contact type)"
            }
        );
    }
    println!(
        "sandbox: Action Network (API v2) at {} (OSDI-API-Token: {})",
        sandbox.action_network_url(),
        config.action_network_key
    );
    println!(
        "sandbox: BigQuery (REST v2) at {} (bearer tokens from {} for the test key {})",
        sandbox.bigquery_url(),
        sandbox.bigquery_token_url(),
        super::BIGQUERY_TEST_KEY_PATH
    );
    println!(
        "sandbox: Mobilize (API v1) at {} (Authorization: Bearer {}; organization {})",
        sandbox.mobilize_url(),
        config.mobilize_key,
        super::MOBILIZE_ORGANIZATION_ID
    );
    println!(
        "sandbox: Mobile Commons (REST API, XML) at {} (HTTP Basic: {} / {}; campaign {})",
        sandbox.mobile_commons_url(),
        config.mobile_commons_username,
        config.mobile_commons_password,
        super::MOBILE_COMMONS_CAMPAIGN_ID
    );
    println!(
        "sandbox:   their truth and faults under {base}/_control/van, {base}/_control/actionnetwork, {base}/_control/bigquery, {base}/_control/mobilize and {base}/_control/mobile_commons",
        base = sandbox.base_url()
    );
    println!(
        "sandbox:   VAN's changed-entity export jobs at {}/changedEntityExportJobs (files under {}/van-files/); \
         play a phone banker or a supporter with `sandbox van-mark`, `sandbox an-unsubscribe`, `sandbox mobilize-opt-out` and `sandbox mobile-commons-stop`",
        sandbox.van_url(),
        sandbox.base_url()
    );
}

/// How often the running sandbox prints a summary line.
const REPORT_EVERY: Duration = Duration::from_secs(10);

fn print_summary(sandbox: &super::RunningSandbox) {
    let truth = sandbox.truth();
    let opted_out = truth.leads.iter().filter(|l| l.global_opted_out).count();
    let moving = truth.messages.iter().filter(|m| m.can_advance()).count();
    let d = sandbox.delivery_counts();
    let stats = sandbox.stats();
    println!(
        "sandbox: {} leads ({opted_out} opted out), {} messages ({moving} still moving); \
         {} events: {} delivered, {} dropped, {} given up, {} waiting ({} sent twice, \
         {} failed attempts); {} API requests, {} token requests",
        truth.leads.len(),
        truth.messages.len(),
        d.events,
        d.delivered,
        d.dropped,
        d.gave_up,
        d.waiting,
        d.duplicated,
        d.failed_attempts,
        stats.api_requests,
        stats.token_requests,
    );
}

async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => {}
                    _ = term.recv() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser as _;

    use super::*;

    #[derive(clap::Parser)]
    struct Line {
        #[command(flatten)]
        args: SandboxArgs,
    }

    #[test]
    fn van_mark_takes_a_van_id_or_a_phone_and_an_unsubscribe_a_phone() {
        let line = Line::try_parse_from([
            "sandbox",
            "van-mark",
            "--url",
            "http://127.0.0.1:9090",
            "--van-id",
            "5",
            "--phone-status",
        ])
        .expect("parses");
        assert!(matches!(
            line.args.command,
            Some(SandboxCommand::VanMark {
                van_id: Some(5),
                phone_status: true,
                opt_in: false,
                ..
            })
        ));
        for wrong in [
            vec!["sandbox", "van-mark", "--url", "u"],
            vec![
                "sandbox", "van-mark", "--url", "u", "--van-id", "5", "--phone", "+1",
            ],
            vec!["sandbox", "an-unsubscribe", "--url", "u"],
        ] {
            assert!(Line::try_parse_from(&wrong).is_err(), "{wrong:?}");
        }
        let plain = Line::try_parse_from(["sandbox", "--leads", "3"]).expect("parses");
        assert!(plain.args.command.is_none());
    }
}
