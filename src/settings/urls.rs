//! Configured URLs: no credential in them, and none sent over plain `http://` to a host
//! that is not this machine unless the section allows it.

use super::SettingsError;

/// What a configured URL is sent with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Sends {
    /// Nothing secret (a public URL, shown to others).
    Nothing,
    /// A credential, or what one signs: the section's `allow_insecure_http` lets it go over
    /// plain `http://` to a host that is not loopback.
    Secret { allow_insecure_http: bool },
}

impl Sends {
    /// A credential, `allow_insecure_http` as the section says.
    pub(super) fn secret(allow_insecure_http: bool) -> Self {
        Self::Secret {
            allow_insecure_http,
        }
    }
}

/// Refuses `value` under `key` unless it is an http(s) URL with a host and without
/// user-info (`user:password@`: a credential in a URL is printed wherever the URL is, and
/// reqwest sends it as a second `Authorization`), and, when it is sent a secret, unless it
/// is `https://`, or `http://` to a loopback host, or `allow_insecure_http` is set.
/// `owner` (e.g. `destination "van"`) begins the message. Never quotes user-info.
pub(super) fn url(
    key: &'static str,
    owner: &str,
    value: &str,
    sends: Sends,
) -> Result<(), SettingsError> {
    let refused = |message: String| Err(SettingsError::invalid(key, owned(owner, &message)));
    let parsed = match reqwest::Url::parse(value) {
        Ok(url) if matches!(url.scheme(), "http" | "https") && url.host().is_some() => url,
        _ => {
            return refused(format!(
                "{} is not an http(s) URL",
                crate::model::text::quoted(&without_user_info(value))
            ));
        }
    };
    if !parsed.username().is_empty() || parsed.password().is_some() {
        return refused(
            "holds a user name or password before `@`: a credential goes in the section's own secret key (api_key, secret, client_secret or their _file), never in a URL, which is shown and logged".to_owned(),
        );
    }
    let insecure = parsed.scheme() == "http" && !loopback(&parsed);
    if insecure
        && sends
            == (Sends::Secret {
                allow_insecure_http: false,
            })
    {
        return refused(format!(
            "{} is plain http:// to a host that is not loopback: the credentials sent with it (or what they sign) would cross the network unencrypted; use https://, or set `allow_insecure_http = true` in this section for a network you trust",
            crate::model::text::quoted(value)
        ));
    }
    Ok(())
}

/// Whether `url`'s host is this machine: `localhost`, 127.0.0.0/8 or `::1`.
fn loopback(url: &reqwest::Url) -> bool {
    let Some(host) = url.host_str() else {
        return false;
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// `value` with what may be user-info (between `://` and an `@` of the authority) replaced,
/// for quoting a URL that did not parse.
fn without_user_info(value: &str) -> std::borrow::Cow<'_, str> {
    let start = value.find("://").map_or(0, |at| at + 3);
    let authority_end = value[start..]
        .find(['/', '?', '#'])
        .map_or(value.len(), |at| start + at);
    match value[start..authority_end].rfind('@') {
        Some(at) => format!(
            "{}{}{}",
            &value[..start],
            super::REDACTED,
            &value[start + at..]
        )
        .into(),
        None => value.into(),
    }
}

/// `message`, after `owner: ` when there is an owner.
pub(super) fn owned(owner: &str, message: &str) -> String {
    if owner.is_empty() {
        message.to_owned()
    } else {
        format!("{owner}: {message}")
    }
}
