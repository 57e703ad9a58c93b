//! `GET /organizations/{organization_id}/people`: the organization's people whose
//! `modified_date` is at or after `updated_since`, ordered by `modified_date` then `id`,
//! `per_page` at a time, `next` and `previous` carrying a cursor (the module's document says
//! what is Mobilize's and what is the fake's).

use std::collections::HashMap;

use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde_json::{Value, json};

use super::{MOBILIZE_ORGANIZATION_ID, MobilizePerson, detail, error};
use crate::destinations::FakesState;

/// The page size when `per_page` is absent, as Mobilize documents.
pub const DEFAULT_PER_PAGE: usize = 25;

/// The most `per_page` may ask for: more is a 400.
pub const MAX_PER_PAGE: usize = 100;

/// Where a person sits in the order: its (`modified_date`, `id`).
type Key = (i64, u64);

/// The person's place in the order.
fn key(person: &MobilizePerson) -> Key {
    (person.modified_date, person.id)
}

/// A page's cursor: the people after `position` or, `reverse`, the page before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Cursor {
    position: Key,
    reverse: bool,
}

impl Cursor {
    /// Opaque to the client: base64 (URL-safe, unpadded) of `r=0&p=MODIFIED.ID`.
    fn encode(self) -> String {
        let (modified, id) = self.position;
        let text = format!("r={}&p={modified}.{id}", u8::from(self.reverse));
        URL_SAFE_NO_PAD.encode(text)
    }

    /// The cursor `raw` encodes, or `None` if it cannot be read.
    fn decode(raw: &str) -> Option<Self> {
        let bytes = URL_SAFE_NO_PAD.decode(raw.trim_end_matches('=')).ok()?;
        let text = String::from_utf8(bytes).ok()?;
        let (reverse, position) = text.split_once('&')?;
        let reverse = match reverse {
            "r=0" => false,
            "r=1" => true,
            _ => return None,
        };
        let (modified, id) = position.strip_prefix("p=")?.rsplit_once('.')?;
        Some(Self {
            position: (modified.parse().ok()?, id.parse().ok()?),
            reverse,
        })
    }
}

/// What a listing asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Params {
    updated_since: Option<i64>,
    per_page: usize,
    cursor: Option<Cursor>,
}

/// Why a listing's parameters are refused.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Refused {
    /// A 400 on one parameter (its name, the message), in Mobilize's shape:
    /// `{"per_page": ["..."]}`.
    Invalid(&'static str, String),
    /// A 404 `Invalid cursor`, as Django REST framework words it.
    Cursor,
}

impl IntoResponse for Refused {
    fn into_response(self) -> Response {
        match self {
            Self::Invalid(name, text) => error(StatusCode::BAD_REQUEST, json!({ name: [text] })),
            Self::Cursor => detail(StatusCode::NOT_FOUND, "Invalid cursor"),
        }
    }
}

/// A 400 on the parameter `name`.
fn invalid(name: &'static str, text: &str) -> Refused {
    Refused::Invalid(name, text.to_owned())
}

/// `per_page` as asked: an integer from 1 to [`MAX_PER_PAGE`], or the error answer.
fn per_page(raw: &str) -> Result<usize, Refused> {
    let asked = raw
        .trim()
        .parse::<i64>()
        .map_err(|_| invalid("per_page", "A valid integer is required."))?;
    match usize::try_from(asked) {
        Ok(n) if n > MAX_PER_PAGE => Err(invalid(
            "per_page",
            &format!("Ensure this value is less than or equal to {MAX_PER_PAGE}."),
        )),
        Ok(n) if n >= 1 => Ok(n),
        _ => Err(invalid(
            "per_page",
            "Ensure this value is greater than or equal to 1.",
        )),
    }
}

/// The parameters of `query`, or the error answer.
fn params(query: &HashMap<String, String>) -> Result<Params, Refused> {
    let updated_since = match query.get("updated_since") {
        None => None,
        Some(raw) => Some(
            raw.trim()
                .parse::<i64>()
                .map_err(|_| invalid("updated_since", "A valid integer is required."))?,
        ),
    };
    let per_page = match query.get("per_page") {
        None => DEFAULT_PER_PAGE,
        Some(raw) => per_page(raw)?,
    };
    let cursor = match query.get("cursor") {
        None => None,
        Some(raw) => Some(Cursor::decode(raw).ok_or(Refused::Cursor)?),
    };
    Ok(Params {
        updated_since,
        per_page,
        cursor,
    })
}

/// One page of `sorted` (in the order of [`key`]) and the cursors around it.
#[derive(Debug)]
struct Page<'a> {
    data: Vec<&'a MobilizePerson>,
    next: Option<Cursor>,
    previous: Option<Cursor>,
}

/// The page `cursor` points to (the first page if none), `per_page` people at most: a
/// forward cursor gives the people after its position, a reverse one those just before.
fn page<'a>(sorted: &[&'a MobilizePerson], cursor: Option<Cursor>, per_page: usize) -> Page<'a> {
    let len = sorted.len();
    let (start, end) = match cursor {
        None => (0, per_page.min(len)),
        Some(c) if !c.reverse => {
            let start = sorted.partition_point(|p| key(p) <= c.position);
            (start, start.saturating_add(per_page).min(len))
        }
        Some(c) => {
            let end = sorted.partition_point(|p| key(p) < c.position);
            (end.saturating_sub(per_page), end)
        }
    };
    let some = end > start;
    Page {
        data: sorted[start..end].to_vec(),
        next: (some && end < len).then(|| Cursor {
            position: key(sorted[end - 1]),
            reverse: false,
        }),
        previous: (some && start > 0).then(|| Cursor {
            position: key(sorted[start]),
            reverse: true,
        }),
    }
}

