//! VAN's changed-entity export jobs over HTTP: the catalog, a job's life, its files on the
//! download path, `excludeChangesFromSelf`, the 90-day limit, and what a user marks.

use outreach_sync_sandbox::destinations::{VanMark, VanTarget};
use outreach_sync_sandbox::{DEFAULT_VAN_KEY, DEFAULT_VAN_KEY_2};
use serde_json::{Value, json};

use super::common::*;

/// A window from an hour ago to now.
fn last_hour() -> String {
    (chrono::Utc::now() - chrono::Duration::hours(1)).to_rfc3339()
}

impl Fakes {
    pub(crate) async fn new_job(&self, key: &str, body: Value) -> Answer {
        self.van_post_as("/changedEntityExportJobs", key, body)
            .await
    }

    /// Polls the job until it leaves `Pending` and `InProcess` (at most `polls` times);
    /// the statuses seen, and the last answer.
    pub(crate) async fn poll(&self, key: &str, id: &Value, polls: usize) -> (Vec<String>, Answer) {
        let mut seen = Vec::new();
        for _ in 0..polls {
            let answer = self
                .van_get_as(&format!("/changedEntityExportJobs/{id}"), key)
                .await;
            assert_eq!(answer.status, 200, "{}", answer.body);
            let status = answer.body["jobStatus"].as_str().unwrap_or("?").to_owned();
            seen.push(status.clone());
            if status != "Pending" && status != "InProcess" {
                return (seen, answer);
            }
        }
        let last = self
            .van_get_as(&format!("/changedEntityExportJobs/{id}"), key)
            .await;
        (seen, last)
    }

    /// The CSV of every file of a complete job, each as lines.
    pub(crate) async fn files_of(&self, job: &Value) -> Vec<Vec<String>> {
        let mut files = Vec::new();
        for file in job["files"].as_array().expect("files") {
            let url = file["downloadUrl"].as_str().expect("a URL");
            let response = self.http.get(url).send().await.expect("an answer");
            assert_eq!(response.status(), 200, "{url}");
            let text = response.text().await.expect("a body");
            files.push(text.lines().map(str::to_owned).collect());
        }
        files
    }

    /// A job for `resource` over the last hour, polled to `Complete`, and its files.
    pub(crate) async fn export(
        &self,
        key: &str,
        resource: &str,
        fields: &[&str],
        exclude_self: bool,
    ) -> Vec<Vec<String>> {
        // A window leaves out its end (`dateChangedTo`, now by default): a change made in the
        // very millisecond of the export would fall outside it.
        tokio::time::sleep(std::time::Duration::from_millis(3)).await;
        let created = self
            .new_job(
                key,
                json!({"dateChangedFrom": last_hour(), "resourceType": resource,
                       "requestedFields": fields, "excludeChangesFromSelf": exclude_self}),
            )
            .await;
        assert_eq!(created.status, 201, "{}", created.body);
        let (_, done) = self.poll(key, &created.body["exportJobId"], 10).await;
        assert_eq!(done.body["jobStatus"], "Complete", "{}", done.body);
        self.files_of(&done.body).await
    }
}

#[tokio::test]
async fn the_catalog_names_the_resources_and_the_opt_in_values_by_name() {
    let fakes = Fakes::default().await;
    let resources = fakes.van_get("/changedEntityExportJobs/resources").await;
    assert_eq!(resources.body, json!(["ContactHistory", "Contacts"]));
    let fields = fakes
        .van_get("/changedEntityExportJobs/fields/Contacts")
        .await;
    assert_eq!(fields.status, 200);
    let status = fields
        .body
        .as_array()
        .expect("fields")
        .iter()
        .find(|f| f["fieldName"] == "PhoneOptInStatusID")
        .expect("the opt-in status field");
    assert_eq!(status["isCoreField"], false);
    assert_eq!(status["fieldType"], "N");
    assert_eq!(
        status["availableValues"],
        json!([{"id": 1, "name": "Opt-In"}, {"id": 2, "name": "Unknown"}, {"id": 3, "name": "Opt-Out"}])
    );
    let unknown = fakes.van_get("/changedEntityExportJobs/fields/Nope").await;
    assert_eq!(unknown.status, 404);
    assert_eq!(first_error(&unknown)["code"], "NOT_FOUND");
}

