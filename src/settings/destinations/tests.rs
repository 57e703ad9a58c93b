use super::*;
use crate::settings::kinds::van;

fn van() -> DestinationSettings {
    DestinationSettings::new(
        "van-main",
        SystemSettings::Van(van::VanSettings::default()),
        "https://api.securevan.com/v4",
        "key",
    )
}

#[test]
fn a_name_a_subscriber_has_is_refused() {
    let error = validate(&[van()], &["van-main"]).expect_err("refused");
    assert!(error.to_string().contains("destination.name"), "{error}");
    assert!(validate(&[van()], &["crm"]).is_ok());
}

#[test]
fn a_van_key_on_an_action_network_destination_is_refused_naming_it() {
    let an = DestinationSettings::new(
        "an",
        SystemSettings::ActionNetwork(Default::default()),
        "https://actionnetwork.org/api/v2",
        "key",
    );
    assert!(validate(std::slice::from_ref(&an), &[]).is_ok());
    let an: DestinationSettings = toml::from_str(
        "name = \"an\"\nkind = \"action_network\"\nbase_url = \"https://actionnetwork.org/api/v2\"\n\
         api_key = \"key\"\nvan_id_field = \"VanID\"\n",
    )
    .expect("read");
    let error = validate(&[an], &[]).expect_err("refused");
    assert_eq!(
        error.to_string(),
        "invalid configuration key `destination.kind`: destination \"an\": `van_id_field` is \
         a key of kind \"van\" alone"
    );
}

#[test]
fn a_key_of_no_kind_is_refused_naming_it_and_a_kinds_own_keys_are_its() {
    let read = |extra: &str| {
        toml::from_str::<DestinationSettings>(&format!(
            "name = \"v\"\nkind = \"van\"\nbase_url = \"https://api.securevan.com/v4\"\n\
             api_key = \"key\"\n{extra}"
        ))
    };
    let unknown = read("no_such_key = 1\n").expect("read");
    let error = validate(std::slice::from_ref(&unknown), &[]).expect_err("refused");
    assert!(
        error.to_string().contains("unknown field `no_such_key`"),
        "{error}"
    );
    let van = read("database_mode = 0\nactions = [\"phone_status\"]\n").expect("read");
    let SystemSettings::Van(own) = &van.system else {
        panic!("not a van destination: {van:?}");
    };
    assert_eq!(own.database_mode(), 0);
    assert_eq!(own.actions(), vec![van::VanAction::PhoneStatus]);
    assert!(validate(std::slice::from_ref(&van), &[]).is_ok());
    let shown = toml::to_string(&van).expect("serializes");
    assert!(shown.contains("kind = \"van\""), "{shown}");
}

#[test]
fn a_database_mode_other_than_0_or_1_and_no_key_are_refused() {
    let mut d = van();
    if let SystemSettings::Van(own) = &mut d.system {
        own.database_mode = Some(2);
    }
    let error = validate(&[d], &[]).expect_err("refused");
    assert!(
        error.to_string().contains("destination.database_mode"),
        "{error}"
    );
    let mut d = van();
    d.api_key = None;
    let error = validate(&[d], &[]).expect_err("refused");
    assert!(error.to_string().contains("destination.api_key"), "{error}");
}

fn two_accounts() -> super::super::Settings {
    let account = |name: &str| super::super::AccountSettings {
        name: name.to_owned(),
        ..super::super::AccountSettings::default()
    };
    super::super::Settings {
        account: vec![account("party"), account("candidate")],
        ..super::super::Settings::default()
    }
}

#[test]
fn a_van_destination_names_its_accounts_when_several_are_served() {
    let mut settings = two_accounts();
    settings.destination = vec![van()];
    let error = settings.validate_scopes().expect_err("refused");
    let text = error.to_string();
    assert!(text.contains("destination.accounts"), "{text}");
    assert!(text.contains("a VAN ID means a person only"), "{text}");
    settings.destination[0].scope.accounts = vec!["party".into()];
    assert!(settings.validate_scopes().is_ok());
    // With one account served, it need not name it.
    let mut one = super::super::Settings {
        destination: vec![van()],
        ..super::super::Settings::default()
    };
    assert!(one.validate_scopes().is_ok());
    one.destination[0].scope.accounts = vec!["default".into()];
    assert!(one.validate_scopes().is_ok());
}

