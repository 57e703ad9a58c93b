//! How values cross the storage boundary as text: JSON parameters and results, times as
//! stored.

/// JSON text the database built, decoded; a decode error of the query when it is not.
pub fn json_decoded<T: serde::de::DeserializeOwned>(text: &str) -> Result<T, sqlx::Error> {
    serde_json::from_str(text).map_err(|e| sqlx::Error::Decode(Box::new(e)))
}

/// `value` as JSON text, for a `json_each(?)` parameter or a JSON column. A value that
/// cannot be encoded is an error: binding `[]` in its place would silently match nothing
/// (or mark nothing applied).
pub fn json_param<T: serde::Serialize + ?Sized>(value: &T) -> Result<String, sqlx::Error> {
    serde_json::to_string(value).map_err(|e| sqlx::Error::Encode(Box::new(e)))
}

/// A time as SQLite stores it and the ledger shows it: RFC 3339, UTC, milliseconds.
pub fn timestamp(at: chrono::DateTime<chrono::Utc>) -> String {
    crate::model::Timestamp(at).to_string()
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::json_param;

    #[test]
    fn a_value_that_cannot_be_encoded_is_an_encode_error_not_an_empty_array() {
        // JSON object keys must be strings.
        let unencodable = BTreeMap::from([((1, 2), "pair key")]);
        let error = json_param(&unencodable).expect_err("tuple keys cannot be JSON keys");
        assert!(matches!(error, sqlx::Error::Encode(_)), "{error:?}");
        assert_eq!(
            json_param(&["a", "b"]).expect("strings encode"),
            r#"["a","b"]"#
        );
    }
}