/// The absolute URL of the page `cursor` points to, on the host the client called.
fn link(headers: &HeaderMap, params: &Params, cursor: Cursor) -> Value {
    let host = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or("localhost");
    let since = params
        .updated_since
        .map(|s| format!("&updated_since={s}"))
        .unwrap_or_default();
    let people = format!("/mobilize/v1/organizations/{MOBILIZE_ORGANIZATION_ID}/people");
    let (cursor, per_page) = (cursor.encode(), params.per_page);
    Value::String(format!(
        "http://{host}{people}?cursor={cursor}&per_page={per_page}{since}"
    ))
}

/// `GET /organizations/{organization_id}/people`.
pub(super) async fn list(
    State(fakes): State<FakesState>,
    headers: HeaderMap,
    Path(organization_id): Path<String>,
    Query(query): Query<HashMap<String, String>>,
) -> Response {
    if organization_id.parse::<u64>().ok() != Some(MOBILIZE_ORGANIZATION_ID) {
        return detail(StatusCode::NOT_FOUND, "Not found.");
    }
    let params = match params(&query) {
        Ok(params) => params,
        Err(refused) => return refused.into_response(),
    };
    let mut mobilize = fakes.mobilize();
    let body = {
        let next_href = mobilize.next_href.clone();
        let ordered = mobilize.ordered();
        let from = params
            .updated_since
            .map_or(0, |s| ordered.partition_point(|p| p.modified_date < s));
        let selected = &ordered[from..];
        let page = page(selected, params.cursor, params.per_page);
        let mut next = page
            .next
            .map_or(Value::Null, |c| link(&headers, &params, c));
        if let Some(hostile) = next_href.as_ref().filter(|_| params.cursor.is_none()) {
            next = json!(hostile);
        }
        json!({
            "count": selected.len(),
            "next": next,
            "previous": page.previous.map_or(Value::Null, |c| link(&headers, &params, c)),
            "data": page.data,
        })
    };
    mobilize.listings_served += 1;
    axum::Json(body).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn person(id: u64, modified_date: i64) -> MobilizePerson {
        MobilizePerson {
            id,
            person_id: id,
            user_id: id + 1,
            created_date: modified_date,
            modified_date,
            given_name: String::new(),
            family_name: String::new(),
            email_addresses: Vec::new(),
            phone_numbers: Vec::new(),
            postal_addresses: Vec::new(),
            sms_opt_in_status: super::super::OPT_IN.into(),
        }
    }

    #[test]
    fn a_cursor_reads_back_and_a_forged_one_does_not() {
        let cursor = Cursor {
            position: (-5, 1001),
            reverse: true,
        };
        assert_eq!(Cursor::decode(&cursor.encode()), Some(cursor));
        for bad in [
            "",
            "!!",
            "cj0yJnA9MS4y",
            &URL_SAFE_NO_PAD.encode("r=0&p=x.1"),
        ] {
            assert_eq!(Cursor::decode(bad), None, "{bad}");
        }
    }

    #[test]
    fn pages_forward_and_back_cover_everyone_once() {
        let people: Vec<MobilizePerson> = (0..7)
            .map(|i| person(10 - i, 100 + (i as i64 % 3)))
            .collect();
        let mut sorted: Vec<&MobilizePerson> = people.iter().collect();
        sorted.sort_by_key(|p| key(p));
        let mut seen = Vec::new();
        let mut cursor = None;
        let mut pages = Vec::new();
        loop {
            let page = page(&sorted, cursor, 3);
            seen.extend(page.data.iter().map(|p| p.id));
            pages.push(page.data.iter().map(|p| p.id).collect::<Vec<_>>());
            match page.next {
                Some(next) => cursor = Some(next),
                None => break,
            }
        }
        let expected: Vec<u64> = sorted.iter().map(|p| p.id).collect();
        assert_eq!(seen, expected);
        assert_eq!(pages.len(), 3);
        // From the last page, `previous` gives the second back.
        let last = page(&sorted, cursor, 3);
        let back = page(&sorted, last.previous, 3);
        assert_eq!(back.data.iter().map(|p| p.id).collect::<Vec<_>>(), pages[1]);
        assert!(page(&sorted, None, 3).previous.is_none());
    }

    #[test]
    fn per_page_is_checked_and_a_bad_cursor_is_a_404() {
        let query = |pairs: &[(&str, &str)]| -> HashMap<String, String> {
            pairs
                .iter()
                .map(|(k, v)| ((*k).into(), (*v).into()))
                .collect()
        };
        let defaults = params(&query(&[])).expect("no parameter is needed");
        assert_eq!(defaults.per_page, DEFAULT_PER_PAGE);
        assert_eq!(defaults.updated_since, None);
        let asked = params(&query(&[
            ("per_page", "100"),
            ("updated_since", "1700000000"),
        ]))
        .expect("valid");
        assert_eq!(
            (asked.per_page, asked.updated_since),
            (100, Some(1_700_000_000))
        );
        for (name, value, status) in [
            ("per_page", "101", 400),
            ("per_page", "0", 400),
            ("per_page", "ten", 400),
            ("updated_since", "2026-01-01", 400),
            ("cursor", "nope", 404),
        ] {
            let refused = params(&query(&[(name, value)])).expect_err(value);
            let answer = refused.into_response();
            assert_eq!(answer.status().as_u16(), status, "{name}={value}");
        }
    }
}
