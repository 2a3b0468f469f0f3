//! TLS for the `tls:` listeners: reading the certificate files, swapping them on a
//! reload, and the handshake of each connection.
//!
//! rustls with the ring crypto provider does the work. The server settings built from
//! the files sit behind a lock that every new TLS connection reads once (to clone an
//! `Arc`); a reload builds the new settings first and swaps them in only if the files
//! were good, so connections already open keep the session they have and a bad file
//! changes nothing.

use std::io;
use std::mem::MaybeUninit;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, PoisonError, RwLock};
use std::task::{Context, Poll};
use std::time::Duration;

use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use thiserror::Error;
use tokio::net::TcpStream;
use tokio_rustls::TlsAcceptor;

use super::input::Socket;

/// How long a client has to finish its handshake before the connection is closed.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// A TLS connection, once its handshake is done.
pub type TlsStream = tokio_rustls::server::TlsStream<TcpStream>;

/// The files a TLS listener is served with (`--tls-cert`, `--tls-key`,
/// `--tls-client-ca`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    /// The server's certificate chain (PEM), its own certificate first.
    pub cert: PathBuf,
    /// The private key of that certificate (PEM: PKCS#8, PKCS#1 or SEC1).
    pub key: PathBuf,
    /// With it, only clients presenting a certificate signed by one of these CAs
    /// (PEM) are let in (mutual TLS).
    pub client_ca: Option<PathBuf>,
}

/// Why TLS settings could not be made from the files.
#[derive(Debug, Error)]
pub enum TlsError {
    #[error("cannot read {path}: {source}")]
    Read { path: String, source: io::Error },
    #[error("{path}: {problem}")]
    Pem { path: String, problem: String },
    #[error("{0} holds no certificate")]
    NoCertificate(String),
    #[error("the certificate does not go with the key: {0}")]
    Mismatch(rustls::Error),
    #[error("client CA {path}: {problem}")]
    ClientCa { path: String, problem: String },
}

fn shown(path: &Path) -> String {
    path.display().to_string()
}

fn read(path: &Path) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|source| TlsError::Read {
        path: shown(path),
        source,
    })
}

fn certificates(path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let pem = read(path)?;
    let certs = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| TlsError::Pem {
            path: shown(path),
            problem: e.to_string(),
        })?;
    if certs.is_empty() {
        return Err(TlsError::NoCertificate(shown(path)));
    }
    Ok(certs)
}

/// Build the server settings from `files`: nothing is kept from an earlier build.
pub fn load(files: &TlsFiles) -> Result<Arc<ServerConfig>, TlsError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let chain = certificates(&files.cert)?;
    let key = PrivateKeyDer::from_pem_slice(&read(&files.key)?).map_err(|e| TlsError::Pem {
        path: shown(&files.key),
        problem: format!("no usable private key ({e})"),
    })?;
    let builder = ServerConfig::builder_with_provider(Arc::clone(&provider))
        .with_safe_default_protocol_versions()
        .map_err(TlsError::Mismatch)?;
    let builder = match &files.client_ca {
        None => builder.with_no_client_auth(),
        Some(ca) => {
            let bad = |problem: String| TlsError::ClientCa {
                path: shown(ca),
                problem,
            };
            let mut roots = RootCertStore::empty();
            for cert in certificates(ca)? {
                roots.add(cert).map_err(|e| bad(e.to_string()))?;
            }
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
                .build()
                .map_err(|e| bad(e.to_string()))?;
            builder.with_client_cert_verifier(verifier)
        }
    };
    let config = builder
        .with_single_cert(chain, key)
        .map_err(TlsError::Mismatch)?;
    Ok(Arc::new(config))
}

/// The TLS side of one server: its files, the settings in force, and counters.
#[derive(Debug)]
pub struct Tls {
    files: TlsFiles,
    /// The settings new connections use. A std `RwLock` around an `Arc`: it is read
    /// once per accepted TLS connection and held only to clone the `Arc` (never across
    /// an await), and written only by a reload, so a lock-free swap (the arc-swap
    /// crate) would save nothing measurable and add a dependency.
    current: RwLock<Arc<ServerConfig>>,
    /// Handshakes that failed or timed out.
    pub failed_handshakes: AtomicU64,
}

impl Tls {
    /// Read the files; fails if they do not make valid settings.
    pub fn new(files: TlsFiles) -> Result<Tls, TlsError> {
        let current = RwLock::new(load(&files)?);
        Ok(Tls {
            files,
            current,
            failed_handshakes: AtomicU64::new(0),
        })
    }

