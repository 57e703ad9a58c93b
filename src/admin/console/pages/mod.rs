//! The console's pages and forms, one file per page.

mod change;
mod compliance;
mod import;
mod lookup;
mod quarantine;
mod review;
mod signin;
mod status;

pub use change::{change, change_form};
pub use compliance::{compliance, compliance_file};
pub use import::{
    MAX_UPLOAD_BYTES, PendingImports, confirm as confirm_import, import_form,
    preview as preview_import,
};
pub use lookup::{evidence, lookup};
pub use quarantine::{quarantine, replay};
pub use review::{decide as decide_reply, review};
pub use signin::{signin, signin_form, signout};
pub use status::{retry_destination, retry_subscriber, status};

use axum::extract::rejection::{FormRejection, QueryRejection};
use serde::Deserialize;

use super::ConsoleError;
use super::views::query_value;

impl From<FormRejection> for ConsoleError {
    fn from(rejection: FormRejection) -> Self {
        ConsoleError::BadRequest(rejection.body_text())
    }
}

impl From<QueryRejection> for ConsoleError {
    fn from(rejection: QueryRejection) -> Self {
        ConsoleError::BadRequest(rejection.body_text())
    }
}

/// An optional text field: absent and blank alike are `None`.
pub(super) fn given(value: Option<String>) -> Option<String> {
    value.map(|v| v.trim().to_owned()).filter(|v| !v.is_empty())
}

/// `/?phoneNumber=…`: the lookup page of a number.
pub(super) fn lookup_href(phone: &str, organization: Option<&str>) -> String {
    let mut href = format!("/?phoneNumber={}", query_value(phone));
    if let Some(organization) = organization {
        href.push_str(&format!("&organizationId={}", query_value(organization)));
    }
    href
}

/// A form that carries nothing but its token.
#[derive(Deserialize)]
pub struct CsrfForm {
    pub(super) csrf: Option<String>,
}
