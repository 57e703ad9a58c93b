//! A configured destination, reached with its key in force (a reload replaces it), as the
//! sender holds it: a system of record's API ([`ApiRecord`]: an entry's requests, each
//! answered) or a warehouse's table ([`TableRecord`]: a batch of rows, each row's refusal),
//! chosen by the kind registry when it is built ([`Record::new`]), so that each of the
//! sender's ways takes the one it writes through.

use std::sync::{Arc, Mutex};

use secrecy::SecretString;

use super::warehouse::{Link, Refusal, Table, Warehouse};
use super::{Answer, Body, Destination, Plan, Step, Stop, System, http, system_of};
use crate::model::LedgerEntry;
use crate::settings::{DestinationKeys, DestinationSettings, Live};

/// A destination's requests while it prepares: GETs with the key in force.
pub struct Api<'a> {
    http: &'a reqwest::Client,
    reach: &'a Reach,
    system: &'a dyn Destination,
}

impl Api<'_> {
    /// The JSON a GET of `path` answers, `what` naming it in errors.
    pub async fn get_json<T: serde::de::DeserializeOwned>(
        &self,
        path: &str,
        what: &str,
    ) -> Result<T, Stop> {
        let request = self
            .reach
            .authorized(self.system, self.http.get(self.reach.url(path)))?;
        http::read_json(request, what, self.system).await
    }

    /// The text a GET of `path` answers (XML, say), `what` naming it in errors, the
    /// system's errors read in its words.
    pub async fn get_text(&self, path: &str, what: &str) -> Result<String, Stop> {
        let request = self
            .reach
            .authorized(self.system, self.http.get(self.reach.url(path)))?;
        let system = self.system;
        http::read_text_with(request, what, &|text: &str| system.error_words_in(text)).await
    }
}

/// A configured destination, by the way it is written.
#[derive(Debug)]
pub enum Record {
    Api(ApiRecord),
    Table(TableRecord),
}

impl Record {
    /// The destination of `settings`, its key read from `keys` at each request.
    pub fn new(settings: &DestinationSettings, keys: Live<DestinationKeys>) -> Self {
        let reach = Reach {
            name: settings.name.clone(),
            base_url: settings.base_url().to_owned(),
            keys,
            stopped_under: Mutex::new(None),
            timeout: std::time::Duration::from_secs(settings.timeout_secs),
        };
        match system_of(settings) {
            System::Api(system) => Self::Api(ApiRecord { reach, system }),
            System::Table(table) => Self::Table(TableRecord { reach, table }),
        }
    }

    fn reach(&self) -> &Reach {
        match self {
            Self::Api(api) => &api.reach,
            Self::Table(table) => &table.reach,
        }
    }

    /// Whether what its writes need is looked up.
    pub fn ready(&self) -> bool {
        match self {
            Self::Api(api) => api.system.ready(),
            Self::Table(table) => table.table.ready(),
        }
    }

    /// Forgets what was looked up, so that it is looked up again before the next write.
    pub fn forget(&self) {
        match self {
            Self::Api(api) => api.system.forget(),
            Self::Table(table) => table.table.forget(),
        }
    }

    /// See [`Reach::stopped`].
    pub fn stopped(&self) {
        self.reach().stopped();
    }

    /// See [`Reach::keys_replaced`].
    pub fn keys_replaced(&self) -> bool {
        self.reach().keys_replaced()
    }

    /// Checks the key and looks up what the writes need (a warehouse: its table, and what
    /// it holds).
    pub async fn prepare(&self, http: &reqwest::Client) -> Result<Option<Table>, Stop> {
        match self {
            Self::Api(api) => api.prepare(http).await.map(|()| None),
            Self::Table(table) => table.prepare(http).await.map(Some),
        }
    }
}

/// A system of record, written an entry at a time in its own API.
#[derive(Debug)]
pub struct ApiRecord {
    reach: Reach,
    system: Box<dyn Destination>,
}

/// A warehouse's table, written a batch of rows at a time.
#[derive(Debug)]
pub struct TableRecord {
    reach: Reach,
    table: Box<dyn Warehouse>,
}

