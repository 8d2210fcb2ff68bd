//! Validated identifiers. Every id is checked (charset, length) at the edge, before any I/O, so
//! nothing unvalidated reaches a Redis key or a DynamoDB key.

use std::fmt;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{what} must be 1 to {max} characters of {charset}")]
pub struct InvalidId {
    pub what: &'static str,
    pub max: usize,
    pub charset: &'static str,
}

fn check(
    value: &str,
    what: &'static str,
    max: usize,
    charset: &'static str,
    ok: fn(char) -> bool,
) -> Result<(), InvalidId> {
    if value.is_empty() || value.len() > max || !value.chars().all(ok) {
        return Err(InvalidId { what, max, charset });
    }
    Ok(())
}

macro_rules! string_id {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
        #[serde(into = "String", try_from = "String")]
        pub struct $name(String);

        impl From<$name> for String {
            fn from(id: $name) -> String {
                id.0
            }
        }

        /// Read from outside input (a message body) with the same check as at the HTTP edge.
        impl TryFrom<String> for $name {
            type Error = InvalidId;
            fn try_from(value: String) -> Result<Self, InvalidId> {
                Self::parse(&value)
            }
        }

        impl From<&$name> for String {
            fn from(id: &$name) -> String {
                id.0.clone()
            }
        }

        impl PartialEq<str> for $name {
            fn eq(&self, other: &str) -> bool {
                self.0 == other
            }
        }

        impl PartialEq<$name> for String {
            fn eq(&self, other: &$name) -> bool {
                *self == other.0
            }
        }

        impl $name {
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl AsRef<str> for $name {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }
    };
}

string_id!(
    /// An event id: letters, digits, `-` and `_`. No `#` (DynamoDB key separator) and no braces
    /// (Redis hash tag) can ever appear in one.
    EventId
);
string_id!(
    /// The authenticated user (the JWT `sub`). Never taken from a header, query or body.
    UserId
);
string_id!(
    /// An order id: a UUIDv7, unique without coordination and sortable by time.
    OrderId
);
string_id!(
    /// Where the confirmation goes (the JWT `email` claim). Never logged.
    Email
);
string_id!(
    /// One scan at a door, named by the door (a UUID it draws): sent again with a retried
    /// check-in, so a reply lost on its way is the same check-in, not a second door's.
    ScanId
);
string_id!(
    /// The door a check-in was made at, as its staff named it at set-up ("Gate A", "North 2"):
    /// ASCII letters, digits, spaces and `-` `_` `.` `/` `#`. The organiser counts check-ins by it.
    DoorName
);

/// A ticket number: 1 up to the event's capacity (the order message's check, and the gate's list,
/// keep it there). A number, so `Copy` and ordered like one.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
#[serde(transparent)]
pub struct TicketNo(u32);

/// Shown as the number it is (the report lists numbers with `{:?}`).
impl fmt::Debug for TicketNo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl TicketNo {
    pub const fn new(n: u32) -> Self {
        Self(n)
    }

    pub const fn get(self) -> u32 {
        self.0
    }
}

impl fmt::Display for TicketNo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl std::str::FromStr for TicketNo {
    type Err = std::num::ParseIntError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        s.parse().map(Self)
    }
}

impl EventId {
    pub const MAX_LEN: usize = 64;

    pub fn parse(value: &str) -> Result<Self, InvalidId> {
        check(value, "event id", Self::MAX_LEN, "A-Z a-z 0-9 - _", |c| {
            c.is_ascii_alphanumeric() || c == '-' || c == '_'
        })?;
        Ok(Self(value.to_owned()))
    }

    /// A fresh id for an event released without one.
    pub fn generate() -> Self {
        Self(format!("ev-{}", uuid::Uuid::now_v7().simple()))
    }
}

impl ScanId {
    pub const MAX_LEN: usize = 64;

    pub fn parse(value: &str) -> Result<Self, InvalidId> {
        check(value, "scan id", Self::MAX_LEN, "A-Z a-z 0-9 -", |c| c.is_ascii_alphanumeric() || c == '-')?;
        Ok(Self(value.to_owned()))
    }
}

impl DoorName {
    pub const MAX_LEN: usize = 40;

    pub fn parse(value: &str) -> Result<Self, InvalidId> {
        let value = value.trim();
        check(value, "door name", Self::MAX_LEN, "A-Z a-z 0-9, spaces and - _ . / #", |c| {
            c.is_ascii_alphanumeric() || matches!(c, ' ' | '-' | '_' | '.' | '/' | '#')
        })?;
        Ok(Self(value.to_owned()))
    }
}

impl UserId {
    pub const MAX_LEN: usize = 128;

    pub fn parse(value: &str) -> Result<Self, InvalidId> {
        check(value, "user id", Self::MAX_LEN, "A-Z a-z 0-9 - _ . @ : +", |c| {
            c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '@' | ':' | '+')
        })?;
        Ok(Self(value.to_owned()))
    }
}

