//! What a person's reply to a text says about consent, read one way for every source that
//! is posted people's own words (Twilio now): an opt-out, a reply a person must look at, an
//! opt-in, or nothing.
//!
//! Since April 2025 the FCC counts a revocation "by any reasonable means" (47 CFR
//! 64.1200(a)(10)): a person who texts "Stop texting me" has revoked, though the reply is
//! not the bare word. A list of words cannot settle every reply either way ("stop by at
//! 5?", "cancel my order" are no revocations), so a reply falls in one of four classes:
//!
//! - [`Reply::OptOut`]: the carrier says so (`OptOutType=STOP`), or the reply is made of
//!   revocation words and phrases ([`REVOKING`], [`REVOKING_PHRASES`], the source's own
//!   `opt_out_words`) with at most courtesy words around them ([`COURTESY`]): "STOP",
//!   "Stop.", "STOP STOP", "stop please", "ＳＴＯＰ", "STOP 🛑", "Stop texting me",
//!   "UNSUBSCRIBE ME", "remove me", "take me off your list", "do not text me", "opt-out",
//!   "ALTO", "cancelar".
//! - [`Reply::Review`]: any other reply holding a revocation word or phrase, or a phrase that
//!   says the texts are unwelcome ([`REVIEW_PHRASES`]: "wrong number"): "I want to opt out of
//!   this", "please end these messages", "cancel my order", "stop by at 5?". Not an opt-out
//!   yet, never dropped: a person decides, the legal clock running from its receipt.
//! - [`Reply::OptIn`]: `OptOutType=START`, or START or UNSTOP (Twilio's opt-in words) with
//!   at most courtesy words. A bare "yes" answers every question a campaign asks: nothing.
//! - [`Reply::Nothing`]: everything else.
//!
//! How a reply is read: Unicode compatibility folding (full-width `ＳＴＯＰ` is `stop`),
//! accents and case aside (`CANCELÁ` is `cancela`), characters that do not show skipped
//! (`st\u{200b}op` is `stop`), an apostrophe inside a word dropped (`don't` is `dont`), and
//! every other character that is not a letter or a digit (punctuation, emoji, symbols,
//! hyphens) a space between words, so that "opt-out", "STOP!!!" and "STOP 🛑" read as their
//! words. Letters and digits are words of their own (`stop2` is `stop 2`). When the carrier
//! and the words disagree the cautious answer wins: an opt-out over an opt-in, a review over
//! an opt-in.
//!
//! Reading is cheap whatever the length: one pass, at most [`MOST_WORDS`] words kept, a word
//! at most [`LONGEST_WORD`] letters. A reply longer than that is no bare revocation: holding
//! a revocation word, it is put to a person.

use unicode_normalization::UnicodeNormalization as _;
use unicode_normalization::char::is_combining_mark;

use super::text;

/// What a reply says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reply {
    /// Consent revoked.
    OptOut,
    /// It holds a revocation word or phrase, and more: a person decides.
    Review,
    /// Consent given back.
    OptIn,
    /// Neither.
    Nothing,
}

impl Reply {
    /// As the contract and the review queue name it.
    pub fn as_str(self) -> &'static str {
        match self {
            Reply::OptOut => "opt_out",
            Reply::Review => "review",
            Reply::OptIn => "opt_in",
            Reply::Nothing => "nothing",
        }
    }
}

/// A reply as read: its class, and the revocation words and phrases it holds (as folded,
/// each once, in order), which a person deciding a review is shown.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reading {
    pub reply: Reply,
    pub matched: Vec<String>,
}

/// Words that revoke alone: the FCC's (stop, quit, end, revoke, cancel, unsubscribe; "opt
/// out" is a phrase), Twilio's keywords (optout, stopall), and Spanish ones. Not "para", the
/// everyday "for".
pub const REVOKING: [&str; 13] = [
    "stop",
    "quit",
    "end",
    "revoke",
    "optout",
    "cancel",
    "unsubscribe",
    "stopall",
    "alto",
    "parar",
    "basta",
    "cancelar",
    "baja",
];

