//! The posted sources the bench posts to beside the webhooks, one `[[source]]` of each kind
//! in the daemon's settings: how each is configured, where it is posted, what it answers once
//! a post is durable, and how one of its posts is prepared (body and headers, signed or
//! credentialed before the timed section, apart from the daemon's verifiers).
//!
//! Each post is a person's `STOP` to the campaign's number, with an id of its own (a record
//! of its own) from a number of its own (a real opt-out recorded). The Telnyx events and the
//! Bandwidth callbacks, and the Telnyx signatures, are made by the sandbox's own senders.
//! The sources are configured with the sandbox's defaults: the Ed25519 public key of its
//! test seed, its callback credentials.

use std::net::SocketAddr;

use base64::Engine as _;
use bytes::Bytes;
use chrono::Utc;
use http::{HeaderMap, HeaderName, HeaderValue};
use outreach_sync::settings::kinds::bandwidth::BandwidthSettings;
use outreach_sync::settings::kinds::telnyx::TelnyxSettings;
use outreach_sync::settings::kinds::twilio::TwilioSettings;
use outreach_sync::settings::{SourceSettings, SourceSystem};
use secrecy::SecretString;

use crate::Prepared;
use outreach_sync_sandbox::{
    DEFAULT_BANDWIDTH_PASSWORD, DEFAULT_BANDWIDTH_USERNAME, DEFAULT_TELNYX_PUBLIC_KEY,
    DEFAULT_TELNYX_SEED, bandwidth, telnyx,
};

/// The Twilio source's auth token and the URL given at Twilio (what is signed; the bench
/// posts to the daemon's loopback address, as a proxy would).
const TWILIO_TOKEN: &str = "bench-twilio-auth-token";
const TWILIO_PUBLIC_URL: &str = "https://sync.example.org/sources/twilio-bench";

/// The campaign's number every reply is sent to.
const CAMPAIGN_NUMBER: &str = "+15005550006";

/// A kind of posted source, in the order its phase runs in a round.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PostedKind {
    Twilio,
    Telnyx,
    Bandwidth,
}

impl PostedKind {
    pub const ALL: [PostedKind; 3] = [Self::Twilio, Self::Telnyx, Self::Bandwidth];

    /// The kind's name: its `[[source]]` kind, the ledger's `source` of what its posts
    /// record, and the prefix of its outbox rows' `dedup_key` (`KIND:NAME:ID`).
    pub fn name(self) -> &'static str {
        match self {
            Self::Twilio => "twilio",
            Self::Telnyx => "telnyx",
            Self::Bandwidth => "bandwidth",
        }
    }

    /// The source's name in the settings: it is posted to at `/sources/{source}`.
    pub fn source(self) -> &'static str {
        match self {
            Self::Twilio => "twilio-bench",
            Self::Telnyx => "telnyx-bench",
            Self::Bandwidth => "bandwidth-bench",
        }
    }

    /// Where its posts go on the daemon's ingest listener at `addr`.
    pub fn url(self, addr: SocketAddr) -> String {
        format!("http://{addr}/sources/{}", self.source())
    }

    /// What the daemon answers a post with once it is durable.
    pub fn answer(self) -> &'static str {
        match self {
            Self::Twilio => outreach_sync::systems::twilio::EMPTY_TWIML,
            Self::Telnyx | Self::Bandwidth => "{}",
        }
    }

    /// What its posts are, for the header of its figures.
    pub fn posts(self) -> &'static str {
        match self {
            Self::Twilio => {
                "form-encoded STOP replies signed in X-Twilio-Signature, each a MessageSid"
            }
            Self::Telnyx => {
                "message.received events of a STOP signed with Ed25519, each an event id"
            }
            Self::Bandwidth => {
                "message-received callbacks of a STOP with Basic credentials, each a message id"
            }
        }
    }

    /// Its `[[source]]`: the credentials its posts are prepared with.
    pub fn settings(self) -> SourceSettings {
        let system = match self {
            Self::Twilio => SourceSystem::Twilio(TwilioSettings {
                auth_token: Some(SecretString::from(TWILIO_TOKEN)),
                public_url: TWILIO_PUBLIC_URL.to_owned(),
                ..TwilioSettings::default()
            }),
            Self::Telnyx => SourceSystem::Telnyx(TelnyxSettings {
                public_key: Some(DEFAULT_TELNYX_PUBLIC_KEY.to_owned()),
                public_key_file: None,
                // The default: a post is sent seconds after it is signed (see the header).
                tolerance_secs: 300,
                keys_from_file: Vec::new(),
            }),
            Self::Bandwidth => SourceSystem::Bandwidth(BandwidthSettings {
                username: DEFAULT_BANDWIDTH_USERNAME.to_owned(),
                password: Some(SecretString::from(DEFAULT_BANDWIDTH_PASSWORD)),
                password_file: None,
                passwords: Vec::new(),
            }),
        };
        let mut source = SourceSettings::new(self.source(), system, "", "");
        source.api_key = None;
        source
    }

    /// A `STOP` posted as the kind's system posts it, its record's id made of `id`, from the
    /// `number`th sender; signed (Telnyx: at this moment) or credentialed.
    pub fn prepare(self, id: &str, number: u64) -> Prepared {
        // 415-200-0000 on: eight million numbers, each a valid US one.
        let from = format!("+1415{}", 2_000_000 + number);
        let (body, headers) = match self {
            Self::Twilio => twilio_post(&format!("SM{id}"), &from),
            Self::Telnyx => telnyx_post(id, &from),
            Self::Bandwidth => bandwidth_post(id, &from),
        };
        let headers = headers
            .into_iter()
            .map(|(name, value)| {
                (
                    HeaderName::try_from(name).expect("header name"),
                    HeaderValue::try_from(value).expect("header value"),
                )
            })
            .collect::<HeaderMap>();
        Prepared {
            account: 0,
            body: Bytes::from(body),
            headers,
        }
    }
}

