//! Phone numbers as the ledger keeps them: E.164, `+` and ASCII digits, normalized with
//! libphonenumber's rules and metadata (the `phonenumber` crate) wherever a number comes in:
//! signed deliveries, reconciliation, local changes and lookups.
//!
//! A number is taken when it parses into a *possible* number: a known country code and a
//! national number of a length some number of that country has. Whether the range is
//! assigned is not asked (`+1 555 ...` is kept): a consent change is never refused for that.
//! What is written is refused when it is anything but a phone number written plainly: ASCII
//! digits, one leading `+`, and the separators people type (space, `-`, `.`, `/`, `(`,
//! `)`). Full-width and other scripts' digits, invisible and direction-changing characters,
//! letters (vanity numbers, extensions) and markup are refused, naming the character: a
//! ledger number must look like the number it is.

use std::fmt;
use std::str::FromStr;

use phonenumber::country::Id;
use phonenumber::metadata::DATABASE;

/// Most digits a written number may have: E.164's 15, and an international dialling
/// prefix before them (`011`, `00`). Longer text is refused before it is parsed.
const MAX_DIGITS: usize = 18;

/// The region national formats are read in (`(202) 555-0143` with `US`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Region(Id);

impl Region {
    /// The default region: the service's numbers are American.
    pub const US: Region = Region(Id::US);
}

impl Default for Region {
    fn default() -> Self {
        Region::US
    }
}

impl FromStr for Region {
    type Err = PhoneError;

    /// An ISO 3166-1 alpha-2 code, in either case (`US`, `gb`).
    fn from_str(code: &str) -> Result<Self, Self::Err> {
        code.trim()
            .to_ascii_uppercase()
            .parse::<Id>()
            .map(Region)
            .map_err(|_| PhoneError::UnknownRegion(code.to_owned()))
    }
}

/// A number in E.164 form: `+`, the country code and the national number, ASCII only.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct E164(String);

impl E164 {
    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub fn into_string(self) -> String {
        self.0
    }
}

impl fmt::Display for E164 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Why a written number is not taken. The text says what is wrong without repeating the
/// number (which may be long, or hold characters that reorder a line when shown).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PhoneError {
    #[error("empty")]
    Empty,
    #[error(
        "invalid character {0} at position {1}: only ASCII digits, a leading +, spaces and ( ) - . / are taken"
    )]
    InvalidCharacter(ShownChar, usize),
    #[error("not a phone number")]
    NotANumber,
    #[error("not a possible number: unknown country code")]
    UnknownCountryCode,
    #[error("not a possible number: too long ({0} digits)")]
    TooLong(usize),
    #[error("not a possible number: too short ({0} digits)")]
    TooShort(usize),
    #[error("not a possible number: too long ({0} digits after the country code)")]
    NationalTooLong(usize),
    #[error("not a possible number: too short ({0} digits after the country code)")]
    NationalTooShort(usize),
    #[error(
        "not a possible number: {0} digits after the country code is a local number without its area code"
    )]
    LocalOnly(usize),
    #[error("not a possible number: no number of country code +{0} has {1} digits")]
    InvalidLength(u16, usize),
    #[error("unknown region {0:?}: an ISO 3166-1 alpha-2 code is expected (e.g. US)")]
    UnknownRegion(String),
}

/// A character as an error shows it: quoted when it is printable ASCII, else its code
/// point (`U+202E`), so that an invisible or direction-changing one shows as what it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShownChar(pub char);

impl fmt::Display for ShownChar {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_ascii_graphic() {
            write!(f, "'{}'", self.0)
        } else {
            write!(f, "U+{:04X}", u32::from(self.0))
        }
    }
}

/// `raw` normalized to E.164, national formats read in `default_region`; an error saying
/// what is wrong when it is not a possible number.
pub fn normalize(raw: &str, default_region: Region) -> Result<E164, PhoneError> {
    if is_nanp_e164(raw) {
        return Ok(E164(raw.to_owned()));
    }
    parse(raw, default_region)
}

/// An E.164 number as its country's dialing prefix and its national number, as VAN takes a
/// phone: `+12025550143` is `("1", "2025550143")`, `+442071838750` `("44", "2071838750")`.
pub fn dialing(e164: &str) -> Result<(String, String), PhoneError> {
    if is_nanp_e164(e164) {
        return Ok(("1".to_owned(), e164[2..].to_owned()));
    }
    let number = phonenumber::parse(None, e164).map_err(|_| PhoneError::NotANumber)?;
    Ok((
        number.code().value().to_string(),
        number.national().to_string(),
    ))
}