#[tokio::test]
async fn a_job_goes_pending_then_in_process_then_complete_with_a_csv_of_the_changes() {
    let fakes = Fakes::default().await;
    let (van_id, phone) = fakes.a_van_person();
    let mark = fakes
        .sandbox
        .van_mark(
            DEFAULT_VAN_KEY,
            &VanTarget::VanId(van_id),
            VanMark::OptOut,
            "Ann",
        )
        .expect("marked");
    // A window ends before its `dateChangedTo` (now, here): not in the change's millisecond.
    tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    let created = fakes
        .new_job(
            DEFAULT_VAN_KEY,
            json!({"dateChangedFrom": last_hour(), "resourceType": "Contacts",
                   "requestedFields": ["Phone", "PhoneOptInStatusID"],
                   "excludeChangesFromSelf": true, "fileSizeKbLimit": 100000}),
        )
        .await;
    assert_eq!(created.status, 201, "{}", created.body);
    assert_eq!(created.body["jobStatus"], "Pending");
    assert_eq!(created.body["files"], json!([]));
    let (seen, done) = fakes
        .poll(DEFAULT_VAN_KEY, &created.body["exportJobId"], 10)
        .await;
    assert_eq!(seen, ["Pending", "InProcess", "Complete"]);
    assert_eq!(done.body["exportedRecordCount"], 1);
    assert!(done.body["files"][0]["dateExpired"].is_string());
    let url = done.body["files"][0]["downloadUrl"]
        .as_str()
        .expect("a URL");
    assert!(
        url.contains("/van-files/") && !url.contains("/van/v4"),
        "{url}"
    );
    let files = fakes.files_of(&done.body).await;
    assert_eq!(
        files[0][0],
        "VanID,FirstName,LastName,Phone,PhoneOptInStatusID,DateChanged,ChangeTypeID"
    );
    let row: Vec<&str> = files[0][1].split(',').collect();
    assert_eq!(row[0], van_id.to_string());
    assert_eq!(row[3], phone);
    assert_eq!(row[4], "3", "Opt-Out");
    assert_eq!(
        row[5],
        mark.at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
    );
    // Another committee sees none of it.
    let other = fakes
        .export(DEFAULT_VAN_KEY_2, "Contacts", &[], false)
        .await;
    assert_eq!(other[0].len(), 1, "a header alone: {other:?}");
}

#[tokio::test]
async fn exclude_changes_from_self_leaves_out_what_the_same_key_wrote() {
    let fakes = Fakes::default().await;
    let truth = fakes.sandbox.van_truth();
    let (ours, theirs) = (&truth.people[0], &truth.people[1]);
    let written = fakes
        .van_post(
            &format!("/people/{}", ours.van_id),
            json!({"vanId": ours.van_id, "phones": [{"phoneNumber": ours.phones[0].phone_number,
                   "phoneType": "C", "phoneOptInStatus": "O"}]}),
        )
        .await;
    assert_eq!(written.status, 200, "{}", written.body);
    fakes
        .control(
            reqwest::Method::POST,
            "/van/mark",
            Some(json!({"apiKey": DEFAULT_VAN_KEY, "vanId": theirs.van_id, "mark": "optOut"})),
        )
        .await;
    let van_ids = |files: Vec<Vec<String>>| -> Vec<String> {
        files[0][1..]
            .iter()
            .map(|l| l.split(',').next().unwrap_or_default().to_owned())
            .collect()
    };
    let all = fakes.export(DEFAULT_VAN_KEY, "Contacts", &[], false).await;
    assert_eq!(
        van_ids(all),
        [ours.van_id.to_string(), theirs.van_id.to_string()]
    );
    let others = fakes.export(DEFAULT_VAN_KEY, "Contacts", &[], true).await;
    assert_eq!(van_ids(others), [theirs.van_id.to_string()]);
}

