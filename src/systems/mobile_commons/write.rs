//! Mobile Commons as a destination: each opt-out written as the profile's opt-out from every
//! campaign (`POST /profile_opt_out`, a form of `phone_number`, digits with the country
//! code, and `company` when one is named), its answer read as Mobile Commons words it: a
//! 200 with `success="false"` is a refusal in its `<error id message>`. Before the write the
//! profile is looked up by its number (`GET /profiles?phone_number=`): one it holds opted
//! out already (the reading of [`super::opted_out`], the read side's) ends the entry
//! `already`, nothing written. Mobile Commons writes no opt-in: such a destination refuses
//! `opt_ins = true` (its settings).

use secrecy::SecretString;

use super::{ONE_PROFILE, Profiles, Unread, error_words_in, opted_out, parsed};
use crate::model::LedgerEntry;
use crate::systems::{Answer, Api, Body, Destination, Pending, Plan, Step, Stop};

/// The bit of the one action.
const PROFILE_OPT_OUT: i64 = 1;

impl Profiles {
    /// A form's fields, with the company when one is named.
    fn form(&self, mut fields: Vec<(&'static str, String)>) -> Vec<(&'static str, String)> {
        if !self.company.is_empty() {
            fields.push(("company", self.company.clone()));
        }
        fields
    }
}

/// The number as Mobile Commons writes it: the digits of E.164, country code first.
fn digits_of(entry: &LedgerEntry) -> Result<String, String> {
    let number = entry.phone_number.trim_start_matches('+');
    if number.is_empty() || !number.bytes().all(|b| b.is_ascii_digit()) {
        return Err("not a number in E.164".to_owned());
    }
    Ok(number.to_owned())
}

impl Destination for Profiles {
    fn authorize(
        &self,
        request: reqwest::RequestBuilder,
        key: &SecretString,
    ) -> reqwest::RequestBuilder {
        self.with_key(request, key)
    }

    /// A page of one profile answers a login of the company.
    fn prepare<'a>(&'a self, api: Api<'a>) -> Pending<'a, Result<(), Stop>> {
        Box::pin(async move {
            let text = api
                .get_text(&self.path(ONE_PROFILE), "the profiles")
                .await?;
            match parsed(&text, "the profiles") {
                Ok(_) => Ok(()),
                Err(Unread::NotXml(error)) => Err(Stop::retry(error)),
                Err(Unread::Refused(error)) => Err(Stop::Lookup(error)),
            }
        })
    }

    /// Mobile Commons' errors are XML, not JSON.
    fn error_words(&self, _body: &serde_json::Value) -> Option<String> {
        None
    }

    /// `<error id=... message=...>` in an answer's XML; a 401's text as it is.
    fn error_words_in(&self, text: &str) -> Option<String> {
        error_words_in(text)
    }

    /// Mobile Commons answers a refusal with a 200.
    fn reads_success(&self) -> bool {
        true
    }

    /// `<response success="true">`: written; `success="false"`: refused, in Mobile Commons'
    /// words; anything else is no answer to go by (the write may have been made, or not).
    fn success_of(&self, text: &str) -> Answer {
        match parsed(text, "profile_opt_out") {
            Ok(_) => Answer::Success,
            Err(Unread::Refused(error)) => Answer::Refused(error),
            Err(Unread::NotXml(error)) => Answer::Retry {
                error,
                retry_after: None,
                unknown: true,
            },
        }
    }

    /// The one request of `entry`: the profile of its number opted out of every campaign.
    /// The person is the number.
    fn plan(&self, entry: &LedgerEntry, _lead: Option<&serde_json::Value>) -> Result<Plan, String> {
        if !entry.opted_out {
            return Err("Mobile Commons writes opt-outs alone".to_owned());
        }
        let number = digits_of(entry)?;
        Ok(Plan {
            person: entry.phone_number.clone(),
            steps: vec![Step {
                bit: PROFILE_OPT_OUT,
                action: "profile_opt_out",
                path: "/profile_opt_out".to_owned(),
                body: Body::Form(self.form(vec![("phone_number", number)])),
            }],
        })
    }

