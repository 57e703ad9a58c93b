//! Whether a JSON value can be a cell of a column, as `insertAll` converts it: per type
//! (`STRING` a string; `INTEGER` an integer or a string of digits; `BOOLEAN` a bool or
//! `"true"`/`"false"`; `TIMESTAMP` RFC 3339 or BigQuery's own format, or seconds since the
//! epoch; ...) and per mode (`REPEATED` an array, others not). Messages are Google's.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use chrono::{DateTime, NaiveDate, NaiveDateTime};
use serde_json::Value;

use super::BigQueryField;

/// The date-and-time layouts BigQuery reads, `T` or a space between date and time.
const DATETIME_FORMATS: [&str; 4] = [
    "%Y-%m-%d %H:%M:%S%.f",
    "%Y-%m-%dT%H:%M:%S%.f",
    "%Y-%m-%d %H:%M",
    "%Y-%m-%dT%H:%M",
];

/// Why `value` cannot be a cell of `field`, or `None` if it can. A null is for the caller
/// (`REQUIRED`) to judge.
pub(super) fn cell_error(field: &BigQueryField, value: &Value) -> Option<String> {
    match (field.mode.as_str(), value) {
        ("REPEATED", Value::Array(items)) => {
            items.iter().find_map(|item| scalar_error(field, item))
        }
        ("REPEATED", _) => Some(format!(
            "Non-array value specified for repeated field: {}.",
            field.name
        )),
        (_, Value::Array(_)) => Some(format!(
            "Array specified for non-repeated field: {}.",
            field.name
        )),
        _ => scalar_error(field, value),
    }
}

/// Why one value cannot be of the field's type.
fn scalar_error(field: &BigQueryField, value: &Value) -> Option<String> {
    if value.is_object() && field.field_type != "JSON" {
        return Some(format!("This field: {} is not a record.", field.name));
    }
    let shown = match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    let good = match field.field_type.as_str() {
        "STRING" => value.is_string(),
        "INTEGER" => integer(value),
        "BOOLEAN" => boolean(value),
        "FLOAT" => float(value),
        "NUMERIC" => float(value) && !value.as_str().is_some_and(non_finite),
        "TIMESTAMP" => value.is_number() || value.as_str().is_some_and(timestamp),
        "DATE" => value.as_str().is_some_and(date),
        "DATETIME" => value.as_str().is_some_and(datetime),
        "BYTES" => value.as_str().is_some_and(|s| STANDARD.decode(s).is_ok()),
        "JSON" => value
            .as_str()
            .is_none_or(|s| serde_json::from_str::<Value>(s).is_ok()),
        _ => false,
    };
    (!good).then(|| message(&field.field_type, &shown))
}

/// What Google says of a value its column's type cannot take.
fn message(field_type: &str, shown: &str) -> String {
    match field_type {
        "STRING" => format!("Cannot convert value to string: {shown}"),
        "INTEGER" => format!("Cannot convert value to integer (bad value): {shown}"),
        "BOOLEAN" => format!("Cannot convert value to boolean: {shown}"),
        "FLOAT" => format!("Cannot convert value to floating point (bad value): {shown}"),
        "NUMERIC" => format!("Invalid NUMERIC value: {shown}"),
        "TIMESTAMP" => format!(
            "Couldn't convert value to timestamp: Could not parse '{shown}' as a timestamp. \
             Required format is YYYY-MM-DD HH:MM[:SS[.SSSSSS]] or YYYY/MM/DD HH:MM[:SS[.SSSSSS]]"
        ),
        "DATE" => format!("Invalid date string \"{shown}\""),
        "DATETIME" => format!("Invalid datetime string \"{shown}\""),
        "BYTES" => "Could not decode base64 string to bytes.".to_owned(),
        _ => format!("Failed to parse JSON: {shown}"),
    }
}

