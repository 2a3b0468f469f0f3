//! TLS for client connections (rustls with the ring provider): the settings read
//! from PEM files, and the handshake over a connected TCP socket.
//!
//! There are no built-in trusted roots: the caller names the CA file, which may be the
//! system's bundle. A client certificate and key, when given, are offered to servers
//! that ask for one (mutual TLS).

use std::io::{self, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use rustls::{ClientConfig, ClientConnection, RootCertStore, StreamOwned};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, ServerName};

use crate::error::ClientError;

/// How long a handshake may take when the connection has no timeout of its own: the
/// server gives its clients the same.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// A TLS session over a TCP socket.
pub type TlsStream = StreamOwned<ClientConnection, TcpStream>;

/// The files TLS settings are read from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    /// CA certificates (PEM) the server's certificate must chain to.
    pub ca: PathBuf,
    /// This client's certificate chain (PEM), for servers that ask for one.
    pub cert: Option<PathBuf>,
    /// The private key of `cert` (PEM: PKCS#8, PKCS#1 or SEC1).
    pub key: Option<PathBuf>,
    /// The name the server's certificate must carry; by default the host connected to
    /// (a DNS name or an IP address).
    pub server_name: Option<String>,
}

/// Settings ready for connections: read once, shared by every connect.
#[derive(Debug, Clone)]
pub struct TlsSettings {
    config: Arc<ClientConfig>,
    server_name: Option<ServerName<'static>>,
}

fn setup(path: &Path, problem: impl std::fmt::Display) -> ClientError {
    ClientError::TlsSetup(format!("{}: {problem}", path.display()))
}

fn read(path: &Path) -> Result<Vec<u8>, ClientError> {
    std::fs::read(path).map_err(|e| setup(path, format!("cannot read it ({e})")))
}

fn certificates(path: &Path) -> Result<Vec<CertificateDer<'static>>, ClientError> {
    let certs = CertificateDer::pem_slice_iter(&read(path)?)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| setup(path, format!("not PEM certificates ({e})")))?;
    if certs.is_empty() {
        return Err(setup(path, "holds no PEM certificate"));
    }
    Ok(certs)
}

fn server_name(text: &str) -> Result<ServerName<'static>, ClientError> {
    ServerName::try_from(text.to_owned())
        .map_err(|_| ClientError::TlsSetup(format!("{text:?} is not a valid server name")))
}

impl TlsSettings {
    /// Read the files. Nothing is connected yet.
    pub fn load(files: &TlsFiles) -> Result<TlsSettings, ClientError> {
        let mut roots = RootCertStore::empty();
        // A system bundle may hold a certificate rustls cannot parse; skipping it is
        // what every TLS library does with such bundles. None usable is an error.
        let (added, _skipped) = roots.add_parsable_certificates(certificates(&files.ca)?);
        if added == 0 {
            return Err(setup(&files.ca, "holds no usable CA certificate"));
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| ClientError::TlsSetup(e.to_string()))?
            .with_root_certificates(roots);
        let config = match (&files.cert, &files.key) {
            (None, None) => builder.with_no_client_auth(),
            (Some(cert), Some(key)) => {
                let chain = certificates(cert)?;
                let key_der = PrivateKeyDer::from_pem_slice(&read(key)?)
                    .map_err(|e| setup(key, format!("no usable private key ({e})")))?;
                builder.with_client_auth_cert(chain, key_der).map_err(|e| {
                    ClientError::TlsSetup(format!(
                        "the certificate {} does not go with the key {}: {e}",
                        cert.display(),
                        key.display()
                    ))
                })?
            }
            _ => {
                return Err(ClientError::TlsSetup(
                    "a client certificate needs its key, and a key its certificate".to_owned(),
                ))
            }
        };
        let server_name = files.server_name.as_deref().map(server_name).transpose()?;
        Ok(TlsSettings {
            config: Arc::new(config),
            server_name,
        })
    }

