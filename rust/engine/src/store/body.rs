//! A job body in 12 bytes: a pointer and a length.
//!
//! Small bodies (the common case) sit in a slot of the job table's [`BodyArena`],
//! with no header: replies copy them into the output buffer anyway. The arena owns
//! that memory; the table gives the slot back when the job goes
//! ([`Body::release`]). Bodies of at least [`SHARED_MIN`] bytes keep the connection's
//! reference-counted [`Bytes`] (behind the pointer, owned by the body), so a reply
//! can send them by reference without a copy.

use std::fmt;
use std::ptr::NonNull;

use bytes::Bytes;

use super::arena::BodyArena;

/// Bodies at least this long (CRLF included) are kept as shared [`Bytes`]; the
/// same bound as the server's by-reference replies. Shorter ones fit an arena slot.
pub const SHARED_MIN: usize = 2048;

const _: () = assert!(SHARED_MIN <= super::arena::SLOT_MAX);

/// A job's body, CRLF included. Packed to 4-byte alignment so the job record
/// places it next to its 4-byte fields without padding.
#[repr(C, packed(4))]
pub struct Body {
    /// Below `SHARED_MIN`: `len` bytes in a slot of the table's arena. Otherwise a
    /// `Box<Bytes>` this body owns.
    ptr: NonNull<u8>,
    len: u32,
}

// SAFETY: a `Body` refers to bytes no one changes while it lives (an arena slot is
// written once, before the body exists) or owns a `Bytes`, which is Send + Sync.
unsafe impl Send for Body {}
// SAFETY: as above; `&Body` only reads.
unsafe impl Sync for Body {}

/// A body on its way into the job table: bytes to copy into the arena, or (when
/// large) to keep as they are.
#[derive(Debug)]
pub enum BodyIn<'a> {
    Slice(&'a [u8]),
    Bytes(Bytes),
    Boxed(Box<[u8]>),
}

impl<'a> From<&'a [u8]> for BodyIn<'a> {
    fn from(s: &'a [u8]) -> BodyIn<'a> {
        BodyIn::Slice(s)
    }
}

impl From<Bytes> for BodyIn<'_> {
    fn from(b: Bytes) -> Self {
        BodyIn::Bytes(b)
    }
}

impl From<Box<[u8]>> for BodyIn<'_> {
    fn from(b: Box<[u8]>) -> Self {
        BodyIn::Boxed(b)
    }
}

impl From<Vec<u8>> for BodyIn<'_> {
    fn from(v: Vec<u8>) -> Self {
        BodyIn::Boxed(v.into_boxed_slice())
    }
}

impl BodyIn<'_> {
    /// Bytes, CRLF included.
    pub fn len(&self) -> usize {
        match self {
            BodyIn::Slice(s) => s.len(),
            BodyIn::Bytes(b) => b.len(),
            BodyIn::Boxed(b) => b.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl Body {
    fn shared(&self) -> bool {
        self.len as usize >= SHARED_MIN
    }

    /// A body for the job table: small ones copied into `arena`, large ones kept.
    pub(super) fn new(arena: &mut BodyArena, body: BodyIn<'_>) -> Body {
        let len = u32::try_from(body.len()).unwrap_or(u32::MAX);
        if (len as usize) < SHARED_MIN {
            let ptr = match &body {
                BodyIn::Slice(s) => arena.alloc(s),
                BodyIn::Bytes(b) => arena.alloc(b),
                BodyIn::Boxed(b) => arena.alloc(b),
            };
            return Body { ptr, len };
        }
        let bytes = match body {
            BodyIn::Slice(s) => Bytes::copy_from_slice(s),
            BodyIn::Bytes(b) => b,
            BodyIn::Boxed(b) => Bytes::from(b),
        };
        let ptr = NonNull::from(Box::leak(Box::new(bytes))).cast::<u8>();
        Body { ptr, len }
    }

    /// The body leaves the table: a small one's slot goes back to `arena` (the one
    /// it was made with).
    pub(super) fn release(self, arena: &mut BodyArena) {
        if !self.shared() {
            // SAFETY: a small body's slot came from `arena` (the table has one) for
            // this length, and `self` is consumed, so it is freed once.
            unsafe { arena.free(self.ptr, self.len as usize) };
        }
    }

    /// The body as reply-ready [`Bytes`]: a copy when small, a new reference to
    /// the same bytes when large.
    pub fn to_bytes(&self) -> Bytes {
        let ptr = self.ptr;
        if self.shared() {
            // SAFETY: a shared body points to a live `Bytes` it owns.
            unsafe { ptr.cast::<Bytes>().as_ref() }.clone()
        } else {
            Bytes::copy_from_slice(self)
        }
    }
}

impl std::ops::Deref for Body {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        let (ptr, len) = (self.ptr, self.len as usize);
        if len >= SHARED_MIN {
            // SAFETY: a shared body points to a live `Bytes` it owns.
            unsafe { ptr.cast::<Bytes>().as_ref() }
        } else {
            // SAFETY: a small body points to `len` initialised bytes of an arena slot,
            // which the table keeps until the body is released.
            unsafe { std::slice::from_raw_parts(ptr.as_ptr(), len) }
        }
    }
}

impl Drop for Body {
    fn drop(&mut self) {
        if self.shared() {
            // SAFETY: made by `Box::leak(Box<Bytes>)` and dropped once, here. (A small
            // body's slot is the arena's: `release` gives it back.)
            drop(unsafe { Box::from_raw(self.ptr.cast::<Bytes>().as_ptr()) });
        }
    }
}

impl fmt::Debug for Body {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&Bytes::copy_from_slice(&self[..self.len().min(64)]), f)?;
        write!(f, " ({} bytes)", self.len())
    }
}

impl PartialEq for Body {
    fn eq(&self, other: &Body) -> bool {
        self[..] == other[..]
    }
}

impl Eq for Body {}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn small_and_shared_bodies_round_trip() {
        assert_eq!(std::mem::size_of::<Body>(), 12);
        assert_eq!(std::mem::size_of::<Option<Body>>(), 12);
        let mut arena = BodyArena::default();
        for n in [0, 2, 102, SHARED_MIN - 1, SHARED_MIN, 70_000] {
            let data: Vec<u8> = (0..n).map(|i| (i % 251) as u8).collect();
            let made = [
                Body::new(&mut arena, BodyIn::from(&data[..])),
                Body::new(&mut arena, Bytes::copy_from_slice(&data).into()),
                Body::new(&mut arena, data.clone().into()),
            ];
            for body in made {
                assert_eq!(&body[..], &data[..]);
                assert_eq!(body.to_bytes(), Bytes::from(data.clone()));
                body.release(&mut arena);
            }
        }
        assert_eq!(arena.pages(), 0);
        // A shared body's replies point at the very bytes that were put.
        let big = Bytes::from(vec![7u8; SHARED_MIN + 5]);
        let body = Body::new(&mut arena, big.clone().into());
        assert_eq!(body.to_bytes().as_ptr(), big.as_ptr());
    }
}