/// `+1`, a digit 2-9 and nine more ASCII digits: the common case, answered without the
/// parser (about 8 µs a number, which a 10,000-number lookup would feel). The parser gives
/// such a number back unchanged: every ten-digit national number is possible under +1, and
/// one starting 2-9 has no trunk prefix to strip.
fn is_nanp_e164(raw: &str) -> bool {
    let digits = raw.as_bytes();
    digits.len() == 12
        && raw.starts_with("+1")
        && (b'2'..=b'9').contains(&digits[2])
        && digits[3..].iter().all(u8::is_ascii_digit)
}

/// [`normalize`] by the parser and the metadata.
fn parse(raw: &str, default_region: Region) -> Result<E164, PhoneError> {
    let digits = check_characters(raw)?;
    if digits > MAX_DIGITS {
        return Err(PhoneError::TooLong(digits));
    }
    let number = phonenumber::parse(Some(default_region.0), raw.trim()).map_err(|e| match e {
        phonenumber::ParseError::InvalidCountryCode => PhoneError::UnknownCountryCode,
        phonenumber::ParseError::TooLong => PhoneError::TooLong(digits),
        phonenumber::ParseError::TooShortNsn | phonenumber::ParseError::TooShortAfterIdd => {
            PhoneError::TooShort(digits)
        }
        // No digits left once a trunk prefix is stripped (`+1 1000000000`).
        phonenumber::ParseError::NoNumber | phonenumber::ParseError::MalformedInteger(_) => {
            PhoneError::NotANumber
        }
    })?;
    let code = number.code().value();
    let national = number.national().to_string();
    possible_length(code, national.len())?;
    // Built from two integers: always `+` and ASCII digits.
    Ok(E164(format!("+{code}{national}")))
}

/// The number of digits in `raw`, or the first character that has no place in a written
/// number (positions count characters from 1).
fn check_characters(raw: &str) -> Result<usize, PhoneError> {
    if raw.trim().is_empty() {
        return Err(PhoneError::Empty);
    }
    let (mut digits, mut started) = (0, false);
    for (index, c) in raw.chars().enumerate() {
        match c {
            '0'..='9' => digits += 1,
            '+' if !started => {}
            ' ' | '-' | '.' | '/' | '(' | ')' => {}
            _ => return Err(PhoneError::InvalidCharacter(ShownChar(c), index + 1)),
        }
        started |= c != ' ';
    }
    Ok(digits)
}

/// Whether a national number of `length` digits is possible under country code `code`:
/// libphonenumber's possible-number test for a number of unknown type, whose lengths are
/// those of every type of number of the code's main region.
fn possible_length(code: u16, length: usize) -> Result<(), PhoneError> {
    let regions = DATABASE
        .by_code(&code)
        .ok_or(PhoneError::UnknownCountryCode)?;
    let main = regions
        .iter()
        .find(|m| m.is_main_country_for_code())
        .or(regions.first())
        .ok_or(PhoneError::UnknownCountryCode)?;
    let d = main.descriptors();
    let kinds = [
        d.fixed_line(),
        d.mobile(),
        d.toll_free(),
        d.premium_rate(),
        d.shared_cost(),
        d.personal_number(),
        d.voip(),
        d.pager(),
        d.uan(),
        d.voicemail(),
        d.no_international(),
    ];
    let lengths = kinds.iter().flatten();
    let fits = |n: usize| u16::try_from(n).unwrap_or(u16::MAX);
    if lengths
        .clone()
        .any(|k| k.possible_length().contains(&fits(length)))
    {
        return Ok(());
    }
    if lengths
        .clone()
        .any(|k| k.possible_local_length().contains(&fits(length)))
    {
        return Err(PhoneError::LocalOnly(length));
    }
    let all = lengths.flat_map(|k| k.possible_length().iter().copied());
    match (all.clone().min(), all.max()) {
        (Some(min), _) if fits(length) < min => Err(PhoneError::NationalTooShort(length)),
        (_, Some(max)) if fits(length) > max => Err(PhoneError::NationalTooLong(length)),
        _ => Err(PhoneError::InvalidLength(code, length)),
    }
}

