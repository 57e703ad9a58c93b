use super::*;
use crate::signature::SignatureHeader;
use std::borrow::Cow;

#[test]
fn the_router_refuses_paths_axum_would_panic_on_or_take_twice() {
    let party = AccountId::new("party").expect("an account's name");
    let candidate = AccountId::new("candidate").expect("an account's name");
    for path in [
        "/webhooks/:x",
        "/webhooks/{",
        "/webhooks/{x}",
        "/webhooks/{*rest}",
        "/webhooks/caf\u{e9}",
        "/healthz",
        "/",
        "webhooks",
    ] {
        let error = routable([(&party, path)]).expect_err(path).to_string();
        assert!(error.contains("account \"party\""), "{error}");
    }
    let error = routable([(&party, "/webhooks/a"), (&candidate, "/webhooks/a")])
        .expect_err("one path twice")
        .to_string();
    assert!(
        error.contains("candidate") && error.contains("\"party\"'s"),
        "{error}"
    );
    assert!(routable([(&party, "/webhooks/a"), (&candidate, "/webhooks/b")]).is_ok());
}

fn key(body: &[u8], webhook_id: Option<&str>) -> Result<String, events::NotJson> {
    let received = events::receive(body, Utc::now())?;
    Ok(dedup_key(received.id, webhook_id, body))
}

