//! Callers: who a revocation binds. Three accounts, each its own sandbox with the same
//! people; two of them one caller. From the revoke-all rule's date a STOP given in one
//! member is held in every member (its ledger and its service), never in an account that
//! is no member; an opt-in stays where it was given; before the date nothing spreads but
//! by `callers apply`; the compliance report counts each member as a destination.

use std::sync::Arc;

use outreach_sync::model::caller::{Binds, Caller, Member};
use outreach_sync::model::{ACCOUNT_WIDE, AccountId};
use outreach_sync::settings::{CallerSettings, Live, Settings};
use serde_json::Value;

use crate::common::{Backend, on_both_backends};
use crate::sharing::{ACCOUNTS, Trio};

const PARTY: usize = 0;
const CANDIDATE: usize = 1;
const COALITION: usize = 2;

/// The caller `senate` of `members`, the rule in force from `from` (`""`: never).
fn senate(
    members: &[&str],
    from: &str,
) -> impl FnOnce(&mut Settings, &[outreach_sync_sandbox::RunningSandbox]) {
    let members: Vec<String> = members.iter().map(|m| (*m).to_owned()).collect();
    let from = from.to_owned();
    move |settings: &mut Settings, _| {
        crate::common::with_admin_token(settings);
        settings.consent.share_across_accounts = false;
        settings.consent.revoke_all_from = from;
        settings.caller = vec![CallerSettings {
            name: "senate".into(),
            members,
        }];
    }
}

/// Each account's (service, ledger) state of the trio's number.
async fn states(trio: &Trio) -> Vec<(bool, Option<bool>)> {
    let mut states = Vec::new();
    for i in 0..ACCOUNTS.len() {
        states.push(trio.opted_out(i).await);
    }
    states
}

