//! `GET /people`: the people collection, `per_page` (default and most 25) a `page` at a
//! time, `_links.next` while more remain, and an OData `filter` on `modified_date` or
//! `created_date` (`gt`, `lt`, `eq`, clauses joined by `and`: `modified_date gt
//! '2026-11-01T00:00:00Z'`); a filter it cannot read is a 400. As Action Network documents,
//! the people collection carries no `total_records` or `total_pages`, and is in no
//! particular order (here: the order people were added).

use std::collections::HashMap;

use axum::Json;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, NaiveDate, Utc};
use serde_json::{Value, json};

use super::{ActionNetworkPerson, error, resource};
use crate::destinations::FakesState;

/// The page size, default and most.
pub(super) const MAX_PER_PAGE: usize = 25;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Field {
    Modified,
    Created,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Gt,
    Lt,
    Eq,
}

/// One clause of a filter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Clause {
    field: Field,
    op: Op,
    value: DateTime<Utc>,
}

/// A date as a filter or a person writes it: RFC 3339, or a day (midnight UTC).
fn parse_date(raw: &str) -> Option<DateTime<Utc>> {
    if let Ok(t) = DateTime::parse_from_rfc3339(raw) {
        return Some(t.with_timezone(&Utc));
    }
    NaiveDate::parse_from_str(raw, "%Y-%m-%d")
        .ok()
        .and_then(|d| d.and_hms_opt(0, 0, 0))
        .map(|t| t.and_utc())
}

fn clause(raw: &str) -> Option<Clause> {
    let mut words = raw.trim().splitn(3, ' ');
    let field = match words.next()? {
        "modified_date" => Field::Modified,
        "created_date" => Field::Created,
        _ => return None,
    };
    let op = match words.next()? {
        "gt" => Op::Gt,
        "lt" => Op::Lt,
        "eq" => Op::Eq,
        _ => return None,
    };
    let quoted = words.next()?.trim();
    let value = quoted.strip_prefix('\'')?.strip_suffix('\'')?;
    Some(Clause {
        field,
        op,
        value: parse_date(value)?,
    })
}

/// The clauses of a filter, or `None` if it cannot be read.
fn parse_filter(raw: &str) -> Option<Vec<Clause>> {
    raw.split(" and ").map(clause).collect()
}

fn matches(person: &ActionNetworkPerson, clauses: &[Clause]) -> bool {
    clauses.iter().all(|c| {
        let raw = match c.field {
            Field::Modified => &person.modified_date,
            Field::Created => &person.created_date,
        };
        parse_date(raw).is_some_and(|t| match c.op {
            Op::Gt => t > c.value,
            Op::Lt => t < c.value,
            Op::Eq => t == c.value,
        })
    })
}

/// A query parameter's value, percent-encoded.
fn encode(value: &str) -> String {
    value
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// A positive number from the query, else the default.
fn number(query: &HashMap<String, String>, name: &str, default: usize) -> usize {
    query
        .get(name)
        .and_then(|v| v.trim().parse::<usize>().ok())
        .filter(|n| *n > 0)
        .unwrap_or(default)
}

/// `GET /people`.
pub(super) async fn list(
    State(fakes): State<FakesState>,
    headers: HeaderMap,
    Query(query): Query<HashMap<String, String>>,
) -> Response {
    let clauses = match query.get("filter").map(|f| (f, parse_filter(f))) {
        None => Vec::new(),
        Some((_, Some(clauses))) => clauses,
        Some((raw, None)) => {
            return error(
                StatusCode::BAD_REQUEST,
                format!("The filter `{raw}` could not be parsed"),
            );
        }
    };
    let page = number(&query, "page", 1);
    let per_page = number(&query, "per_page", MAX_PER_PAGE).min(MAX_PER_PAGE);
    let an = fakes.action_network();
    let selected: Vec<&ActionNetworkPerson> =
        an.people.iter().filter(|p| matches(p, &clauses)).collect();
    let skip = (page - 1).saturating_mul(per_page);
    let people: Vec<Value> = selected
        .iter()
        .skip(skip)
        .take(per_page)
        .map(|p| resource(p, &headers))
        .collect();
    let more = selected.len() > skip.saturating_add(per_page) || an.endless_next;
    let host = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or("localhost");
    let base = format!("http://{host}/actionnetwork/api/v2/people");
    let filter = query
        .get("filter")
        .map(|f| format!("&filter={}", encode(f)))
        .unwrap_or_default();
    let href =
        |page: usize| json!({"href": format!("{base}?page={page}&per_page={per_page}{filter}")});
    let items: Vec<Value> = people
        .iter()
        .map(|p| json!({"href": p["_links"]["self"]["href"]}))
        .collect();
    let mut links = json!({
        "self": href(page),
        "osdi:people": items,
        "curies": [
            {"name": "osdi", "href": format!("http://{host}/actionnetwork/api/v2/docs/v2/{{rel}}"), "templated": true},
            {"name": "action_network", "href": format!("http://{host}/actionnetwork/api/v2/docs/v2/{{rel}}"), "templated": true}
        ],
    });
    if more {
        links["next"] = href(page + 1);
    }
    if let Some(hostile) = an.next_href.as_ref().filter(|_| page == 1) {
        links["next"] = json!({ "href": hostile });
    }
    if page > 1 {
        links["previous"] = href(page - 1);
    }
    Json(json!({
        "per_page": per_page,
        "page": page,
        "_links": links,
        "_embedded": {"osdi:people": people},
    }))
    .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_filter_reads_dates_and_joins_clauses_with_and() {
        let clauses = parse_filter(
            "modified_date gt '2026-11-01T00:00:00Z' and modified_date lt '2026-11-02'",
        )
        .expect("parses");
        assert_eq!(clauses.len(), 2);
        assert_eq!(clauses[0].op, Op::Gt);
        assert_eq!(clauses[1].value.to_rfc3339(), "2026-11-02T00:00:00+00:00");
        for bad in [
            "modified_date gt 2026-11-01",
            "modified_date after '2026-11-01'",
            "name eq 'x'",
            "modified_date gt 'yesterday'",
            "modified_date gt '2026-11-01' or modified_date lt '2026-11-02'",
        ] {
            assert!(parse_filter(bad).is_none(), "{bad}");
        }
    }
}
