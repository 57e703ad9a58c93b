use chrono::TimeDelta;

use super::messages::after;
use super::*;
use crate::model::LeadMessage;
use crate::model::business_days::BusinessDays;

fn at(text: &str) -> Timestamp {
    text.parse().expect("time")
}

fn row(seq: i64) -> OptOutRow {
    OptOutRow {
        seq,
        organization_id: "org_1".into(),
        lead_id: Some("lead_1".into()),
        phone_number: "+15550000001".into(),
        occurred_at: at("2026-11-23T15:00:00Z"),
        recorded_at: at("2026-11-23T15:00:01Z"),
        source: Source::Webhook,
        push_state: None,
        push_finished_at: None,
        opted_in_at: None,
        state_lead_id: None,
        superseded: false,
        account_id: crate::model::AccountId::default_account(),
        event_ref: format!("event:evt_{seq}"),
    }
}

#[test]
fn a_row_had_by_a_subscriber_takes_the_earliest_request_that_carried_it() {
    let span = |first, last, when: &str| AckSpan {
        first_seq: first,
        last_seq: last,
        acked_at: at(when),
    };
    // A replay sent 1..=9 again later; 12 is in no acknowledged request yet.
    let spans = [
        span(1, 5, "2026-11-23T15:00:02Z"),
        span(1, 9, "2026-11-24T09:00:00Z"),
        span(6, 9, "2026-11-23T15:00:03Z"),
    ];
    let rows: Vec<OptOutRow> = [2, 7, 9, 12].into_iter().map(row).collect();
    assert_eq!(
        earliest_acks(&spans, &rows),
        [
            Some(at("2026-11-23T15:00:02Z")),
            Some(at("2026-11-23T15:00:03Z")),
            Some(at("2026-11-23T15:00:03Z")),
            None
        ]
    );
}

#[test]
fn the_first_message_within_the_window_is_the_confirmation_and_an_opt_in_ends_it() {
    let rules = Rules {
        calendar: BusinessDays::new(10, chrono_tz::America::New_York, []),
        timezone: "America/New_York".into(),
        deadline_business_days: 10,
        confirmation_window: TimeDelta::seconds(300),
        subscribers: Vec::new(),
        destinations: Vec::new(),
        callers: Vec::new(),
        sources: Vec::new(),
    };
    let message = |id: &str, created: &str| LeadMessage {
        account_id: crate::model::DEFAULT_ACCOUNT.into(),
        lead_id: "lead_1".into(),
        id: id.into(),
        status: "delivered".into(),
        created_at: Some(created.into()),
    };
    let mut opted_out = row(1);
    opted_out.opted_in_at = Some(at("2026-11-25T00:00:00Z"));
    let by_lead = HashMap::from([(
        (
            crate::model::DEFAULT_ACCOUNT.to_owned(),
            "lead_1".to_owned(),
        ),
        vec![
            message("before", "2026-11-23T14:59:59Z"),
            message("confirm", "2026-11-23T15:02:00Z"),
            message("later", "2026-11-23T16:00:00Z"),
            message("opted-in-again", "2026-11-25T10:00:00Z"),
        ],
    )]);
    let (confirmation, sent) = after(&opted_out, &rules, &by_lead);
    assert_eq!(confirmation.map(|m| m.id), Some("confirm".to_owned()));
    let sent: Vec<String> = sent.into_iter().map(|m| m.id).collect();
    assert_eq!(sent, ["later"]);
}
