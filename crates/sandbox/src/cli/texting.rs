//! `sandbox telnyx-send` and `sandbox bandwidth-send`: a person's text to a campaign's
//! Telnyx or Bandwidth number, posted as the carrier posts it to a daemon's source. Neither
//! needs a running sandbox.

use chrono::{DateTime, Utc};

use crate::config::{DEFAULT_BANDWIDTH_PASSWORD, DEFAULT_BANDWIDTH_USERNAME, DEFAULT_TELNYX_SEED};
use crate::{bandwidth, telnyx};

/// Flags of `sandbox telnyx-send`.
#[derive(Debug, Clone, clap::Args)]
pub struct TelnyxSend {
    /// Where to post: the source's URL (`http://127.0.0.1:8080/sources/telnyx-main`).
    #[arg(long, value_name = "URL")]
    pub url: String,
    /// The Ed25519 private key seed it is signed with, in hexadecimal (default: the
    /// sandbox's published test key, public key RjltmtIRNXF88fF0gMNhvUctEq7AxCFSuiHYvb7o35s=).
    #[arg(long, value_name = "HEX", default_value = DEFAULT_TELNYX_SEED)]
    pub key: String,
    /// The person's number, in E.164.
    #[arg(long, value_name = "P")]
    pub from: String,
    /// The campaign's Telnyx number.
    #[arg(long, value_name = "P", default_value = "+15005550006")]
    pub to: String,
    /// What the person wrote.
    #[arg(long)]
    pub text: String,
    /// The event's id (`data.id`; default: a new one); the same id and timestamp twice is
    /// Telnyx retrying the same event.
    #[arg(long, value_name = "ID")]
    pub id: Option<String>,
    /// When it is signed (`telnyx-timestamp`) and happened, in Unix seconds (default: now).
    #[arg(long, value_name = "SECS")]
    pub timestamp: Option<i64>,
}

impl TelnyxSend {
    /// Posts the `message.received` event; prints its id and the answer, or fails on an
    /// answer other than 2xx.
    pub(super) async fn run(self) -> anyhow::Result<()> {
        let id = self.id.unwrap_or_else(telnyx::new_event_id);
        let timestamp = self.timestamp.unwrap_or_else(|| Utc::now().timestamp());
        let at = DateTime::<Utc>::from_timestamp(timestamp, 0)
            .ok_or_else(|| anyhow::anyhow!("--timestamp {timestamp} is out of range"))?;
        let message_id = telnyx::message_id_for(&id);
        let mut event = telnyx::inbound(&id, &message_id, &self.from, &self.to, &self.text, at);
        telnyx::addressed_to(&mut event, &self.url);
        let body = serde_json::to_vec(&event)?;
        let (status, answer) = telnyx::send(
            &reqwest::Client::new(),
            &self.url,
            &self.key,
            timestamp,
            &body,
        )
        .await?;
        report(&self.url, &id, status, &answer)
    }
}

/// Flags of `sandbox bandwidth-send`.
#[derive(Debug, Clone, clap::Args)]
pub struct BandwidthSend {
    /// Where to post: the source's URL (`http://127.0.0.1:8080/sources/bandwidth-main`).
    #[arg(long, value_name = "URL")]
    pub url: String,
    /// The username of the application's callback credentials.
    #[arg(long, default_value = DEFAULT_BANDWIDTH_USERNAME)]
    pub username: String,
    /// The password of the application's callback credentials.
    #[arg(long, default_value = DEFAULT_BANDWIDTH_PASSWORD)]
    pub password: String,
    /// Send no credentials, as an application without callback credentials does (with
    /// them, the callback is posted without, then again with them once answered 401 with a
    /// `WWW-Authenticate` challenge).
    #[arg(long)]
    pub no_auth: bool,
    /// The person's number, in E.164.
    #[arg(long, value_name = "P")]
    pub from: String,
    /// The campaign's Bandwidth number.
    #[arg(long, value_name = "P", default_value = "+15005550006")]
    pub to: String,
    /// What the person wrote.
    #[arg(long)]
    pub text: String,
    /// The message's id (default: a new one); the same id twice is Bandwidth retrying.
    #[arg(long, value_name = "ID")]
    pub id: Option<String>,
}

impl BandwidthSend {
    /// Delivers the `message-received` callback; prints the message's id and the answer, or
    /// fails on an answer other than 2xx.
    pub(super) async fn run(self) -> anyhow::Result<()> {
        let id = self.id.unwrap_or_else(bandwidth::new_message_id);
        let callbacks = [bandwidth::inbound(
            &id,
            &self.from,
            &self.to,
            &self.text,
            Utc::now(),
        )];
        let credentials =
            (!self.no_auth).then_some((self.username.as_str(), self.password.as_str()));
        let (status, answer) =
            bandwidth::deliver(&reqwest::Client::new(), &self.url, credentials, &callbacks).await?;
        report(&self.url, &id, status, &answer)
    }
}

