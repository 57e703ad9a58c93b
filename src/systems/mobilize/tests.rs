use super::*;
use crate::model::phone::Region;

const US: Region = Region::US;

fn person(status: &str, numbers: &[&str], modified: i64) -> serde_json::Value {
    json!({
        "id": 1001,
        "person_id": 1001,
        "user_id": 701001,
        "created_date": 1_700_000_000,
        "modified_date": modified,
        "given_name": "Ada",
        "phone_numbers": numbers
            .iter()
            .enumerate()
            .map(|(at, number)| json!({"primary": at == 0, "number": number}))
            .collect::<Vec<_>>(),
        "sms_opt_in_status": status,
    })
}

fn said(read: &Listed) -> Vec<&Said> {
    read.records.iter().map(|r| &r.said).collect()
}

#[test]
fn an_opted_out_person_is_an_opt_out_of_each_of_their_numbers_at_their_modified_date() {
    let read = records_of(
        &person(
            "OPT_OUT",
            &["+12025550103", "(202) 555-0104"],
            1_764_000_000,
        ),
        US,
    );
    let at = Utc.timestamp_opt(1_764_000_000, 0).single().unwrap();
    assert_eq!(read.modified, Some(at));
    let consent = |number: &str| Said::Consent {
        phone_number: number.to_owned(),
        opted_out: true,
        occurred_at: at,
    };
    assert_eq!(
        said(&read),
        vec![&consent("+12025550103"), &consent("+12025550104")]
    );
    assert_eq!(read.records[0].key, "1001:+12025550103:1764000000:OPT_OUT");
    assert_eq!(read.records[0].stands_on["personId"], "1001");
    assert_eq!(read.records[0].stands_on["modifiedDate"], 1_764_000_000);
    assert_eq!(read.records[0].stands_on["person"]["user_id"], 701001);
}

#[test]
fn an_opt_in_is_said_and_an_unspecified_status_is_nothing() {
    let read = records_of(&person("OPT_IN", &["2025550103"], 1_764_000_000), US);
    assert!(matches!(
        read.records[0].said,
        Said::Consent { opted_out: false, ref phone_number, .. } if phone_number == "+12025550103"
    ));
    for status in ["UNSPECIFIED", "opt_out", ""] {
        let read = records_of(&person(status, &["2025550103"], 1_764_000_000), US);
        assert!(
            matches!(&read.records[0].said, Said::Nothing(why) if why.starts_with("sms_opt_in_status")),
            "{status}: {:?}",
            read.records[0].said
        );
    }
}

#[test]
fn a_national_number_is_one_of_the_region_never_a_foreign_one() {
    let read = records_of(&person("OPT_OUT", &["2025550103"], 1_764_000_000), US);
    assert!(matches!(
        &read.records[0].said,
        Said::Consent { phone_number, .. } if phone_number == "+12025550103"
    ));
    let gb: Region = "GB".parse().unwrap();
    let read = records_of(&person("OPT_OUT", &["020 7946 0958"], 1_764_000_000), gb);
    assert!(matches!(
        &read.records[0].said,
        Said::Consent { phone_number, .. } if phone_number == "+442079460958"
    ));
    let read = records_of(&person("OPT_OUT", &["555\u{7}"], 1_764_000_000), US);
    assert!(
        matches!(&read.records[0].said, Said::Nothing(why) if why.starts_with("number ") && !why.contains('\u{7}')),
        "{:?}",
        read.records[0].said
    );
    assert!(!read.records[0].key.contains('\u{7}'));
}

#[test]
fn a_person_without_a_number_or_a_modified_date_is_one_ignored_record() {
    let read = records_of(&person("OPT_OUT", &[], 1_764_000_000), US);
    assert_eq!(read.records.len(), 1);
    assert_eq!(
        read.records[0].said,
        Said::Nothing("no phone number".to_owned())
    );
    let mut undated = person("OPT_OUT", &["+12025550103"], 0);
    undated["modified_date"] = json!("2026-12-01T00:00:00Z");
    let read = records_of(&undated, US);
    assert_eq!(read.modified, None);
    assert_eq!(read.records.len(), 1);
    assert!(matches!(&read.records[0].said, Said::Nothing(why) if why.contains("modified_date")));
}

#[test]
fn mobilizes_own_words_are_its_error() {
    let people = People { organization: 4242 };
    let words = |body: &str| {
        super::super::http::words_with(body, &|json: &serde_json::Value| people.error_words(json))
    };
    assert_eq!(
        words(r#"{"data":null,"error":{"detail":"Not found."}}"#),
        "Not found."
    );
    assert_eq!(
        words(
            r#"{"data":null,"error":{"per_page":["Ensure this value is less than or equal to 100."]}}"#
        ),
        "per_page: Ensure this value is less than or equal to 100."
    );
    assert_eq!(words(r#"{"detail":"x"}"#), r#"{"detail":"x"}"#);
}

#[test]
fn the_sandboxs_seeded_numbers_are_numbers() {
    for number in ["+13125000000", "+13125099999", "+13125100000"] {
        assert_eq!(number_of(number, US).as_deref(), Ok(number));
    }
}

/// The kind's keys, as `check-config` reads them.
mod settings {
    use crate::settings::test_support::{load, refused};

    const BASE: &str = "[webhook]\nsecrets = [\"whsec-1\"]\n[[source]]\nname = \"mz\"\nkind = \"mobilize\"\nbase_url = \"https://api.mobilize.us/v1\"\napi_key = \"k\"\n";

    #[test]
    fn a_mobilize_source_names_its_organization() {
        load(&format!("{BASE}organization_id = 4242\n")).expect("valid");
        refused(BASE, "source.organization_id");
        refused(
            &format!("{BASE}organization_id = 0\n"),
            "source.organization_id",
        );
        refused(
            &format!("{BASE}organization_id = 1\nopt_out_words = [\"halt\"]\n"),
            "source.opt_out_words",
        );
    }
}

#[test]
fn an_opt_in_and_an_opt_out_in_the_same_second_are_two_records() {
    let opted_in = records_of(&person("OPT_IN", &["+12025550103"], 1_764_000_000), US);
    let opted_out = records_of(&person("OPT_OUT", &["+12025550103"], 1_764_000_000), US);
    assert_ne!(opted_in.records[0].key, opted_out.records[0].key);
}