#[test]
fn the_dedup_key_prefers_the_event_id_then_the_webhook_id_then_the_body_hash() {
    assert_eq!(
        key(br#"{"id":"evt_1"}"#, Some("msg_1")).unwrap(),
        "event:evt_1"
    );
    assert_eq!(key(br#"{"id":42}"#, None).unwrap(), "event:42");
    assert_eq!(key(br#"{"x":1}"#, Some("msg_1")).unwrap(), "webhook:msg_1");
    assert_eq!(
        key(br#"{"id":""}"#, Some("msg_1")).unwrap(),
        "webhook:msg_1"
    );
    assert!(key(br#"[1,2]"#, None).unwrap().starts_with("sha256:"));
    assert_eq!(key(b"{not json", None), Err(events::NotJson));
    assert_eq!(key(br#"{"id":"a"} trailing"#, None), Err(events::NotJson));
}

#[test]
fn a_body_that_repeats_a_key_keeps_its_id_and_is_kept_as_unparseable() {
    let body = br#"{"id":"evt_2","data":{"a":1,"a":2}}"#;
    assert_eq!(key(body, None).unwrap(), "event:evt_2");
    let received = events::receive(body, Utc::now()).unwrap();
    assert!(matches!(
        received.event,
        Err(events::ParseError::DuplicateKey(k)) if k == "a"
    ));
    assert!(
        key(br#"{"id":"a","id":"b"}"#, None)
            .unwrap()
            .starts_with("sha256:")
    );
    assert_eq!(key(br#"{"a":1,"a":2"#, None), Err(events::NotJson));
}

#[test]
fn rejected_headers_are_kept_as_name_value_pairs_without_credentials() {
    let mut headers = HeaderMap::new();
    headers.insert("x-signature", "sha256=ab\"c".parse().unwrap());
    headers.insert("authorization", "Bearer secret".parse().unwrap());
    assert_eq!(
        headers_as_pairs(&headers),
        r#"[["x-signature","sha256=ab\"c"]]"#
    );
}

#[test]
fn kept_headers_are_every_value_as_received_in_order_naming_the_one_that_verified() {
    let mut headers = HeaderMap::new();
    headers.insert("authorization", "Bearer secret".parse().unwrap());
    headers.append("x-signature", "bogus".parse().unwrap());
    headers.insert("content-type", "application/json".parse().unwrap());
    headers.append("x-signature", "ab\"c".parse().unwrap());
    let verified = SignatureHeader {
        name: "x-signature".into(),
        position: 1,
    };
    let (kept, at) = headers_as_received(&headers, &verified);
    assert_eq!(
        kept,
        r#"[["x-signature","bogus"],["x-signature","ab\"c"],["content-type","application/json"]]"#
    );
    assert_eq!(at, Some(1));
    assert_eq!(kept, headers_as_pairs(&headers));
    let credential = SignatureHeader {
        name: "authorization".into(),
        position: 0,
    };
    assert_eq!(headers_as_received(&headers, &credential).1, None);
}

#[test]
fn kept_headers_are_the_text_serde_json_makes_of_the_pairs_whatever_their_bytes() {
    let mut headers = HeaderMap::new();
    headers.insert("content-type", HeaderValue::from_static("application/json"));
    headers.append(
        "x-signature",
        HeaderValue::from_static(r#"sha256="quoted" \back\slash"#),
    );
    headers.insert("cookie", HeaderValue::from_static("session=secret"));
    headers.append(
        "x-signature",
        HeaderValue::from_bytes(b"tab\there").unwrap(),
    );
    headers.insert(
        "x-latin1",
        HeaderValue::from_bytes(b"caf\xe9 \xff\xfe \x80").unwrap(),
    );
    headers.insert(
        "x-utf8",
        HeaderValue::from_bytes("café ☃ </script>".as_bytes()).unwrap(),
    );
    headers.insert("x-cut", HeaderValue::from_bytes(b"\xe2\x98").unwrap());
    headers.insert("x-empty", HeaderValue::from_static(""));
    let token = HeaderName::from_bytes(b"x-token!#$%&'*+.^_`|~09").unwrap();
    headers.insert(
        token,
        HeaderValue::from_static("any name a header may have"),
    );
    let pairs: Vec<(&str, Cow<'_, str>)> = headers
        .iter()
        .filter(|(name, _)| *name != "cookie")
        .map(|(name, value)| (name.as_str(), String::from_utf8_lossy(value.as_bytes())))
        .collect();
    let expected = serde_json::to_string(&pairs).unwrap();
    for escaped in [
        r#"\"quoted\""#,
        r"\\back\\slash",
        r"tab\there",
        "caf\u{fffd}",
    ] {
        assert!(expected.contains(escaped), "{expected}");
    }
    assert_eq!(headers_as_pairs(&headers), expected);
    for (position, at) in [(0, Some(1)), (1, Some(2)), (2, None)] {
        let verified = SignatureHeader {
            name: "x-signature".into(),
            position,
        };
        assert_eq!(
            headers_as_received(&headers, &verified),
            (expected.clone(), at)
        );
    }
    assert_eq!(headers_as_pairs(&HeaderMap::new()), "[]");
}

/// Any byte a header value may hold, mostly those JSON escapes or UTF-8 reads specially.
fn header_byte() -> impl proptest::strategy::Strategy<Value = u8> {
    proptest::prop_oneof![
        proptest::sample::select(
            b" a/<\"\\\t\x7f\x80\xbf\xc3\xa9\xe2\x98\x83\xf0\x9f\xff".to_vec()
        ),
        proptest::prelude::any::<u8>(),
    ]
}

proptest::proptest! {
    #[test]
    fn kept_headers_of_any_bytes_are_the_text_serde_json_makes_of_the_pairs(
        values in proptest::collection::vec(
            proptest::collection::vec(header_byte(), 0..24),
            0..6,
        )
    ) {
        let mut headers = HeaderMap::new();
        for (i, value) in values.iter().enumerate() {
            if let Ok(value) = HeaderValue::from_bytes(value) {
                headers.append(if i % 2 == 0 { "x-even" } else { "x-odd" }, value);
            }
        }
        let pairs: Vec<(&str, Cow<'_, str>)> = headers
            .iter()
            .map(|(name, value)| (name.as_str(), String::from_utf8_lossy(value.as_bytes())))
            .collect();
        let expected = serde_json::to_string(&pairs).unwrap();
        proptest::prop_assert_eq!(headers_as_pairs(&headers), expected);
    }
}
