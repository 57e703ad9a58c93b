//! The v3 request bodies the sandbox reads: creating and updating resources, the lead
//! upsert and the lead operations. Secrets arrive as `SecretString`, so
//! they never show in `Debug`.

use std::collections::BTreeMap;

use secrecy::SecretString;
use serde::Deserialize;

use super::common::{CountryCode, IntegrationType, PhoneNumberType};
use super::resources::Location;

/// POST /agents: all four required; `email` is the agent's login.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct NewAgent {
    pub name: String,
    pub full_name: String,
    pub email: String,
    pub group_id: String,
}

/// PUT /agents/{id}.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct AgentUpdate {
    pub name: String,
    pub full_name: String,
    /// Sends a new invitation; the sandbox sends no email.
    #[serde(default)]
    #[expect(
        dead_code,
        reason = "read so a wrong type is refused; no email is sent"
    )]
    pub send_invite: Option<bool>,
}

/// POST /custom_fields: all three required.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct NewCustomField {
    pub name: String,
    pub agent_visible: bool,
    pub organization_id: String,
}

/// POST /groups: `location` is required here (it assigns the timezone).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct NewGroup {
    pub name: String,
    pub country_code: CountryCode,
    pub location: Location,
    pub organization_id: String,
    #[serde(default)]
    pub description: Option<String>,
}

/// POST /leads: `phoneNumber` and `organizationId` required, the rest optional.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct LeadUpsert {
    pub phone_number: String,
    pub organization_id: String,
    #[serde(default)]
    pub active_group_ids: Option<Vec<String>>,
    #[serde(default)]
    pub inactive_group_ids: Option<Vec<String>>,
    #[serde(default)]
    pub custom_fields: Option<BTreeMap<String, String>>,
    #[serde(default)]
    pub first_name: Option<String>,
    #[serde(default)]
    pub last_name: Option<String>,
    #[serde(default)]
    pub notes: Option<String>,
    #[serde(default)]
    pub follow_up: Option<String>,
    #[serde(default)]
    pub email: Option<String>,
    #[serde(default)]
    pub postal_code: Option<String>,
    #[serde(default)]
    pub phone_number_type: Option<PhoneNumberType>,
    #[serde(default)]
    pub tag_ids: Option<Vec<String>>,
}

/// PATCH /leads: a lead id and one operation.
#[derive(Debug, Deserialize)]
pub(crate) struct LeadPatch {
    pub id: String,
    pub operation: LeadOperation,
}

/// The lead operations, discriminated by `type`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(tag = "type")]
pub(crate) enum LeadOperation {
    #[serde(rename = "makeActiveInGroup", rename_all = "camelCase")]
    MakeActiveInGroup { group_id: String },
    #[serde(rename = "makeInactiveInGroup", rename_all = "camelCase")]
    MakeInactiveInGroup { group_id: String },
    #[serde(rename = "attachLeadToIntegration", rename_all = "camelCase")]
    AttachLeadToIntegration {
        integration_id: String,
        external: ExternalLead,
    },
    #[serde(rename = "applyTag", rename_all = "camelCase")]
    ApplyTag { tag_id: String },
    #[serde(rename = "removeTag", rename_all = "camelCase")]
    RemoveTag { tag_id: String },
    #[serde(rename = "setCustomField", rename_all = "camelCase")]
    SetCustomField {
        custom_field_name: String,
        value: String,
    },
    /// `tagId`, when given, must be a tag with visibility `OPT_OUT`.
    #[serde(rename = "optOut", rename_all = "camelCase")]
    OptOut {
        #[serde(default)]
        tag_id: Option<String>,
    },
    #[serde(rename = "optIn")]
    OptIn,
}