    /// Do the handshake on a connected socket whose timeouts are already set; `host`
    /// names the server when no server name was given.
    /// `limit` is the socket timeout in force, for the message when it runs out.
    pub(crate) fn handshake(
        &self,
        mut tcp: TcpStream,
        host: &str,
        addr: &str,
        limit: Duration,
    ) -> Result<TlsStream, ClientError> {
        let name = match &self.server_name {
            Some(name) => name.clone(),
            None => server_name(host)?,
        };
        let mut session = ClientConnection::new(Arc::clone(&self.config), name)
            .map_err(|e| ClientError::TlsSetup(e.to_string()))?;
        while session.is_handshaking() {
            if let Err(e) = session.complete_io(&mut tcp) {
                return Err(handshake_error(addr, e, limit));
            }
        }
        Ok(StreamOwned::new(session, tcp))
    }
}

/// The host part of `host:port` or `[v6]:port`.
pub(crate) fn host_of(hostport: &str) -> &str {
    let host = hostport.rsplit_once(':').map_or(hostport, |(h, _)| h);
    host.strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host)
}

/// A handshake failure, said plainly.
fn handshake_error(addr: &str, e: io::Error, limit: Duration) -> ClientError {
    let problem = match e.get_ref().and_then(|i| i.downcast_ref::<rustls::Error>()) {
        Some(rustls::Error::InvalidMessage(_)) => {
            format!("{e}; the server does not speak TLS there (a plain listener?)")
        }
        Some(_) => e.to_string(),
        None => match e.kind() {
            // A plain beanstalkd listener waits for a line that never comes.
            io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => format!(
                "no handshake answer within {:.1} s; does the server listen with TLS there?",
                limit.as_secs_f64()
            ),
            io::ErrorKind::UnexpectedEof => {
                "the server closed the connection during the handshake".to_owned()
            }
            _ => e.to_string(),
        },
    };
    ClientError::Tls {
        addr: addr.to_owned(),
        problem,
    }
}

/// The TLS problem inside an I/O error from an established session, if it is one: an
/// alert from the server (a client certificate refused) or a damaged record.
pub(crate) fn session_problem(e: &io::Error) -> Option<String> {
    let inner = e.get_ref()?.downcast_ref::<rustls::Error>()?;
    Some(match inner {
        rustls::Error::AlertReceived(_) => {
            format!("{inner} (the server refused this client's certificate or settings)")
        }
        other => other.to_string(),
    })
}

/// Send close_notify without waiting: if the socket cannot take it at once it is
/// left out, so closing never blocks.
pub(crate) fn goodbye(s: &mut TlsStream) {
    s.conn.send_close_notify();
    if s.sock.set_nonblocking(true).is_ok() {
        let _ = s.conn.write_tls(&mut s.sock);
        let _ = s.sock.flush();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts() {
        assert_eq!(host_of("127.0.0.1:11300"), "127.0.0.1");
        assert_eq!(host_of("[::1]:11300"), "::1");
        assert_eq!(host_of("example.org:1"), "example.org");
    }

    #[test]
    fn missing_and_malformed_files_are_setup_errors() {
        let dir = std::env::temp_dir().join(format!("beanpole-client-tls-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("mkdir");
        let ca = dir.join("ca.pem");
        let files = TlsFiles {
            ca: ca.clone(),
            cert: None,
            key: None,
            server_name: None,
        };
        let err = TlsSettings::load(&files).expect_err("missing");
        assert!(matches!(err, ClientError::TlsSetup(_)), "{err}");
        assert!(err.to_string().contains("ca.pem"), "{err}");
        std::fs::write(&ca, b"not pem").expect("write");
        assert!(matches!(
            TlsSettings::load(&files),
            Err(ClientError::TlsSetup(_))
        ));
        std::fs::write(
            &ca,
            b"-----BEGIN CERTIFICATE-----\n!!!!\n-----END CERTIFICATE-----\n",
        )
        .expect("write");
        assert!(matches!(
            TlsSettings::load(&files),
            Err(ClientError::TlsSetup(_))
        ));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