/// Phrases that revoke, as folded words.
pub const REVOKING_PHRASES: [&[&str]; 21] = [
    &["opt", "out"],
    &["opt", "me", "out"],
    &["stop", "all"],
    &["remove", "me"],
    &["take", "me", "off"],
    &["do", "not", "text"],
    &["dont", "text"],
    &["do", "not", "contact"],
    &["dont", "contact"],
    &["do", "not", "message"],
    &["dont", "message"],
    &["stop", "texting"],
    &["stop", "messaging"],
    &["stop", "sending"],
    &["stop", "contacting"],
    &["no", "more", "texts"],
    &["no", "more", "messages"],
    &["no", "mas", "mensajes"],
    &["no", "me", "envien"],
    &["dar", "de", "baja"],
    &["darme", "de", "baja"],
];

/// Phrases that say the texts are unwelcome without revoking in so many words: always put
/// to a person.
pub const REVIEW_PHRASES: [&[&str]; 5] = [
    &["wrong", "number"],
    &["not", "interested"],
    &["leave", "me", "alone"],
    &["numero", "equivocado"],
    &["no", "me", "interesa"],
];

/// Words that may stand around a revocation (or an opt-in) and leave it one: courtesy,
/// address and the texts themselves ("stop please", "remove me from your list").
pub const COURTESY: [&str; 41] = [
    "please",
    "pls",
    "plz",
    "plse",
    "thanks",
    "thank",
    "you",
    "thankyou",
    "thx",
    "ty",
    "me",
    "now",
    "asap",
    "ok",
    "okay",
    "sorry",
    "hi",
    "hello",
    "hey",
    "kindly",
    "just",
    "right",
    "away",
    "immediately",
    "your",
    "the",
    "this",
    "list",
    "from",
    "of",
    "texts",
    "text",
    "messages",
    "message",
    "msgs",
    "sms",
    "por",
    "favor",
    "gracias",
    "ya",
    "mi",
];

/// The opt-in words: Twilio's, but not YES.
pub const OPT_IN: [&str; 2] = ["start", "unstop"];

/// Words read at most: a longer reply is no bare revocation.
pub const MOST_WORDS: usize = 64;
/// Letters of a word kept at most: a longer one is no word of the lists.
pub const LONGEST_WORD: usize = 32;

/// The class of the reply `body`, with Twilio's `OptOutType` parameter when it came with
/// one (see [`read`]).
pub fn classify(body: &str, opt_out_type: Option<&str>) -> Reply {
    read(body, opt_out_type, &[]).reply
}

/// The reply `body` read, with Twilio's `OptOutType` parameter when it came with one, and
/// the source's own revocation words (`opt_out_words`: a word or a phrase each, folded as a
/// reply is).
pub fn read(body: &str, opt_out_type: Option<&str>, own_words: &[String]) -> Reading {
    let marked = |kind: &str| opt_out_type.is_some_and(|t| t.trim().eq_ignore_ascii_case(kind));
    let (words, whole) = words(body);
    let own: Vec<Vec<String>> = own_words
        .iter()
        .map(|w| words_of(w))
        .filter(|w| !w.is_empty())
        .collect();
    let units = units(&words, &own);
    let matched = matched(&units);
    let holds = |kind: Unit| units.iter().any(|(unit, _)| *unit == kind);
    let only = |kinds: &[Unit]| units.iter().all(|(unit, _)| kinds.contains(unit));
    let revokes = holds(Unit::Revoking) && whole && only(&[Unit::Revoking, Unit::Courtesy]);
    let review = holds(Unit::Revoking) || holds(Unit::Unwelcome);
    let opts_in = holds(Unit::OptIn) && whole && only(&[Unit::OptIn, Unit::Courtesy]);
    let reply = if marked("STOP") || revokes {
        Reply::OptOut
    } else if review {
        Reply::Review
    } else if marked("START") || opts_in {
        Reply::OptIn
    } else {
        Reply::Nothing
    };
    Reading { reply, matched }
}