/// A JSON integer (in range), or a string of digits with an optional sign.
fn integer(value: &Value) -> bool {
    match value {
        Value::Number(n) => n.is_i64(),
        Value::String(s) => s.trim().parse::<i64>().is_ok(),
        _ => false,
    }
}

/// A JSON bool, or `"true"` or `"false"` (any case).
fn boolean(value: &Value) -> bool {
    match value {
        Value::Bool(_) => true,
        Value::String(s) => s.eq_ignore_ascii_case("true") || s.eq_ignore_ascii_case("false"),
        _ => false,
    }
}

/// A JSON number, or a string of one (`NaN` and `Infinity` too).
fn float(value: &Value) -> bool {
    match value {
        Value::Number(_) => true,
        Value::String(s) => s.trim().parse::<f64>().is_ok(),
        _ => false,
    }
}

/// `NaN` or an infinity, which `NUMERIC` cannot hold.
fn non_finite(s: &str) -> bool {
    s.trim().parse::<f64>().is_ok_and(|f| !f.is_finite())
}

/// RFC 3339, or BigQuery's `YYYY-MM-DD HH:MM[:SS[.SSSSSS]]` with an optional `UTC`, `Z` or
/// offset.
fn timestamp(s: &str) -> bool {
    let s = s.trim();
    if DateTime::parse_from_rfc3339(s).is_ok()
        || DateTime::parse_from_str(s, "%Y-%m-%d %H:%M:%S%.f%:z").is_ok()
    {
        return true;
    }
    let bare = s
        .strip_suffix(" UTC")
        .or_else(|| s.strip_suffix('Z'))
        .unwrap_or(s)
        .replace('/', "-");
    datetime(&bare)
}

/// `YYYY-MM-DD`.
fn date(s: &str) -> bool {
    NaiveDate::parse_from_str(s.trim(), "%Y-%m-%d").is_ok()
}

/// A civil date and time, no zone.
fn datetime(s: &str) -> bool {
    DATETIME_FORMATS
        .iter()
        .any(|f| NaiveDateTime::parse_from_str(s.trim(), f).is_ok())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A column `f` of this type and mode.
    fn field(field_type: &str, mode: &str) -> BigQueryField {
        BigQueryField {
            name: "f".into(),
            field_type: field_type.into(),
            mode: mode.into(),
        }
    }

    #[test]
    fn each_type_takes_what_google_converts() {
        let cases = [
            ("INTEGER", json!(42), true),
            ("INTEGER", json!("-42"), true),
            ("INTEGER", json!("4x"), false),
            ("INTEGER", json!(4.5), false),
            ("BOOLEAN", json!("true"), true),
            ("BOOLEAN", json!("yes"), false),
            ("TIMESTAMP", json!("2026-11-28T16:00:00Z"), true),
            ("TIMESTAMP", json!("2026-11-28 16:00:00.123 UTC"), true),
            ("TIMESTAMP", json!(1_800_000_000), true),
            ("TIMESTAMP", json!("yesterday"), false),
            ("STRING", json!("x"), true),
            ("STRING", json!(1), false),
            ("STRING", json!({"a": 1}), false),
            ("DATE", json!("2026-11-28"), true),
            ("BYTES", json!("aGVsbG8="), true),
            ("JSON", json!({"a": 1}), true),
            ("JSON", json!("{not json"), false),
        ];
        for (field_type, value, good) in cases {
            let error = cell_error(&field(field_type, "NULLABLE"), &value);
            assert_eq!(error.is_none(), good, "{field_type} {value}: {error:?}");
        }
    }

    #[test]
    fn repeated_wants_an_array_and_others_do_not() {
        let repeated = field("STRING", "REPEATED");
        assert!(cell_error(&repeated, &json!(["a", "b"])).is_none());
        assert!(cell_error(&repeated, &json!(["a", 1])).is_some());
        assert!(cell_error(&repeated, &json!("a")).is_some());
        assert!(cell_error(&field("STRING", "NULLABLE"), &json!(["a"])).is_some());
    }
}
