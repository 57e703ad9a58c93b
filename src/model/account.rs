//! The account of the service a record is of: [`AccountId`], the name of an `[[account]]`
//! (`default` for `[service]` alone), and [`Scope`], an organization and an account as
//! filters of a read.

use std::borrow::Borrow;
use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::{DEFAULT_ACCOUNT, MAX_ID_CHARS};

/// The name of an account of the service: one or more of `a-z`, `0-9`, `_` and `-`, at
/// most [`MAX_ID_CHARS`] characters. Made from input through [`AccountId::new`] (or
/// `parse`, or serde), which refuses any other name; read back from the database as it was
/// stored (every name stored was one of these). Cheap to clone.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct AccountId(Arc<str>);

/// A name that is not an account's: why, as a sentence naming it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("account {shown}: {problem}")]
pub struct InvalidAccount {
    shown: String,
    problem: String,
}

/// Whether `name` is one or more of `a-z`, `0-9`, `_` and `-`: the rule of the names the
/// configuration gives (accounts, subscribers, destinations).
pub fn well_formed_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-')
}

impl AccountId {
    /// `name`, if it is an account's name.
    pub fn new(name: &str) -> Result<Self, InvalidAccount> {
        let refused = |problem: String| InvalidAccount {
            shown: super::text::quoted(name),
            problem,
        };
        if name.chars().count() > MAX_ID_CHARS {
            return Err(refused(format!(
                "a name is at most {MAX_ID_CHARS} characters"
            )));
        }
        if !well_formed_name(name) {
            return Err(refused(
                "a name is one or more of a-z, 0-9, `_` and `-`".to_owned(),
            ));
        }
        Ok(Self(Arc::from(name)))
    }

    /// The account a record read back from the database names: every name stored was an
    /// account's when it was written (as [`sqlx::Decode`] reads it too).
    pub fn stored(name: &str) -> Self {
        Self(Arc::from(name))
    }

    /// The account of a configuration without `[[account]]` ([`DEFAULT_ACCOUNT`]).
    pub fn default_account() -> Self {
        Self(Arc::from(DEFAULT_ACCOUNT))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl Default for AccountId {
    fn default() -> Self {
        Self::default_account()
    }
}

impl fmt::Display for AccountId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for AccountId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.0, f)
    }
}

impl FromStr for AccountId {
    type Err = InvalidAccount;

    fn from_str(name: &str) -> Result<Self, Self::Err> {
        Self::new(name)
    }
}

impl AsRef<str> for AccountId {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl Borrow<str> for AccountId {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl std::ops::Deref for AccountId {
    type Target = str;

    fn deref(&self) -> &str {
        &self.0
    }
}

/// An account equals its name.
impl PartialEq<str> for AccountId {
    fn eq(&self, name: &str) -> bool {
        &*self.0 == name
    }
}

impl PartialEq<&str> for AccountId {
    fn eq(&self, name: &&str) -> bool {
        &*self.0 == *name
    }
}

impl PartialEq<String> for AccountId {
    fn eq(&self, name: &String) -> bool {
        *self.0 == **name
    }
}

impl PartialEq<AccountId> for str {
    fn eq(&self, account: &AccountId) -> bool {
        self == &*account.0
    }
}

impl PartialEq<AccountId> for String {
    fn eq(&self, account: &AccountId) -> bool {
        **self == *account.0
    }
}

/// Text in the OpenAPI document, as it is serialized.
impl utoipa::PartialSchema for AccountId {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        utoipa::openapi::schema::ObjectBuilder::new()
            .schema_type(utoipa::openapi::schema::Type::String)
            .into()
    }
}

impl utoipa::ToSchema for AccountId {}

impl Serialize for AccountId {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for AccountId {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let name = <std::borrow::Cow<'de, str>>::deserialize(deserializer)?;
        Self::new(&name).map_err(serde::de::Error::custom)
    }
}

impl<DB: sqlx::Database> sqlx::Type<DB> for AccountId
where
    str: sqlx::Type<DB>,
{
    fn type_info() -> DB::TypeInfo {
        <str as sqlx::Type<DB>>::type_info()
    }

    fn compatible(ty: &DB::TypeInfo) -> bool {
        <str as sqlx::Type<DB>>::compatible(ty)
    }
}

impl<'q, DB: sqlx::Database> sqlx::Encode<'q, DB> for AccountId
where
    String: sqlx::Encode<'q, DB>,
{
    fn encode_by_ref(
        &self,
        buf: &mut DB::ArgumentBuffer<'q>,
    ) -> Result<sqlx::encode::IsNull, sqlx::error::BoxDynError> {
        <String as sqlx::Encode<'q, DB>>::encode(self.0.to_string(), buf)
    }
}

/// As stored: every name the database holds was an account's when it was written.
impl<'r, DB: sqlx::Database> sqlx::Decode<'r, DB> for AccountId
where
    &'r str: sqlx::Decode<'r, DB>,
{
    fn decode(value: DB::ValueRef<'r>) -> Result<Self, sqlx::error::BoxDynError> {
        let name = <&'r str as sqlx::Decode<'r, DB>>::decode(value)?;
        Ok(Self::stored(name))
    }
}

/// Where a read looks: one organization or every one, one account or every one. Named
/// fields, so the two can never be given in each other's place.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Scope<'a> {
    pub organization: Option<&'a str>,
    pub account: Option<&'a AccountId>,
}

impl<'a> Scope<'a> {
    /// Every organization of every account.
    pub fn everywhere() -> Self {
        Self::default()
    }

    /// Only `organization` (`None`: every one), of every account.
    pub fn organization(organization: Option<&'a str>) -> Self {
        Self {
            organization,
            account: None,
        }
    }

    /// Only `account` (`None`: every one).
    pub fn in_account(self, account: Option<&'a AccountId>) -> Self {
        Self { account, ..self }
    }

    /// The account's name, for a statement that binds text.
    pub fn account_name(&self) -> Option<&'a str> {
        self.account.map(AccountId::as_str)
    }

    /// Whether a record of the account named `recorded` is in scope.
    pub fn holds_account(&self, recorded: &str) -> bool {
        self.account.is_none_or(|a| a == recorded)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_account_is_made_from_a_well_formed_name_only() {
        let party: AccountId = "party_2-b".parse().expect("well formed");
        assert_eq!(party.to_string(), "party_2-b");
        assert_eq!(party, "party_2-b");
        for name in ["", "Party", "a b", "x\u{7}", &"a".repeat(MAX_ID_CHARS + 1)] {
            let error = AccountId::new(name).expect_err("ill formed");
            assert!(error.to_string().starts_with("account "), "{error}");
        }
        assert!(AccountId::new(&"a".repeat(MAX_ID_CHARS)).is_ok());
        assert_eq!(AccountId::default_account(), DEFAULT_ACCOUNT);
    }

    #[test]
    fn an_account_is_its_name_in_json_and_refuses_another_name() {
        let party = AccountId::new("party").expect("well formed");
        let json = serde_json::to_string(&party).expect("serialize");
        assert_eq!(json, r#""party""#);
        let back: AccountId = serde_json::from_str(&json).expect("deserialize");
        assert_eq!(back, party);
        assert!(serde_json::from_str::<AccountId>(r#""Not One""#).is_err());
    }
}
