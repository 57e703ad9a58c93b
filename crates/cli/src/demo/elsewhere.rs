//! Opt-outs given where the daemon cannot hear them, played at the end of the run: a phone
//! banker marks "Do Not Text" in VAN, a supporter unsubscribes in Action Network, people
//! text a campaign's Twilio number ("stop by at 5?", "Opt out", "please stop texting me
//! about the rally"). The daemon's sources read the first two back and are posted the
//! texts; the two replies held for review are decided over the admin API as a person
//! would; the demo waits for each opt-out to reach the service, the CRM and the other
//! systems, and says how long each took.

use std::time::{Duration, Instant};

use outreach_sync::settings::kinds::twilio::TwilioSettings;
use outreach_sync::settings::{SourceSettings, SourceSystem};
use outreach_sync_sandbox::destinations::{VanMark, VanTarget};
use outreach_sync_sandbox::wire::Lead;
use outreach_sync_sandbox::{
    DEFAULT_ACTION_NETWORK_KEY, DEFAULT_TWILIO_AUTH_TOKEN, DEFAULT_VAN_KEY, RunningSandbox,
};

use super::receiver::DemoSubscriber;

/// How often the demo's sources read.
const EVERY_SECS: u64 = 2;
/// The longest the demo waits for one opt-out to reach everywhere.
const WAIT: Duration = Duration::from_secs(30);

/// The demo's sources: the sandbox's VAN committee and Action Network, read back with the
/// destinations' keys (so that what the daemon wrote there is not read back as news).
pub(super) fn demo_sources(sandbox: &RunningSandbox) -> Vec<SourceSettings> {
    let mut van = SourceSettings::new(
        "van",
        SourceSystem::Van(Default::default()),
        &sandbox.van_url(),
        DEFAULT_VAN_KEY,
    );
    let mut action_network = SourceSettings::new(
        "action-network",
        SourceSystem::ActionNetwork(Default::default()),
        &sandbox.action_network_url(),
        DEFAULT_ACTION_NETWORK_KEY,
    );
    for source in [&mut van, &mut action_network] {
        source.every_secs = EVERY_SECS;
        source.requests_per_second = 50;
    }
    vec![van, action_network, twilio_source()]
}

/// The demo's Twilio source's name, and the URL given at Twilio for it: the demo posts to the
/// daemon's own address, signed for this one, as a proxy in front of it would pass it on.
const TWILIO: &str = "twilio";
const TWILIO_PUBLIC_URL: &str = "https://sync.example.org/sources/twilio";

/// A campaign's Twilio number, posted to by the sandbox playing Twilio.
fn twilio_source() -> SourceSettings {
    let mut twilio = SourceSettings::new(
        TWILIO,
        SourceSystem::Twilio(TwilioSettings {
            auth_token: Some(DEFAULT_TWILIO_AUTH_TOKEN.into()),
            public_url: TWILIO_PUBLIC_URL.to_owned(),
            ..TwilioSettings::default()
        }),
        "",
        "",
    );
    twilio.api_key = None;
    twilio
}

/// Where one opt-out given elsewhere had reached, and how long after it was given.
struct Reached {
    service: Option<Duration>,
    crm: bool,
    other: bool,
}

/// Who decides the demo's replies held for review.
const REVIEWER: &str = "demo";

/// The daemon's listeners, as the demo reaches them.
pub(super) struct Daemon<'a> {
    /// The ingest listener (the Twilio source's posts).
    pub ingest: std::net::SocketAddr,
    /// The admin listener, and its token (the replies decided).
    pub admin: std::net::SocketAddr,
    pub admin_token: &'a str,
}

/// Plays each, waits for each, and gives the lines that say what happened.
pub(super) async fn give(
    sandbox: &RunningSandbox,
    crm: &DemoSubscriber,
    daemon: &Daemon<'_>,
) -> Vec<String> {
    let mut lines = given_in_crms(sandbox, crm).await;
    lines.extend(texted(sandbox, crm, daemon).await);
    lines
}

/// What a text to the campaign's number is, as the daemon's classifier reads it.
#[derive(Clone, Copy, PartialEq)]
enum Reply {
    /// An opt-out in the words of the rules.
    OptOut,
    /// Held for review; the demo decides it an opt-out (`true`) or not.
    Review(bool),
}

