//! Documented constraints checked before a request is sent, so a bad value fails here with
//! a clear error rather than as an opaque 400/422 from the service.

use super::error::ClientError;
use crate::model::text::quoted;

/// Largest and smallest `limit` of a list request.
pub const MIN_LIMIT: u32 = 1;
pub const MAX_LIMIT: u32 = 1000;

/// PHONE: `^\+[1-9]\d{1,14}$|^\d{5,6}$` (E.164 with a plus, or a 5-6 digit short code).
pub fn is_phone(value: &str) -> bool {
    let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if let Some(rest) = value.strip_prefix('+') {
        let first_ok = rest
            .bytes()
            .next()
            .is_some_and(|b| (b'1'..=b'9').contains(&b));
        return first_ok && (2..=15).contains(&rest.len()) && digits(rest);
    }
    (5..=6).contains(&value.len()) && digits(value)
}

/// E.164 only (GET /leads `phoneNumber`).
pub fn is_e164(value: &str) -> bool {
    crate::model::phone::is_e164_form(value)
}

/// Custom field names: `^[_a-zA-Z]\w*$` (ASCII word characters).
pub fn is_custom_field_name(value: &str) -> bool {
    let mut bytes = value.bytes();
    bytes
        .next()
        .is_some_and(|b| b == b'_' || b.is_ascii_alphabetic())
        && bytes.all(|b| b == b'_' || b.is_ascii_alphanumeric())
}

pub fn phone(field: &'static str, value: &str) -> Result<(), ClientError> {
    if is_phone(value) {
        Ok(())
    } else {
        Err(ClientError::invalid(
            field,
            format!(
                "{} is not E.164 (+ and 2-15 digits) or a 5-6 digit short code",
                quoted(value)
            ),
        ))
    }
}

pub fn e164(field: &'static str, value: &str) -> Result<(), ClientError> {
    if is_e164(value) {
        Ok(())
    } else {
        Err(ClientError::invalid(
            field,
            format!(
                "{} is not an E.164 number (+ and 2-15 digits)",
                quoted(value)
            ),
        ))
    }
}

pub fn custom_field_name(field: &'static str, value: &str) -> Result<(), ClientError> {
    if is_custom_field_name(value) {
        Ok(())
    } else {
        Err(ClientError::invalid(
            field,
            format!(
                "{} must start with a letter or _ and hold only letters, digits and _",
                quoted(value)
            ),
        ))
    }
}

pub fn limit(value: Option<u32>) -> Result<(), ClientError> {
    match value {
        Some(n) if !(MIN_LIMIT..=MAX_LIMIT).contains(&n) => Err(ClientError::invalid(
            "limit",
            format!("{n} is outside {MIN_LIMIT}..={MAX_LIMIT}"),
        )),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn phone_numbers_follow_the_documented_pattern() {
        for good in ["+15551234567", "+12", "+123456789012345", "12345", "123456"] {
            assert!(is_phone(good), "{good}");
        }
        for bad in [
            "+0123",
            "+1",
            "+1234567890123456",
            "1234",
            "1234567",
            "+1 555",
            "",
            "+",
        ] {
            assert!(!is_phone(bad), "{bad}");
        }
        assert!(!is_e164("12345"));
    }

    #[test]
    fn custom_field_names_follow_the_documented_pattern() {
        for good in ["a", "_", "donor_level", "Tier2"] {
            assert!(is_custom_field_name(good), "{good}");
        }
        for bad in ["", "2tier", "has space", "dash-ed", "é"] {
            assert!(!is_custom_field_name(bad), "{bad}");
        }
    }

    #[test]
    fn limits_outside_one_to_a_thousand_are_refused() {
        assert!(limit(Some(0)).is_err());
        assert!(limit(Some(1001)).is_err());
        assert!(limit(Some(1)).is_ok());
        assert!(limit(Some(1000)).is_ok());
        assert!(limit(None).is_ok());
    }
}
