//! Text that came from elsewhere (the service, a user, a delivery) made safe for where the
//! daemon puts it: a terminal or a text log ([`escape_controls`], [`Escaped`]), an error
//! message ([`quoted`]), a spreadsheet cell ([`spreadsheet_safe`]), an id it keeps
//! ([`id_problem`]). Pure functions, one place, so that every printer uses the same rule.

use std::borrow::Cow;
use std::fmt::{self, Write as _};

/// Most characters of someone else's text an error message quotes ([`quoted`]).
pub const QUOTED_CHARS: usize = 100;

/// Whether `c` would do something on a terminal or in a log rather than show: a control
/// character (C0, DEL, C1: ESC starts a terminal sequence, CR rewrites the line, LF starts
/// a new log line) or a character that reorders or hides text (bidirectional overrides and
/// isolates, zero-width marks).
pub fn is_unsafe_char(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{200B}'..='\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}' | '\u{FEFF}'
        )
}

/// What [`is_unsafe_char`] lets through, as a pattern of the OpenAPI document: no C0, DEL or
/// C1 control, no bidirectional override or isolate, no zero-width mark.
pub const SAFE_TEXT_PATTERN: &str =
    "^[^\\u0000-\\u001f\\u007f-\\u009f\\u200b-\\u200f\\u202a-\\u202e\\u2066-\\u2069\\ufeff]*$";

/// [`SAFE_TEXT_PATTERN`] with at least one character that is not white space.
pub const SAFE_NONBLANK_PATTERN: &str = "^[^\\u0000-\\u001f\\u007f-\\u009f\\u200b-\\u200f\\u202a-\\u202e\\u2066-\\u2069\\ufeff]*[^\\s\\u0000-\\u001f\\u007f-\\u009f\\u200b-\\u200f\\u202a-\\u202e\\u2066-\\u2069\\ufeff][^\\u0000-\\u001f\\u007f-\\u009f\\u200b-\\u200f\\u202a-\\u202e\\u2066-\\u2069\\ufeff]*$";

/// An id as the admin API takes it ([`id_problem`]): at most
/// [`MAX_ID_CHARS`](super::MAX_ID_CHARS) characters, none of them [`is_unsafe_char`].
pub fn id_schema() -> utoipa::openapi::schema::Object {
    utoipa::openapi::schema::ObjectBuilder::new()
        .schema_type(utoipa::openapi::schema::Type::String)
        .max_length(Some(super::MAX_ID_CHARS))
        .pattern(Some(SAFE_TEXT_PATTERN))
        .build()
}

/// `text` with every [`is_unsafe_char`] written as an escape (`\n`, `\r`, `\t`,
/// `\u{1b}`), so that it shows as what it is and cannot move the cursor, colour the
/// terminal or start a line of its own. A backslash is doubled only when something was
/// escaped, so plain text comes back as it was (borrowed).
pub fn escape_controls(text: &str) -> Cow<'_, str> {
    if !text.chars().any(is_unsafe_char) {
        return Cow::Borrowed(text);
    }
    let mut escaped = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        push_escaped(&mut escaped, c);
    }
    Cow::Owned(escaped)
}

fn push_escaped(out: &mut String, c: char) {
    match c {
        '\n' => out.push_str("\\n"),
        '\r' => out.push_str("\\r"),
        '\t' => out.push_str("\\t"),
        '\\' => out.push_str("\\\\"),
        c if is_unsafe_char(c) => {
            let _ = write!(out, "\\u{{{:x}}}", u32::from(c));
        }
        c => out.push(c),
    }
}

/// Displays its text through [`escape_controls`]: for `format!`, `println!` and `tracing`
/// fields (`%Escaped(&value)`), where a borrowed value is at hand.
#[derive(Debug, Clone, Copy)]
pub struct Escaped<'a>(pub &'a str);

/// Width and alignment (`{:<12}`) apply to the escaped text.
impl fmt::Display for Escaped<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(&escape_controls(self.0))
    }
}

/// At most `max_chars` characters of `text`, escaped ([`escape_controls`]), with `…` when
/// some were left out: someone else's text quoted in a message, bounded whatever its size.
pub fn bounded(text: &str, max_chars: usize) -> String {
    let end = text
        .char_indices()
        .nth(max_chars)
        .map_or(text.len(), |(at, _)| at);
    let mut out = escape_controls(&text[..end]).into_owned();
    if end < text.len() {
        out.push('…');
    }
    out
}

/// [`bounded`] to [`QUOTED_CHARS`], between backticks: how an error message quotes a value
/// a user or the service gave.
pub fn quoted(text: &str) -> String {
    format!("`{}`", bounded(text, QUOTED_CHARS))
}

