//! What a person's reply to a text says about consent: the words that revoke it and those
//! that give it back, read one way for every source that hears a person's own words.
//!
//! An opt-out is a reply whose whole text is one of the words the FCC's rule names as a
//! reasonable revocation (47 CFR 64.1200(a)(10), FCC 24-24: stop, quit, end, revoke, opt out,
//! cancel, unsubscribe) or one Twilio stops on by default (STOPALL, and REVOKE and OPTOUT
//! since May 2025), or one Twilio marked so (`OptOutType=STOP`, from a Messaging Service with
//! Advanced Opt-Out, which knows the keywords configured there). A sentence that contains a
//! word is not one ("stop by at 5", "I want to opt out of this"): the contract, like Twilio,
//! takes the whole reply or nothing. How the reply is read:
//! - white space (any Unicode white space) at either end goes, and a run of it inside is one
//!   space: "opt  out" is "opt out";
//! - a hyphen or dash between words is a space: "opt-out" is "opt out". It is how the FCC's
//!   own phrase is most often written, and a spelling is not a different request;
//! - "opt out" and "optout", "stop all" and "stopall" are the same words: the FCC writes the
//!   one with a space, Twilio the other without (its keywords take none);
//! - at the end, closing punctuation goes: `. ! ? ,` and the ellipsis, the doubled marks
//!   (`‼ ⁇ ⁈ ⁉`), the Arabic question mark and the full-width and ideographic forms; at the
//!   start, the Spanish `¡ ¿`; at either end, quotes (straight, curly, low, guillemets), so
//!   that a reply copying `Reply "STOP" to opt out` counts. Anything else (an emoji, a smiley,
//!   a digit) leaves a reply that is not the word;
//! - case aside (ASCII: the words are ASCII, so a letter outside it is never one);
//! - a character that does not show ([`text::is_unsafe_char`] that is not white space: a
//!   control, a zero-width or bidirectional mark) is skipped wherever it is: the person saw
//!   and sent the word.
//!
//! An opt-in is `OptOutType=START`, or a reply that is START or UNSTOP, Twilio's opt-in words.
//! Twilio also takes YES, but a bare "yes" answers every question a campaign asks ("Can we
//! count on you?"), and recording it as consent given back is the costly mistake: from the
//! text alone it is nothing. (With Advanced Opt-Out, Twilio decides for the numbers it blocked,
//! and says `OptOutType=START`.) HELP, INFO and anything else say nothing. When the parameter
//! and the words disagree, an opt-out wins, the cautious answer.
//!
//! Reading is cheap whatever the length: the ends are trimmed in place, and the rest is given
//! up at the first character that cannot be part of a word, or past the longest word.

use super::text;

/// What a reply says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reply {
    /// Consent revoked.
    OptOut,
    /// Consent given back.
    OptIn,
    /// Neither.
    Nothing,
}

/// The opt-out words, as [`word`] writes a reply.
const OPT_OUT: [&str; 10] = [
    "stop",
    "quit",
    "end",
    "revoke",
    "opt out",
    "optout",
    "cancel",
    "unsubscribe",
    "stopall",
    "stop all",
];

/// The opt-in words, as [`word`] writes a reply.
const OPT_IN: [&str; 2] = ["start", "unstop"];

/// The longest word, in bytes ("unsubscribe").
const LONGEST: usize = 11;

/// Quotes, dropped at either end.
const QUOTES: [char; 12] = [
    '"', '\'', '`', '\u{2018}', '\u{2019}', '\u{201A}', '\u{201C}', '\u{201D}', '\u{201E}',
    '\u{00AB}', '\u{00BB}', '\u{FF02}',
];

/// Closing punctuation, dropped at the end.
const CLOSING: [char; 15] = [
    '.', '!', '?', ',', '\u{2026}', '\u{203C}', '\u{2047}', '\u{2048}', '\u{2049}', '\u{061F}',
    '\u{3002}', '\u{FF01}', '\u{FF0C}', '\u{FF0E}', '\u{FF1F}',
];

/// Opening punctuation, dropped at the start.
const OPENING: [char; 2] = ['\u{00A1}', '\u{00BF}'];