impl OrderId {
    pub fn generate() -> Self {
        Self(uuid::Uuid::now_v7().to_string())
    }

    pub fn parse(value: &str) -> Result<Self, InvalidId> {
        let err = InvalidId { what: "order id", max: 36, charset: "a UUID" };
        uuid::Uuid::try_parse(value).map_err(|_| err.clone())?;
        Ok(Self(value.to_ascii_lowercase()))
    }

    /// When the order was made (epoch ms), read from the UUIDv7 itself: the outbox needs no score.
    /// `None` for a UUID of another version.
    pub fn created_ms(&self) -> Option<i64> {
        let (secs, nanos) = uuid::Uuid::try_parse(&self.0).ok()?.get_timestamp()?.to_unix();
        Some(secs as i64 * 1000 + i64::from(nanos / 1_000_000))
    }
}

impl Email {
    pub fn parse(value: &str) -> Result<Self, InvalidId> {
        let err = InvalidId { what: "email", max: 254, charset: "an address local@domain" };
        let value = value.trim();
        let (local, domain) = value.split_once('@').ok_or_else(|| err.clone())?;
        let plausible = !local.is_empty()
            && domain.contains('.')
            && !domain.starts_with('.')
            && !domain.ends_with('.')
            && value.len() <= 254
            && !value.chars().any(|c| c.is_whitespace() || c.is_control() || c == '<' || c == '>')
            && !domain.contains('@');
        if !plausible {
            return Err(err);
        }
        Ok(Self(value.to_owned()))
    }

    /// The address as door staff may see it: the local part's first character and the domain
    /// (`a•••@example.com`), enough to ask a holder "is this yours?".
    pub fn masked(&self) -> String {
        let (local, domain) = self.0.split_once('@').unwrap_or((&self.0, ""));
        let first: String = local.chars().take(1).collect();
        format!("{first}\u{2022}\u{2022}\u{2022}@{domain}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(2_000))]
        /// Any string: a clear error or an id that cannot break a Redis hash tag or a DynamoDB key.
        #[test]
        fn any_string_is_refused_or_a_safe_id(s in "\\PC{0,80}|[A-Za-z0-9_:@.+{}#-]{0,140}") {
            if let Ok(id) = EventId::parse(&s) {
                proptest::prop_assert!(id.as_str().len() <= EventId::MAX_LEN);
                proptest::prop_assert!(!id.as_str().contains(['{', '}', '#', ':', ' ']), "{}", id);
            }
            if let Ok(user) = UserId::parse(&s) {
                proptest::prop_assert!(user.as_str().len() <= UserId::MAX_LEN);
                proptest::prop_assert!(!user.as_str().contains(['{', '}', '#', '|', ' ']), "{}", user);
            }
            if let Ok(order) = OrderId::parse(&s) {
                proptest::prop_assert_eq!(order.as_str().len(), 36);
            }
            let _ = Email::parse(&s);
        }
    }

    #[test]
    fn an_order_id_tells_when_it_was_made() {
        let before = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64;
        let made = OrderId::generate().created_ms().unwrap();
        let after = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64;
        assert!(before <= made && made <= after, "{before} <= {made} <= {after}");
        assert_eq!(OrderId::parse("0199a0b0-0000-7000-8000-000000000001").unwrap().created_ms(), Some(0x0199a0b00000));
        assert_eq!(OrderId::parse("6ba7b810-9dad-41d1-80b4-00c04fd430c8").unwrap().created_ms(), None, "a v4 UUID");
    }

    #[test]
    fn event_ids_refuse_key_separators_and_hash_tags() {
        assert!(EventId::parse("lecture-2026_01").is_ok());
        for bad in ["", "a#b", "a{b}", "a:b", "a b", &"x".repeat(65), "ünï"] {
            assert!(EventId::parse(bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn user_ids_accept_cognito_subs_and_refuse_separators() {
        assert!(UserId::parse("3f9c2a1e-8b7d-4c6e-9a5f-1b2c3d4e5f60").is_ok());
        for bad in ["", "u#1", "u{1}", "u 1", &"u".repeat(129)] {
            assert!(UserId::parse(bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn order_ids_are_time_ordered_uuids() {
        let a = OrderId::generate();
        let b = OrderId::generate();
        assert!(a < b, "UUIDv7 ids sort by creation time");
        assert_eq!(OrderId::parse(a.as_str()).unwrap(), a);
        assert!(OrderId::parse("not-a-uuid").is_err());
    }

    #[test]
    fn emails_need_a_local_part_and_a_dotted_domain() {
        assert!(Email::parse("u1@example.com").is_ok());
        assert_eq!(Email::parse("alice@example.com").unwrap().masked(), "a\u{2022}\u{2022}\u{2022}@example.com");
        for bad in ["", "u1", "@example.com", "u1@localhost", "u 1@example.com", "a@b@c.d", "u1@.com"] {
            assert!(Email::parse(bad).is_err(), "{bad:?} accepted");
        }
    }
}