#[tokio::test]
async fn do_not_text_shows_in_contact_history_as_the_committee_s_result_id() {
    let fakes = Fakes::default().await;
    let dnt = fakes
        .van_id_of(DEFAULT_VAN_KEY, "resultCodes", "Do Not Text")
        .await;
    let sms = fakes
        .van_id_of(DEFAULT_VAN_KEY, "contactTypes", "SMS Text")
        .await;
    let (van_id, phone) = fakes.a_van_person();
    let by_api = fakes
        .van_post(
            &format!("/people/{van_id}/canvassResponses"),
            do_not_text(dnt, sms, &phone),
        )
        .await;
    assert_eq!(by_api.status, 204, "{}", by_api.body);
    let answer = fakes
        .control(
            reqwest::Method::POST,
            "/van/mark",
            Some(json!({"apiKey": DEFAULT_VAN_KEY, "phoneNumber": "+12025550999"})),
        )
        .await;
    assert_eq!(answer.status, 201, "{}", answer.body);
    assert_eq!(
        answer.body["by"],
        json!({"kind": "user", "name": "Phone banker"})
    );
    let files = fakes
        .export(DEFAULT_VAN_KEY, "ContactHistory", &["Phone"], false)
        .await;
    assert_eq!(
        files[0][0],
        "ContactsContactID,VanID,CommitteeID,DateCanvassed,ContactTypeID,InputTypeID,ResultID,Phone,DateChanged,ChangeTypeID"
    );
    assert_eq!(files[0].len(), 3, "{files:?}");
    for row in &files[0][1..] {
        let cells: Vec<&str> = row.split(',').collect();
        assert_eq!(cells[6], dnt.to_string(), "{row}");
    }
    assert!(files[0][2].contains(",2025550999,"), "{:?}", files[0][2]);
    let only_user = fakes
        .export(DEFAULT_VAN_KEY, "ContactHistory", &[], true)
        .await;
    assert_eq!(
        only_user[0].len(),
        2,
        "the API's own left out: {only_user:?}"
    );
}

#[tokio::test]
async fn a_bad_job_is_refused_in_van_s_words_the_90_day_limit_first() {
    let fakes = Fakes::default().await;
    let old = (chrono::Utc::now() - chrono::Duration::days(91)).to_rfc3339();
    for (body, property, words) in [
        (
            json!({"dateChangedFrom": old, "resourceType": "Contacts"}),
            "dateChangedFrom",
            "90 days",
        ),
        (
            json!({"dateChangedFrom": last_hour(), "resourceType": "Nope"}),
            "resourceType",
            "Nope",
        ),
        (
            json!({"dateChangedFrom": last_hour(), "resourceType": "Contacts", "requestedFields": ["Shoe"]}),
            "requestedFields",
            "Shoe",
        ),
        (
            json!({"resourceType": "Contacts"}),
            "dateChangedFrom",
            "required",
        ),
    ] {
        let answer = fakes.new_job(DEFAULT_VAN_KEY, body.clone()).await;
        assert_eq!(answer.status, 400, "{body}: {}", answer.body);
        assert_eq!(
            first_error(&answer)["code"],
            "INVALID_PARAMETER",
            "{}",
            answer.body
        );
        assert!(
            properties(&answer).contains(&property.to_owned()),
            "{}",
            answer.body
        );
        assert!(
            first_error(&answer)["text"]
                .as_str()
                .is_some_and(|t| t.contains(words)),
            "{}",
            answer.body
        );
    }
    let unknown = fakes.van_get("/changedEntityExportJobs/99").await;
    assert_eq!(unknown.status, 404);
}