/// Three texts to the campaign's Twilio number from two people: a question held for review
/// and decided not an opt-out, an opt-out in the FCC's words, and a sentence held for
/// review and decided an opt-out. Each opt-out is waited for at the service, the CRM and
/// Action Network (a decided one from its decision).
async fn texted(
    sandbox: &RunningSandbox,
    crm: &DemoSubscriber,
    daemon: &Daemon<'_>,
) -> Vec<String> {
    let mut lines = vec![
        "texts to the campaign's Twilio number, posted to the daemon's twilio source:".to_owned(),
    ];
    let people = texting_with_van_id(sandbox);
    let [(first, _), (second, _)] = people.as_slice() else {
        lines.push("  (no two leads left to text from)".to_owned());
        return lines;
    };
    let post_to = format!("http://{}/sources/{TWILIO}", daemon.ingest);
    let http = reqwest::Client::new();
    for (from, words, reply) in [
        (first, "stop by at 5?", Reply::Review(false)),
        (first, "Opt out", Reply::OptOut),
        (
            second,
            "please stop texting me about the rally",
            Reply::Review(true),
        ),
    ] {
        let sid = outreach_sync_sandbox::cli::new_message_sid();
        let params =
            outreach_sync_sandbox::twilio::inbound(&sid, &from.phone_number, "+15005550006", words);
        let target = outreach_sync_sandbox::twilio::Target {
            post_to: &post_to,
            signed_for: TWILIO_PUBLIC_URL,
        };
        let given = Instant::now();
        let answer =
            outreach_sync_sandbox::twilio::send(&http, target, DEFAULT_TWILIO_AUTH_TOKEN, &params)
                .await;
        let what = format!("{} texted {words:?}", from.phone_number);
        let line = match answer {
            Ok((200, _)) if reply == Reply::OptOut => {
                let reached = wait(sandbox, crm, from, given, |s| in_action_network(s, from)).await;
                describe(&what, &reached, "Action Network")
            }
            Ok((200, _)) => {
                let opt_out = reply == Reply::Review(true);
                match decide(&http, daemon, from, words, opt_out).await {
                    Err(error) => format!("  {what}: held for review, not decided: {error}"),
                    Ok(()) if !opt_out => format!(
                        "  {what}: held for review, decided not an opt-out by {REVIEWER}, nothing recorded"
                    ),
                    Ok(()) => {
                        let decided = Instant::now();
                        let reached =
                            wait(sandbox, crm, from, decided, |s| in_action_network(s, from)).await;
                        let what =
                            format!("{what}: held for review, decided an opt-out by {REVIEWER}");
                        describe(&what, &reached, "Action Network")
                    }
                }
            }
            Ok((status, body)) => format!("  {what}: the daemon answered {status}: {body}"),
            Err(error) => format!("  {what}: not posted: {error}"),
        };
        lines.push(line);
    }
    lines
}

