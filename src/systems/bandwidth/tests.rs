use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use chrono::{DateTime, Utc};

use super::*;
use crate::model::phone::Region;
use crate::model::read::Said;

const US: Region = Region::US;

fn bandwidth(passwords: &[&str]) -> Bandwidth {
    let settings = BandwidthSettings {
        username: "campaign".to_owned(),
        passwords: passwords
            .iter()
            .map(|p| SecretString::from((*p).to_owned()))
            .collect(),
        ..BandwidthSettings::default()
    };
    Bandwidth::new(&settings, &[])
}

fn authorized(value: &str) -> http::HeaderMap {
    let mut headers = http::HeaderMap::new();
    headers.insert(
        http::header::AUTHORIZATION,
        value.parse().expect("a header"),
    );
    headers
}

fn basic_of(username: &str, password: &str) -> http::HeaderMap {
    authorized(&format!(
        "Basic {}",
        STANDARD.encode(format!("{username}:{password}"))
    ))
}

fn received(id: &str, from: &str, text: &str, time: &str) -> serde_json::Value {
    serde_json::json!({
        "type": "message-received",
        "time": time,
        "description": "Incoming message received",
        "to": "+15005550006",
        "message": {
            "id": id,
            "owner": "+15005550006",
            "applicationId": "93de2206-9669-4e07-948d-329f4b722ee2",
            "time": time,
            "segmentCount": 1,
            "direction": "in",
            "to": ["+15005550006"],
            "from": from,
            "text": text
        }
    })
}

#[test]
fn the_callback_credentials_verify_and_nothing_else_does() {
    let source = bandwidth(&["old-password", "new-password"]);
    let now = Utc::now();
    let verify = |headers: &http::HeaderMap| source.verify(headers, b"[]", now);
    assert_eq!(verify(&basic_of("campaign", "old-password")), Ok(0));
    assert_eq!(
        verify(&basic_of("campaign", "new-password")),
        Ok(1),
        "a rotation"
    );
    assert!(verify(&basic_of("campaign", "wrong")).is_err());
    assert!(verify(&basic_of("someone", "old-password")).is_err());
    assert!(verify(&basic_of("campaign", "old-password ")).is_err());
    let lower = format!("basic {}", STANDARD.encode("campaign:old-password"));
    assert_eq!(verify(&authorized(&lower)), Ok(0), "the scheme in any case");
    let bearer = verify(&authorized("Bearer abc")).unwrap_err();
    assert!(bearer.starts_with("no Authorization: Basic"), "{bearer}");
    assert!(verify(&http::HeaderMap::new()).is_err(), "none");
    assert!(verify(&authorized("Basic !!!")).is_err(), "not base64");
    let mut twice = basic_of("campaign", "old-password");
    twice.append(
        http::header::AUTHORIZATION,
        "Basic Y2FtcGFpZ246b2xkLXBhc3N3b3Jk"
            .parse()
            .expect("a header"),
    );
    assert!(verify(&twice).is_err(), "given twice");
    assert_eq!(source.challenge(), Some(CHALLENGE));
}

#[test]
fn each_received_callback_is_a_reply_at_its_time_and_others_are_ignored() {
    let now = Utc::now();
    let post = serde_json::json!([
        received("m-1", "+14155550100", "Stop texting me", "2026-12-01T10:00:00.000Z"),
        received("m-2", "+14155550101", "cancel my order", "2026-12-01T10:00:01.000Z"),
        {"type": "message-delivered", "time": "2026-12-01T10:00:02Z", "message": {"id": "m-3"}},
        {"type": "message-failed"},
    ]);
    let body = serde_json::to_vec(&post).expect("JSON");
    let records = bandwidth(&["p"]).records(&body, now, US).expect("read");
    assert_eq!(records.len(), 3, "{records:?}");
    let at: DateTime<Utc> = "2026-12-01T10:00:00Z".parse().expect("a time");
    assert_eq!(
        (records[0].key.as_str(), &records[0].said),
        (
            "m-1",
            &Said::Consent {
                phone_number: "+14155550100".to_owned(),
                opted_out: true,
                occurred_at: at
            }
        )
    );
    let Said::Review { received_at, .. } = &records[1].said else {
        panic!("put to a person: {:?}", records[1]);
    };
    assert_eq!(*received_at, now, "its deadline runs from receipt");
    assert!(matches!(&records[2].said, Said::Nothing(why) if why.contains("message-delivered")));
    assert_eq!(records[0].stands_on["callback"]["message"]["id"], "m-1");
    assert_eq!(
        bandwidth(&["p"]).key(&body),
        None,
        "several: kept by its bytes"
    );
    let one = serde_json::to_vec(&[&post[0]]).expect("JSON");
    assert_eq!(bandwidth(&["p"]).key(&one).as_deref(), Some("m-1"));
}