/// What a run of a reply's words is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Unit {
    Revoking,
    Unwelcome,
    Courtesy,
    OptIn,
    Other,
}

/// `words` cut into units, the longest phrase first at each word; each with its words.
fn units(words: &[String], own: &[Vec<String>]) -> Vec<(Unit, String)> {
    let fixed = REVOKING_PHRASES
        .iter()
        .map(|p| (Unit::Revoking, p.to_vec()))
        .chain(REVIEW_PHRASES.iter().map(|p| (Unit::Unwelcome, p.to_vec())));
    let mut phrases: Vec<(Unit, Vec<&str>)> = fixed
        .chain(
            own.iter()
                .map(|p| (Unit::Revoking, p.iter().map(String::as_str).collect())),
        )
        .collect();
    phrases.sort_by_key(|(_, p)| std::cmp::Reverse(p.len()));
    let mut units = Vec::new();
    let mut at = 0;
    while at < words.len() {
        let rest = &words[at..];
        let phrase = phrases.iter().find(|(_, p)| {
            p.len() <= rest.len() && p.iter().zip(rest).all(|(a, b)| *a == b.as_str())
        });
        let (unit, len) = match phrase {
            Some((unit, p)) => (*unit, p.len()),
            None => (word_unit(&rest[0]), 1),
        };
        units.push((unit, rest[..len].join(" ")));
        at += len;
    }
    units
}

fn word_unit(word: &str) -> Unit {
    if REVOKING.contains(&word) {
        Unit::Revoking
    } else if COURTESY.contains(&word) {
        Unit::Courtesy
    } else if OPT_IN.contains(&word) {
        Unit::OptIn
    } else {
        Unit::Other
    }
}

/// The revocation words and phrases among `units`, each once, in order.
fn matched(units: &[(Unit, String)]) -> Vec<String> {
    let mut matched: Vec<String> = Vec::new();
    for (unit, words) in units {
        if matches!(unit, Unit::Revoking | Unit::Unwelcome) && !matched.contains(words) {
            matched.push(words.clone());
        }
    }
    matched
}

/// The words of `text`, folded, however many.
fn words_of(text: &str) -> Vec<String> {
    words(text).0
}

/// The words of `body`, folded (see the module's doc), at most [`MOST_WORDS`]; and whether
/// that is the whole reply.
fn words(body: &str) -> (Vec<String>, bool) {
    let mut words: Vec<String> = Vec::new();
    let mut word = String::new();
    let mut letters = 0;
    let mut digits = false;
    let mut whole = true;
    let end = |word: &mut String, words: &mut Vec<String>, whole: &mut bool| {
        if word.is_empty() {
            return true;
        }
        if words.len() == MOST_WORDS {
            *whole = false;
            return false;
        }
        words.push(std::mem::take(word));
        true
    };
    for c in body.nfkd() {
        if is_combining_mark(c) || (text::is_unsafe_char(c) && !c.is_whitespace()) {
            continue;
        }
        if matches!(c, '\'' | '\u{2019}') && !word.is_empty() {
            continue;
        }
        let letter = c.is_alphabetic();
        if letter || c.is_numeric() {
            if !word.is_empty() && digits == letter {
                letters = 0;
                if !end(&mut word, &mut words, &mut whole) {
                    break;
                }
            }
            digits = !letter;
            letters += 1;
            match letters.cmp(&LONGEST_WORD) {
                std::cmp::Ordering::Less | std::cmp::Ordering::Equal => {
                    word.extend(c.to_lowercase());
                }
                // No word of the lists is this long: the rest of it is dropped, and the
                // mark keeps it from being one of them.
                std::cmp::Ordering::Greater if letters == LONGEST_WORD + 1 => word.push('…'),
                std::cmp::Ordering::Greater => {}
            }
        } else {
            letters = 0;
            if !end(&mut word, &mut words, &mut whole) {
                break;
            }
        }
    }
    end(&mut word, &mut words, &mut whole);
    (words, whole)
}

#[cfg(test)]
mod tests;
