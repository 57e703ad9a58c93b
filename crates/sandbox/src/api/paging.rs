//! Opaque cursors and keyset paging over id-ordered maps: a page resumes after the last id
//! it returned, so inserts between pages neither repeat nor skip earlier items.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;

use super::{ApiError, ApiResult, Params};
use crate::wire::Page;

pub(super) fn encode_cursor(last_id: &str) -> String {
    URL_SAFE_NO_PAD.encode(format!("after:{last_id}"))
}

pub(super) fn decode_cursor(cursor: &str) -> ApiResult<String> {
    URL_SAFE_NO_PAD
        .decode(cursor)
        .ok()
        .and_then(|bytes| String::from_utf8(bytes).ok())
        .and_then(|text| text.strip_prefix("after:").map(str::to_owned))
        .ok_or_else(|| ApiError::bad_request("cursor: not a cursor this service issued"))
}

/// One page of `items` (already filtered, in id order) per `cursor` and `limit`.
pub(super) fn page<'a, T: Clone + 'a>(
    items: impl Iterator<Item = (&'a String, &'a T)>,
    params: &Params,
    default_limit: usize,
) -> ApiResult<Page<T>> {
    let limit = params.limit(default_limit)?;
    let after = params.get("cursor").map(decode_cursor).transpose()?;
    let mut taken: Vec<(&String, &T)> = items
        .filter(|(id, _)| {
            after
                .as_ref()
                .is_none_or(|after| id.as_str() > after.as_str())
        })
        .take(limit + 1)
        .collect();
    let has_more = taken.len() > limit;
    taken.truncate(limit);
    let cursor = taken.last().map(|(id, _)| encode_cursor(id));
    Ok(Page {
        items: taken.into_iter().map(|(_, item)| item.clone()).collect(),
        cursor,
        has_more,
    })
}
