//! Where a leads pass reads from: the list endpoints of the configured API version. The pass
//! (apply, checkpoints, counts) is one for both versions; only how pages are fetched differs.

use chrono::Utc;
use futures::TryStreamExt;

use super::leads::LeadsPage;
use super::mirror::kept;
use super::{PAGE_SIZE, mirror_lead, mirror_v2_lead};
use crate::client::models::{ListLeads, ListOrganizations, Paging};
use crate::client::{ClientError, ServiceClient, V2Client};
use crate::settings::ApiVersion;

/// Marks a saved v2 cursor, so a pass never resumes with a cursor of the other version
/// (after `service.api_version` changed) and is refused on every pass.
const V2_CURSOR: &str = "v2:";

#[derive(Debug, Clone)]
pub(super) enum LeadSource {
    /// `GET /v3/organizations`, `GET /v3/leads?organizationId=`, `GET /v3/messages/{id}`.
    V3(ServiceClient),
    /// `GET /v2/organizations`, `GET /v2/organizations/{id}/leads`. The v2.1 document has
    /// no message endpoint.
    V2(V2Client),
}

impl LeadSource {
    pub fn of(client: &ServiceClient) -> Self {
        match client.config().api_version {
            ApiVersion::V3 => Self::V3(client.clone()),
            ApiVersion::V2 => Self::V2(client.v2()),
        }
    }

    /// Whether message statuses can be read through this version.
    pub fn reads_messages(&self) -> bool {
        matches!(self, Self::V3(_))
    }

    /// Every organization of the account.
    pub async fn organizations(&self) -> Result<Vec<String>, ClientError> {
        match self {
            Self::V3(client) => {
                client
                    .organizations(ListOrganizations::default(), Some(PAGE_SIZE))
                    .map_ok(|o| o.id)
                    .try_collect()
                    .await
            }
            Self::V2(v2) => {
                v2.organizations(Some(PAGE_SIZE))
                    .map_ok(|o| o.id)
                    .try_collect()
                    .await
            }
        }
    }

    /// A cursor saved by an interrupted pass, if it is this version's; else `None`: the
    /// organization is scanned again from its first page.
    pub fn resume(&self, saved: Option<String>) -> Option<String> {
        let saved = saved?;
        let ours = match self {
            Self::V3(_) => !saved.starts_with(V2_CURSOR),
            Self::V2(_) => saved.starts_with(V2_CURSOR),
        };
        if !ours {
            tracing::info!(
                "the saved cursor is of the other API version; the organization is scanned from the start"
            );
        }
        ours.then_some(saved)
    }

    /// One page of an organization's leads, in the mirror's form, with the cursor of the
    /// next page as it is saved. Its observations are timed when the request was sent: the
    /// page reflects at least every change before then, and a webhook event after then is
    /// newer than the page and wins over it.
    #[tracing::instrument(name = "fetch_leads_page", skip_all, fields(organization = %organization))]
    pub async fn page(
        self,
        organization: String,
        cursor: Option<String>,
    ) -> Result<LeadsPage, ClientError> {
        match self {
            Self::V3(client) => {
                let query = ListLeads {
                    organization_id: Some(organization),
                    ..ListLeads::default()
                };
                let paging = Paging {
                    cursor,
                    limit: Some(PAGE_SIZE),
                };
                let fetched_at = Utc::now();
                let page = client.leads_page(&query, &paging).await?;
                Ok(LeadsPage {
                    next: page.next_cursor().map(str::to_owned),
                    leads: page
                        .items
                        .iter()
                        .filter_map(|l| kept(&l.id, mirror_lead(l)))
                        .collect(),
                    fetched_at,
                })
            }
            Self::V2(v2) => {
                let cursor = cursor.map(|c| c.trim_start_matches(V2_CURSOR).to_owned());
                let paging = Paging {
                    cursor: cursor.clone(),
                    limit: Some(PAGE_SIZE),
                };
                let fetched_at = Utc::now();
                // Past 100,000 leads this is `CursorDepthExceeded`, which ends the scan.
                let page = v2.organization_leads_page(&organization, &paging).await?;
                let pagination = page.pagination;
                let next = match (pagination.has_next_page, pagination.cursor) {
                    (false, _) => None,
                    (true, Some(next)) if Some(&next) != cursor.as_ref() => {
                        Some(format!("{V2_CURSOR}{next}"))
                    }
                    // Following it would fetch the same page for ever.
                    (true, _) => {
                        return Err(ClientError::Decode {
                            endpoint: format!("v2/organizations/{organization}/leads"),
                            message: "hasNextPage is true but no new cursor was given".into(),
                        });
                    }
                };
                Ok(LeadsPage {
                    next,
                    leads: page
                        .items
                        .iter()
                        .filter_map(|l| kept(&l.id, mirror_v2_lead(l)))
                        .collect(),
                    fetched_at,
                })
            }
        }
    }
}