/// Hyphens and dashes, read as a space between words.
const HYPHENS: [char; 6] = [
    '-', '\u{2010}', '\u{2011}', '\u{2012}', '\u{2013}', '\u{2014}',
];

/// What the reply `body` says, with Twilio's `OptOutType` parameter when it came with one.
pub fn classify(body: &str, opt_out_type: Option<&str>) -> Reply {
    let marked = |kind: &str| opt_out_type.is_some_and(|t| t.trim().eq_ignore_ascii_case(kind));
    let word = word(body);
    let is = |words: &[&str]| word.as_ref().is_some_and(|w| words.contains(&w.as_str()));
    if marked("STOP") || is(&OPT_OUT) {
        Reply::OptOut
    } else if marked("START") || is(&OPT_IN) {
        Reply::OptIn
    } else {
        Reply::Nothing
    }
}

/// A reply short enough to be a word, in lower case, its words one space apart.
#[derive(Default)]
struct Word {
    bytes: [u8; LONGEST],
    len: usize,
}

impl Word {
    fn as_str(&self) -> &str {
        std::str::from_utf8(&self.bytes[..self.len]).unwrap_or_default()
    }

    /// Appends `byte`; `None` past [`LONGEST`].
    fn push(&mut self, byte: u8) -> Option<()> {
        *self.bytes.get_mut(self.len)? = byte;
        self.len += 1;
        Some(())
    }
}

/// `body` as the words are written: ends trimmed, lower case, one space between words;
/// `None` when it cannot be one (a character no word has, or too long).
fn word(body: &str) -> Option<Word> {
    let core = body
        .trim_end_matches(|c| blank(c) || QUOTES.contains(&c) || CLOSING.contains(&c))
        .trim_start_matches(|c| blank(c) || QUOTES.contains(&c) || OPENING.contains(&c));
    let mut word = Word::default();
    let mut apart = false;
    for c in core.chars() {
        if c.is_whitespace() || HYPHENS.contains(&c) {
            apart = word.len > 0;
        } else if c.is_ascii_alphabetic() {
            if apart {
                word.push(b' ')?;
                apart = false;
            }
            word.push(c.to_ascii_lowercase() as u8)?;
        } else if !text::is_unsafe_char(c) {
            return None;
        }
    }
    Some(word)
}

/// White space, or a character that does not show.
fn blank(c: char) -> bool {
    c.is_whitespace() || text::is_unsafe_char(c)
}

#[cfg(test)]
mod tests {
    use super::Reply::{Nothing, OptIn, OptOut};
    use super::*;