    /// Read the files again; on success new connections get the new settings, on
    /// failure the settings in force are kept. Open connections are not touched.
    pub fn reload(&self) -> Result<(), TlsError> {
        let fresh = load(&self.files)?;
        *self.current.write().unwrap_or_else(PoisonError::into_inner) = fresh;
        Ok(())
    }

    fn acceptor(&self) -> TlsAcceptor {
        let config = self
            .current
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        TlsAcceptor::from(config)
    }

    /// Do the server side of the handshake on `stream`, within
    /// [`HANDSHAKE_TIMEOUT`]. A failure is counted (and told with `verbose`), and
    /// the connection is then dropped by the caller.
    pub async fn handshake(&self, stream: TcpStream, verbose: u8) -> Option<TlsStream> {
        let peer = stream.peer_addr().ok();
        let accepted =
            tokio::time::timeout(HANDSHAKE_TIMEOUT, self.acceptor().accept(stream)).await;
        let problem = match accepted {
            Ok(Ok(tls)) => return Some(tls),
            Ok(Err(e)) => e.to_string(),
            Err(_) => format!("no handshake within {} s", HANDSHAKE_TIMEOUT.as_secs()),
        };
        self.failed_handshakes.fetch_add(1, Ordering::Relaxed);
        if verbose > 0 {
            match peer {
                Some(peer) => eprintln!("beanpole: TLS handshake with {peer} failed: {problem}"),
                None => eprintln!("beanpole: TLS handshake failed: {problem}"),
            }
        }
        None
    }
}

impl Socket for TlsStream {
    /// The hang-up is the TCP connection's: decrypted input buffered in the session
    /// is input like any other, left for the reads that come after the wait.
    fn poll_hang_up(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.get_ref().0.poll_hang_up(cx)
    }

    /// Decrypted input: what the session already holds, else what the TCP socket has
    /// queued (read without its readiness, which a wait for the hang-up forgot), fed
    /// to the session. `WouldBlock` until a whole record is in.
    fn read_queued(&mut self, dst: &mut [MaybeUninit<u8>]) -> io::Result<usize> {
        use std::io::Read;
        let (tcp, session) = self.get_mut();
        let mut plain = vec![0u8; dst.len()];
        match session.reader().read(&mut plain) {
            Ok(n) => return Ok(copy_init(dst, &plain[..n])),
            Err(e) if e.kind() != io::ErrorKind::WouldBlock => return Err(e),
            Err(_) => {}
        }
        let mut raw = [MaybeUninit::<u8>::uninit(); 16 * 1024];
        let n = super::input::read_queued(tcp.as_raw_fd(), &mut raw)?;
        if n == 0 {
            return Ok(0);
        }
        // SAFETY: the read initialised the first `n` bytes.
        let raw: &[u8] = unsafe { std::slice::from_raw_parts(raw.as_ptr().cast(), n) };
        session.read_tls(&mut &raw[..])?;
        session.process_new_packets().map_err(io::Error::other)?;
        let n = session.reader().read(&mut plain)?;
        Ok(copy_init(dst, &plain[..n]))
    }

    /// Send close_notify, so the client sees a clean end rather than a truncation;
    /// if the socket cannot take it at once, the connection is closed without it.
    fn poll_goodbye(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        use tokio::io::AsyncWrite;
        self.get_mut().1.send_close_notify();
        let _ = std::pin::Pin::new(self).poll_flush(cx);
        Poll::Ready(())
    }
}

/// Copy `src` into the start of `dst`; the number of bytes copied.
fn copy_init(dst: &mut [MaybeUninit<u8>], src: &[u8]) -> usize {
    let n = src.len().min(dst.len());
    for (d, s) in dst.iter_mut().zip(&src[..n]) {
        d.write(*s);
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files(dir: &Path) -> TlsFiles {
        TlsFiles {
            cert: dir.join("cert.pem"),
            key: dir.join("key.pem"),
            client_ca: None,
        }
    }

    #[test]
    fn missing_and_malformed_files_are_errors_not_panics() {
        let dir = std::env::temp_dir().join(format!("beanpole-tls-unit-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("mkdir");
        let f = files(&dir);
        assert!(matches!(load(&f), Err(TlsError::Read { .. })));
        std::fs::write(&f.cert, b"not pem at all").expect("write");
        assert!(matches!(load(&f), Err(TlsError::NoCertificate(_))));
        std::fs::write(
            &f.cert,
            b"-----BEGIN CERTIFICATE-----\n!!!!\n-----END CERTIFICATE-----\n",
        )
        .expect("write");
        assert!(matches!(load(&f), Err(TlsError::Pem { .. })));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
