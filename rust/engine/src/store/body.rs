//! A job body in 12 bytes: a pointer and a length.
//!
//! Small bodies (the common case) are one exact-size allocation owned by the job,
//! with no header: replies copy them into the output buffer anyway. Bodies of at
//! least [`SHARED_MIN`] bytes keep the connection's reference-counted [`Bytes`]
//! (behind the pointer), so a reply can send them by reference without a copy.

use std::fmt;
use std::ptr::NonNull;

use bytes::Bytes;

/// Bodies at least this long (CRLF included) are kept as shared [`Bytes`]; the
/// same bound as the server's by-reference replies.
pub const SHARED_MIN: usize = 2048;

/// A job's body, CRLF included. Packed to 4-byte alignment so the job record
/// places it next to its 4-byte fields without padding.
#[repr(C, packed(4))]
pub struct Body {
    /// Below `SHARED_MIN`: a `Box<[u8]>` of `len` bytes. Otherwise a `Box<Bytes>`.
    ptr: NonNull<u8>,
    len: u32,
}

// SAFETY: a `Body` owns its allocation outright (the shared kind owns a `Bytes`,
// which is Send + Sync), like a `Box`.
unsafe impl Send for Body {}
// SAFETY: as above; `&Body` only reads.
unsafe impl Sync for Body {}

impl Body {
    fn shared(&self) -> bool {
        self.len as usize >= SHARED_MIN
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

    fn from_box(b: Box<[u8]>) -> Body {
        let len = u32::try_from(b.len()).unwrap_or(u32::MAX);
        debug_assert!((len as usize) < SHARED_MIN);
        let ptr = NonNull::from(Box::leak(b)).cast::<u8>();
        Body { ptr, len }
    }
}

impl From<Bytes> for Body {
    fn from(bytes: Bytes) -> Body {
        if bytes.len() >= SHARED_MIN {
            let len = u32::try_from(bytes.len()).unwrap_or(u32::MAX);
            let ptr = NonNull::from(Box::leak(Box::new(bytes))).cast::<u8>();
            Body { ptr, len }
        } else {
            // Takes over the allocation when the `Bytes` is a unique, exact-size
            // vector (what the server hands over), and copies otherwise.
            Body::from_box(Vec::from(bytes).into_boxed_slice())
        }
    }
}

impl From<Vec<u8>> for Body {
    fn from(v: Vec<u8>) -> Body {
        if v.len() >= SHARED_MIN {
            Body::from(Bytes::from(v))
        } else {
            Body::from_box(v.into_boxed_slice())
        }
    }
}

impl From<Box<[u8]>> for Body {
    fn from(b: Box<[u8]>) -> Body {
        if b.len() >= SHARED_MIN {
            Body::from(Bytes::from(b))
        } else {
            Body::from_box(b)
        }
    }
}

impl From<&[u8]> for Body {
    fn from(s: &[u8]) -> Body {
        Body::from(s.to_vec())
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
            // SAFETY: a small body points to `len` initialized bytes it owns.
            unsafe { std::slice::from_raw_parts(ptr.as_ptr(), len) }
        }
    }
}

impl Drop for Body {
    fn drop(&mut self) {
        let (ptr, len) = (self.ptr, self.len as usize);
        if len >= SHARED_MIN {
            // SAFETY: made by `Box::leak(Box<Bytes>)` and dropped once, here.
            drop(unsafe { Box::from_raw(ptr.cast::<Bytes>().as_ptr()) });
        } else {
            let slice = std::ptr::slice_from_raw_parts_mut(ptr.as_ptr(), len);
            // SAFETY: made by `Box::leak(Box<[u8]>)` of this length, dropped once.
            drop(unsafe { Box::from_raw(slice) });
        }
    }
}

impl Clone for Body {
    fn clone(&self) -> Body {
        if self.shared() {
            Body::from(self.to_bytes())
        } else {
            Body::from(&self[..])
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
        for n in [0, 2, 102, SHARED_MIN - 1, SHARED_MIN, 70_000] {
            let data: Vec<u8> = (0..n).map(|i| (i % 251) as u8).collect();
            let from_bytes = Body::from(Bytes::copy_from_slice(&data));
            let from_vec = Body::from(data.clone());
            assert_eq!(&from_bytes[..], &data[..]);
            assert_eq!(&from_vec[..], &data[..]);
            assert_eq!(from_bytes.to_bytes(), Bytes::from(data.clone()));
            let copy = from_vec.clone();
            drop(from_vec);
            assert_eq!(&copy[..], &data[..]);
        }
        // A shared body's replies point at the very bytes that were put.
        let big = Bytes::from(vec![7u8; SHARED_MIN + 5]);
        let body = Body::from(big.clone());
        assert_eq!(body.to_bytes().as_ptr(), big.as_ptr());
    }
}
