//! A connection's pending output: reply text in one reused buffer, large job bodies
//! by reference.
//!
//! A body of at least [`BY_REF_MIN`] bytes is not copied into the buffer: the
//! reply keeps a reference to the job's `Bytes` and the whole batch goes out with
//! vectored writes (the text before it, the body, the text after it, ...). Smaller
//! bodies are copied, which is cheaper than another slice.

use std::io::{self, IoSlice};

use bytes::Bytes;
use tokio::io::{AsyncWrite, AsyncWriteExt};

use crate::protocol::encode::push_u64;

/// Bodies at least this long (CRLF included) are written from the job's own bytes.
const BY_REF_MIN: usize = 2048;
/// Slices handed to one `writev` at most (Linux allows 1024).
const MAX_SLICES: usize = 64;

#[derive(Debug, Default)]
pub struct Out {
    /// Reply text, and the copied small bodies.
    pub buf: Vec<u8>,
    /// Bodies sent by reference: each goes before `buf[at..]`.
    bodies: Vec<(usize, Bytes)>,
    /// Total length of `bodies`.
    body_bytes: usize,
}

impl Out {
    /// Bytes waiting to be written.
    pub fn len(&self) -> usize {
        self.buf.len() + self.body_bytes
    }

    pub fn is_empty(&self) -> bool {
        self.buf.is_empty() && self.bodies.is_empty()
    }

    /// Drop everything waiting to be written.
    pub fn clear(&mut self) {
        self.buf.clear();
        self.bodies.clear();
        self.body_bytes = 0;
    }

    pub fn extend(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
    }

    /// Append a job body (which already ends with CRLF).
    pub fn body(&mut self, body: &Bytes) {
        if body.len() < BY_REF_MIN {
            self.buf.extend_from_slice(body);
        } else {
            self.body_bytes += body.len();
            self.bodies.push((self.buf.len(), body.clone()));
        }
    }

    /// The output from byte `from` on, if it is all in the text buffer (no body
    /// by reference after it): a session's reply to record, without a copy.
    pub fn text_tail(&self, from: usize) -> Option<&[u8]> {
        match self.bodies.last() {
            Some(&(at, _)) if from < at + self.body_bytes => None,
            Some(_) => self.buf.get(from - self.body_bytes..),
            None => self.buf.get(from..),
        }
    }

