//! RFC 3339 date-times as docs/FAIRNESS.md section 8 reads them ("Times"): a `T` (or `t`), seconds
//! from 00 to 59 (a leap second is not a time here), up to nine fractional digits, and `Z` (or
//! `z`) or an offset; compared as instants. The `time` crate alone takes any separator, a leap
//! second and any number of digits; two verifiers must agree on what a time is.

use time::{OffsetDateTime, format_description::well_known::Rfc3339};

/// The instant `text` names, or `None` when it is not a time as the text reads one.
pub fn instant(text: &str) -> Option<OffsetDateTime> {
    let b = text.as_bytes();
    let digits = |range: std::ops::Range<usize>| b.get(range).is_some_and(|d| d.iter().all(u8::is_ascii_digit));
    let shape = b.len() >= 20
        && digits(0..4)
        && b[4] == b'-'
        && digits(5..7)
        && b[7] == b'-'
        && digits(8..10)
        && matches!(b[10], b'T' | b't')
        && digits(11..13)
        && b[13] == b':'
        && digits(14..16)
        && b[16] == b':'
        && digits(17..19)
        && &b[17..19] != b"60";
    if !shape {
        return None;
    }
    let mut rest = &b[19..];
    if let Some(fraction) = rest.strip_prefix(b".") {
        let n = fraction.iter().take_while(|c| c.is_ascii_digit()).count();
        if !(1..=9).contains(&n) {
            return None;
        }
        rest = &fraction[n..];
    }
    let zone = matches!(rest, b"Z" | b"z")
        || (rest.len() == 6
            && matches!(rest[0], b'+' | b'-')
            && rest[1..3].iter().all(u8::is_ascii_digit)
            && rest[3] == b':'
            && rest[4..6].iter().all(u8::is_ascii_digit)
            && &rest[1..3] <= b"23"
            && &rest[4..6] <= b"59");
    if !zone {
        return None;
    }
    OffsetDateTime::parse(text, &Rfc3339).ok()
}

#[cfg(test)]
mod tests {
    use super::instant;

    #[test]
    fn a_time_is_rfc_3339_with_a_t_no_leap_second_and_up_to_nine_digits() {
        let at = |t: &str| instant(t).map(|i| i.unix_timestamp_nanos());
        assert_eq!(at("2027-03-01T10:00:00Z"), at("2027-03-01t11:00:00+01:00"));
        assert_eq!(at("2027-03-01T10:00:00Z"), at("2027-03-01T10:00:00-00:00"));
        assert_eq!(at("2027-03-01T10:00:00.123456789Z"), at("2027-03-01T10:00:00Z").map(|n| n + 123_456_789));
        for not in [
            "2027-03-01 10:00:00Z",
            "2027-03-01T10:00:00.1234567891Z",
            "2027-03-01T23:59:60Z",
            "2027-03-01T10:00:00",
            "2027-03-01T10:00:00.Z",
            "2027-03-01T10:00:00+0100",
            "2027-03-01T10:00:00+24:00",
            "2027-03-01T10:00:00+01:60",
            "2027-02-30T10:00:00Z",
        ] {
            assert_eq!(instant(not), None, "{not}");
        }
    }
}