/// The trio's number's history, one entry a line.
async fn told(trio: &Trio) -> String {
    let history = outreach_sync::ledger::history(&trio.app.pool, &trio.phone, None)
        .await
        .expect("history");
    history
        .iter()
        .map(|e| {
            format!(
                "#{} {} {} {} {} at {} {}",
                e.seq,
                e.account_id,
                e.organization_id,
                if e.opted_out { "out" } else { "in" },
                e.event_ref,
                e.occurred_at,
                if e.superseded { "superseded" } else { "" }
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The evidence of the entries `account` holds of the trio's number that follow another
/// member's (`shared:` refs).
async fn spread_evidence(trio: &Trio, account: &str) -> Vec<Value> {
    trio.app
        .texts(&format!(
            "SELECT CAST(evidence AS TEXT) FROM ledger
             WHERE account_id = '{account}' AND phone_number = '{}'
               AND event_ref LIKE 'shared:%' ORDER BY seq",
            trio.phone
        ))
        .await
        .iter()
        .map(|e| serde_json::from_str(e).expect("evidence"))
        .collect()
}

on_both_backends!(
    a_stop_in_one_member_binds_every_member_and_no_other_account_and_a_start_stays_where_given,
    flavor = "multi_thread",
    worker_threads = 2
);
async fn a_stop_in_one_member_binds_every_member_and_no_other_account_and_a_start_stays_where_given(
    backend: Backend,
) {
    let Some(trio) = Trio::start_with(backend, senate(&["party", "candidate"], "2020-01-01")).await
    else {
        return;
    };
    let dropped = trio.sandboxes[PARTY].delivery_counts().dropped;
    assert!(trio.act(PARTY, true), "the STOP changed the party's lead");
    trio.taken_in(PARTY, dropped).await;
    trio.quiet().await;
    assert_eq!(
        states(&trio).await,
        vec![(true, Some(true)), (true, Some(true)), (false, Some(false))],
        "(service, ledger) of party, candidate, coalition"
    );
    let evidence = spread_evidence(&trio, ACCOUNTS[CANDIDATE]).await;
    assert!(
        !evidence.is_empty(),
        "the candidate holds it as the caller's"
    );
    for kept in &evidence {
        assert_eq!(kept["caller"], "senate", "{kept}");
        let rule = kept["rule"].as_str().unwrap_or_default();
        assert!(rule.contains("64.1200(a)(10)"), "{kept}");
    }
    // Held account-wide there: a lead that appears later with the number is opted out.
    let wide = trio
        .app
        .count(&format!(
            "SELECT COUNT(*) FROM ledger WHERE account_id = 'candidate'
               AND organization_id = '{ACCOUNT_WIDE}' AND phone_number = '{}'",
            trio.phone
        ))
        .await;
    assert_eq!(wide, 1, "one account-wide entry in the candidate");
    assert!(
        spread_evidence(&trio, ACCOUNTS[COALITION]).await.is_empty(),
        "no member: nothing held"
    );

    // An opt-in is given to one program: it stays there. (The service dates its events to
    // the whole second, and at the same instant an opt-out wins: the START comes a second
    // after the STOP, as a person's would.)
    tokio::time::sleep(std::time::Duration::from_millis(1_100)).await;
    let dropped = trio.sandboxes[CANDIDATE].delivery_counts().dropped;
    assert!(trio.act(CANDIDATE, false));
    trio.taken_in(CANDIDATE, dropped).await;
    trio.quiet().await;
    let now = states(&trio).await;
    let told = told(&trio).await;
    assert_eq!(
        now[PARTY],
        (true, Some(true)),
        "the party keeps the STOP:\n{told}"
    );
    assert_eq!(
        now[CANDIDATE],
        (false, Some(false)),
        "the candidate's START:\n{told}"
    );

    // The compliance report: the candidate is a destination of the party's opt-out.
    let report: Value = trio
        .app
        .admin_get("/v1/compliance?since=2020-01-01")
        .await
        .json()
        .await
        .expect("json");
    let items = report["items"].as_array().expect("items");
    let item = items
        .iter()
        .find(|i| {
            i["accountId"] == "party"
                && i["phoneNumber"] == trio.phone.as_str()
                && i["organizationId"] != ACCOUNT_WIDE
        })
        .unwrap_or_else(|| panic!("the party's opt-out among {items:?}"));
    let destinations = item["destinations"].as_array().expect("destinations");
    let names: Vec<&str> = destinations
        .iter()
        .filter_map(|d| d["name"].as_str())
        .collect();
    // The party's other programs (held account-wide there) and the candidate's.
    assert!(
        names.contains(&"caller:senate:candidate") && names.contains(&"caller:senate:party"),
        "{names:?}"
    );
    assert!(!names.iter().any(|n| n.contains("coalition")), "{names:?}");
    let candidate = destinations
        .iter()
        .find(|d| d["name"] == "caller:senate:candidate")
        .expect("the candidate");
    assert!(candidate["honouredAt"].is_string(), "{candidate}");
    assert_eq!(item["state"], "honoured", "{item}");

    // `callers` and `GET /v1/callers` say who binds whom, and that the rule is in force.
    let listed: Value = trio
        .app
        .admin_get("/v1/callers")
        .await
        .json()
        .await
        .expect("json");
    assert_eq!(listed["items"][0]["name"], "senate", "{listed}");
    assert_eq!(
        listed["items"][0]["members"],
        serde_json::json!(["party", "candidate"]),
        "{listed}"
    );
    assert_eq!(listed["items"][0]["inForce"], true, "{listed}");
    let mut visitor = crate::console::Visitor::new(&trio.app);
    visitor.sign_in(crate::common::ADMIN_TOKEN).await;
    let status = visitor.text("/status").await;
    let callers = status
        .split("id=\"callers\"")
        .nth(1)
        .and_then(|rest| rest.split("</table>").next())
        .unwrap_or_else(|| panic!("no table of the callers in {status}"));
    assert!(
        callers.contains("senate")
            && callers.contains("<code>party</code>, <code>candidate</code>")
            && callers.contains("in force"),
        "{callers}"
    );
    trio.stop().await;
}

on_both_backends!(
    before_the_rules_date_nothing_spreads_until_callers_apply_which_records_once,
    flavor = "multi_thread",
    worker_threads = 2
);
async fn before_the_rules_date_nothing_spreads_until_callers_apply_which_records_once(
    backend: Backend,
) {
    let Some(trio) = Trio::start_with(backend, senate(&["party", "candidate"], "2099-01-01")).await
    else {
        return;
    };
    let dropped = trio.sandboxes[PARTY].delivery_counts().dropped;
    assert!(trio.act(PARTY, true));
    trio.taken_in(PARTY, dropped).await;
    trio.quiet().await;
    assert_eq!(
        states(&trio).await[CANDIDATE],
        (false, Some(false)),
        "not yet in force: the candidate is not bound"
    );
    let listed: Value = trio
        .app
        .admin_get("/v1/callers")
        .await
        .json()
        .await
        .expect("json");
    assert_eq!(listed["items"][0]["inForce"], false, "{listed}");

    // `callers apply`, as the CLI runs it: the caller's opt-outs so far, held now.
    let config = trio.app.dir.path().join("callers.toml");
    std::fs::write(&config, callers_toml(&trio.app.settings)).expect("config");
    let apply = || {
        crate::cli::run(
            trio.app.dir.path(),
            &[
                "--config",
                config.to_str().expect("path"),
                "callers",
                "apply",
                "senate",
            ],
            &[(
                "OUTREACH_SYNC__DATABASE__URL",
                trio.app.settings.database.url.as_str(),
            )],
            "",
        )
    };
    let run = |args: &[&str]| {
        let mut all = vec!["--config", config.to_str().expect("path")];
        all.extend_from_slice(args);
        crate::cli::run(
            trio.app.dir.path(),
            &all,
            &[(
                "OUTREACH_SYNC__DATABASE__URL",
                trio.app.settings.database.url.as_str(),
            )],
            "",
        )
    };
    let listed = crate::cli::text(&run(&["callers"]).stdout);
    assert!(
        listed.contains("senate: party, candidate; revoke-all not yet in force: from 2099-01-01"),
        "{listed}"
    );
    let listed: Value = serde_json::from_slice(&run(&["callers", "--json"]).stdout).expect("json");
    assert_eq!(listed["items"][0]["binds"], "from", "{listed}");
    assert_eq!(listed["items"][0]["inForce"], false, "{listed}");
    let out = apply();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        crate::cli::text(&out.stderr)
    );
    assert!(crate::cli::text(&out.stdout).contains("held in every member"));
    trio.passed_on().await;
    assert_eq!(states(&trio).await[CANDIDATE], (true, Some(true)));
    let evidence = spread_evidence(&trio, ACCOUNTS[CANDIDATE]).await;
    assert!(
        evidence[0]["rule"]
            .as_str()
            .is_some_and(|r| r.contains("applied early")),
        "{evidence:?}"
    );
    let entries = "SELECT COUNT(*) FROM ledger WHERE event_ref LIKE 'shared:%'";
    let once = trio.app.count(entries).await;
    let out = apply();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        crate::cli::text(&out.stderr)
    );
    assert_eq!(
        trio.app.count(entries).await,
        once,
        "applied again: nothing new"
    );
    let out = crate::cli::run(
        trio.app.dir.path(),
        &[
            "--config",
            config.to_str().expect("path"),
            "callers",
            "apply",
            "house",
        ],
        &[(
            "OUTREACH_SYNC__DATABASE__URL",
            trio.app.settings.database.url.as_str(),
        )],
        "",
    );
    assert_eq!(out.status.code(), Some(3), "no such caller");
    trio.stop().await;
}

/// The accounts and callers of `settings`, as a configuration file the CLI reads.
fn callers_toml(settings: &Settings) -> String {
    let mut text = format!(
        "[consent]\nrevoke_all_from = {:?}\n",
        settings.consent.revoke_all_from
    );
    for account in &settings.account {
        text.push_str(&format!(
            "\n[[account]]\nname = {:?}\nbase_url = {:?}\nclient_id = {:?}\n\
             client_secret = \"unused-{}\"\n\n[account.webhook]\nsecrets = [\"unused-{}\"]\n",
            account.name, account.base_url, account.client_id, account.name, account.name
        ));
    }
    for caller in &settings.caller {
        text.push_str(&format!(
            "\n[[caller]]\nname = {:?}\nmembers = {:?}\n",
            caller.name, caller.members
        ));
    }
    text
}

on_both_backends!(
    an_organization_member_holds_the_opt_out_for_itself_alone,
    flavor = "multi_thread",
    worker_threads = 2
);
async fn an_organization_member_holds_the_opt_out_for_itself_alone(backend: Backend) {
    let Some(trio) = Trio::start_with(backend, |settings, sandboxes| {
        let organization = sandboxes[0].leads()[0].organization_id.clone();
        senate(
            &[&format!("party/{organization}"), "candidate"],
            "2020-01-01",
        )(settings, sandboxes)
    })
    .await
    else {
        return;
    };
    let dropped = trio.sandboxes[CANDIDATE].delivery_counts().dropped;
    assert!(trio.act(CANDIDATE, true));
    trio.taken_in(CANDIDATE, dropped).await;
    trio.quiet().await;
    assert_eq!(states(&trio).await[PARTY], (true, Some(true)));
    let organizations = trio
        .app
        .texts(&format!(
            "SELECT organization_id FROM ledger WHERE account_id = 'party'
               AND event_ref LIKE 'shared:%' AND phone_number = '{}'",
            trio.phone
        ))
        .await;
    assert_eq!(
        organizations,
        vec![trio.organization.clone()],
        "held for the member organization, not account-wide"
    );
    trio.stop().await;
}

on_both_backends!(
    callers_changed_on_reload_bind_a_member_added_and_leave_a_member_removed_what_it_had,
    flavor = "multi_thread",
    worker_threads = 2
);
async fn callers_changed_on_reload_bind_a_member_added_and_leave_a_member_removed_what_it_had(
    backend: Backend,
) {
    // No caller at start: the daemon's own sharer has nothing to do; this test's plays the
    // reloaded one.
    let Some(trio) = Trio::start_with(backend, |settings, _| {
        settings.consent.share_across_accounts = false;
    })
    .await
    else {
        return;
    };
    assert!(trio.act(PARTY, true));
    // Taken in: what a webhook lost missed, a pass finds.
    trio.pass(PARTY).await;
    trio.app.drain().await;
    assert_eq!(trio.opted_out(PARTY).await, (true, Some(true)));
    let shared = "SELECT COUNT(*) FROM ledger WHERE event_ref LIKE 'shared:%'";
    assert_eq!(
        trio.app.count(shared).await,
        0,
        "no caller: nothing spreads"
    );

    let id = |name: &str| AccountId::new(name).expect("account");
    let caller = |members: &[&str]| Caller {
        name: Some("senate".into()),
        members: members.iter().map(|m| Member::Account(id(m))).collect(),
        binds: Binds::From("2020-01-01T05:00:00Z".parse().expect("a time")),
    };
    let callers = Live::new(vec![caller(&["party", "candidate"])]);
    let sharer = outreach_sync::share::Sharer::new(
        trio.app.pool.clone(),
        callers.clone(),
        Arc::new(tokio::sync::Notify::new()),
    );
    sharer.catch_up().await.expect("shared");
    let in_account = |account: &str| {
        format!(
            "SELECT COUNT(*) FROM ledger WHERE event_ref LIKE 'shared:%' AND account_id = '{account}'"
        )
    };
    assert!(trio.app.count(&in_account("candidate")).await > 0);
    // The candidate leaves, the coalition joins: the coalition has what was given since the
    // date, the candidate keeps what it had.
    let candidate_had = trio.app.count(&in_account("candidate")).await;
    callers.replace(vec![caller(&["party", "coalition"])]);
    sharer.catch_up().await.expect("shared");
    assert!(trio.app.count(&in_account("coalition")).await > 0);
    assert_eq!(
        trio.app.count(&in_account("candidate")).await,
        candidate_had
    );
    trio.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_postgres_two_replicas_hold_a_members_opt_out_in_the_others_once() {
    let Some(trio) = Trio::start_with(
        Backend::Postgres,
        senate(&["party", "candidate"], "2020-01-01"),
    )
    .await
    else {
        return;
    };
    let second = trio.app.replica("second").await;
    let dropped = trio.sandboxes[PARTY].delivery_counts().dropped;
    assert!(trio.act(PARTY, true));
    trio.taken_in(PARTY, dropped).await;
    trio.quiet().await;
    assert_eq!(states(&trio).await[CANDIDATE], (true, Some(true)));
    // The candidate's one organization holding the number, and the account-wide entry.
    let held = trio
        .app
        .count(&format!(
            "SELECT COUNT(*) FROM ledger WHERE account_id = 'candidate'
               AND event_ref LIKE 'shared:%' AND phone_number = '{}'",
            trio.phone
        ))
        .await;
    assert_eq!(held, 2, "{}", told(&trio).await);
    let pushed = trio
        .app
        .count(&format!(
            "SELECT COUNT(*) FROM pushes AS p JOIN ledger AS l ON l.seq = p.seq
             WHERE l.account_id = 'candidate' AND l.event_ref LIKE 'shared:%'
               AND p.phone_number = '{}'",
            trio.phone
        ))
        .await;
    assert_eq!(pushed, 1, "one push to the candidate's service");
    second.stop().await;
    trio.stop().await;
}