    /// A copy of the output from byte `from` on (a session's reply, to record).
    pub fn tail(&self, from: usize) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.len().saturating_sub(from));
        let mut skip = from;
        for p in self.pieces() {
            if skip >= p.len() {
                skip -= p.len();
                continue;
            }
            out.extend_from_slice(&p[skip..]);
            skip = 0;
        }
        out
    }

    /// Append a decimal number.
    pub fn num(&mut self, n: u64) {
        push_u64(&mut self.buf, n);
    }

    /// Write everything and empty the buffer (keeping its capacity up to `keep`).
    pub async fn write_to<W: AsyncWrite + Unpin>(
        &mut self,
        w: &mut W,
        keep: usize,
    ) -> io::Result<()> {
        if self.bodies.is_empty() {
            w.write_all(&self.buf).await?;
        } else {
            // Boxed: only batches with a large body take this path, and the
            // connection's task stays small for all the others.
            Box::pin(self.write_vectored(w)).await?;
        }
        // A TLS session may keep encrypted records back until flushed; for a plain
        // socket this does nothing.
        w.flush().await?;
        self.buf.clear();
        self.bodies.clear();
        self.body_bytes = 0;
        if self.buf.capacity() > keep {
            self.buf = Vec::new();
        }
        if self.bodies.capacity() > MAX_SLICES {
            self.bodies = Vec::new();
        }
        Ok(())
    }

    async fn write_vectored<W: AsyncWrite + Unpin>(&self, w: &mut W) -> io::Result<()> {
        // The output as a sequence of pieces; `done` bytes of it are written.
        let pieces = self.pieces();
        let total: usize = pieces.iter().map(|p| p.len()).sum();
        let mut done = 0;
        let mut slices: Vec<IoSlice<'_>> = Vec::with_capacity(MAX_SLICES.min(pieces.len()));
        while done < total {
            slices.clear();
            let mut skip = done;
            for p in &pieces {
                if skip >= p.len() {
                    skip -= p.len();
                    continue;
                }
                slices.push(IoSlice::new(&p[skip..]));
                skip = 0;
                if slices.len() == MAX_SLICES {
                    break;
                }
            }
            let n = w.write_vectored(&slices).await?;
            if n == 0 {
                return Err(io::ErrorKind::WriteZero.into());
            }
            done += n;
        }
        Ok(())
    }

    fn pieces(&self) -> Vec<&[u8]> {
        let mut pieces = Vec::with_capacity(2 * self.bodies.len() + 1);
        let mut from = 0;
        for (at, body) in &self.bodies {
            if *at > from {
                pieces.push(&self.buf[from..*at]);
            }
            pieces.push(&body[..]);
            from = *at;
        }
        if self.buf.len() > from {
            pieces.push(&self.buf[from..]);
        }
        pieces
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers() {
        let mut v = Vec::new();
        for n in [0u64, 7, 10, 12345, u64::MAX] {
            v.clear();
            push_u64(&mut v, n);
            assert_eq!(v, n.to_string().into_bytes());
        }
    }

    #[test]
    fn pieces_keep_the_order() {
        let mut out = Out::default();
        out.extend(b"A ");
        out.body(&Bytes::from(vec![b'x'; BY_REF_MIN]));
        out.body(&Bytes::from(vec![b'y'; BY_REF_MIN]));
        out.extend(b"B");
        out.body(&Bytes::from_static(b"z\r\n"));
        let joined: Vec<u8> = out.pieces().concat();
        let mut want = b"A ".to_vec();
        want.extend(vec![b'x'; BY_REF_MIN]);
        want.extend(vec![b'y'; BY_REF_MIN]);
        want.extend(b"Bz\r\n");
        assert_eq!(joined, want);
        assert_eq!(out.len(), want.len());
    }

    #[test]
    fn a_text_tail_is_the_tail_when_no_body_by_reference_is_in_it() {
        let mut out = Out::default();
        out.extend(b"INSERTED 1\r\n");
        assert_eq!(out.text_tail(0), Some(&b"INSERTED 1\r\n"[..]));
        out.extend(b"RESERVED 2 2048\r\n");
        let mark = out.len();
        out.body(&Bytes::from(vec![b'x'; BY_REF_MIN]));
        assert_eq!(out.text_tail(mark), None, "a body by reference");
        let after = out.len();
        out.extend(b"DELETED\r\n");
        assert_eq!(out.text_tail(after), Some(&b"DELETED\r\n"[..]));
        for from in 0..out.len() {
            if let Some(text) = out.text_tail(from) {
                assert_eq!(text, out.tail(from), "from {from}");
            }
        }
    }

    #[tokio::test]
    async fn vectored_write_sends_everything() {
        let (mut a, mut b) = tokio::io::duplex(1000);
        let mut out = Out::default();
        out.extend(b"RESERVED 1 5000\r\n");
        out.body(&Bytes::from(vec![b'q'; 5002]));
        out.extend(b"DELETED\r\n");
        let want: Vec<u8> = out.pieces().concat();
        let reader = tokio::spawn(async move {
            let mut got = Vec::new();
            tokio::io::AsyncReadExt::read_to_end(&mut b, &mut got)
                .await
                .map(|_| got)
        });
        out.write_to(&mut a, 1 << 20).await.expect("write");
        drop(a);
        let got = reader.await.expect("join").expect("read");
        assert_eq!(got, want);
        assert!(out.is_empty());
    }
}
