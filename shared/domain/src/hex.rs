//! Lowercase hex, as the checkable draws publish their seeds, roots, keys and signatures.

pub fn encode(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Exactly `N` bytes written as `2N` lowercase hex digits; anything else is `None`.
pub fn decode<const N: usize>(text: &str) -> Option<[u8; N]> {
    let digits = text.as_bytes();
    if digits.len() != 2 * N {
        return None;
    }
    let digit = |c: u8| match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        _ => None,
    };
    let mut out = [0u8; N];
    for (byte, pair) in out.iter_mut().zip(digits.chunks(2)) {
        *byte = (digit(pair[0])? << 4) | digit(pair[1])?;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    #[test]
    fn round_trips_and_refuses_what_is_not_lowercase_hex_of_the_length() {
        assert_eq!(super::decode::<3>(&super::encode(&[0, 0xab, 0xff])), Some([0, 0xab, 0xff]));
        for bad in ["00abf", "00ABff", "00abfg", "00abff00"] {
            assert_eq!(super::decode::<3>(bad), None, "{bad}");
        }
    }
}