/// A cell a spreadsheet will not run: text starting with `=`, `+`, `-`, `@`, a tab or a
/// carriage return gets a leading `'` (OWASP's rule against CSV formula injection), so
/// Excel, LibreOffice and Google Sheets show it as text instead of evaluating it.
///
/// For free text and ids (organization, lead, event references, reasons, URLs). A cell
/// the daemon writes itself in a form of its own (a number in E.164, a timestamp, a count,
/// a boolean) is written without it: an E.164 number starts with `+` and must stay the
/// number it is, and none of them can hold a formula.
pub fn spreadsheet_safe(cell: &str) -> Cow<'_, str> {
    match cell.chars().next() {
        Some('=' | '+' | '-' | '@' | '\t' | '\r') => Cow::Owned(format!("'{cell}")),
        _ => Cow::Borrowed(cell),
    }
}

/// What is wrong with an id given for `field` (an organization, lead or tag id), or `None`:
/// at most [`super::MAX_ID_CHARS`] characters and no [`is_unsafe_char`] (an id is written
/// into logs, terminals and files, where a line break or an escape sequence would forge or
/// rewrite what is shown). The one rule of ids a user gives: the admin API, the console
/// and the CLI.
pub fn id_problem(field: &str, id: &str) -> Option<String> {
    if id.chars().count() > super::MAX_ID_CHARS {
        return Some(format!(
            "{field} is at most {} characters",
            super::MAX_ID_CHARS
        ));
    }
    let (position, c) = id.chars().enumerate().find(|(_, c)| is_unsafe_char(*c))?;
    Some(format!(
        "{field} holds a control character ({}) at position {}: an id is printable text",
        escape_controls(&c.to_string()),
        position + 1
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The document's patterns say what the functions take, character for character.
    #[test]
    fn the_safe_text_patterns_are_is_unsafe_char() {
        let safe = regex::Regex::new(SAFE_TEXT_PATTERN).unwrap();
        let nonblank = regex::Regex::new(SAFE_NONBLANK_PATTERN).unwrap();
        let characters = (0..0x3000)
            .chain([0xFEFF, 0xFFFD, 0x1F600])
            .filter_map(char::from_u32);
        for c in characters {
            let text = format!("a{c}b");
            assert_eq!(safe.is_match(&text), !is_unsafe_char(c), "{:?}", c);
            let alone = c.to_string();
            assert_eq!(
                nonblank.is_match(&alone),
                !is_unsafe_char(c) && !alone.trim().is_empty(),
                "{:?}",
                c
            );
        }
        assert!(safe.is_match(""));
        assert!(!nonblank.is_match(""));
        assert!(!nonblank.is_match(" \u{3000} "));
    }

    #[test]
    fn plain_text_is_left_as_it_is() {
        assert!(matches!(
            escape_controls("org_1 C:\\x é"),
            Cow::Borrowed("org_1 C:\\x é")
        ));
    }

    #[test]
    fn a_line_break_an_escape_sequence_and_a_direction_override_are_shown_as_escapes() {
        let text = "id\n2026-11-21 INFO forged\r\u{1b}[2J\u{202E}x\\";
        let escaped = escape_controls(text);
        assert_eq!(
            escaped,
            "id\\n2026-11-21 INFO forged\\r\\u{1b}[2J\\u{202e}x\\\\"
        );
        assert!(!escaped.chars().any(is_unsafe_char));
        assert_eq!(Escaped(text).to_string(), escaped);
        assert_eq!(format!("[{:<6}]", Escaped("a\tb")), "[a\\tb  ]");
    }

    #[test]
    fn a_quote_is_bounded_and_escaped() {
        let long = "a".repeat(5000);
        let quote = quoted(&long);
        assert_eq!(quote.chars().count(), QUOTED_CHARS + 3, "{quote}");
        assert!(quote.ends_with("…`"));
        assert_eq!(quoted("short"), "`short`");
        assert_eq!(quoted("a\u{1b}b"), "`a\\u{1b}b`");
        assert_eq!(bounded("abc\n", 3), "abc…");
        assert_eq!(bounded("ab\nc", 3), "ab\\n…");
    }

    #[test]
    fn a_cell_that_a_spreadsheet_would_evaluate_starts_with_a_quote() {
        for formula in [
            "=HYPERLINK(\"http://evil.example/\",\"click\")",
            "+1+1",
            "-2",
            "@SUM(A1)",
            "\tx",
            "\rx",
        ] {
            assert_eq!(spreadsheet_safe(formula), format!("'{formula}"));
        }
        for plain in ["org_1", "", "a=b", "'quoted"] {
            assert!(matches!(spreadsheet_safe(plain), Cow::Borrowed(p) if p == plain));
        }
    }

    #[test]
    fn an_id_with_a_control_character_or_too_long_is_refused_naming_the_field() {
        assert_eq!(id_problem("organizationId", "org_1"), None);
        let problem = id_problem("organizationId", "org\n\u{1b}[31m").expect("refused");
        assert!(
            problem.starts_with("organizationId holds a control character (\\n) at position 4"),
            "{problem}"
        );
        let long = "o".repeat(super::super::MAX_ID_CHARS + 1);
        assert!(id_problem("tagId", &long).is_some_and(|p| p.starts_with("tagId is at most")));
    }
}