/// `raw` as the ledger keeps it: normalized (national formats read as American), or, when
/// it is not a possible number but already written in E.164 form (`+` and 2 to 15 ASCII
/// digits), as written. Numbers of that kind the service may hold (its own check is the
/// form only), and ledgers written before numbers were normalized keep them: they are
/// still looked up, and an opt-out of one is still taken. Else the error of [`normalize`].
pub fn canonical(raw: &str) -> Result<String, PhoneError> {
    normalize(raw, Region::default())
        .map(E164::into_string)
        .or_else(|error| {
            if is_e164_form(raw) {
                Ok(raw.to_owned())
            } else {
                Err(error)
            }
        })
}

/// [`is_e164_form`] as a pattern of the OpenAPI document: what [`canonical`] always takes.
pub const E164_PATTERN: &str = "^\\+[1-9][0-9]{1,14}$";

/// A phone number as the admin API takes it: in E.164 form (the pattern), or written as
/// people write it, which [`canonical`] reads when it is a possible number.
pub fn schema() -> utoipa::openapi::schema::Object {
    utoipa::openapi::schema::ObjectBuilder::new()
        .schema_type(utoipa::openapi::schema::Type::String)
        .pattern(Some(E164_PATTERN))
        .description(Some(
            "A phone number in E.164 form (e.g. +15551234567); a possible number written as \
             people write it (+1 (555) 123-4567; a national number is read as American) is \
             read too",
        ))
        .examples(["+15551234567"])
        .build()
}

