//! Attribute values: the one place that builds and reads them.

use std::collections::HashMap;

use aws_sdk_dynamodb::types::AttributeValue;
use time::{OffsetDateTime, format_description::well_known::Rfc3339};

use super::StoreError;

pub type Item = HashMap<String, AttributeValue>;

pub fn s(v: impl Into<String>) -> AttributeValue {
    AttributeValue::S(v.into())
}

pub fn n(v: impl ToString) -> AttributeValue {
    AttributeValue::N(v.to_string())
}

pub fn get_s(item: &Item, name: &str) -> Result<String, StoreError> {
    match item.get(name) {
        Some(AttributeValue::S(v)) => Ok(v.clone()),
        _ => Err(StoreError::Malformed(format!("attribute {name} missing or not a string"))),
    }
}

pub fn opt_s(item: &Item, name: &str) -> Option<String> {
    match item.get(name) {
        Some(AttributeValue::S(v)) => Some(v.clone()),
        _ => None,
    }
}

pub fn get_n<T: std::str::FromStr>(item: &Item, name: &str) -> Result<T, StoreError> {
    match item.get(name) {
        Some(AttributeValue::N(v)) => v.parse().map_err(|_| StoreError::Malformed(format!("attribute {name} = {v}"))),
        _ => Err(StoreError::Malformed(format!("attribute {name} missing or not a number"))),
    }
}

/// A number that may be absent (absent is `None`; present and malformed is an error).
pub fn opt_n<T: std::str::FromStr>(item: &Item, name: &str) -> Result<Option<T>, StoreError> {
    if item.contains_key(name) { get_n(item, name).map(Some) } else { Ok(None) }
}

pub fn get_time(item: &Item, name: &str) -> Result<OffsetDateTime, StoreError> {
    let v = get_s(item, name)?;
    OffsetDateTime::parse(&v, &Rfc3339).map_err(|_| StoreError::Malformed(format!("attribute {name} = {v}")))
}