    /// (body, OptOutType, what it says).
    const CASES: &[(&str, Option<&str>, Reply)] = &[
        // The FCC's words (47 CFR 64.1200(a)(10)).
        ("stop", None, OptOut),
        ("quit", None, OptOut),
        ("end", None, OptOut),
        ("revoke", None, OptOut),
        ("opt out", None, OptOut),
        ("cancel", None, OptOut),
        ("unsubscribe", None, OptOut),
        // Twilio's default opt-out keywords, as sent.
        ("STOP", None, OptOut),
        ("STOPALL", None, OptOut),
        ("UNSUBSCRIBE", None, OptOut),
        ("CANCEL", None, OptOut),
        ("END", None, OptOut),
        ("QUIT", None, OptOut),
        ("REVOKE", None, OptOut),
        ("OPTOUT", None, OptOut),
        // Case, white space, hyphens, punctuation, quotes.
        ("sToP", None, OptOut),
        ("  Stop \r\n", None, OptOut),
        ("\u{3000}stop\u{a0}", None, OptOut),
        ("opt  out", None, OptOut),
        ("Opt\tOut", None, OptOut),
        ("opt-out", None, OptOut),
        ("Opt-Out!", None, OptOut),
        ("opt \u{2013} out", None, OptOut),
        ("stop all", None, OptOut),
        ("Stop-all", None, OptOut),
        ("stop.", None, OptOut),
        ("STOP!!!", None, OptOut),
        ("stop?!", None, OptOut),
        ("Stop\u{2026}", None, OptOut),
        ("stop !", None, OptOut),
        ("stop\u{ff01}", None, OptOut),
        ("\u{a1}Stop!", None, OptOut),
        ("\"STOP\"", None, OptOut),
        ("'stop'", None, OptOut),
        ("\u{201c}Stop\u{201d}", None, OptOut),
        ("\"STOP\".", None, OptOut),
        ("\u{ab}stop\u{bb}", None, OptOut),
        // What does not show is skipped.
        ("\u{feff}stop", None, OptOut),
        ("st\u{200b}op", None, OptOut),
        ("stop\u{0}", None, OptOut),
        ("\u{1b}stop\u{7}", None, OptOut),
        ("\u{202e}pots", None, Nothing),
        // Near misses: a sentence, another word, a word with more.
        ("stop by at 5?", None, Nothing),
        ("stop by the office", None, Nothing),
        ("please don't stop", None, Nothing),
        ("Stop please", None, Nothing),
        ("please cancel", None, Nothing),
        ("I want to opt out of this", None, Nothing),
        ("end of day", None, Nothing),
        ("Stopp", None, Nothing),
        ("stops", None, Nothing),
        ("sto p", None, Nothing),
        ("stop stop", None, Nothing),
        ("optout out", None, Nothing),
        ("opt", None, Nothing),
        ("out", None, Nothing),
        ("stop 🛑", None, Nothing),
        ("stop :)", None, Nothing),
        ("stop2", None, Nothing),
        ("(stop)", None, Nothing),
        ("s.t.o.p", None, Nothing),
        ("opt_out", None, Nothing),
        ("ｓｔｏｐ", None, Nothing),
        ("arrêt", None, Nothing),
        ("unsubscribe me", None, Nothing),
        ("unsubscribed", None, Nothing),
        // Empty.
        ("", None, Nothing),
        ("   ", None, Nothing),
        ("?!.", None, Nothing),
        ("\"\"", None, Nothing),
        ("-", None, Nothing),
        // Opt-in and the rest.
        ("start", None, OptIn),
        ("START", None, OptIn),
        ("Unstop!", None, OptIn),
        ("yes", None, Nothing),
        ("YES", None, Nothing),
        ("help", None, Nothing),
        ("INFO", None, Nothing),
        ("start over", None, Nothing),
        // Twilio's OptOutType: STOP, START, HELP.
        ("ALTO", Some("STOP"), OptOut),
        ("please stop texting me", Some("STOP"), OptOut),
        ("yes", Some("START"), OptIn),
        ("help", Some("HELP"), Nothing),
        ("stop", Some("HELP"), OptOut),
        ("stop", Some("START"), OptOut),
        ("start", Some("STOP"), OptOut),
        ("", Some("stop"), OptOut),
        ("", Some(" STOP "), OptOut),
        ("", Some("START"), OptIn),
        ("", Some("HELP"), Nothing),
        ("", Some("STOPALL"), Nothing),
        ("", Some(""), Nothing),
        ("hello", Some("other"), Nothing),
    ];

    #[test]
    fn each_reply_says_what_the_table_says() {
        let wrong: Vec<String> = CASES
            .iter()
            .filter(|(body, kind, said)| classify(body, *kind) != *said)
            .map(|(body, kind, said)| {
                let got = classify(body, *kind);
                format!("{body:?} with {kind:?}: {got:?}, not {said:?}")
            })
            .collect();
        assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    }

    #[test]
    fn a_long_reply_is_given_up_early_and_a_long_tail_trimmed() {
        let sentence = "stop ".repeat(200_000);
        assert_eq!(classify(&sentence, None), Nothing);
        let shouting = format!("STOP{}", "!".repeat(1_000_000));
        assert_eq!(classify(&shouting, None), OptOut);
        let hidden = format!("stop{}", "\u{200b}".repeat(1_000_000));
        assert_eq!(classify(&hidden, None), OptOut);
        let letters = "a".repeat(1_000_000);
        assert_eq!(classify(&letters, None), Nothing);
    }

    #[test]
    fn every_word_fits_the_buffer_and_is_written_as_word_writes_it() {
        for w in OPT_OUT.iter().chain(&OPT_IN) {
            assert!(w.len() <= LONGEST, "{w}");
            assert_eq!(word(w).as_ref().map(Word::as_str), Some(*w));
        }
    }
}
