use super::*;

fn at() -> DateTime<Utc> {
    DateTime::parse_from_rfc3339("2026-11-21T12:00:00Z")
        .unwrap()
        .with_timezone(&Utc)
}

#[test]
fn a_consent_subset_parses_with_the_event_time() {
    let body = br#"{"eventType":"consentUpdate-v1","createdAt":"2026-11-21T10:00:00Z",
        "data":{"organizationId":"o1","phoneNumber":"+15550001111","globalOptedOut":true,"tagId":"t1"}}"#;
    let Event::Consent(e) = parse(body, at()).unwrap() else {
        panic!()
    };
    assert!(e.opted_out && e.lead.is_none());
    assert_eq!(e.tag_id.as_deref(), Some("t1"));
    assert_eq!(e.occurred_at.to_rfc3339(), "2026-11-21T10:00:00+00:00");
}

#[test]
fn a_full_lead_resource_is_kept_and_a_missing_time_is_the_receipt_time() {
    let body = br#"{"type":"consentUpdate-v1","data":{"id":"l1","type":"lead","organizationId":"o1",
        "phoneNumber":"+15550001111","activeGroupIds":["g1"],"inactiveGroupIds":[],"customFields":{"a":"b"},
        "tagIds":[],"globalOptedOut":false,"createdAt":"2026-01-01T00:00:00Z","firstName":"Ada"}}"#;
    let Event::Consent(e) = parse(body, at()).unwrap() else {
        panic!()
    };
    assert_eq!(e.lead.unwrap().first_name.as_deref(), Some("Ada"));
    assert_eq!(e.occurred_at, at());
}

#[test]
fn the_number_is_normalized_and_an_impossible_one_is_refused_saying_what_is_wrong() {
    let event = |phone: &str| {
        let data = serde_json::json!({"id": "l1", "type": "lead", "organizationId": "o1",
            "phoneNumber": phone, "activeGroupIds": [], "inactiveGroupIds": [],
            "customFields": {}, "tagIds": [], "globalOptedOut": true});
        let body = serde_json::json!({"type": "consentUpdate-v1", "data": data});
        parse(body.to_string().as_bytes(), at())
    };
    let Event::Consent(e) = event("+1 (555) 010-0001").unwrap() else {
        panic!()
    };
    assert_eq!(e.phone_number.as_deref(), Some("+15550100001"));
    assert_eq!(e.lead.unwrap().phone_number, "+15550100001");
    let error = event("+1555\u{202E}0100001").unwrap_err().to_string();
    assert_eq!(
        error,
        "consentUpdate-v1: `phoneNumber`: invalid character U+202E at position 6: only ASCII digits, a leading +, spaces and ( ) - . / are taken"
    );
    let error = event(&"1".repeat(301)).unwrap_err().to_string();
    assert_eq!(
        error,
        "consentUpdate-v1: `phoneNumber`: not a possible number: too long (301 digits)"
    );
}