/// `+`, a digit 1-9, and up to 14 more ASCII digits.
pub fn is_e164_form(value: &str) -> bool {
    value.strip_prefix('+').is_some_and(|rest| {
        rest.bytes()
            .next()
            .is_some_and(|b| (b'1'..=b'9').contains(&b))
            && (2..=15).contains(&rest.len())
            && rest.bytes().all(|b| b.is_ascii_digit())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_number_splits_into_its_dialing_prefix_and_national_number() {
        assert_eq!(
            dialing("+12025550143").expect("valid"),
            ("1".to_owned(), "2025550143".to_owned())
        );
        assert_eq!(
            dialing("+442071838750").expect("valid"),
            ("44".to_owned(), "2071838750".to_owned())
        );
        assert_eq!(
            dialing("+390612345678").expect("valid"),
            ("39".to_owned(), "0612345678".to_owned()),
            "Italy keeps its leading zero"
        );
        assert!(dialing("not a number").is_err());
    }

    /// The document's pattern is `is_e164_form`, and `canonical` takes all it lets through.
    #[test]
    fn the_e164_pattern_is_is_e164_form() {
        let pattern = regex::Regex::new(E164_PATTERN).unwrap();
        for raw in [
            "+1",
            "+12",
            "+123456789012345",
            "+1234567890123456",
            "+0123",
            "12025550143",
            "+1202555014a",
            "+44 20",
            "",
            "+",
            "+999999999999999",
            "+12025550143\n",
        ] {
            assert_eq!(pattern.is_match(raw), is_e164_form(raw), "{raw:?}");
            if pattern.is_match(raw) {
                assert!(canonical(raw).is_ok(), "{raw:?}");
            }
        }
    }

    fn us(raw: &str) -> Result<String, PhoneError> {
        normalize(raw, Region::US).map(E164::into_string)
    }

    #[test]
    fn an_e164_number_is_kept_as_it_is() {
        assert_eq!(us("+12025550143").unwrap(), "+12025550143");
        assert_eq!(us("+442079460958").unwrap(), "+442079460958");
        // An Italian fixed line keeps its leading zero.
        assert_eq!(us("+39 06 1234 5678").unwrap(), "+390612345678");
    }

    #[test]
    fn a_possible_number_in_a_fictional_range_is_kept() {
        assert_eq!(us("+1 555 010 0001").unwrap(), "+15550100001");
        assert_eq!(us("+1 (555) 000-1111").unwrap(), "+15550001111");
    }

    #[test]
    fn a_national_number_is_read_in_the_region() {
        assert_eq!(us("(202) 555-0143").unwrap(), "+12025550143");
        assert_eq!(us("202.555.0143").unwrap(), "+12025550143");
        assert_eq!(us("011 44 20 7946 0958").unwrap(), "+442079460958");
        let gb: Region = "gb".parse().unwrap();
        assert_eq!(
            normalize("020 7946 0958", gb).unwrap().as_str(),
            "+442079460958"
        );
        assert!(matches!(
            "XX".parse::<Region>(),
            Err(PhoneError::UnknownRegion(_))
        ));
    }

    /// The crate's parser refuses full-width and Arabic-Indic digits (it answers "not a
    /// number"); they are refused before it, naming the first character that is not ASCII.
    #[test]
    fn other_scripts_digits_are_refused_naming_the_character() {
        let full_width = "＋１５５５０１０００１";
        assert_eq!(
            us(full_width).unwrap_err().to_string(),
            "invalid character U+FF0B at position 1: only ASCII digits, a leading +, spaces and ( ) - . / are taken"
        );
        let arabic_indic = "+١٥٥٥٠١٠٠٠٠١";
        assert!(matches!(
            us(arabic_indic),
            Err(PhoneError::InvalidCharacter(ShownChar('١'), 2))
        ));
    }

    #[test]
    fn hostile_text_is_refused_saying_what_is_wrong() {
        let cases = [
            (
                "+1555\u{202E}0100001",
                "invalid character U+202E at position 6",
            ),
            (" +1 555 010 0001 x", "invalid character 'x' at position 18"),
            ("1 +15550100001", "invalid character '+' at position 3"),
            (
                "+1555\u{200B}0100001",
                "invalid character U+200B at position 6",
            ),
            (
                "<script>alert(1)</script>",
                "invalid character '<' at position 1",
            ),
            (
                "+15550100001<script>",
                "invalid character '<' at position 13",
            ),
            (
                &"1".repeat(301),
                "not a possible number: too long (301 digits)",
            ),
            ("", "empty"),
            ("   ", "empty"),
            ("+1 202 555 0143 ext. 12", "invalid character 'e'"),
            ("+1-800-FLOWERS", "invalid character 'F'"),
            ("1+2025550143", "invalid character '+' at position 2"),
        ];
        for (raw, expected) in cases {
            let error = us(raw).unwrap_err().to_string();
            assert!(error.starts_with(expected), "{raw:?}: {error}");
        }
    }

    #[test]
    fn a_number_of_an_impossible_length_or_code_is_refused() {
        let cases = [
            (
                "+1555000",
                "not a possible number: too short (6 digits after the country code)",
            ),
            (
                "+1 202 555 01434",
                "not a possible number: too long (11 digits after the country code)",
            ),
            (
                "+15550002",
                "7 digits after the country code is a local number without its area code",
            ),
            ("555 0100", "a local number without its area code"),
            (
                "+999 1234567",
                "not a possible number: unknown country code",
            ),
            ("12", "not a possible number: too short (2 digits)"),
            ("--", "not a phone number"),
            (
                "+7 9123 4567 8901",
                "no number of country code +7 has 12 digits",
            ),
        ];
        for (raw, expected) in cases {
            let error = us(raw).unwrap_err().to_string();
            assert!(error.contains(expected), "{raw:?}: {error}");
        }
    }

    #[test]
    fn the_ledger_keeps_a_possible_number_normalized_and_an_e164_one_as_written() {
        assert_eq!(canonical("+1 (555) 000-1111").unwrap(), "+15550001111");
        assert_eq!(canonical("+1555").unwrap(), "+1555");
        assert!(canonical("+1555\u{202E}0100001").is_err());
        assert!(canonical(&"1".repeat(301)).is_err());
    }

    proptest::proptest! {
        #[test]
        fn whatever_is_taken_is_a_plus_and_ascii_digits(raw in "\\PC{0,24}") {
            if let Ok(number) = us(&raw) {
                proptest::prop_assert!(is_e164_form(&number), "{raw:?} -> {number}");
            }
        }

        #[test]
        fn a_nanp_number_in_e164_is_what_the_parser_gives(national in "[2-9][0-9]{9}") {
            let raw = format!("+1{national}");
            proptest::prop_assert_eq!(parse(&raw, Region::US).map(E164::into_string), Ok(raw));
        }

        #[test]
        fn a_normalized_number_normalizes_to_itself(raw in "[+]?[0-9 ()-]{0,20}") {
            if let Ok(number) = us(&raw) {
                proptest::prop_assert_eq!(us(&number), Ok(number.clone()));
            }
        }
    }
}