#[test]
fn an_account_no_one_serves_is_refused_naming_the_key() {
    let mut settings = two_accounts();
    let mut an = DestinationSettings::new(
        "an",
        SystemSettings::ActionNetwork(Default::default()),
        "https://actionnetwork.org/api/v2",
        "key",
    );
    an.scope.accounts = vec!["party".into(), "partty".into()];
    settings.destination = vec![an];
    let text = settings.validate_scopes().expect_err("refused").to_string();
    assert!(text.contains("destination.accounts"), "{text}");
    assert!(text.contains("`partty`"), "{text}");
    settings.destination.clear();
    let mut crm = super::super::SubscriberSettings::new(
        "crm",
        "http://127.0.0.1:9/hooks",
        "whsec_c2VjcmV0LXNoYXJlZC13aXRoLXRoZS1jcm0=",
    );
    crm.scope.accounts = vec!["nobody".into()];
    settings.subscriber = vec![crm];
    let text = settings.validate_scopes().expect_err("refused").to_string();
    assert!(text.contains("subscriber.accounts"), "{text}");
}

#[test]
fn the_key_never_shows_in_debug_nor_in_the_serialized_settings() {
    let d = DestinationSettings::new(
        "an",
        SystemSettings::ActionNetwork(Default::default()),
        "https://actionnetwork.org/api/v2",
        "an-secret-key-123",
    );
    assert!(!format!("{d:?}").contains("an-secret-key-123"));
    let shown = serde_json::to_string(&d).expect("serializes");
    assert!(!shown.contains("an-secret-key-123"), "{shown}");
}

/// `[[destination]]` `name` of `kind` with `extra` keys, loaded as the configuration file.
fn loaded(kind: &str, extra: &str) -> Result<super::super::Settings, SettingsError> {
    let dir = tempfile::tempdir().expect("temporary directory");
    let path = dir.path().join("config.toml");
    let text = format!(
        "[webhook]\nsecrets = [\"s\"]\n[[destination]]\nname = \"d\"\nkind = \"{kind}\"\n\
         base_url = \"https://api.example.org/v4\"\napi_key = \"TOPSECRET\"\n{extra}\n"
    );
    std::fs::write(&path, text).expect("write the file");
    super::super::Settings::load_from(Some(&path), &[])
}

#[test]
fn a_configuration_file_gives_each_kind_its_own_keys_and_refuses_the_others() {
    let settings = loaded(
        "van",
        "database_mode = 0\nresult_code = \"Opted Out\"\nactions = [\"phone_status\"]",
    )
    .expect("loaded");
    let SystemSettings::Van(own) = &settings.destination[0].system else {
        panic!("not a van destination");
    };
    assert_eq!(own.database_mode(), 0);
    assert_eq!(own.result_code(), "Opted Out");
    assert_eq!(own.actions(), vec![van::VanAction::PhoneStatus]);
    let error = loaded("action_network", "result_code = \"Opted Out\"")
        .expect_err("refused")
        .to_string();
    assert!(
        error.contains("`destination.kind`")
            && error.contains("`result_code` is a key of kind \"van\" alone"),
        "{error}"
    );
    let error = loaded("van", "no_such_key = true")
        .expect_err("refused")
        .to_string();
    assert!(error.contains("no_such_key"), "{error}");
    let error = loaded("crm", "").expect_err("refused").to_string();
    assert!(error.contains("unknown variant `crm`"), "{error}");
    assert!(!error.contains("TOPSECRET"), "{error}");
}