/// Where a destination is and the key it is reached with.
#[derive(Debug)]
struct Reach {
    name: String,
    /// The API's root (`base_url`), without a trailing `/`.
    base_url: String,
    keys: Live<DestinationKeys>,
    /// The keys in force when it was stopped (its key did not work, its lookups missed):
    /// once a reload replaced them, it is tried again.
    stopped_under: Mutex<Option<Arc<DestinationKeys>>>,
    /// Longest wait for an answer to one request.
    timeout: std::time::Duration,
}

impl Reach {
    /// Notes that it was stopped under the keys in force now.
    fn stopped(&self) {
        if let Ok(mut under) = self.stopped_under.lock() {
            *under = Some(self.keys.current());
        }
    }

    /// Whether the keys were replaced since it was stopped (or it was stopped before this
    /// process started): then it is tried again.
    fn keys_replaced(&self) -> bool {
        let now = self.keys.current();
        self.stopped_under
            .lock()
            .is_ok_and(|under| under.as_ref().is_none_or(|under| !Arc::ptr_eq(under, &now)))
    }

    /// The key in force.
    fn key(&self) -> Result<SecretString, Stop> {
        self.keys
            .current()
            .get(&self.name)
            .cloned()
            .ok_or_else(|| Stop::Credentials("no API key is configured".to_owned()))
    }

    /// `request` with the key in force, to `system`.
    fn authorized(
        &self,
        system: &dyn Destination,
        request: reqwest::RequestBuilder,
    ) -> Result<reqwest::RequestBuilder, Stop> {
        let key = self.key()?;
        Ok(system.authorize(request.timeout(self.timeout), &key))
    }

    /// How a warehouse is reached with `secret`.
    fn link<'a>(&'a self, http: &'a reqwest::Client, secret: &'a SecretString) -> Link<'a> {
        Link {
            http,
            secret,
            base_url: &self.base_url,
            timeout: self.timeout,
        }
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base_url)
    }
}

impl ApiRecord {
    /// See [`Destination::needs_lead`].
    pub fn needs_lead(&self) -> bool {
        self.system.needs_lead()
    }

    /// Checks the key and looks up what the plans need.
    pub async fn prepare(&self, http: &reqwest::Client) -> Result<(), Stop> {
        let system = self.system.as_ref();
        system
            .prepare(Api {
                http,
                reach: &self.reach,
                system,
            })
            .await
    }

    /// See [`Destination::plan`].
    pub fn plan(
        &self,
        entry: &LedgerEntry,
        lead: Option<&serde_json::Value>,
    ) -> Result<Plan, String> {
        self.system.plan(entry, lead)
    }

    /// See [`Destination::holds`]: `None` when the system is not asked.
    pub fn holds<'a>(
        &'a self,
        http: &'a reqwest::Client,
        plan: &'a Plan,
    ) -> Option<super::Pending<'a, Result<Option<String>, Stop>>> {
        let system = self.system.as_ref();
        let api = Api {
            http,
            reach: &self.reach,
            system,
        };
        system.holds(api, plan)
    }

    /// Sends one step, its answer read as the system words it.
    pub async fn send(&self, http: &reqwest::Client, step: &Step) -> Answer {
        let system = self.system.as_ref();
        let request = match self
            .reach
            .authorized(system, http.post(self.reach.url(&step.path)))
        {
            Ok(request) => request,
            Err(stop) => return Answer::Credentials(stop.to_string()),
        };
        let request = match &step.body {
            Body::Json(json) => request.json(json),
            Body::Form(form) => request.form(form),
        };
        Answer::of(request.send().await, system).await
    }
}

impl TableRecord {
    /// Checks the key, and the table (made when missing), and what it holds.
    pub async fn prepare(&self, http: &reqwest::Client) -> Result<Table, Stop> {
        let secret = self.reach.key()?;
        self.table.prepare(self.reach.link(http, &secret)).await
    }

    /// Writes `rows`: the rows it refused, by index and reason.
    pub async fn write_rows(
        &self,
        http: &reqwest::Client,
        rows: &[crate::model::warehouse::Row],
    ) -> Result<Vec<Refusal>, Stop> {
        let secret = self.reach.key()?;
        self.table.write(self.reach.link(http, &secret), rows).await
    }
}
