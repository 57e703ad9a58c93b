//! The faults of VAN's export jobs, each set per committee (over HTTP or from the handle):
//! a missing column, a garbage row, a huge file, a job stuck `InProcess`, expired download
//! URLs, and `Error`.

use outreach_sync_sandbox::destinations::{VanExportSettings, VanMark, VanTarget};
use outreach_sync_sandbox::{DEFAULT_VAN_KEY, DEFAULT_VAN_KEY_2};
use serde_json::json;

use super::common::*;

fn last_hour() -> String {
    (chrono::Utc::now() - chrono::Duration::hours(1)).to_rfc3339()
}

/// Two opt-outs by a user in the default committee.
fn two_changes(fakes: &Fakes) {
    let truth = fakes.sandbox.van_truth();
    for person in &truth.people[..2] {
        fakes
            .sandbox
            .van_mark(
                DEFAULT_VAN_KEY,
                &VanTarget::VanId(person.van_id),
                VanMark::OptOut,
                "Ann",
            )
            .expect("marked");
    }
}

async fn complete_job(fakes: &Fakes) -> serde_json::Value {
    let created = fakes
        .new_job(
            DEFAULT_VAN_KEY,
            json!({"dateChangedFrom": last_hour(), "resourceType": "Contacts",
                   "requestedFields": ["Phone", "PhoneOptInStatusID"]}),
        )
        .await;
    assert_eq!(created.status, 201, "{}", created.body);
    let (_, done) = fakes
        .poll(DEFAULT_VAN_KEY, &created.body["exportJobId"], 10)
        .await;
    assert_eq!(done.body["jobStatus"], "Complete", "{}", done.body);
    done.body
}

#[tokio::test]
async fn a_missing_column_and_a_garbage_row_are_served_when_set() {
    let fakes = Fakes::default().await;
    two_changes(&fakes);
    let set = fakes
        .control(
            reqwest::Method::PUT,
            "/van/export",
            Some(json!({"apiKey": DEFAULT_VAN_KEY, "missingColumn": "PhoneOptInStatusID", "garbageRow": true})),
        )
        .await;
    assert_eq!(set.status, 200, "{}", set.body);
    let job = complete_job(&fakes).await;
    let file = &fakes.files_of(&job).await[0];
    assert_eq!(
        file[0],
        "VanID,FirstName,LastName,Phone,DateChanged,ChangeTypeID"
    );
    assert_eq!(file.len(), 4, "header, a row, the garbage, a row: {file:?}");
    assert!(file[2].starts_with("not-a-van-id,"), "{file:?}");
    assert!(
        file[3]
            .split(',')
            .next()
            .is_some_and(|v| v.parse::<u64>().is_ok())
    );
}

#[tokio::test]
async fn a_huge_file_streams_past_64_mib_without_ending() {
    let fakes = Fakes::default().await;
    two_changes(&fakes);
    assert!(fakes.sandbox.van_set_export(
        DEFAULT_VAN_KEY,
        VanExportSettings {
            huge_file: true,
            ..VanExportSettings::default()
        }
    ));
    let job = complete_job(&fakes).await;
    assert_eq!(job["files"].as_array().map(Vec::len), Some(1));
    let url = job["files"][0]["downloadUrl"].as_str().expect("a URL");
    let mut response = fakes.http.get(url).send().await.expect("an answer");
    assert_eq!(response.status(), 200);
    let mut read = 0usize;
    while read < 64 * 1024 * 1024 {
        let chunk = response
            .chunk()
            .await
            .expect("a chunk")
            .expect("not the end yet");
        read += chunk.len();
    }
    drop(response);
    fakes.sandbox.shutdown().await;
}

#[tokio::test]
async fn a_stuck_job_stays_in_process_and_an_error_job_says_why() {
    let fakes = Fakes::default().await;
    fakes.sandbox.van_set_export(
        DEFAULT_VAN_KEY,
        VanExportSettings {
            stuck: true,
            ..VanExportSettings::default()
        },
    );
    let stuck = fakes
        .new_job(
            DEFAULT_VAN_KEY,
            json!({"dateChangedFrom": last_hour(), "resourceType": "Contacts"}),
        )
        .await;
    let (seen, last) = fakes
        .poll(DEFAULT_VAN_KEY, &stuck.body["exportJobId"], 8)
        .await;
    assert_eq!(seen.len(), 8);
    assert_eq!(last.body["jobStatus"], "InProcess");
    fakes.sandbox.van_set_export(
        DEFAULT_VAN_KEY,
        VanExportSettings {
            error: Some("The export failed".into()),
            ..VanExportSettings::default()
        },
    );
    let failed = fakes
        .new_job(
            DEFAULT_VAN_KEY,
            json!({"dateChangedFrom": last_hour(), "resourceType": "Contacts"}),
        )
        .await;
    let (seen, last) = fakes
        .poll(DEFAULT_VAN_KEY, &failed.body["exportJobId"], 8)
        .await;
    assert_eq!(seen, ["Error"]);
    assert_eq!(last.body["message"], "The export failed");
    assert!(last.body["code"].is_string());
    assert_eq!(last.body["files"], json!([]));
    // The other committee's jobs are untouched.
    let other = fakes
        .new_job(
            DEFAULT_VAN_KEY_2,
            json!({"dateChangedFrom": last_hour(), "resourceType": "Contacts"}),
        )
        .await;
    let (_, done) = fakes
        .poll(DEFAULT_VAN_KEY_2, &other.body["exportJobId"], 8)
        .await;
    assert_eq!(done.body["jobStatus"], "Complete");
}

#[tokio::test]
async fn an_expired_download_url_is_403_with_an_xml_error_and_polls_are_configurable() {
    let fakes = Fakes::default().await;
    two_changes(&fakes);
    fakes.sandbox.van_set_export(
        DEFAULT_VAN_KEY,
        VanExportSettings {
            expired_urls: true,
            polls_before_complete: 0,
            ..VanExportSettings::default()
        },
    );
    let created = fakes
        .new_job(
            DEFAULT_VAN_KEY,
            json!({"dateChangedFrom": last_hour(), "resourceType": "Contacts"}),
        )
        .await;
    let (seen, done) = fakes
        .poll(DEFAULT_VAN_KEY, &created.body["exportJobId"], 8)
        .await;
    assert_eq!(seen, ["Complete"], "no poll before Complete");
    let expired = done.body["files"][0]["dateExpired"]
        .as_str()
        .expect("a date");
    assert!(
        chrono::DateTime::parse_from_rfc3339(expired).expect("RFC 3339") < chrono::Utc::now(),
        "{expired}"
    );
    let url = done.body["files"][0]["downloadUrl"]
        .as_str()
        .expect("a URL");
    let response = fakes.http.get(url).send().await.expect("an answer");
    assert_eq!(response.status(), 403);
    let body = response.text().await.expect("a body");
    assert!(body.contains("<Code>AccessDenied</Code>"), "{body}");
    let unknown = fakes
        .http
        .get(format!("{}/van-files/nope.csv", fakes.sandbox.base_url()))
        .send()
        .await
        .expect("an answer");
    assert_eq!(unknown.status(), 404);
    assert_eq!(fakes.sandbox.van_truth().downloads.len(), 2);
}
