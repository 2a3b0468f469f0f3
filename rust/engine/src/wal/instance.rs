//! The identity of a log directory's job-id space: the `id` a server with `-b`
//! reports in `stats`.
//!
//! beanstalkd draws a new `id` at every start. A job id, though, names a job only
//! within one id space: a server without a log starts again at id 1, while a
//! server with `-b` keeps its ids across restarts. Whoever keeps job ids across a
//! restart (a Spark checkpoint) compares `stats`'s `id` to tell the two apart, so
//! with a log the `id` belongs to the directory: drawn when the log starts empty,
//! kept in the file `instance` beside the segments, the same after every restart.
//! A log that starts empty (no segment at all) starts its ids at 1 again, so it
//! gets a new identity even if an old `instance` file was left behind.
//!
//! Must not import the store or the server: the log opens before either exists.

use std::fs;
use std::io::{self, Write};
use std::path::Path;

/// The file holding the identity, in the log directory.
pub const FILE: &str = "instance";
/// Hex digits of an identity (8 random bytes, as beanstalkd's `id`).
const LEN: usize = 16;

/// The directory's identity: the one kept in it, or a new one (written and synced
/// before it is returned) when there is none or the log starts empty.
pub fn load_or_create(dir: &Path, log_is_empty: bool) -> io::Result<String> {
    let path = dir.join(FILE);
    if !log_is_empty {
        match fs::read_to_string(&path) {
            Ok(text) => {
                let id = text.trim_end_matches('\n');
                if id.len() == LEN && id.bytes().all(|b| b.is_ascii_hexdigit()) {
                    return Ok(id.to_owned());
                }
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!(
                        "{} does not hold an identity (16 hex digits); \
                         remove it to give the log a new one",
                        path.display()
                    ),
                ));
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
    }
    let id = crate::stats::process::instance_id();
    let tmp = dir.join(format!("{FILE}.tmp"));
    {
        let mut f = fs::File::create(&tmp)?;
        f.write_all(format!("{id}\n").as_bytes())?;
        f.sync_all()?;
    }
    fs::rename(&tmp, &path)?;
    // The rename is durable once the directory is synced.
    fs::File::open(dir)?.sync_all()?;
    Ok(id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kept_across_opens_and_new_when_the_log_starts_empty() {
        let dir = tempfile::tempdir().expect("test");
        let first = load_or_create(dir.path(), true).expect("test");
        assert_eq!(first.len(), LEN);
        assert!(first.bytes().all(|b| b.is_ascii_hexdigit()));
        assert_eq!(load_or_create(dir.path(), false).expect("test"), first);
        assert_eq!(load_or_create(dir.path(), false).expect("test"), first);
        // Ids start at 1 again in an empty log: a new identity.
        let second = load_or_create(dir.path(), true).expect("test");
        assert_ne!(second, first);
        assert_eq!(load_or_create(dir.path(), false).expect("test"), second);
    }

    #[test]
    fn a_log_with_segments_but_no_identity_gets_one() {
        let dir = tempfile::tempdir().expect("test");
        let id = load_or_create(dir.path(), false).expect("test");
        assert_eq!(
            fs::read_to_string(dir.path().join(FILE)).expect("test"),
            format!("{id}\n")
        );
    }

    #[test]
    fn a_damaged_identity_is_refused() {
        let dir = tempfile::tempdir().expect("test");
        fs::write(dir.path().join(FILE), "not hex\n").expect("test");
        let err = load_or_create(dir.path(), false).expect_err("test");
        assert_eq!(err.kind(), io::ErrorKind::InvalidData);
        assert!(err.to_string().contains("16 hex digits"), "{err}");
    }
}
