//! JSON read as docs/FAIRNESS.md section 8 reads it: RFC 8259 text in which no object names a
//! member twice, nested at most [`MAX_DEPTH`] deep. serde_json keeps a repeated member's last
//! value (and a struct ignores a repeated member it does not name), and stops at its own depth;
//! two verifiers must not each pick their own value, or their own limit.

use serde::{
    Deserialize, Deserializer,
    de::{Error, MapAccess, SeqAccess, Visitor},
};
use serde_json::{Map, Number, Value};

/// How deep arrays and objects may nest: the outermost is at depth 1.
pub const MAX_DEPTH: usize = 64;

/// The JSON `text` as a value, or an error when it is not JSON, names a member twice or nests
/// deeper than [`MAX_DEPTH`].
pub fn parse(text: &[u8]) -> Result<Value, serde_json::Error> {
    let value = serde_json::from_slice::<Strict>(text).map(|s| s.0)?;
    if depth(&value) > MAX_DEPTH {
        return Err(<serde_json::Error as Error>::custom(format!("nested deeper than {MAX_DEPTH}")));
    }
    Ok(value)
}

fn depth(value: &Value) -> usize {
    match value {
        Value::Array(items) => 1 + items.iter().map(depth).max().unwrap_or(0),
        Value::Object(members) => 1 + members.values().map(depth).max().unwrap_or(0),
        _ => 0,
    }
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
        let nested = |n: usize| format!("{}{}", "[".repeat(n), "]".repeat(n));
        assert!(parse(nested(64).as_bytes()).is_ok());
        assert!(parse(nested(65).as_bytes()).is_err());
        assert!(parse(nested(500).as_bytes()).is_err());
        // Read exactly as written: one number, two spellings, one double; the largest double.
        assert_eq!(parse(b"48382277801338157e-8").unwrap(), parse(b"483822778.01338154").unwrap());
        assert!(parse(b"1.7976931348623158e308").is_ok());
        assert!(parse(b"1e400").is_err());
    }
}
