//! A server with a `tls:` listener beside a plain one: a rustls client puts and
//! reserves, a reload with broken files keeps the certificate in force, a good reload
//! changes it for new connections, and bad settings fail the start. Certificates are
//! made with `openssl` (the tests say so and return when it is missing).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use beanpole_engine::server::{
    BoundAddr, ListenAddr, ServerConfig, ServerError, ServerHandle, TlsFiles,
};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("beanpole-tls-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("mkdir");
    dir
}

fn openssl(args: &[&str], dir: &Path) -> bool {
    Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .is_ok_and(|o| o.status.success())
}

/// A CA (ca.pem) and two server certificates it signed for 127.0.0.1 (a.pem/a.key,
/// b.pem/b.key); false when openssl is not there.
fn make_certs(dir: &Path) -> bool {
    let ec = [
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:P-256",
        "-nodes",
    ];
    let mut ca = vec!["req", "-x509"];
    ca.extend(ec);
    ca.extend([
        "-keyout",
        "ca.key",
        "-out",
        "ca.pem",
        "-days",
        "2",
        "-subj",
        "/CN=test CA",
        "-addext",
        "basicConstraints=critical,CA:TRUE",
        "-addext",
        "keyUsage=critical,keyCertSign,cRLSign",
    ]);
    if !openssl(&ca, dir) {
        return false;
    }
    std::fs::write(
        dir.join("ext"),
        "basicConstraints=CA:FALSE\nsubjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n",
    )
    .expect("write");
    for name in ["a", "b"] {
        let (key, csr, pem) = (
            format!("{name}.key"),
            format!("{name}.csr"),
            format!("{name}.pem"),
        );
        let mut req = vec!["req", "-new"];
        req.extend(ec);
        req.extend(["-keyout", &key, "-out", &csr, "-subj", "/CN=server"]);
        let sign = [
            "x509",
            "-req",
            "-in",
            &csr,
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-out",
            &pem,
            "-days",
            "2",
            "-extfile",
            "ext",
        ];
        assert!(openssl(&req, dir) && openssl(&sign, dir), "openssl failed");
    }
    true
}

fn der(path: &Path) -> Vec<u8> {
    CertificateDer::from_pem_file(path).expect("pem").to_vec()
}

type Client = rustls::StreamOwned<rustls::ClientConnection, TcpStream>;

/// Connect with TLS trusting `ca`; the client and the certificate the server showed.
fn connect(addr: SocketAddr, ca: &Path) -> (BufReader<Client>, Vec<u8>) {
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(CertificateDer::from_pem_file(ca).expect("ca"))
        .expect("root");
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
    let name = ServerName::IpAddress(addr.ip().into());
    let conn = rustls::ClientConnection::new(Arc::new(config), name).expect("client");
    let sock = TcpStream::connect(addr).expect("connect");
    sock.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    let mut stream = rustls::StreamOwned::new(conn, sock);
    while stream.conn.is_handshaking() {
        stream
            .conn
            .complete_io(&mut stream.sock)
            .expect("handshake");
    }
    let seen = stream.conn.peer_certificates().expect("certificate")[0].to_vec();
    (BufReader::new(stream), seen)
}

fn ask(stream: &mut BufReader<Client>, data: &[u8]) -> String {
    stream.get_mut().write_all(data).expect("write");
    let mut reply = String::new();
    stream.read_line(&mut reply).expect("read");
    reply
}

fn tcp(addr: &BoundAddr) -> SocketAddr {
    let BoundAddr::Tcp(sa) = addr else {
        panic!("expected TCP, got {addr}");
    };
    *sa
}

#[test]
fn tls_and_plain_share_one_queue_and_reloads_change_only_new_connections() {
    let dir = scratch("serve");
    if !make_certs(&dir) {
        eprintln!("openssl is not available: test not run");
        return;
    }
    let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
    std::fs::copy(dir.join("a.pem"), &cert).expect("copy");
    std::fs::copy(dir.join("a.key"), &key).expect("copy");
    let config = ServerConfig {
        listen: vec![
            ListenAddr::parse("tls:127.0.0.1:0", 0).expect("tls"),
            ListenAddr::parse("127.0.0.1:0", 0).expect("plain"),
        ],
        threads: 1,
        tls: Some(TlsFiles {
            cert: cert.clone(),
            key: key.clone(),
            client_ca: None,
        }),
        ..ServerConfig::default()
    };
    let mut server = ServerHandle::start(config).expect("start");
    let tls_addr = tcp(&server.local_addrs()[0]);
    let plain_addr = tcp(&server.local_addrs()[1]);
    let ca = dir.join("ca.pem");

    let (mut kept, seen) = connect(tls_addr, &ca);
    assert_eq!(seen, der(&dir.join("a.pem")));
    assert_eq!(ask(&mut kept, b"put 0 0 60 3\r\nabc\r\n"), "INSERTED 1\r\n");

    // Broken files: the reload fails and the certificate in force stays.
    std::fs::write(&cert, "garbage").expect("write");
    assert!(server.reload_tls().is_err());
    assert_eq!(connect(tls_addr, &ca).1, der(&dir.join("a.pem")));

    // Good new files: new connections get them, the open one goes on.
    std::fs::copy(dir.join("b.pem"), &cert).expect("copy");
    std::fs::copy(dir.join("b.key"), &key).expect("copy");
    assert!(server.reload_tls().expect("reload"));
    assert_eq!(connect(tls_addr, &ca).1, der(&dir.join("b.pem")));
    assert_eq!(ask(&mut kept, b"reserve\r\n"), "RESERVED 1 3\r\n");

    // The plain listener sees the same queue.
    let mut plain = TcpStream::connect(plain_addr).expect("connect");
    plain.write_all(b"stats-job 1\r\n").expect("write");
    let mut head = [0u8; 3];
    plain.read_exact(&mut head).expect("read");
    assert_eq!(&head, b"OK ");
    assert_eq!(server.tls_failed_handshakes(), Some(0));
    server.stop(Duration::from_secs(5));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bad_tls_settings_fail_the_start() {
    let dir = scratch("bad");
    let tls = vec![ListenAddr::parse("tls:127.0.0.1:0", 0).expect("tls")];
    let without_files = ServerConfig {
        listen: tls.clone(),
        ..ServerConfig::default()
    };
    assert!(matches!(
        ServerHandle::start(without_files),
        Err(ServerError::Invalid(_))
    ));
    let missing = ServerConfig {
        listen: tls,
        tls: Some(TlsFiles {
            cert: dir.join("none.pem"),
            key: dir.join("none.key"),
            client_ca: None,
        }),
        ..ServerConfig::default()
    };
    assert!(matches!(
        ServerHandle::start(missing),
        Err(ServerError::Tls(_))
    ));
    let _ = std::fs::remove_dir_all(&dir);
}
