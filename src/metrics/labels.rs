//! The label values of the daemon's metrics, each an enum whose Prometheus spelling is
//! written once beside its variant, and the label sets the families are keyed by.

use std::fmt::Write as _;

use prometheus_client::encoding::{
    EncodeLabel, EncodeLabelSet, EncodeLabelValue, LabelSetEncoder, LabelValueEncoder,
};

use crate::model::AccountId;

/// An enum of label values: its variants, their spelling in the exposition (`label()`), the
/// list of all of them, and the encoding `prometheus-client` asks for. The crate's derive
/// spells a value as its variant's name (`TooLarge`), which would change every series.
macro_rules! label_values {
    ($(#[$meta:meta])* pub enum $name:ident {
        $($(#[$variant_meta:meta])* $variant:ident => $label:literal,)+
    }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub enum $name {
            $($(#[$variant_meta])* $variant,)+
        }

        impl $name {
            pub const ALL: &[$name] = &[$($name::$variant,)+];

            /// The value as exposed and logged.
            pub fn label(self) -> &'static str {
                match self {
                    $($name::$variant => $label,)+
                }
            }
        }

        impl EncodeLabelValue for $name {
            fn encode(&self, encoder: &mut LabelValueEncoder<'_>) -> std::fmt::Result {
                encoder.write_str(self.label())
            }
        }
    };
}

label_values! {
    /// What the ingest listener answered to one delivery.
    pub enum Delivery {
        Accepted => "accepted",
        Duplicate => "duplicate",
        Rejected => "rejected",
        TooLarge => "too_large",
        NotJson => "not_json",
        BacklogFull => "backlog_full",
        Unavailable => "unavailable",
        /// Posted to a path that is no account's: 404, nothing read or stored.
        UnknownPath => "unknown_path",
    }
}

label_values! {
    /// What one request to a subscriber ended in.
    pub enum SubscriberOutcome {
        /// Answered 2xx: the cursor moved past the entries.
        Delivered => "delivered",
        /// No answer, a 5xx, 408 or 429: retried.
        Failed => "failed",
        /// Another 3xx or 4xx: retried, and shown as an error.
        Rejected => "rejected",
        /// 410: the subscriber is disabled.
        Gone => "gone",
    }
}

label_values! {
    /// What one record a source read came to.
    pub enum SourceOutcome {
        /// An opt-out recorded in the ledger.
        OptOut => "opt_out",
        /// An opt-in recorded in the ledger (a source with `opt_ins = true`).
        OptIn => "opt_in",
        /// Said what every target account holds already: nothing changed.
        Confirmed => "confirmed",
        /// Says nothing the ledger takes (another change, an opt-in not taken, no number).
        Ignored => "ignored",
        /// A reply holding a revocation word among others: kept for a person to decide.
        Review => "review",
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub(super) struct SourceLabels {
    pub source: String,
    pub outcome: SourceOutcome,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub(super) struct SourcePostLabels {
    pub source: String,
    pub outcome: Delivery,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub(super) struct SourceNameLabels {
    pub source: String,
}

/// A destination, by name.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub(super) struct DestinationNameLabels {
    pub destination: String,
}

/// A system the daemon hears: `service`, or a source's kind.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub(super) struct SystemLabels {
    pub system: String,
}

label_values! {
    /// What one request to a destination ended in.
    pub enum DestinationOutcome {
        /// Answered with success.
        Sent => "sent",
        /// No lead in the mirror, or no VAN ID on it: nothing was sent.
        Unmatched => "unmatched",
        /// A 404 or another 4xx: the entry is refused and passed.
        Refused => "refused",
        /// 401 or 403: the destination stops until its key works.
        Credentials => "credentials",
        /// What it names is not there, or its table's shape changed (a column dropped or
        /// of another type, a NOT NULL column added): it stops until put right.
        Lookup => "lookup",
        /// No answer, a 3xx, 5xx, 408 or 429: retried.
        Failed => "failed",
        /// A request that repeats an action whose first request was never answered (sent
        /// once more at most), whatever its answer.
        Repeated => "repeated",
        /// The destination was told this of the person already: nothing was sent.
        Already => "already",
        /// An account-wide entry that reaches a system through its leads' entries: nothing
        /// was sent for it.
        ThroughLeads => "through_leads",
    }
}

label_values! {
    /// What one push attempt of a local consent change ended in.
    pub enum Push {
        /// The service accepted the change.
        Sent => "sent",
        /// It failed and will be tried again.
        Retry => "retry",
        /// It failed for good (attempts exhausted or refused by the service).
        Failed => "failed",
    }
}

label_values! {
    /// One of the daemon's two listeners.
    pub enum Listener {
        Ingest => "ingest",
        Admin => "admin",
    }
}

label_values! {
    /// Why a listener closed a connection itself.
    pub enum Closed {
        /// No request began within the idle timeout.
        Idle => "idle",
        /// A request's head did not arrive whole within the header timeout.
        HeaderTimeout => "header_timeout",
        /// At the cap, a new connection took its place.
        Evicted => "evicted",
        /// At the cap with every connection busy: closed as soon as accepted.
        Refused => "refused",
    }
}

label_values! {
    /// A credential presented to the admin listener.
    pub enum AuthAttempt {
        /// A bearer token on the API.
        Bearer => "bearer",
        /// A token on the console's sign-in form.
        SignIn => "signin",
    }
}

label_values! {
    /// What became of a credential that matched no token.
    pub enum AuthOutcome {
        /// Refused (401), counted against its address.
        Refused => "refused",
        /// Refused with 429: its address is past the limit (the credential was not compared).
        Limited => "limited",
    }
}

/// An answer of the service, as counted: its HTTP status, or none.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) enum Upstream {
    /// A status in `100..600`.
    Status(u16),
    /// A status outside `100..600`.
    Other,
    /// No answer (connect error, timeout, broken body).
    Error,
}

impl Upstream {
    pub(super) fn of(status: u16) -> Self {
        if (100..600).contains(&status) {
            Upstream::Status(status)
        } else {
            Upstream::Other
        }
    }
}

impl EncodeLabelValue for Upstream {
    fn encode(&self, encoder: &mut LabelValueEncoder<'_>) -> std::fmt::Result {
        match self {
            Upstream::Status(status) => write!(encoder, "{status}"),
            Upstream::Other => encoder.write_str("other"),
            Upstream::Error => encoder.write_str("error"),
        }
    }
}

/// An account as a label value: its name.
impl EncodeLabelValue for AccountId {
    fn encode(&self, encoder: &mut LabelValueEncoder<'_>) -> std::fmt::Result {
        encoder.write_str(self.as_str())
    }
}

/// The series of one account's work (reconciliation).
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub(super) struct AccountLabels {
    pub account: AccountId,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(super) struct DeliveryLabels {
    /// The account whose path the delivery came in on (`None`: no account's path).
    pub account: Option<AccountId>,
    pub outcome: Delivery,
}

/// A delivery on no account's path has no `account` label (rather than an empty one).
impl EncodeLabelSet for DeliveryLabels {
    fn encode(&self, encoder: &mut LabelSetEncoder<'_>) -> std::fmt::Result {
        if let Some(account) = &self.account {
            ("account", account.clone()).encode(encoder.encode_label())?;
        }
        ("outcome", self.outcome).encode(encoder.encode_label())
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub(super) struct PushLabels {
    pub account: AccountId,
    pub outcome: Push,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub(super) struct UpstreamLabels {
    pub account: AccountId,
    pub status: Upstream,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub(super) struct SubscriberLabels {
    pub subscriber: String,
    pub outcome: SubscriberOutcome,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub(super) struct DestinationLabels {
    pub destination: String,
    pub outcome: DestinationOutcome,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub(super) struct AuthLabels {
    pub attempt: AuthAttempt,
    pub outcome: AuthOutcome,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub(super) struct ListenerLabels {
    pub listener: Listener,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub(super) struct ClosedLabels {
    pub listener: Listener,
    pub reason: Closed,
}