#[test]
fn a_warehouse_takes_its_own_keys_every_entry_by_default_and_its_secret_from_a_file() {
    let dir = tempfile::tempdir().expect("dir");
    let url_file = dir.path().join("warehouse-url");
    std::fs::write(&url_file, "postgres://warehouse@127.0.0.1:5432/data\n").expect("write");
    let mut destinations: Vec<DestinationSettings> = vec![
        toml::from_str(&format!(
            "name = \"warehouse\"\nkind = \"postgres\"\nurl_file = {url_file:?}\n\
             table = \"consent\"\nbatch = 200\nfrom_seq = 10\n"
        ))
        .expect("read"),
    ];
    read_secret_files(&mut destinations).expect("the file is read");
    let warehouse = &destinations[0];
    validate(&destinations, &[]).expect("valid");
    assert!(warehouse.is_warehouse() && warehouse.opt_ins());
    assert_eq!(warehouse.requests_per_second(), 50);
    let table = warehouse.system.table().expect("a table");
    assert_eq!(
        (table.table(), table.batch(), table.start_cursor()),
        ("consent", 200, 9)
    );
    assert!(
        !format!("{warehouse:?}").contains("127.0.0.1"),
        "the URL is a secret"
    );
    let keys = keys_of(&destinations);
    use secrecy::ExposeSecret as _;
    assert_eq!(
        keys["warehouse"].expose_secret(),
        "postgres://warehouse@127.0.0.1:5432/data"
    );

    let bigquery: DestinationSettings = toml::from_str(
        "name = \"bq\"\nkind = \"bigquery\"\nproject = \"tmc-data\"\ndataset = \"consent\"\n\
         api_key = \"inline\"\n",
    )
    .expect("read");
    let error = read_secret_files(&mut [bigquery]).expect_err("refused");
    assert!(error.to_string().contains("credentials_file"), "{error}");
    let van_key_on_a_warehouse: DestinationSettings = toml::from_str(
        "name = \"w\"\nkind = \"postgres\"\napi_key = \"k\"\nvan_id_field = \"VanID\"\n",
    )
    .expect("read");
    let error = validate(&[van_key_on_a_warehouse], &[]).expect_err("refused");
    assert!(error.to_string().contains("`van_id_field`"), "{error}");
}

#[test]
fn a_bigquery_destination_names_its_dataset_and_reaches_google_by_default() {
    let read = |extra: &str| {
        toml::from_str::<DestinationSettings>(&format!(
            "name = \"bq\"\nkind = \"bigquery\"\napi_key = \"{{}}\"\n{extra}"
        ))
        .expect("read")
    };
    let bq = read("project = \"tmc-data\"\ndataset = \"consent\"\n");
    validate(std::slice::from_ref(&bq), &[]).expect("valid");
    assert_eq!(
        bq.base_url(),
        crate::settings::kinds::bigquery::BIGQUERY_BASE_URL
    );
    let error = validate(&[read("project = \"tmc-data\"\n")], &[]).expect_err("refused");
    assert!(error.to_string().contains("destination.dataset"), "{error}");
    let error = validate(
        &[read("project = \"p\"\ndataset = \"d\"\ntable = \"a-b\"\n")],
        &[],
    )
    .expect_err("refused");
    assert!(error.to_string().contains("destination.table"), "{error}");
    let error = validate(
        &[read("project = \"p\"\ndataset = \"d\"\nbatch = 0\n")],
        &[],
    )
    .expect_err("refused");
    assert!(error.to_string().contains("destination.batch"), "{error}");
}

/// A `mobile_commons` destination `d` with `keys`, loaded as the configuration file.
fn mobile_commons(keys: &str) -> Result<super::super::Settings, SettingsError> {
    let dir = tempfile::tempdir().expect("temporary directory");
    let path = dir.path().join("config.toml");
    let password_file = dir.path().join("mc-password");
    std::fs::write(&password_file, "from-the-file\n").expect("write the password");
    let keys = keys.replace("PASSWORD_FILE", &password_file.display().to_string());
    let text = format!(
        "[webhook]\nsecrets = [\"s\"]\n[[destination]]\nname = \"d\"\nkind = \"mobile_commons\"\n\
         base_url = \"https://secure.mcommons.com/api\"\n{keys}\n"
    );
    std::fs::write(&path, text).expect("write the file");
    super::super::Settings::load_from(Some(&path), &[])
}

