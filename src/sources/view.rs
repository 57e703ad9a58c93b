//! A source as `sources` and `GET /v1/sources` show it: its configuration's name and kind
//! beside its row (watermark, last run, counts), and its state.

use chrono::Utc;
use serde::Serialize;

use crate::model::Timestamp;
use crate::settings::SourceSettings;
use crate::store::{Pool, SourceRow, SourceStore as _};

/// Runs missed before a source is `stale` (the alert's rule too).
pub const STALE_AFTER_RUNS: u32 = 3;

/// Where a source stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum SourceState {
    /// Configured, not read yet.
    Waiting,
    /// Its last run read to its end.
    Ok,
    /// Its last run stopped with `lastError`; the watermark stayed.
    Error,
    /// Nothing read to its end for longer than three intervals.
    Stale,
    /// A run is reading now (since `runningSince`, from `watermark`), and the run before
    /// did not read to its end (or there was none); `lastError` is that run's.
    Running,
}

/// A configured source.
#[derive(Debug, Clone, Serialize, PartialEq, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = ConfiguredSource)]
pub struct SourceView {
    pub name: String,
    /// `van`, `action_network` or `twilio`.
    pub kind: String,
    pub state: SourceState,
    pub last_error: Option<String>,
    /// The next run reads changes from here (less a small overlap).
    pub watermark: Option<Timestamp>,
    pub last_run_at: Option<Timestamp>,
    pub last_success_at: Option<Timestamp>,
    /// Records read and recorded (each once), and what they came to.
    pub read: i64,
    pub opt_outs: i64,
    /// Opt-ins recorded (a source with `opt_ins = true`; never otherwise).
    pub opt_ins: i64,
    /// Said what every target account held already: nothing changed.
    pub confirmed: i64,
    /// Said nothing the ledger takes (another change, an opt-in not taken, no number).
    pub ignored: i64,
    /// When the run in progress started (`state` `running`).
    pub running_since: Option<Timestamp>,
}

/// Every configured source, in configuration order, beside its row.
pub async fn views(
    pool: &Pool,
    sources: &[SourceSettings],
) -> Result<Vec<SourceView>, crate::store::Error> {
    let rows = pool.sources().await?;
    Ok(sources
        .iter()
        .map(|s| view(s, rows.iter().find(|r| r.source == s.name)))
        .collect())
}

fn view(settings: &SourceSettings, row: Option<&SourceRow>) -> SourceView {
    let kind = settings.system.kind().to_owned();
    let Some(row) = row else {
        return SourceView {
            name: settings.name.clone(),
            kind,
            state: SourceState::Waiting,
            last_error: None,
            watermark: None,
            last_run_at: None,
            last_success_at: None,
            read: 0,
            opt_outs: 0,
            opt_ins: 0,
            confirmed: 0,
            ignored: 0,
            running_since: None,
        };
    };
    let stale_after = chrono::Duration::seconds(
        i64::try_from(
            settings
                .every_secs
                .saturating_mul(u64::from(STALE_AFTER_RUNS)),
        )
        .unwrap_or(i64::MAX),
    );
    let since_success = row
        .last_success_at
        .or(row.last_run_at)
        .map(|at| Utc::now() - at.at());
    // A run noted as started but not ended within its deadline was cut off (a crash, the
    // leader's lease lost): not shown as running.
    let deadline = chrono::Duration::seconds(
        i64::try_from(settings.read_timeout_secs.saturating_add(60)).unwrap_or(i64::MAX),
    );
    let running_since = row
        .running_since
        .filter(|since| Utc::now() - since.at() < deadline);
    let last = match (&row.last_error, row.last_run_at) {
        (_, None) => SourceState::Waiting,
        _ if settings.system.polled() && since_success.is_some_and(|d| d > stale_after) => {
            SourceState::Stale
        }
        (Some(_), _) => SourceState::Error,
        (None, _) => SourceState::Ok,
    };
    // A run in progress is shown rather than an older error, a staleness it may end, or
    // a wait; after a run that read to its end the state stays `ok` (`runningSince` says
    // one is reading again).
    let state = match (last, running_since) {
        (SourceState::Ok, _) | (_, None) => last,
        (_, Some(_)) => SourceState::Running,
    };
    SourceView {
        name: settings.name.clone(),
        kind,
        state,
        last_error: row.last_error.clone(),
        watermark: row.watermark,
        last_run_at: row.last_run_at,
        last_success_at: row.last_success_at,
        read: row.read,
        opt_outs: row.opt_outs,
        opt_ins: row.opt_ins,
        confirmed: row.confirmed,
        ignored: row.ignored,
        running_since,
    }
}