/// Prints `{id}: {status} {answer}` for a 2xx answer; fails with the answer otherwise.
fn report(url: &str, id: &str, status: u16, answer: &str) -> anyhow::Result<()> {
    if !(200..300).contains(&status) {
        anyhow::bail!("{url}: {status}: {answer}");
    }
    println!("{id}: {status} {answer}");
    Ok(())
}

#[cfg(test)]
mod tests {
    use clap::Parser as _;

    use super::super::{SandboxArgs, SandboxCommand};
    use super::*;

    #[derive(clap::Parser)]
    struct Line {
        #[command(flatten)]
        args: SandboxArgs,
    }

    #[test]
    fn the_carriers_sends_take_their_defaults_and_need_a_url_a_sender_and_a_text() {
        let line = Line::try_parse_from([
            "sandbox",
            "telnyx-send",
            "--url",
            "u",
            "--from",
            "+1",
            "--text",
            "STOP",
        ])
        .expect("parses");
        let Some(SandboxCommand::TelnyxSend(send)) = line.args.command else {
            panic!("not telnyx-send");
        };
        assert_eq!(send.key, crate::DEFAULT_TELNYX_SEED);
        assert_eq!(send.to, "+15005550006");
        assert!(send.id.is_none() && send.timestamp.is_none());
        let line = Line::try_parse_from([
            "sandbox",
            "bandwidth-send",
            "--url",
            "u",
            "--from",
            "+1",
            "--text",
            "STOP",
            "--no-auth",
        ])
        .expect("parses");
        let Some(SandboxCommand::BandwidthSend(send)) = line.args.command else {
            panic!("not bandwidth-send");
        };
        assert_eq!(send.username, crate::DEFAULT_BANDWIDTH_USERNAME);
        assert_eq!(send.password, crate::DEFAULT_BANDWIDTH_PASSWORD);
        assert!(send.no_auth);
        for wrong in [
            vec!["sandbox", "telnyx-send", "--from", "+1", "--text", "t"],
            vec!["sandbox", "telnyx-send", "--url", "u", "--text", "t"],
            vec!["sandbox", "bandwidth-send", "--url", "u", "--from", "+1"],
        ] {
            assert!(Line::try_parse_from(&wrong).is_err(), "{wrong:?}");
        }
        // The help names the public key of the default seed.
        let help = <Line as clap::CommandFactory>::command()
            .find_subcommand_mut("telnyx-send")
            .expect("telnyx-send")
            .render_long_help()
            .to_string();
        assert!(help.contains(crate::DEFAULT_TELNYX_PUBLIC_KEY), "{help}");
    }

    #[tokio::test]
    async fn telnyx_send_posts_a_signed_event_addressed_to_the_url_and_the_same_bytes_again() {
        use axum::http::HeaderMap;
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<(HeaderMap, bytes::Bytes)>();
        let app = axum::Router::new().route(
            "/sources/telnyx-main",
            axum::routing::post(move |headers: HeaderMap, body: bytes::Bytes| {
                let _ = tx.send((headers, body));
                async { "{}" }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("a port");
        let url = format!(
            "http://{}/sources/telnyx-main",
            listener.local_addr().expect("an address")
        );
        let server = tokio::spawn(async move { axum::serve(listener, app).await });
        let send = TelnyxSend {
            url: url.clone(),
            key: DEFAULT_TELNYX_SEED.into(),
            from: "+14155550100".into(),
            to: "+15005550006".into(),
            text: "STOP".into(),
            id: Some("b2c3d4e5-0000-4000-8000-000000000001".into()),
            timestamp: Some(1_767_225_600),
        };
        send.clone().run().await.expect("taken");
        send.run().await.expect("taken again");
        let (headers, first) = rx.recv().await.expect("the first post");
        let (_, again) = rx.recv().await.expect("the second post");
        server.abort();
        assert_eq!(first, again);
        let signature = headers[telnyx::SIGNATURE_HEADER].to_str().expect("text");
        assert_eq!(
            signature,
            telnyx::signature(DEFAULT_TELNYX_SEED, "1767225600", &first).expect("a seed")
        );
        let event: serde_json::Value = serde_json::from_slice(&first).expect("JSON");
        assert_eq!(event["meta"]["delivered_to"], url.as_str());
        assert_eq!(event["data"]["id"], "b2c3d4e5-0000-4000-8000-000000000001");
        assert_eq!(event["data"]["occurred_at"], "2026-01-01T00:00:00.000Z");
        assert_eq!(
            event["data"]["payload"]["from"]["phone_number"],
            "+14155550100"
        );
    }
}