/// A post's body and headers.
type Post = (Vec<u8>, Vec<(&'static str, String)>);

/// A reply as Twilio's messaging webhook posts it (the parameters it always has), signed as
/// Twilio signs it for [`TWILIO_PUBLIC_URL`].
fn twilio_post(sid: &str, from: &str) -> Post {
    let params: Vec<(&str, &str)> = vec![
        ("ToCountry", "US"),
        ("SmsMessageSid", sid),
        ("NumMedia", "0"),
        ("SmsSid", sid),
        ("SmsStatus", "received"),
        ("Body", "STOP"),
        ("To", CAMPAIGN_NUMBER),
        ("NumSegments", "1"),
        ("MessageSid", sid),
        ("AccountSid", "ACbench00000000000000000000000000"),
        ("From", from),
        ("ApiVersion", "2010-04-01"),
    ];
    let body = form_urlencoded::Serializer::new(String::new())
        .extend_pairs(&params)
        .finish();
    let signature = twilio_signature(TWILIO_TOKEN, TWILIO_PUBLIC_URL, &params);
    (
        body.into_bytes(),
        vec![
            (
                "content-type",
                "application/x-www-form-urlencoded".to_owned(),
            ),
            ("x-twilio-signature", signature),
        ],
    )
}

/// `X-Twilio-Signature` of `params` posted to `url`: base64 of the HMAC-SHA1 under `token`
/// of the URL, then each parameter's name and value, sorted by name (written here apart
/// from the daemon's verifier, with the `hmac` and `sha1` crates).
fn twilio_signature(token: &str, url: &str, params: &[(&str, &str)]) -> String {
    use hmac::Mac as _;
    let mut sorted = params.to_vec();
    sorted.sort_unstable();
    let mut mac =
        <hmac::Hmac<sha1::Sha1> as hmac::digest::KeyInit>::new_from_slice(token.as_bytes())
            .expect("HMAC takes a key of any length");
    mac.update(url.as_bytes());
    for (name, value) in sorted {
        mac.update(name.as_bytes());
        mac.update(value.as_bytes());
    }
    base64::engine::general_purpose::STANDARD.encode(mac.finalize().into_bytes())
}

/// A `message.received` event as Telnyx's messaging webhook posts it, its event id `id`,
/// serialized once and signed with the sandbox's key at the time it is prepared.
fn telnyx_post(id: &str, from: &str) -> Post {
    let now = Utc::now();
    let event = telnyx::inbound(
        id,
        &telnyx::message_id_for(id),
        from,
        CAMPAIGN_NUMBER,
        "STOP",
        now,
    );
    let body = serde_json::to_vec(&event).expect("an event is JSON");
    let timestamp = now.timestamp().to_string();
    let signature =
        telnyx::signature(DEFAULT_TELNYX_SEED, &timestamp, &body).expect("the sandbox's seed");
    (
        body,
        vec![
            ("content-type", "application/json".to_owned()),
            (telnyx::SIGNATURE_HEADER, signature),
            (telnyx::TIMESTAMP_HEADER, timestamp),
        ],
    )
}

/// A JSON array of one `message-received` callback as a Bandwidth application's inbound
/// callback posts it, its message id `id`, with the sandbox's callback credentials.
fn bandwidth_post(id: &str, from: &str) -> Post {
    let callback = bandwidth::inbound(id, from, CAMPAIGN_NUMBER, "STOP", Utc::now());
    let body = serde_json::to_vec(&[callback]).expect("a callback is JSON");
    let credentials = base64::engine::general_purpose::STANDARD.encode(format!(
        "{DEFAULT_BANDWIDTH_USERNAME}:{DEFAULT_BANDWIDTH_PASSWORD}"
    ));
    (
        body,
        vec![
            ("content-type", "application/json; charset=utf-8".to_owned()),
            ("user-agent", bandwidth::USER_AGENT.to_owned()),
            ("authorization", format!("Basic {credentials}")),
        ],
    )
}
