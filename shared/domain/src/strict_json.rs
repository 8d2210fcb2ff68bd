//! JSON read as docs/FAIRNESS.md section 8 reads it: RFC 8259 text in which no object names a
//! member twice. serde_json keeps a repeated member's last value (and a struct ignores a repeated
//! member it does not name); two verifiers must not each pick their own value.

use serde::{
    Deserialize, Deserializer,
    de::{Error, MapAccess, SeqAccess, Visitor},
};
use serde_json::{Map, Number, Value};

/// The JSON `text` as a value, or an error when it is not JSON or names a member twice.
pub fn parse(text: &[u8]) -> Result<Value, serde_json::Error> {
    serde_json::from_slice::<Strict>(text).map(|s| s.0)
}

struct Strict(Value);

impl<'de> Deserialize<'de> for Strict {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(StrictVisitor).map(Strict)
    }
}

struct StrictVisitor;

impl<'de> Visitor<'de> for StrictVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("JSON")
    }
    fn visit_unit<E: Error>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_bool<E: Error>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }
    fn visit_i64<E: Error>(self, v: i64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }
    fn visit_u64<E: Error>(self, v: u64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }
    fn visit_f64<E: Error>(self, v: f64) -> Result<Value, E> {
        Number::from_f64(v).map(Value::Number).ok_or_else(|| E::custom("a number JSON cannot hold"))
    }
    fn visit_str<E: Error>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }
    fn visit_string<E: Error>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        while let Some(Strict(v)) = seq.next_element()? {
            items.push(v);
        }
        Ok(Value::Array(items))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut members = Map::new();
        while let Some(name) = map.next_key::<String>()? {
            let Strict(value) = map.next_value()?;
            if members.insert(name.clone(), value).is_some() {
                return Err(A::Error::custom(format!("the member {name:?} is named twice")));
            }
        }
        Ok(Value::Object(members))
    }
}

#[cfg(test)]
mod tests {
    use super::parse;

    #[test]
    fn a_member_named_twice_at_any_depth_is_not_read() {
        assert!(parse(br#"{"a":1,"b":[{"c":1.5,"d":null}]}"#).is_ok());
        assert!(parse(br#"{"a":1,"a":1}"#).is_err());
        assert!(parse(br#"{"a":{"c":1,"c":2}}"#).is_err());
        assert!(parse(br#"[{"x":"\ud800"}]"#).is_err(), "a lone surrogate is no character");
        assert!(parse(b"\xef\xbb\xbf{}").is_err(), "a byte-order mark is not JSON");
    }
}
