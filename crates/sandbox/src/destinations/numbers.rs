//! Numbers as the fakes compare them: written with separators or without, with `+` or
//! without, a number is the same number.

/// `raw` without the separators people write numbers with (spaces, `-`, `(`, `)`, `.`) and
/// without `+`.
pub(crate) fn without_separators(raw: &str) -> String {
    raw.chars()
        .filter(|c| !matches!(c, ' ' | '-' | '(' | ')' | '.' | '+'))
        .collect()
}

/// A number's digits, country code first (ten digits are taken as `1` and them), or `None`
/// if it is not a number: how numbers written differently are found to be the same.
pub(crate) fn digits(raw: &str) -> Option<String> {
    let digits = without_separators(raw);
    if digits.is_empty() || !digits.chars().all(|c| c.is_ascii_digit()) {
        return None;
    }
    let digits = if digits.len() == 10 {
        format!("1{digits}")
    } else {
        digits
    };
    (11..=15).contains(&digits.len()).then_some(digits)
}

#[cfg(test)]
mod tests {
    use super::digits;

    #[test]
    fn numbers_written_differently_are_the_same_number() {
        assert_eq!(digits("+1 (415) 555-0100").as_deref(), Some("14155550100"));
        assert_eq!(digits("4155550100"), digits("+14155550100"));
        assert_eq!(digits("4155550100"), digits("14155550100"));
        assert_eq!(digits("+44 20 7946 0958").as_deref(), Some("442079460958"));
        for bad in ["", "call me", "555-0100", "+1 415 555 0100 ext 2"] {
            assert_eq!(digits(bad), None, "{bad}");
        }
    }
}