#[test]
fn a_callback_that_cannot_be_read_one_way_is_not_read() {
    let now = Utc::now();
    let source = bandwidth(&["p"]);
    let object = source.records(b"{}", now, US).unwrap_err();
    assert!(object.starts_with("an object, not an array"), "{object}");
    let twice = br#"[{"type":"message-received","message":{"id":"m-1","from":"+14155550100","from":"+14155550101","text":"STOP"}}]"#;
    assert!(
        source
            .records(twice, now, US)
            .unwrap_err()
            .contains("`from` given twice")
    );
    let no_id = serde_json::json!([{"type": "message-received", "message": {"from": "+14155550100", "text": "STOP"}}]);
    let error = source
        .records(&serde_json::to_vec(&no_id).expect("JSON"), now, US)
        .unwrap_err();
    assert_eq!(
        error,
        "callback 1: no message.id: what makes the record one cannot be told"
    );
    let national = serde_json::json!([received("m-4", "4155550100", "STOP", "not a time")]);
    let read = source
        .records(&serde_json::to_vec(&national).expect("JSON"), now, US)
        .expect("read");
    assert_eq!(
        read[0].said,
        Said::Consent {
            phone_number: "+14155550100".to_owned(),
            opted_out: true,
            occurred_at: now
        },
        "a national number in the region; no readable time: the receipt"
    );
    assert_eq!(source.records(b"[]", now, US), Ok(Vec::new()));
}

/// The kind's keys, as `check-config` reads them.
mod settings {
    use crate::settings::test_support::{load, refused};

    const BASE: &str =
        "[webhook]\nsecrets = [\"whsec-1\"]\n[[source]]\nname = \"bw\"\nkind = \"bandwidth\"\n";

    #[test]
    fn a_bandwidth_source_takes_its_callback_credentials_and_never_shows_them() {
        let settings = load(&format!(
            "{BASE}username = \"campaign\"\npassword = \"hunter2\"\n"
        ))
        .expect("valid");
        let crate::settings::SourceSystem::Bandwidth(bandwidth) = &settings.source[0].system else {
            panic!("a bandwidth source");
        };
        assert_eq!(bandwidth.accepted().len(), 1);
        assert!(!format!("{bandwidth:?}").contains("hunter2"));
        let dir = tempfile::tempdir().expect("a directory");
        let file = dir.path().join("passwords");
        std::fs::write(&file, "hunter2\nhunter3\n").expect("written");
        let rotated = format!("{BASE}username = \"campaign\"\npassword_file = {file:?}\n");
        let settings = load(&rotated).expect("valid");
        let crate::settings::SourceSystem::Bandwidth(bandwidth) = &settings.source[0].system else {
            panic!("a bandwidth source");
        };
        assert_eq!(bandwidth.accepted().len(), 2);
        refused(
            &format!("{BASE}password = \"hunter2\"\n"),
            "source.username",
        );
        refused(
            &format!("{BASE}username = \"a:b\"\npassword = \"hunter2\"\n"),
            "source.username",
        );
        refused(
            &format!("{BASE}username = \"campaign\"\n"),
            "source.password",
        );
        refused(
            &format!("{BASE}username = \"campaign\"\npassword = \" \"\n"),
            "source.password",
        );
    }
}
