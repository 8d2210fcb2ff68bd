//! The table's keys and indexes: the names the code relies on. The local runner provisions its
//! table from these, and a test checks `template.yaml` declares the same.

pub const GSI1: &str = "GSI1";
pub const GSI2: &str = "GSI2";
/// Orders of one event are spread over this many GSI2 partitions, so no index partition takes
/// every write of a 20,000-ticket drop.
pub const GSI2_SHARDS: u32 = 16;
/// The GSI1 partition that lists events.
pub const EVENTS_PARTITION: &str = "EVENTS";

/// Attribute names of the keys.
pub mod attr {
    pub const PK: &str = "PK";
    pub const SK: &str = "SK";
    pub const GSI1PK: &str = "GSI1PK";
    pub const GSI1SK: &str = "GSI1SK";
    pub const GSI2PK: &str = "GSI2PK";
    pub const GSI2SK: &str = "GSI2SK";
}

/// Every key attribute with its DynamoDB type (`S` or `N`).
pub const KEY_ATTRIBUTES: [(&str, &str); 6] = [
    (attr::PK, "S"),
    (attr::SK, "S"),
    (attr::GSI1PK, "S"),
    (attr::GSI1SK, "S"),
    (attr::GSI2PK, "S"),
    (attr::GSI2SK, "N"),
];

/// The indexes as (name, partition key, sort key); both project every attribute.
pub const INDEXES: [(&str, &str, &str); 2] = [(GSI1, attr::GSI1PK, attr::GSI1SK), (GSI2, attr::GSI2PK, attr::GSI2SK)];