#[test]
fn shapes_that_cannot_be_applied_say_why() {
    let cases: [(&[u8], &str); 5] = [
        (b"[1]", "not a JSON object"),
        (br#"{"data":{}}"#, "no `type`"),
        (
            br#"{"type":"leadCreated-v9","data":{}}"#,
            "unknown event type",
        ),
        (
            br#"{"type":"consentUpdate-v1","data":{"id":"l1"}}"#,
            "globalOptedOut",
        ),
        (
            br#"{"type":"messageStatus-v1","data":{"id":"m1"}}"#,
            "status",
        ),
    ];
    for (body, expected) in cases {
        let error = parse(body, at()).unwrap_err().to_string();
        assert!(error.contains(expected), "{error}");
    }
}

#[test]
fn an_ambiguous_or_malformed_delivery_says_exactly_what_is_wrong() {
    let cases: [(&[u8], &str); 6] = [
        (
            br#"{"type":"consentUpdate-v1","data":{"id":"l1","globalOptedOut":true,"phoneNumber":"+15550000001","globalOptedOut":false}}"#,
            "ambiguous: duplicate key globalOptedOut",
        ),
        (
            br#"{"type":"consentUpdate-v1","type":"messageStatus-v1","data":{}}"#,
            "ambiguous: duplicate key type",
        ),
        (b"1e999", "not JSON: number out of range"),
        (b"{\"type\":", "not JSON: EOF while parsing"),
        (b"\"consentUpdate-v1\"", "not a JSON object: a string"),
        (br#"{"type":5,"data":{}}"#, "must be strings"),
    ];
    for (body, expected) in cases {
        let error = parse(body, at()).unwrap_err().to_string();
        assert!(error.contains(expected), "{error}");
    }
}

#[test]
fn a_key_repeated_at_any_depth_is_refused_naming_it_and_the_id_is_still_read() {
    let deep = format!(
        r#"{{"id":"evt_9","type":"consentUpdate-v1","data":{{"x":{}{{"k":1,"k":2}}{}}}}}"#,
        "[{\"y\":".repeat(40),
        "}]".repeat(40)
    );
    let cases: [(&[u8], &str); 7] = [
        (br#"{"id":"evt_9","id":"evt_9","data":{}}"#, "id"),
        (br#"{"data":{},"id":"evt_9","data":{}}"#, "data"),
        (
            br#"{"id":"evt_9","data":{"tags":[{"a":1},{"b":2,"b":3}]}}"#,
            "b",
        ),
        (
            br#"{"id":"evt_9","data":{"customFields":{"a":{"c":true,"c":true}}}}"#,
            "c",
        ),
        // The same key however it is written, and the first repeat in the text.
        (br#"{"id":"evt_9","a":1,"\u0061":2}"#, "a"),
        (br#"{"id":"evt_9","a":{"b":1,"b":2},"a":3}"#, "b"),
        (deep.as_bytes(), "k"),
    ];
    for (body, key) in cases {
        let expected = ParseError::DuplicateKey(key.to_owned());
        assert_eq!(parse(body, at()), Err(expected.clone()));
        let received = receive(body, at()).unwrap();
        assert_eq!(received.event, Err(expected));
        let id = (key != "id").then(|| "evt_9".to_owned());
        assert_eq!(received.id, id, "{}", String::from_utf8_lossy(body));
    }
}

#[test]
fn a_repeat_among_many_keys_is_found_and_many_distinct_keys_are_taken() {
    let keys: Vec<String> = (0..100).map(|i| format!(r#""k{i}":{i}"#)).collect();
    let body = |keys: &[String]| {
        format!(
            r#"{{"type":"consentUpdate-v1","data":{{"id":"l1","globalOptedOut":true,{}}}}}"#,
            keys.join(",")
        )
    };
    assert!(parse(body(&keys).as_bytes(), at()).is_ok());
    for repeat in [r#""k3":0"#, r#""k99":0"#, r#""globalOptedOut":false"#] {
        let mut keys = keys.clone();
        keys.push(repeat.to_owned());
        let key = repeat.split('"').nth(1).unwrap().to_owned();
        let error = parse(body(&keys).as_bytes(), at());
        assert_eq!(error, Err(ParseError::DuplicateKey(key)));
    }
}

#[test]
fn a_number_past_a_double_anywhere_is_refused_saying_where() {
    let body = br#"{"id":"evt_9","type":"consentUpdate-v1","data":{"id":"l1","globalOptedOut":true,"x":[1e400]}}"#;
    let error = "not JSON: number out of range at line 1 column 90";
    assert_eq!(parse(body, at()).unwrap_err().to_string(), error);
    let received = receive(body, at()).unwrap();
    assert_eq!(received.event.unwrap_err().to_string(), error);
    assert_eq!(received.id.as_deref(), Some("evt_9"));
}

#[test]
fn a_field_of_the_wrong_type_is_refused_as_serde_words_it() {
    let cases: [(&[u8], &str); 5] = [
        // The first in key order, as a JSON value's keys are.
        (
            br#"{"type":5,"createdAt":[],"data":{}}"#,
            "`type`, `eventType` and `createdAt` must be strings: invalid type: sequence, expected a string",
        ),
        (
            br#"{"eventType":1.5,"type":"consentUpdate-v1","data":{}}"#,
            "`type`, `eventType` and `createdAt` must be strings: invalid type: floating point `1.5`, expected a string",
        ),
        (
            br#"{"type":"consentUpdate-v1","data":{"id":"l1","organizationId":"o1","phoneNumber":"+15550001111",
                "globalOptedOut":true,"activeGroupIds":[],"inactiveGroupIds":[],"customFields":{},"tagIds":[1],"email":false}}"#,
            "consentUpdate-v1: lead resource: invalid type: boolean `false`, expected a string",
        ),
        (
            br#"{"type":"messageStatus-v1","data":{"id":"m1"}}"#,
            "messageStatus-v1: missing field `status`",
        ),
        (
            br#"{"type":"messageStatus-v1","data":{"id":"m1","status":"sent","threadId":-3}}"#,
            "messageStatus-v1: invalid type: integer `-3`, expected a string",
        ),
    ];
    for (body, expected) in cases {
        assert_eq!(parse(body, at()).unwrap_err().to_string(), expected);
    }
}

#[test]
fn the_typed_resources_are_read_whole() {
    let body = br#"{"id":7,"type":"consentUpdate-v1","data":{"id":"l\u0031","type":"lead","organizationId":"o1",
        "phoneNumber":"+1 (555) 010-0001","activeGroupIds":["g1"],"inactiveGroupIds":[],"customFields":{"n":1.5,"s":"\"x\""},
        "tagIds":["t"],"globalOptedOut":true,"firstName":null,"accountId":"ignored?"}}"#;
    let received = receive(body, at()).unwrap();
    assert_eq!(received.id.as_deref(), Some("7"));
    let Ok(Event::Consent(e)) = received.event else {
        panic!()
    };
    let lead = e.lead.unwrap();
    assert_eq!(e.lead_id.as_deref(), Some("l1"));
    assert_eq!(
        (lead.id.as_str(), lead.phone_number.as_str()),
        ("l1", "+15550100001")
    );
    assert_eq!(
        serde_json::Value::Object(lead.custom_fields),
        serde_json::json!({"n": 1.5, "s": "\"x\""})
    );
    assert_eq!(lead.tag_ids, ["t"]);
    let body = br#"{"eventType":"messageStatus-v1","createdAt":"2026-11-21T10:00:00Z","data":{"id":"m1","status":"delivered","leadId":"l1","organizationId":"o1","errorCode":null}}"#;
    let Event::MessageStatus(e) = parse(body, at()).unwrap() else {
        panic!()
    };
    assert_eq!(
        (e.message.id.as_str(), e.message.status.as_str()),
        ("m1", "delivered")
    );
    assert_eq!(
        (e.lead_id.as_deref(), e.organization_id.as_deref()),
        (Some("l1"), Some("o1"))
    );
}

proptest::proptest! {
    #[test]
    fn any_bytes_parse_or_give_a_reason(body in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..200)) {
        if let Err(error) = parse(&body, at()) {
            proptest::prop_assert!(!error.to_string().is_empty());
        }
    }

    #[test]
    fn any_json_text_parses_or_gives_a_reason(body in r#"\{("[a-zA-Z]{0,8}":("[a-z+0-9]{0,6}"|true|false|[0-9e.-]{1,6}|\{\}|\[\]|null),?){0,6}\}"#) {
        if let Err(error) = parse(body.as_bytes(), at()) {
            proptest::prop_assert!(!error.to_string().is_empty());
        }
    }
}