#[tokio::test]
async fn the_download_path_takes_no_credential_and_records_any_sent() {
    let fakes = Fakes::default().await;
    let created = fakes
        .new_job(
            DEFAULT_VAN_KEY,
            json!({"dateChangedFrom": last_hour(), "resourceType": "Contacts"}),
        )
        .await;
    let (_, done) = fakes
        .poll(DEFAULT_VAN_KEY, &created.body["exportJobId"], 10)
        .await;
    let url = done.body["files"][0]["downloadUrl"]
        .as_str()
        .expect("a URL");
    let bare = fakes.http.get(url).send().await.expect("an answer");
    assert_eq!(bare.status(), 200);
    assert!(
        fakes
            .sandbox
            .van_truth()
            .download_credentials_seen
            .is_empty()
    );
    let leaky = fakes
        .http
        .get(format!("{url}?api_key=sandbox-van-key"))
        .header("Authorization", basic("outreach-sync", "sandbox-van-key|1"))
        .send()
        .await
        .expect("an answer");
    assert_eq!(
        leaky.status(),
        200,
        "credentials are not refused, only recorded"
    );
    let truth = fakes.sandbox.van_truth();
    let seen: Vec<(&str, &str)> = truth
        .download_credentials_seen
        .iter()
        .map(|c| (c.location.as_str(), c.value.as_str()))
        .collect();
    assert_eq!(seen.len(), 2, "{seen:?}");
    assert_eq!(seen[0].0, "Authorization");
    assert_eq!(seen[1], ("query:api_key", "sandbox-van-key"));
    assert_eq!(truth.downloads.len(), 2);
    let over_http = fakes.control(reqwest::Method::GET, "/van", None).await;
    assert_eq!(
        over_http.body["downloadCredentialsSeen"][1]["location"],
        "query:api_key"
    );
}

#[tokio::test]
async fn a_hundred_thousand_seeded_changes_come_in_files_of_ten_thousand_rows() {
    let fakes = Fakes::default().await;
    let first = fakes
        .sandbox
        .van_seed_changes(DEFAULT_VAN_KEY, 100_000, false)
        .expect("seeded");
    let started = std::time::Instant::now();
    let created = fakes
        .new_job(
            DEFAULT_VAN_KEY,
            json!({"dateChangedFrom": last_hour(), "resourceType": "Contacts",
                   "requestedFields": ["Phone", "PhoneOptInStatusID"], "excludeChangesFromSelf": true}),
        )
        .await;
    let (_, done) = fakes
        .poll(DEFAULT_VAN_KEY, &created.body["exportJobId"], 10)
        .await;
    let files = done.body["files"].as_array().expect("files");
    assert!(
        (10..=11).contains(&files.len()),
        "{} files for {}",
        files.len(),
        done.body["exportedRecordCount"]
    );
    let records = done.body["exportedRecordCount"].as_u64().expect("a count");
    assert!(records >= 99_990, "the hour's seeds: {records}");
    let url = files[0]["downloadUrl"].as_str().expect("a URL");
    let text = fakes
        .http
        .get(url)
        .send()
        .await
        .expect("an answer")
        .text()
        .await
        .expect("a body");
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 10_001);
    assert!(lines[1].ends_with(",2"), "{}", lines[1]);
    assert!(
        lines
            .iter()
            .skip(1)
            .all(|l| l.split(',').nth(4) == Some("3"))
    );
    let van_id: u64 = lines[1]
        .split(',')
        .next()
        .and_then(|v| v.parse().ok())
        .expect("a VAN ID");
    assert!((first..first + 100_000).contains(&van_id), "{van_id}");
    assert!(
        started.elapsed() < std::time::Duration::from_secs(20),
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn a_phone_changed_twice_is_one_row_with_its_current_status() {
    let fakes = Fakes::default().await;
    let (van_id, _) = fakes.a_van_person();
    let target = VanTarget::VanId(van_id);
    for mark in [VanMark::OptOut, VanMark::OptIn] {
        fakes
            .sandbox
            .van_mark(DEFAULT_VAN_KEY, &target, mark, "Ann")
            .expect("marked");
    }
    let files = fakes
        .export(DEFAULT_VAN_KEY, "Contacts", &["PhoneOptInStatusID"], false)
        .await;
    assert_eq!(files[0].len(), 2, "{files:?}");
    assert_eq!(
        files[0][1].split(',').nth(3),
        Some("1"),
        "Opt-In, the current one"
    );
}
