//! What VAN's changed-entity export offers, as `GET /changedEntityExportJobs/resources`,
//! `/fields/{resourceType}` and `/changeTypes/{resourceType}` list it, and how a change
//! fills each column of a file.
//!
//! Two resources: `Contacts` (a person and a phone: the phone's opt-in status) and
//! `ContactHistory` (canvass responses: the result code, `ResultID`). Every file ends with
//! VAN's own change columns, `DateChanged` and `ChangeTypeID`.

use serde::Serialize;

use super::changes::{Resource, VanChange, VanChangeKind, timestamp};

/// A field of a resource, as `/fields/{resourceType}` describes it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Field {
    pub name: &'static str,
    /// `B`oolean, `T`ext, `D`ate, `N`umber, `M`oney.
    pub kind: &'static str,
    pub max_chars: Option<u32>,
    /// Always exported; the others only when requested.
    pub core: bool,
}

const fn field(name: &'static str, kind: &'static str, max: u32, core: bool) -> Field {
    Field {
        name,
        kind,
        max_chars: if max == 0 { None } else { Some(max) },
        core,
    }
}

/// The fields of `Contacts`, in file order.
const CONTACTS: [Field; 6] = [
    field("VanID", "N", 0, true),
    field("FirstName", "T", 20, true),
    field("LastName", "T", 25, true),
    field("Phone", "T", 25, false),
    field("PhoneDialingPrefix", "T", 5, false),
    field("PhoneOptInStatusID", "N", 0, false),
];

/// The fields of `ContactHistory`, in file order.
const CONTACT_HISTORY: [Field; 9] = [
    field("ContactsContactID", "N", 0, true),
    field("VanID", "N", 0, true),
    field("CommitteeID", "N", 0, true),
    field("DateCanvassed", "D", 0, true),
    field("ContactTypeID", "N", 0, true),
    field("InputTypeID", "N", 0, true),
    field("ResultID", "N", 0, true),
    field("Phone", "T", 25, false),
    field("PhoneDialingPrefix", "T", 5, false),
];

/// VAN's own columns, after the fields: when the record changed, and how.
pub(crate) const CHANGE_COLUMNS: [&str; 2] = ["DateChanged", "ChangeTypeID"];

/// The phone opt-in statuses: id, name, and the letter VAN's people endpoints use.
pub(crate) const OPT_IN_STATUSES: [(u32, &str, &str); 3] =
    [(1, "Opt-In", "I"), (2, "Unknown", "U"), (3, "Opt-Out", "O")];

/// The change types: id, name, description.
pub(crate) const CHANGE_TYPES: [(u32, &str, &str); 3] = [
    (1, "Created", "The record was created"),
    (2, "Updated", "The record was updated"),
    (3, "Deleted", "The record was deleted"),
];

/// The names `GET /changedEntityExportJobs/resources` lists.
pub(crate) const RESOURCES: [&str; 2] = ["ContactHistory", "Contacts"];

impl Resource {
    /// The resource a name stands for (VAN reads it without regard to case).
    pub(crate) fn named(name: &str) -> Option<Self> {
        if name.eq_ignore_ascii_case("Contacts") {
            Some(Self::Contacts)
        } else if name.eq_ignore_ascii_case("ContactHistory") {
            Some(Self::ContactHistory)
        } else {
            None
        }
    }

    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::Contacts => "Contacts",
            Self::ContactHistory => "ContactHistory",
        }
    }

    pub(crate) fn fields(self) -> &'static [Field] {
        match self {
            Self::Contacts => &CONTACTS,
            Self::ContactHistory => &CONTACT_HISTORY,
        }
    }
}

/// One id and name of an enumerated field.
#[derive(Serialize)]
pub(crate) struct AvailableValue {
    id: u32,
    name: &'static str,
}

/// A field as `/fields/{resourceType}` answers it.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct FieldAnswer {
    field_name: &'static str,
    field_type: &'static str,
    max_textbox_characters: Option<u32>,
    is_core_field: bool,
    available_values: Option<Vec<AvailableValue>>,
}

pub(crate) fn field_answers(resource: Resource) -> Vec<FieldAnswer> {
    resource
        .fields()
        .iter()
        .map(|f| FieldAnswer {
            field_name: f.name,
            field_type: f.kind,
            max_textbox_characters: f.max_chars,
            is_core_field: f.core,
            available_values: (f.name == "PhoneOptInStatusID").then(|| {
                OPT_IN_STATUSES
                    .iter()
                    .map(|(id, name, _)| AvailableValue { id: *id, name })
                    .collect()
            }),
        })
        .collect()
}

/// The id of an opt-in status letter (`I`, `U`, `O`).
pub(crate) fn opt_in_status_id(letter: &str) -> Option<u32> {
    OPT_IN_STATUSES
        .iter()
        .find(|(_, _, l)| *l == letter)
        .map(|(id, _, _)| *id)
}

/// The value of `column` for `change` (empty when it has none).
pub(crate) fn cell(change: &VanChange, column: &str, committee_id: u32) -> String {
    let phone = || change.phone_number.clone().unwrap_or_default();
    let prefix = || change.dialing_prefix.clone().unwrap_or_default();
    let opt = |v: Option<u32>| v.map(|v| v.to_string()).unwrap_or_default();
    match (&change.what, column) {
        (_, "VanID") => change.van_id.to_string(),
        (_, "Phone") => phone(),
        (_, "PhoneDialingPrefix") => prefix(),
        (_, "DateChanged") => timestamp(change.at),
        (VanChangeKind::PhoneOptInStatus { status }, "PhoneOptInStatusID") => {
            opt(opt_in_status_id(status))
        }
        (VanChangeKind::PhoneOptInStatus { .. }, "ChangeTypeID") => "2".into(),
        (VanChangeKind::CanvassResponse { .. }, "ChangeTypeID") => "1".into(),
        (_, "CommitteeID") => committee_id.to_string(),
        (
            VanChangeKind::CanvassResponse {
                contacts_contact_id,
                result_code_id,
                contact_type_id,
                input_type_id,
                date_canvassed,
            },
            column,
        ) => match column {
            "ContactsContactID" => contacts_contact_id.to_string(),
            "DateCanvassed" => date_canvassed.clone(),
            "ContactTypeID" => opt(*contact_type_id),
            "InputTypeID" => input_type_id.map(|v| v.to_string()).unwrap_or_default(),
            "ResultID" => result_code_id.to_string(),
            _ => String::new(),
        },
        _ => String::new(),
    }
}

/// A CSV field: quoted when it holds a comma, a quote or a line break.
pub(crate) fn csv_field(value: &str) -> String {
    if value.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", value.replace('"', "\"\""))
    } else {
        value.to_owned()
    }
}
