use chrono::TimeZone as _;

use super::*;
use crate::model::phone::Region;

const US: Region = Region::US;

fn page(profiles: &str) -> String {
    format!(
        r#"<?xml version="1.0" encoding="UTF-8"?>
<response success="true"><profiles num="2" page="1">{profiles}</profiles></response>"#
    )
}

fn profile(id: u32, number: &str, status: &str, updated: &str, opted_out: &str) -> String {
    format!(
        r#"<profile id="{id}"><first_name>Ada</first_name><last_name/><phone_number>{number}</phone_number><email/><status>{status}</status><created_at>2026-11-01 10:00:00 UTC</created_at><updated_at>{updated}</updated_at><opted_out_at>{opted_out}</opted_out_at><opted_out_source/><source type="API" name="Sandbox"/><address><street1/><postal_code>20001</postal_code><country>US</country></address><custom_columns/><subscriptions><subscription campaign_id="181818" status="Opted-Out"/></subscriptions></profile>"#
    )
}

fn read(xml: &str) -> Vec<Listed> {
    let response = response(xml, "the profiles").expect("read");
    response
        .profiles
        .map(|p| p.profiles)
        .unwrap_or_default()
        .iter()
        .map(|p| records_of(p, US))
        .collect()
}

fn at(text: &str) -> DateTime<Utc> {
    time(text).expect("a time")
}

#[test]
fn a_stop_and_an_opt_out_by_staff_are_opt_outs_and_an_active_subscriber_is_nothing() {
    let xml = page(
        &[
            profile(
                1,
                "15555550100",
                TEXTED_STOP,
                "2026-11-28 07:05:28 UTC",
                "2026-11-28 07:05:20 UTC",
            ),
            profile(
                2,
                "12025550103",
                "Profiles with no Subscriptions",
                "2026-11-28 08:00:00 UTC",
                "2026-11-28 07:59:00 UTC",
            ),
            profile(
                3,
                "12025550104",
                "Active Subscriber",
                "2026-11-28 09:00:00 UTC",
                "2026-10-01 00:00:00 UTC",
            ),
            profile(
                4,
                "12025550105",
                "Profiles with no Subscriptions",
                "2026-11-28 09:00:00 UTC",
                "",
            ),
            profile(
                5,
                "12025550106",
                "Undeliverable",
                "2026-11-28 09:00:00 UTC",
                "",
            ),
        ]
        .concat(),
    );
    let listed = read(&xml);
    let said: Vec<&Said> = listed.iter().map(|l| &l.records[0].said).collect();
    assert_eq!(
        said[0],
        &Said::Consent {
            phone_number: "+15555550100".to_owned(),
            opted_out: true,
            occurred_at: at("2026-11-28 07:05:20 UTC"),
        }
    );
    assert_eq!(
        said[1],
        &Said::Consent {
            phone_number: "+12025550103".to_owned(),
            opted_out: true,
            occurred_at: at("2026-11-28 07:59:00 UTC"),
        }
    );
    for nothing in &said[2..] {
        assert!(
            matches!(nothing, Said::Nothing(why) if why.starts_with("status ")),
            "{nothing:?}"
        );
    }
    assert_eq!(listed[0].modified, Some(at("2026-11-28 07:05:28 UTC")));
    assert_eq!(
        listed[0].records[0].key,
        "1:15555550100:2026-11-28 07:05:28 UTC:Texted a STOP word"
    );
    assert_eq!(
        listed[0].records[0].stands_on["profile"]["status"],
        TEXTED_STOP
    );
}

