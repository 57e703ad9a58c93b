//! The documents' constraints on what the service receives, applied as the service applies
//! them: the PHONE pattern, E.164, custom field names, `limit`, email format.

/// PHONE: `^\+[1-9]\d{1,14}$|^\d{5,6}$`, E.164 with its plus or a 5 to 6 digit short code.
pub(crate) fn is_phone(value: &str) -> bool {
    is_e164(value) || is_short_code(value)
}

/// The E.164 half of PHONE: a plus, a first digit 1-9, then 1 to 14 more digits.
pub(crate) fn is_e164(value: &str) -> bool {
    let Some(digits) = value.strip_prefix('+') else {
        return false;
    };
    let mut bytes = digits.bytes();
    matches!(bytes.next(), Some(b'1'..=b'9'))
        && (1..=14).contains(&bytes.len())
        && bytes.all(|b| b.is_ascii_digit())
}

fn is_short_code(value: &str) -> bool {
    matches!(value.len(), 5 | 6) && value.bytes().all(|b| b.is_ascii_digit())
}

/// A custom field name: `^[_a-zA-Z]\w*$`, where `\w` is an ASCII letter, digit or `_`.
pub(crate) fn is_custom_field_name(value: &str) -> bool {
    let word = |c: char| c == '_' || c.is_ascii_alphanumeric();
    let mut chars = value.chars();
    chars
        .next()
        .is_some_and(|c| c == '_' || c.is_ascii_alphabetic())
        && chars.all(word)
}

/// "email format", loosely: `local@domain.tld`, no whitespace.
pub(crate) fn is_email(value: &str) -> bool {
    if value.contains(char::is_whitespace) {
        return false;
    }
    value.split_once('@').is_some_and(|(local, domain)| {
        !local.is_empty()
            && domain.contains('.')
            && !domain.starts_with('.')
            && !domain.ends_with('.')
    })
}

/// Why a `limit` was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum BadLimit {
    /// Not a number at all (a malformed request).
    NotANumber,
    /// A number, but not an integer from 1 to 1000.
    OutOfRange,
}

/// `limit`: an integer-valued number from 1 to 1000 (`2.0` is one; `2.5` is not). What
/// does not parse as a number is malformed; any other number outside that is refused.
pub(crate) fn limit(raw: &str) -> Result<usize, BadLimit> {
    let number: f64 = raw.parse().map_err(|_| BadLimit::NotANumber)?;
    if number.fract() != 0.0 || !(1.0..=1000.0).contains(&number) {
        return Err(BadLimit::OutOfRange);
    }
    // An integer from 1 to 1000: the conversion is exact.
    Ok(number as usize)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn phone_follows_the_pattern_of_the_document() {
        for good in ["+15551234567", "+12", "+123456789012345", "12345", "123456"] {
            assert!(is_phone(good), "{good}");
        }
        for bad in [
            "",
            "+",
            "+1",
            "+0123",
            "+1234567890123456",
            "1234",
            "1234567",
            "+1 555",
            "+1555a",
            "1234a",
            "+١٢٣",
        ] {
            assert!(!is_phone(bad), "{bad}");
        }
        assert!(is_e164("+15551234567"));
        assert!(!is_e164("12345"), "a short code is not E.164");
    }

    #[test]
    fn custom_field_names_start_with_a_letter_or_underscore() {
        for good in ["a", "_", "_9", "donor_level", "Tier2"] {
            assert!(is_custom_field_name(good), "{good}");
        }
        for bad in ["", "9a", "a b", "a-b", "é", "aé"] {
            assert!(!is_custom_field_name(bad), "{bad}");
        }
    }

    #[test]
    fn emails_need_a_local_part_and_a_dotted_domain() {
        assert!(is_email("sam@example.org"));
        for bad in [
            "",
            "sam",
            "@example.org",
            "sam@org",
            "sam@.org",
            "sam@org.",
            "s am@x.org",
        ] {
            assert!(!is_email(bad), "{bad}");
        }
    }

    #[test]
    fn limit_is_an_integer_from_one_to_a_thousand() {
        assert_eq!(limit("1"), Ok(1));
        assert_eq!(limit("1000"), Ok(1000));
        assert_eq!(limit("20.0"), Ok(20));
        for out in ["0", "1001", "2.5", "-1", "NaN", "inf"] {
            assert_eq!(limit(out), Err(BadLimit::OutOfRange), "{out}");
        }
        for bad in ["ten", "", " 5"] {
            assert_eq!(limit(bad), Err(BadLimit::NotANumber), "{bad}");
        }
    }
}