/// The external object of `attachLeadToIntegration`: `integrationType` says which of the
/// document's shapes `externalObject` has. The tokens are the table's, hyphenated
/// `voter-file-a-alt` included.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(tag = "integrationType", content = "externalObject")]
pub(crate) enum ExternalLead {
    #[serde(rename = "voter_file_a")]
    VoterFileA(VoterFileRecord),
    #[serde(rename = "voter-file-a-alt")]
    VoterFileAAlt(VoterFileRecord),
    #[serde(rename = "fundraising_b")]
    FundraisingB {
        version: Fixed<Version1>,
        #[serde(rename = "remoteId")]
        remote_id: String,
    },
    #[serde(rename = "crm_b")]
    CrmB {
        version: Fixed<Version41>,
        #[serde(rename = "crmObjectType")]
        crm_object_type: String,
        #[serde(rename = "crmObjectId")]
        crm_object_id: String,
    },
    #[serde(rename = "fundraising_a")]
    FundraisingA {
        version: Fixed<Version1>,
        #[serde(rename = "constituentId")]
        constituent_id: String,
    },
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct VoterFileRecord {
    pub version: Fixed<VersionV4>,
    pub voter_file_id: String,
    #[serde(default)]
    pub voter_file_phone_id: Option<f64>,
}

/// A `version` that must be one constant string.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Fixed<V>(std::marker::PhantomData<V>);

/// The constant a [`Fixed`] accepts.
pub(crate) trait Constant {
    const VALUE: &'static str;
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct VersionV4;
impl Constant for VersionV4 {
    const VALUE: &'static str = "v4";
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Version1;
impl Constant for Version1 {
    const VALUE: &'static str = "1.0";
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Version41;
impl Constant for Version41 {
    const VALUE: &'static str = "41.0";
}

impl<'de, V: Constant> Deserialize<'de> for Fixed<V> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let value = String::deserialize(d)?;
        if value == V::VALUE {
            Ok(Self(std::marker::PhantomData))
        } else {
            Err(serde::de::Error::custom(format!(
                "version must be `{}`, got `{value}`",
                V::VALUE
            )))
        }
    }
}

/// POST /integrations.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct NewIntegrationBody {
    pub organization_id: String,
    pub integration: NewIntegration,
}

/// `integration` of POST /integrations, discriminated by `type`.
#[derive(Debug, Deserialize)]
#[serde(tag = "type")]
pub(crate) enum NewIntegration {
    #[serde(rename = "advocacy_a")]
    AdvocacyA {
        name: String,
        credentials: AdvocacyCredentials,
    },
    #[serde(rename = "voter_file_a", rename_all = "camelCase")]
    VoterFileA {
        name: String,
        credentials: VoterFileCredentials,
        #[serde(default)]
        #[expect(
            dead_code,
            reason = "read so a wrong type is refused; no list is processed"
        )]
        ref_key: Option<String>,
    },
    #[serde(rename = "voter_file_a_alt", rename_all = "camelCase")]
    VoterFileAAlt {
        name: String,
        credentials: VoterFileCredentials,
        #[serde(default)]
        #[expect(
            dead_code,
            reason = "read so a wrong type is refused; no list is processed"
        )]
        ref_key: Option<String>,
    },
}

impl NewIntegration {
    pub(crate) fn name(&self) -> &str {
        match self {
            Self::AdvocacyA { name, .. }
            | Self::VoterFileA { name, .. }
            | Self::VoterFileAAlt { name, .. } => name,
        }
    }

    /// The `integrationType` of the integration it creates.
    pub(crate) fn integration_type(&self) -> IntegrationType {
        match self {
            Self::AdvocacyA { .. } => IntegrationType::AdvocacyA,
            Self::VoterFileA { .. } => IntegrationType::VoterFileA,
            Self::VoterFileAAlt { .. } => IntegrationType::VoterFileAAlt,
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct AdvocacyCredentials {
    pub username: String,
    pub password: SecretString,
    pub api_key: SecretString,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct VoterFileCredentials {
    pub application_name: String,
    pub api_key: SecretString,
}

/// PATCH /integrations.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct IntegrationPatch {
    pub integration_id: String,
    pub operation: IntegrationOperation,
}

/// `operation` of PATCH /integrations, discriminated by `type`: new credentials for one
/// kind of integration.
#[derive(Debug, Deserialize)]
#[serde(tag = "type")]
pub(crate) enum IntegrationOperation {
    /// `updateAdvocacyACredentials`.
    #[serde(rename = "updateAdvocacyACredentials")]
    AdvocacyA { credentials: AdvocacyCredentials },
    /// `updateVoterFileACredentials`.
    #[serde(rename = "updateVoterFileACredentials")]
    VoterFileA { credentials: VoterFileCredentials },
    /// `updateVoterFileAltCredentials`.
    #[serde(rename = "updateVoterFileAltCredentials")]
    VoterFileAlt { credentials: VoterFileCredentials },
}
