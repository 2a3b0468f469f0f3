//! Self-describing job bodies.
//!
//! A body is a fixed ASCII header followed by padding up to the body size:
//!
//! ```text
//! bp<seq: 16 hex>.<send time: 16 hex ns>.<check: 8 hex>.<padding>
//! ```
//!
//! `seq` is the job's number in the run (dense from 0), the send time is nanoseconds since the
//! run's epoch (for end-to-end latency), `check` is a hash of seq, time and length, and the
//! padding is a slice of a fixed pattern starting at an offset chosen by `seq`. A consumer
//! re-derives everything from the header, so a body that was truncated, swapped with another
//! job's, or changed anywhere is detected with one hash and one `memcmp`.

pub const HEADER_LEN: usize = 45;
/// Length of the repeating padding pattern (a prime, so offsets differ job to job).
const PATTERN_LEN: usize = 61;
const PATTERN: &[u8; PATTERN_LEN] =
    b"0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXY";
const HEX: &[u8; 16] = b"0123456789abcdef";

/// The padding source for bodies up to `max_len` bytes (allocated once per run).
pub fn pad_source(max_len: usize) -> Vec<u8> {
    PATTERN
        .iter()
        .copied()
        .cycle()
        .take(max_len + PATTERN_LEN)
        .collect()
}

fn mix(seq: u64, ts: u64, len: usize) -> u32 {
    // splitmix64 finaliser over the three fields.
    let mut z = seq ^ ts.rotate_left(23) ^ ((len as u64) << 40) ^ 0x9e37_79b9_7f4a_7c15;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    (z ^ (z >> 31)) as u32
}

fn push_hex(out: &mut Vec<u8>, v: u64, digits: u32) {
    for i in (0..digits).rev() {
        out.push(HEX[((v >> (i * 4)) & 0xf) as usize]);
    }
}

fn parse_hex(s: &[u8]) -> Option<u64> {
    let mut v = 0u64;
    for &c in s {
        let d = match c {
            b'0'..=b'9' => c - b'0',
            b'a'..=b'f' => c - b'a' + 10,
            _ => return None,
        };
        v = (v << 4) | u64::from(d);
    }
    Some(v)
}

/// Append the body of job `seq` sent at `ts` (ns), `len` bytes long (`len >= HEADER_LEN`).
pub fn write(out: &mut Vec<u8>, seq: u64, ts: u64, len: usize, pad: &[u8]) {
    debug_assert!(len >= HEADER_LEN);
    out.extend_from_slice(b"bp");
    push_hex(out, seq, 16);
    out.push(b'.');
    push_hex(out, ts, 16);
    out.push(b'.');
    push_hex(out, u64::from(mix(seq, ts, len)), 8);
    out.push(b'.');
    let off = (seq % PATTERN_LEN as u64) as usize;
    out.extend_from_slice(&pad[off..off + (len - HEADER_LEN)]);
}

/// What is wrong with a body.
#[derive(Debug, PartialEq, Eq)]
pub enum BodyError {
    Length { got: usize, want: usize },
    Header,
    Checksum,
    Padding,
}

impl std::fmt::Display for BodyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BodyError::Length { got, want } => write!(f, "body is {got} bytes, {want} were put"),
            BodyError::Header => f.write_str("body header is not one this tool wrote"),
            BodyError::Checksum => f.write_str("body header checksum does not match"),
            BodyError::Padding => f.write_str("body padding differs from what was put"),
        }
    }
}

/// Check a body of expected length `want`; returns `(seq, ts)`.
pub fn check(body: &[u8], want: usize, pad: &[u8]) -> Result<(u64, u64), BodyError> {
    if body.len() != want {
        return Err(BodyError::Length {
            got: body.len(),
            want,
        });
    }
    if body.len() < HEADER_LEN
        || &body[..2] != b"bp"
        || body[18] != b'.'
        || body[35] != b'.'
        || body[44] != b'.'
    {
        return Err(BodyError::Header);
    }
    let seq = parse_hex(&body[2..18]).ok_or(BodyError::Header)?;
    let ts = parse_hex(&body[19..35]).ok_or(BodyError::Header)?;
    let chk = parse_hex(&body[36..44]).ok_or(BodyError::Header)?;
    if chk != u64::from(mix(seq, ts, want)) {
        return Err(BodyError::Checksum);
    }
    let off = (seq % PATTERN_LEN as u64) as usize;
    if body[HEADER_LEN..] != pad[off..off + (want - HEADER_LEN)] {
        return Err(BodyError::Padding);
    }
    Ok((seq, ts))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_corruption() {
        let pad = pad_source(1000);
        let mut b = Vec::new();
        write(&mut b, 12345, 987_654_321, 100, &pad);
        assert_eq!(b.len(), 100);
        assert_eq!(check(&b, 100, &pad), Ok((12345, 987_654_321)));
        assert_eq!(
            check(&b[..99], 100, &pad),
            Err(BodyError::Length { got: 99, want: 100 })
        );
        let mut c = b.clone();
        c[99] ^= 1;
        assert_eq!(check(&c, 100, &pad), Err(BodyError::Padding));
        let mut c = b.clone();
        c[5] = if c[5] == b'0' { b'1' } else { b'0' };
        assert_eq!(check(&c, 100, &pad), Err(BodyError::Checksum));
        let mut other = Vec::new();
        write(&mut other, 12346, 987_654_321, 100, &pad);
        assert_ne!(other, b);
        let mut exact = Vec::new();
        write(&mut exact, 0, 0, HEADER_LEN, &pad);
        assert_eq!(check(&exact, HEADER_LEN, &pad), Ok((0, 0)));
    }
}
