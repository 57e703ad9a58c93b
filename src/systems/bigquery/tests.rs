use super::grant::token_uri_allowed;
use super::*;

#[test]
fn the_schema_is_the_rows_columns_and_a_table_of_other_columns_is_named() {
    let settings: BigQuerySettings =
        toml::from_str("project = \"p\"\ndataset = \"d\"\n").expect("settings");
    let table = BigQuery::new(&settings);
    let ours = json!({ "schema": { "fields": schema() } });
    assert_eq!(table.compare(&ours), Ok(()));
    let mut fields = schema();
    fields[5]["type"] = json!("STRING");
    let theirs = json!({ "schema": { "fields": fields } });
    assert_eq!(
        table.compare(&theirs),
        Err(Stop::Lookup(
            "table p.d.consent_events: column `optedOut` is STRING, the rows' BOOLEAN".into()
        ))
    );
    let mut legacy = schema();
    legacy[0]["type"] = json!("INT64");
    legacy.push(json!({ "name": "note", "type": "STRING" }));
    assert_eq!(
        table.compare(&json!({ "schema": { "fields": legacy } })),
        Ok(())
    );
}

#[test]
fn a_token_uri_is_https_or_this_host() {
    assert!(token_uri_allowed("https://oauth2.googleapis.com/token").is_ok());
    assert!(token_uri_allowed("http://127.0.0.1:8080/token").is_ok());
    assert!(token_uri_allowed("http://oauth2.example.org/token").is_err());
}
