//! One step of simulated account activity: a message sent, some messages moving on, now and
//! then a person texting STOP or START. Drawn from the world's seeded generator.

use rand::Rng as _;

use super::World;
use crate::wire::MessageType;

/// What one step did, for the log of `outreach-sync sandbox`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Activity {
    pub sent: Option<String>,
    pub advanced: usize,
    /// (lead id, opted out) for each consent change.
    pub consent: Vec<(String, bool)>,
}

impl World {
    pub(crate) fn activity_step(&mut self) -> Activity {
        let mut activity = Activity::default();
        let reachable: Vec<String> = self
            .leads
            .values()
            .filter(|l| !l.global_opted_out)
            .map(|l| l.id.clone())
            .collect();
        if !reachable.is_empty() {
            let lead = reachable[self.rng.gen_range(0..reachable.len())].clone();
            let kind = if self.rng.gen_bool(0.9) {
                MessageType::SMS
            } else {
                MessageType::MMS
            };
            activity.sent = self.send_message(&lead, kind).ok().map(|m| m.id);
        }
        let moving: Vec<String> = self
            .messages
            .values()
            .filter(|m| m.can_advance())
            .map(|m| m.id.clone())
            .collect();
        let chosen: Vec<String> = moving
            .into_iter()
            .filter(|_| self.rng.gen_bool(0.5))
            .collect();
        activity.advanced = self.advance_messages(&chosen).len();
        if !self.leads.is_empty() && self.rng.gen_bool(0.15) {
            let ids: Vec<String> = self.leads.keys().cloned().collect();
            let id = ids[self.rng.gen_range(0..ids.len())].clone();
            let opted_out = self.leads.get(&id).is_some_and(|l| l.global_opted_out);
            // STOP is common, START rare: flip an opted-out lead back only sometimes.
            if !opted_out || self.rng.gen_bool(0.3) {
                for lead in self.set_consent(&id, !opted_out, None) {
                    activity.consent.push((lead.id, lead.global_opted_out));
                }
            }
        }
        activity
    }
}