    /// The profile of the number, looked up: opted out already (a STOP texted, or an
    /// opt-out with no subscription since) is held. No profile, another number than the
    /// one asked, or a lookup Mobile Commons refused: not held, and the write's answer says
    /// the rest.
    fn holds<'a>(
        &'a self,
        api: Api<'a>,
        plan: &'a Plan,
    ) -> Option<Pending<'a, Result<Option<String>, Stop>>> {
        Some(Box::pin(async move {
            let number = plan.person.trim_start_matches('+');
            let query = format!("{ONE_PROFILE}&phone_number={number}");
            let text = api.get_text(&self.path(&query), "the profile").await?;
            let read = match parsed(&text, "the profile") {
                Ok(read) => read,
                Err(Unread::Refused(_)) => return Ok(None),
                Err(Unread::NotXml(error)) => return Err(Stop::retry(error)),
            };
            let profiles = read.profiles.map(|p| p.profiles).unwrap_or_default();
            let Some(profile) = profiles
                .iter()
                .find(|p| p.phone_number.trim().trim_start_matches('+').eq(number))
            else {
                return Ok(None);
            };
            Ok(opted_out(profile).ok().map(|at| {
                format!(
                    "Mobile Commons holds it already: profile {} of status {}, opted out at {}",
                    crate::model::text::bounded(&profile.id, 40),
                    crate::model::text::quoted(profile.status.trim()),
                    at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
                )
            }))
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn profiles() -> Profiles {
        Profiles {
            username: "data@example.org".to_owned(),
            company: String::new(),
            bearer: false,
        }
    }

    #[test]
    fn a_refusal_answered_with_a_200_is_refused_in_mobile_commons_words() {
        let p = profiles();
        let ok = r#"<response success="true"><profile id="1"><phone_number>15555550100</phone_number></profile></response>"#;
        assert_eq!(p.success_of(ok), Answer::Success);
        let refused = r#"<response success="false"><error id="5" message="Invalid phone number"/></response>"#;
        match p.success_of(refused) {
            Answer::Refused(words) => {
                assert!(words.contains("5 Invalid phone number"), "{words}")
            }
            other => panic!("{other:?}"),
        }
        for garbage in ["", "<html>Bad gateway</html>", "{\"ok\":true}"] {
            assert!(
                matches!(p.success_of(garbage), Answer::Retry { unknown: true, .. }),
                "{garbage}"
            );
        }
    }

    #[test]
    fn the_write_is_the_numbers_digits_with_the_company_when_named() {
        let mut p = profiles();
        let now = crate::model::Timestamp(chrono::Utc::now());
        let entry = LedgerEntry {
            seq: 1,
            organization_id: "org_1".into(),
            lead_id: None,
            phone_number: "+15555550100".into(),
            opted_out: true,
            occurred_at: now,
            recorded_at: now,
            source: crate::model::Source::Webhook,
            event_ref: "event:evt_1".into(),
            superseded: false,
            account_id: "default".parse().expect("an account"),
            push: None,
            echo_of: None,
        };
        let plan = p.plan(&entry, None).expect("a plan");
        assert_eq!(plan.person, "+15555550100");
        let Body::Form(form) = &plan.steps[0].body else {
            panic!("a form");
        };
        assert_eq!(form, &vec![("phone_number", "15555550100".to_owned())]);
        p.company = "ABC123".to_owned();
        let plan = p.plan(&entry, None).expect("a plan");
        let Body::Form(form) = &plan.steps[0].body else {
            panic!("a form");
        };
        assert!(form.contains(&("company", "ABC123".to_owned())));
        let opt_in = LedgerEntry {
            opted_out: false,
            ..entry.clone()
        };
        assert!(p.plan(&opt_in, None).is_err());
        let odd = LedgerEntry {
            phone_number: "+1555x".to_owned(),
            ..entry
        };
        assert!(p.plan(&odd, None).is_err());
    }
}