/// Waits for the reply `words` of `from` to be held for review (the admin API's list), then
/// decides it as a person would (`POST /v1/review/{id}`).
async fn decide(
    http: &reqwest::Client,
    daemon: &Daemon<'_>,
    from: &Lead,
    words: &str,
    opt_out: bool,
) -> Result<(), String> {
    let admin = |path: &str| format!("http://{}{path}", daemon.admin);
    let held = Instant::now();
    let id = loop {
        let listed: serde_json::Value = http
            .get(admin("/v1/review"))
            .bearer_auth(daemon.admin_token)
            .send()
            .await
            .map_err(|e| e.to_string())?
            .json()
            .await
            .map_err(|e| e.to_string())?;
        let found = listed["items"].as_array().and_then(|items| {
            items
                .iter()
                .find(|i| i["phoneNumber"] == from.phone_number.as_str() && i["text"] == words)
                .and_then(|i| i["id"].as_i64())
        });
        match found {
            Some(id) => break id,
            None if held.elapsed() > WAIT => {
                return Err(format!("not held for review within {} s", WAIT.as_secs()));
            }
            None => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    };
    let decision = if opt_out { "opt_out" } else { "not_opt_out" };
    let answer = http
        .post(admin(&format!("/v1/review/{id}")))
        .bearer_auth(daemon.admin_token)
        .json(&serde_json::json!({"decision": decision, "by": REVIEWER}))
        .send()
        .await
        .map_err(|e| e.to_string())?;
    match answer.status().as_u16() {
        200 => Ok(()),
        status => Err(format!(
            "the daemon answered {status}: {}",
            answer.text().await.unwrap_or_default()
        )),
    }
}

/// Whether Action Network holds `lead`'s number as unsubscribed by the daemon.
fn in_action_network(sandbox: &RunningSandbox, lead: &Lead) -> bool {
    let number = lead.phone_number.trim_start_matches('+');
    sandbox
        .action_network_truth()
        .signups
        .iter()
        .any(|p| p.phone_numbers.iter().any(|n| n.number == number))
}

/// A phone banker's "Do Not Text" in VAN and a supporter unsubscribing in Action Network,
/// each waited for at the service, the CRM and the other system.
async fn given_in_crms(sandbox: &RunningSandbox, crm: &DemoSubscriber) -> Vec<String> {
    let mut candidates = texting_with_van_id(sandbox).into_iter();
    let mut lines = vec!["opt-outs given elsewhere, read back by the daemon's sources:".to_owned()];
    let Some((lead, van_id)) = candidates.next() else {
        lines.push("  (no lead with a VAN ID left to play them on)".to_owned());
        return lines;
    };
    let given = Instant::now();
    let marked = sandbox.van_mark(
        DEFAULT_VAN_KEY,
        &VanTarget::VanId(van_id),
        VanMark::DoNotText,
        "phone banker",
    );
    let line = match marked {
        Ok(_) => {
            let reached = wait(sandbox, crm, &lead, given, |s| in_action_network(s, &lead)).await;
            describe(
                &format!(
                    "VAN: a phone banker marked {} \"Do Not Text\"",
                    lead.phone_number
                ),
                &reached,
                "Action Network",
            )
        }
        Err(error) => format!("  VAN: could not mark {}: {error}", lead.phone_number),
    };
    lines.push(line);
    // Chosen now: the service's activity may have opted the other candidate out meanwhile.
    let first = lead.phone_number.clone();
    let Some((lead, van_id)) = texting_with_van_id(sandbox)
        .into_iter()
        .chain(candidates)
        .find(|(l, _)| l.phone_number != first)
    else {
        return lines;
    };
    let given = Instant::now();
    let line = match sandbox.action_network_unsubscribe(&lead.phone_number) {
        Some(_) => {
            let reached = wait(sandbox, crm, &lead, given, |s| {
                s.van_truth()
                    .canvass_responses
                    .iter()
                    .any(|r| r.van_id == van_id)
            })
            .await;
            describe(
                &format!("Action Network: {} unsubscribed", lead.phone_number),
                &reached,
                "VAN",
            )
        }
        None => format!(
            "  Action Network: could not unsubscribe {}",
            lead.phone_number
        ),
    };
    lines.push(line);
    lines
}

/// Two leads of the sandbox not opted out, of two numbers no other lead opted out holds,
/// whose VAN IDs the sandbox knows.
fn texting_with_van_id(sandbox: &RunningSandbox) -> Vec<(Lead, u64)> {
    let leads = sandbox.leads();
    let opted_out: std::collections::HashSet<&str> = leads
        .iter()
        .filter(|l| l.global_opted_out)
        .map(|l| l.phone_number.as_str())
        .collect();
    let mut numbers = std::collections::HashSet::new();
    leads
        .iter()
        .filter(|l| !opted_out.contains(l.phone_number.as_str()))
        .filter_map(|l| {
            let id = l.custom_fields.get("VanID")?.parse().ok()?;
            numbers
                .insert(l.phone_number.clone())
                .then(|| (l.clone(), id))
        })
        .take(2)
        .collect()
}

/// Waits until `lead` is opted out at the service, the CRM was told, and `other` says the
/// other system has it (or [`WAIT`] passed).
async fn wait(
    sandbox: &RunningSandbox,
    crm: &DemoSubscriber,
    lead: &Lead,
    given: Instant,
    other: impl Fn(&RunningSandbox) -> bool,
) -> Reached {
    let mut reached = Reached {
        service: None,
        crm: false,
        other: false,
    };
    while given.elapsed() < WAIT {
        if reached.service.is_none()
            && sandbox
                .leads()
                .iter()
                .any(|l| l.id == lead.id && l.global_opted_out)
        {
            reached.service = Some(given.elapsed());
        }
        reached.crm = reached.crm
            || crm
                .received()
                .read_back
                .iter()
                .any(|(number, _)| *number == lead.phone_number);
        reached.other = reached.other || other(sandbox);
        if reached.service.is_some() && reached.crm && reached.other {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    reached
}

fn describe(what: &str, reached: &Reached, other: &str) -> String {
    let service = match reached.service {
        Some(after) => format!(
            "opted out at the service {:.1} s later",
            after.as_secs_f64()
        ),
        None => format!("NOT at the service within {} s", WAIT.as_secs()),
    };
    let yes_no = |had: bool| if had { "" } else { "NOT " };
    format!(
        "  {what}: {service}, {}in the CRM, {}in {other}",
        yes_no(reached.crm),
        yes_no(reached.other)
    )
}