#[test]
fn a_national_number_is_the_regions_and_control_characters_are_escaped() {
    let xml = page(
        &[
            profile(1, "4155550100", TEXTED_STOP, "2026-11-28 07:05:28 UTC", ""),
            profile(
                2,
                "442079460958",
                TEXTED_STOP,
                "2026-11-28 07:05:28 UTC",
                "",
            ),
            profile(3, "555", TEXTED_STOP, "2026-11-28 07:05:28 UTC", ""),
            profile(
                4,
                "12025550107",
                "Opted out\u{1b}[2J",
                "2026-11-28 07:05:28 UTC",
                "",
            ),
        ]
        .concat(),
    );
    let listed = read(&xml);
    let number = |at: usize| match &listed[at].records[0].said {
        Said::Consent { phone_number, .. } => phone_number.clone(),
        other => format!("{other:?}"),
    };
    assert_eq!(number(0), "+14155550100");
    assert_eq!(number(1), "+442079460958");
    assert!(number(2).contains("Nothing"), "{}", number(2));
    assert!(
        matches!(&listed[3].records[0].said, Said::Nothing(why) if !why.contains('\u{1b}')),
        "{:?}",
        listed[3].records[0].said
    );
}

#[test]
fn an_empty_page_ends_the_listing_and_an_error_is_mobile_commons_words() {
    let empty = r#"<?xml version="1.0" encoding="UTF-8"?><response success="true"><profiles num="0" page="9"/></response>"#;
    assert!(read(empty).is_empty());
    let refused = r#"<?xml version="1.0" encoding="UTF-8"?><response success="false"><error id="0" message="Invalid date: from"/></response>"#;
    let error = response(refused, "the profiles").expect_err("refused");
    assert!(
        error.to_string().contains("0 Invalid date: from"),
        "{error}"
    );
    let people = Profiles {
        username: "u".into(),
        company: String::new(),
        bearer: false,
    };
    assert_eq!(
        people.error_words_in(refused).as_deref(),
        Some("0 Invalid date: from")
    );
    assert_eq!(people.error_words_in("HTTP Basic: Access denied.\n"), None);
    let garbled = response("<response success=", "the profiles").expect_err("not XML");
    assert!(matches!(garbled, ReadError::Stop(_)), "{garbled:?}");
}

#[test]
fn times_are_read_as_mobile_commons_writes_them() {
    let expected = Utc.with_ymd_and_hms(2026, 11, 28, 7, 5, 28).single();
    assert_eq!(time("2026-11-28 07:05:28 UTC"), expected);
    assert_eq!(time("2026-11-28T07:05:28Z"), expected);
    assert_eq!(time("2026-11-28 07:05:28"), expected);
    assert_eq!(time(""), None);
    assert_eq!(time("yesterday"), None);
}

#[test]
fn a_profile_without_updated_at_is_an_ignored_record() {
    let listed = read(&page(&profile(1, "15555550100", TEXTED_STOP, "", "")));
    assert_eq!(listed[0].modified, None);
    assert!(matches!(&listed[0].records[0].said, Said::Nothing(why) if why.contains("updated_at")));
}

/// The kind's keys, as `check-config` reads them.
mod settings {
    use crate::settings::test_support::{load, refused};

    const BASE: &str = "[webhook]\nsecrets = [\"whsec-1\"]\n[[source]]\nname = \"mc\"\nkind = \"mobile_commons\"\nbase_url = \"https://secure.mcommons.com/api\"\n";

    #[test]
    fn a_mobile_commons_source_reads_with_its_login_and_never_shows_the_password() {
        let settings = load(&format!(
            "{BASE}username = \"data@example.org\"\npassword = \"hunter2\"\n"
        ))
        .expect("valid");
        assert!(!format!("{settings:?}").contains("hunter2"));
        let dir = tempfile::tempdir().expect("a directory");
        let file = dir.path().join("password");
        std::fs::write(&file, "hunter3\n").expect("written");
        load(&format!(
            "{BASE}username = \"data@example.org\"\npassword_file = {file:?}\ncompany = \"C123\"\n"
        ))
        .expect("valid");
        refused(
            &format!("{BASE}password = \"hunter2\"\n"),
            "source.username",
        );
        refused(
            &format!("{BASE}username = \"data@example.org\"\n"),
            "source.password",
        );
        refused(
            &format!(
                "{BASE}username = \"data@example.org\"\npassword = \"hunter2\"\napi_key = \"k\"\n"
            ),
            "source.api_key",
        );
        refused(
            &format!(
                "{BASE}username = \"data@example.org\"\npassword = \"hunter2\"\ncompany = \"1; drop\"\n"
            ),
            "source.company",
        );
    }
}
