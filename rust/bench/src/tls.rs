//! `--tls-ca FILE`: every connection is a TLS client (rustls, ring) that trusts only the
//! CAs in FILE and checks the server's certificate against the address connected to.

use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll};

use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, ServerName};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

/// Set once at start when `--tls-ca` is given; read by every connect.
static CONNECTOR: OnceLock<TlsConnector> = OnceLock::new();

/// Make every later connection a TLS one, trusting the CAs in the PEM file `ca`.
pub fn enable(ca: &str) -> Result<(), String> {
    let pem = std::fs::read(ca).map_err(|e| format!("--tls-ca: cannot read {ca}: {e}"))?;
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(&pem) {
        let cert = cert.map_err(|e| format!("--tls-ca: {ca}: {e}"))?;
        roots
            .add(cert)
            .map_err(|e| format!("--tls-ca: {ca}: {e}"))?;
    }
    if roots.is_empty() {
        return Err(format!("--tls-ca: {ca} holds no certificate"));
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS: {e}"))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    let _ = CONNECTOR.set(TlsConnector::from(Arc::new(config)));
    Ok(())
}

/// A client connection: plain TCP, or TLS when [`enable`] was called.
#[derive(Debug)]
pub enum Stream {
    Plain(TcpStream),
    Tls(Box<tokio_rustls::client::TlsStream<TcpStream>>),
}

impl Stream {
    pub async fn connect(addr: SocketAddr) -> io::Result<Stream> {
        let tcp = TcpStream::connect(addr).await?;
        tcp.set_nodelay(true)?;
        match CONNECTOR.get() {
            None => Ok(Stream::Plain(tcp)),
            Some(connector) => {
                let name = ServerName::IpAddress(addr.ip().into());
                let tls = connector.connect(name, tcp).await?;
                Ok(Stream::Tls(Box::new(tls)))
            }
        }
    }
}

impl AsyncRead for Stream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Stream::Tls(s) => Pin::new(s).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Stream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Stream::Tls(s) => Pin::new(s).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_flush(cx),
            Stream::Tls(s) => Pin::new(s).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_shutdown(cx),
            Stream::Tls(s) => Pin::new(s).poll_shutdown(cx),
        }
    }
}
