//! Logging: `tracing` to stderr as text or JSON lines, filtered by `log.level`.
//!
//! Every value of a text line is escaped here, the one place between another system's
//! words and the log: a VAN job's message, an Action Network or BigQuery error, a
//! PostgreSQL warehouse's refusal, a Twilio reply. A line feed in them cannot start a
//! forged line, nor an escape sequence colour or rewrite the terminal (`\n`, `\u{1b}`
//! show instead). JSON lines are escaped by JSON itself.

use std::io::IsTerminal as _;

use tracing_subscriber::EnvFilter;
use tracing_subscriber::field::MakeExt as _;
use tracing_subscriber::fmt::format::{self, FormatFields};

use crate::settings::{LogFormat, LogSettings};

/// Installs the global subscriber once; later calls (tests, `demo`) are ignored.
pub fn init(settings: &LogSettings) {
    let filter = EnvFilter::try_new(&settings.level).unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr);
    let _ = match settings.format {
        LogFormat::Text => builder.fmt_fields(escaped_fields()).try_init(),
        LogFormat::Json => builder.json().flatten_event(true).try_init(),
    };
}

/// A text line's fields, `name=value` apart by spaces (the message bare), each value with
/// every control and reordering character escaped ([`crate::model::text::escape_controls`]).
pub fn escaped_fields() -> impl for<'writer> FormatFields<'writer> + Send + Sync + 'static {
    format::debug_fn(|writer, field, value| {
        let shown = format!("{value:?}");
        let shown = crate::model::text::escape_controls(&shown);
        if field.name() == "message" {
            write!(writer, "{shown}")
        } else {
            write!(writer, "{}={shown}", field.name())
        }
    })
    .delimited(" ")
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    /// What the text log wrote, kept for the test to read.
    #[derive(Clone, Default)]
    struct Kept(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Kept {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(bytes);
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    /// The text log's lines of what `log` writes.
    fn logged(log: impl FnOnce()) -> Vec<String> {
        let kept = Kept::default();
        let writer = kept.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_ansi(false)
            .fmt_fields(super::escaped_fields())
            .with_writer(move || writer.clone())
            .finish();
        tracing::subscriber::with_default(subscriber, log);
        let text = String::from_utf8(kept.0.lock().unwrap().clone()).unwrap();
        text.lines().map(str::to_owned).collect()
    }

    /// Each system's error text as its reader or writer words it (by the name of a source
    /// or destination of that system), with what a hostile system puts in it.
    const HOSTILE: &[(&str, &str)] = &[
        (
            "van-main",
            "export job 7 of Contacts ended in Error: VAN failed \u{1b}[31mRED\nforged line read=0 opt_outs=0",
        ),
        (
            "an-main",
            "the people: answered 400 Bad Request: bad\r\nsource=an-main read=99",
        ),
        (
            "bq-warehouse",
            "insertAll: answered 403: quota\u{1b}]0;title\u{7}\nlevel=INFO",
        ),
        (
            "pg-warehouse",
            "23502: null value in column \"x\"\u{202e}txet desrever\n2026-12-02T00:00:00Z INFO",
        ),
        (
            "twilio-main",
            "reply \"STOP\u{0}\u{8}\u{8}\u{8}\u{8}START\"\u{85}forged",
        ),
    ];

    #[test]
    fn every_systems_error_text_is_one_escaped_log_line() {
        for (system, error) in HOSTILE {
            let lines = logged(|| {
                tracing::warn!(source = *system, error = %error, "source run stopped");
                tracing::warn!(%error);
                tracing::warn!("{error}");
            });
            assert_eq!(lines.len(), 3, "{system}: {lines:#?}");
            for line in &lines {
                assert!(
                    !line.chars().any(crate::model::text::is_unsafe_char),
                    "{system}: {line:?}"
                );
            }
            assert!(
                lines[0].contains(&format!("source=\"{system}\"")),
                "{lines:?}"
            );
            assert!(lines[0].contains("source run stopped"), "{lines:?}");
        }
        let job = logged(|| tracing::warn!(error = %HOSTILE[0].1, "source run stopped"));
        assert!(
            job[0].contains("VAN failed \\u{1b}[31mRED\\nforged line"),
            "{job:?}"
        );
    }

    #[test]
    fn plain_text_and_debug_values_show_as_they_did() {
        let lines = logged(|| {
            tracing::info!(source = "van-main", read = 12, from = %"2026-12-01T00:00:00Z", "source read");
            tracing::info!(name = ?"quoted", "debug");
        });
        assert!(
            lines[0].ends_with("source read source=\"van-main\" read=12 from=2026-12-01T00:00:00Z"),
            "{lines:?}"
        );
        assert!(lines[1].ends_with("debug name=\"quoted\""), "{lines:?}");
    }
}
