//! Integrations: the resource, create and update payloads (discriminated by `type`) and the
//! external lead objects of `attachLeadToIntegration` (discriminated by `integrationType`).

use secrecy::{ExposeSecret, SecretString};
use serde::{Deserialize, Serialize, Serializer};

use super::common::IntegrationType;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Integration {
    pub id: String,
    #[serde(rename = "type")]
    pub kind: String,
    pub name: String,
    pub integration_type: IntegrationType,
    pub organization_id: String,
    pub created_at: String,
}

/// Sends a secret to the service; nothing else may read it out.
pub(crate) fn expose<S: Serializer>(secret: &SecretString, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(secret.expose_secret())
}

/// Credentials of an `advocacy_a` integration.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AdvocacyCredentials {
    pub username: String,
    #[serde(serialize_with = "expose")]
    pub password: SecretString,
    #[serde(serialize_with = "expose")]
    pub api_key: SecretString,
}

/// Credentials of a `voter_file_a` / `voter_file_a_alt` integration.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VoterFileCredentials {
    pub application_name: String,
    #[serde(serialize_with = "expose")]
    pub api_key: SecretString,
}

/// `integration` of POST /integrations.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "type")]
pub enum NewIntegration {
    #[serde(rename = "advocacy_a")]
    AdvocacyA {
        name: String,
        credentials: AdvocacyCredentials,
    },
    #[serde(rename = "voter_file_a", rename_all = "camelCase")]
    VoterFileA {
        name: String,
        credentials: VoterFileCredentials,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        ref_key: Option<String>,
    },
    #[serde(rename = "voter_file_a_alt", rename_all = "camelCase")]
    VoterFileAAlt {
        name: String,
        credentials: VoterFileCredentials,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        ref_key: Option<String>,
    },
}

impl NewIntegration {
    pub fn name(&self) -> &str {
        match self {
            Self::AdvocacyA { name, .. }
            | Self::VoterFileA { name, .. }
            | Self::VoterFileAAlt { name, .. } => name,
        }
    }

    pub fn integration_type(&self) -> IntegrationType {
        match self {
            Self::AdvocacyA { .. } => IntegrationType::AdvocacyA,
            Self::VoterFileA { .. } => IntegrationType::VoterFileA,
            Self::VoterFileAAlt { .. } => IntegrationType::VoterFileAAlt,
        }
    }
}

/// Body of POST /integrations.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CreateIntegration {
    pub organization_id: String,
    pub integration: NewIntegration,
}

/// `operation` of PATCH /integrations; the service applies it only if the credentials are
/// valid.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum IntegrationOperation {
    UpdateAdvocacyACredentials { credentials: AdvocacyCredentials },
    UpdateVoterFileACredentials { credentials: VoterFileCredentials },
    UpdateVoterFileAltCredentials { credentials: VoterFileCredentials },
}

/// Body of PATCH /integrations.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UpdateIntegration {
    pub integration_id: String,
    pub operation: IntegrationOperation,
}

/// Constant `version` values of external objects: each is a one-value enumeration.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum VersionV4 {
    #[default]
    #[serde(rename = "v4")]
    V4,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum Version1 {
    #[default]
    #[serde(rename = "1.0")]
    V1_0,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum Version41 {
    #[default]
    #[serde(rename = "41.0")]
    V41_0,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VoterFileObject {
    pub version: VersionV4,
    pub voter_file_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub voter_file_phone_id: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FundraisingBObject {
    pub version: Version1,
    pub remote_id: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CrmBObject {
    pub version: Version41,
    pub crm_object_type: String,
    pub crm_object_id: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FundraisingAObject {
    pub version: Version1,
    pub constituent_id: String,
}

/// `external` of `attachLeadToIntegration`: `{"integrationType": ..., "externalObject": ...}`.
/// The tokens are the document's, including its hyphenated `voter-file-a-alt`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "integrationType", content = "externalObject")]
pub enum ExternalLeadObject {
    #[serde(rename = "voter_file_a")]
    VoterFileA(VoterFileObject),
    #[serde(rename = "voter-file-a-alt")]
    VoterFileAAlt(VoterFileObject),
    #[serde(rename = "fundraising_b")]
    FundraisingB(FundraisingBObject),
    #[serde(rename = "crm_b")]
    CrmB(CrmBObject),
    #[serde(rename = "fundraising_a")]
    FundraisingA(FundraisingAObject),
}
