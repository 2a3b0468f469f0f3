//! Rendezvous hashing: which of several servers owns a key.
//!
//! Every server scores `blake2b-64(server ++ "\0" ++ key)` (read big-endian) and the
//! highest score wins; on a tie the first server listed wins. This is the rule of
//! `beanpole.sharded.rendezvous` in Python, so a key lands on the same server whichever
//! side picks it. Adding a server moves only the keys the new server now wins.

use blake2::digest::{Update, VariableOutput};
use blake2::Blake2bVar;

/// The score of `server` for `key`.
pub fn score(server: &[u8], key: &[u8]) -> u64 {
    let mut h = Blake2bVar::new(8).unwrap_or_else(|_| unreachable!("8 is a valid blake2b size"));
    h.update(server);
    h.update(b"\0");
    h.update(key);
    let mut out = [0u8; 8];
    // The output buffer is exactly the size asked for, so this cannot fail.
    let _ = h.finalize_variable(&mut out);
    u64::from_be_bytes(out)
}

/// The index in `servers` of the server that owns `key` (0 when `servers` is empty).
pub fn pick<S: AsRef<[u8]>>(servers: &[S], key: &[u8]) -> usize {
    let mut best = 0usize;
    let mut best_score = 0u64;
    for (i, s) in servers.iter().enumerate() {
        let sc = score(s.as_ref(), key);
        if i == 0 || sc > best_score {
            best = i;
            best_score = sc;
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scores_are_those_of_python_hashlib() {
        // int.from_bytes(hashlib.blake2b(s + b"\0" + k, digest_size=8).digest(), "big")
        assert_eq!(score(b"127.0.0.1:11300", b"user-1"), 6379456165134865818);
        assert_eq!(score(b"127.0.0.1:11301", b"user-1"), 4921554374585645265);
        assert_eq!(score(b"a", b""), 5607187266179385537);
    }

    #[test]
    fn the_highest_score_wins() {
        let servers = ["127.0.0.1:11300", "127.0.0.1:11301"];
        assert_eq!(pick(&servers, b"user-1"), 0);
        let empty: [&str; 0] = [];
        assert_eq!(pick(&empty, b"x"), 0);
    }
}