#[test]
fn a_mobile_commons_destination_is_written_with_its_login_and_writes_opt_outs_alone() {
    use secrecy::ExposeSecret as _;
    let settings = mobile_commons("username = \"data@example.org\"\npassword = \"TOPSECRET\"")
        .expect("loaded");
    let d = &settings.destination[0];
    let key = d.api_key.as_ref().map(|k| k.expose_secret().to_owned());
    assert_eq!(key.as_deref(), Some("TOPSECRET"), "the password is its key");
    assert!(!d.opt_ins());
    assert!(!format!("{d:?}").contains("TOPSECRET"));
    let shown = serde_json::to_string(d).expect("serializes");
    assert!(!shown.contains("TOPSECRET"), "{shown}");
    let from_file =
        mobile_commons("username = \"data@example.org\"\npassword_file = \"PASSWORD_FILE\"")
            .expect("loaded");
    let key = from_file.destination[0]
        .api_key
        .as_ref()
        .map(|k| k.expose_secret().to_owned());
    assert_eq!(key.as_deref(), Some("from-the-file"));
    // A company's API token instead of the login: its key, sent as a bearer.
    let by_token = mobile_commons("token_file = \"PASSWORD_FILE\"").expect("loaded");
    let key = by_token.destination[0]
        .api_key
        .as_ref()
        .map(|k| k.expose_secret().to_owned());
    assert_eq!(key.as_deref(), Some("from-the-file"));
    for (keys, wanted) in [
        (
            "username = \"data@example.org\"\napi_key = \"k\"",
            "a mobile_commons destination's secret is in `password`",
        ),
        (
            "username = \"data@example.org\"",
            "`password` is required (or `password_file`)",
        ),
        (
            "username = \"data@example.org\"\npassword = \"p\"\npassword_file = \"PASSWORD_FILE\"",
            "both given",
        ),
        (
            "username = \"data@example.org\"\npassword = \"p\"\nopt_ins = true",
            "writes opt-outs alone",
        ),
        ("password = \"TOPSECRET\"", "`destination.username`"),
        (
            "username = \"data@example.org\"\ntoken = \"TOPSECRET\"",
            "a token, or a username and password: not both",
        ),
        ("token = \"  \"", "`destination.token`"),
        (
            "username = \"data@example.org\"\npassword = \"TOPSECRET\"\nvan_id_field = \"VanID\"",
            "van_id_field",
        ),
    ] {
        let error = mobile_commons(keys).expect_err(keys).to_string();
        assert!(error.contains(wanted), "{keys}: {error}");
        assert!(!error.contains("TOPSECRET"), "{error}");
    }
}

#[test]
fn a_mobile_commons_source_reads_what_a_destination_of_the_same_login_writes_alone() {
    use super::super::kinds::mobile_commons::MobileCommonsSettings;
    use super::super::{SourceSettings, SourceSystem};
    let own = |company: &str| MobileCommonsSettings {
        username: "data@example.org".to_owned(),
        company: company.to_owned(),
        password: Some("p".to_owned().into()),
        ..MobileCommonsSettings::default()
    };
    let url = "https://secure.mcommons.com/api";
    let destination = |company: &str, password: &str| {
        DestinationSettings::new(
            "mc",
            SystemSettings::MobileCommons(own(company)),
            url,
            password,
        )
    };
    let mut source = SourceSettings::new("mc", SourceSystem::MobileCommons(own("")), url, "");
    source.api_key = None;
    assert!(source.reads_what_writes(&destination("", "p")));
    assert!(!source.reads_what_writes(&destination("", "another")));
    assert!(!source.reads_what_writes(&destination("ABC123", "p")));
}
