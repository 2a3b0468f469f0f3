//! Fresh directories from the real beanstalkd, when it is installed (`BEANSTALKD`
//! or `beanstalkd` on `PATH`): generated, read back and compared with what the
//! server said before it stopped. Without it these tests say so and pass.

mod import_common;

use std::collections::{BTreeMap, HashMap};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use beanpole_engine::wal::import::{ImportedJob, ImportedState};

use import_common::*;

fn beanstalkd() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("BEANSTALKD") {
        return Some(PathBuf::from(p));
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join("beanstalkd"))
        .find(|p| p.is_file())
}

macro_rules! need_beanstalkd {
    () => {
        match beanstalkd() {
            Some(exe) => exe,
            None => {
                eprintln!("skipped: beanstalkd is not installed (apt-get install beanstalkd)");
                return;
            }
        }
    };
}

struct Beanstalkd {
    child: Child,
    port: u16,
}

impl Beanstalkd {
    /// Starts beanstalkd on a listening socket bound here first (socket activation),
    /// so there is no port race and nothing to wait for.
    fn start(exe: &Path, dir: &Path, args: &[&str]) -> Beanstalkd {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        listener.set_nonblocking(true).expect("nonblocking");
        let port = listener.local_addr().expect("addr").port();
        let script = "exec 3<&0 0</dev/null; LISTEN_PID=$$ LISTEN_FDS=1 exec \"$@\"";
        let child = Command::new("sh")
            .arg("-c")
            .arg(script)
            .arg("sh")
            .arg(exe)
            .arg("-b")
            .arg(dir)
            .args(args)
            .stdin(Stdio::from(OwnedFd::from(listener)))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn beanstalkd");
        Beanstalkd { child, port }
    }

    fn client(&self) -> Client {
        Client::connect(self.port)
    }

    fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Beanstalkd {
    fn drop(&mut self) {
        self.kill();
    }
}

struct Client {
    r: BufReader<TcpStream>,
    w: TcpStream,
}

impl Client {
    fn connect(port: u16) -> Client {
        let s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
        s.set_nodelay(true).expect("nodelay");
        s.set_read_timeout(Some(Duration::from_secs(10)))
            .expect("timeout");
        Client {
            r: BufReader::new(s.try_clone().expect("clone")),
            w: s,
        }
    }

    fn line(&mut self) -> std::io::Result<String> {
        let mut l = String::new();
        self.r.read_line(&mut l)?;
        if !l.ends_with("\r\n") {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        l.truncate(l.len() - 2);
        Ok(l)
    }

    /// Sends a command and returns the reply line, reading (and returning) a body.
    fn cmd(&mut self, line: &str, body: Option<&[u8]>) -> (String, Vec<u8>) {
        let mut out = line.as_bytes().to_vec();
        out.extend(b"\r\n");
        if let Some(b) = body {
            out.extend(b);
            out.extend(b"\r\n");
        }
        self.w.write_all(&out).expect("send");
        let reply = self.line().expect("reply");
        let word = reply.split(' ').next().unwrap_or("");
        let mut payload = Vec::new();
        if matches!(word, "OK" | "RESERVED" | "FOUND") {
            let n: usize = reply
                .rsplit(' ')
                .next()
                .and_then(|n| n.parse().ok())
                .expect("size");
            payload = vec![0; n + 2];
            self.r.read_exact(&mut payload).expect("body");
            payload.truncate(n);
        }
        (reply, payload)
    }

    fn ok(&mut self, line: &str, want: &str) {
        let (reply, _) = self.cmd(line, None);
        assert_eq!(reply, want, "{line}");
    }

    fn put(&mut self, pri: u32, delay: u32, ttr: u32, body: &[u8]) -> u64 {
        let (reply, _) = self.cmd(
            &format!("put {pri} {delay} {ttr} {}", body.len()),
            Some(body),
        );
        reply
            .strip_prefix("INSERTED ")
            .and_then(|id| id.parse().ok())
            .unwrap_or_else(|| panic!("put: {reply}"))
    }

    fn stats_job(&mut self, id: u64) -> HashMap<String, String> {
        let (reply, body) = self.cmd(&format!("stats-job {id}"), None);
        assert!(reply.starts_with("OK"), "stats-job {id}: {reply}");
        String::from_utf8_lossy(&body)
            .lines()
            .filter_map(|l| l.split_once(": "))
            .map(|(k, v)| (k.to_owned(), v.trim_matches('"').to_owned()))
            .collect()
    }
}

/// What the test expects on disk for one job: its last journaled struct.
#[derive(Debug, Clone, PartialEq)]
struct Snap {
    tube: String,
    body: Vec<u8>,
    pri: u32,
    state: String,
    counters: [u32; 5],
}

fn snap(c: &mut Client, id: u64, body: &[u8]) -> Snap {
    let s = c.stats_job(id);
    let n = |k: &str| s[k].parse::<u32>().expect("number");
    Snap {
        tube: s["tube"].clone(),
        body: body.to_vec(),
        pri: n("pri"),
        state: s["state"].clone(),
        counters: [
            n("reserves"),
            n("timeouts"),
            n("releases"),
            n("buries"),
            n("kicks"),
        ],
    }
}

fn snap_of(j: &ImportedJob) -> Snap {
    Snap {
        tube: String::from_utf8_lossy(&j.tube).into_owned(),
        body: j.body.clone(),
        pri: j.pri,
        state: j.state.as_str().to_owned(),
        counters: [j.reserves, j.timeouts, j.releases, j.buries, j.kicks],
    }
}

#[test]
fn live_jobs_in_every_state_over_many_files() {
    let exe = need_beanstalkd!();
    let tmp = TempDir::new("live-states");
    let mut srv = Beanstalkd::start(&exe, &tmp.0, &["-f", "0", "-s", "2048"]);
    let (mut p, mut w) = (srv.client(), srv.client());
    let mut disk: BTreeMap<u64, Snap> = BTreeMap::new();
    let mut bury_order = Vec::new();
    let t0 = now_ns();

    let tubes = ["default", "t$()+;./_-", "a(b)c", "x.y_z-1"];
    let mut ids = Vec::new();
    for (i, tube) in tubes.iter().cycle().take(20).enumerate() {
        p.ok(&format!("use {tube}"), &format!("USING {tube}"));
        let mut body = format!("job {i}\r\n\0").into_bytes();
        body.extend(std::iter::repeat_n(i as u8, i * 13));
        let delay = if i % 5 == 4 { 3600 } else { 0 };
        let id = p.put(i as u32 * 3, delay, 60, &body);
        disk.insert(id, snap(&mut p, id, &body));
        ids.push((id, body));
    }
    // The maximum size, then two small ones: beanstalkd's own replay loses all three.
    p.ok("use big", "USING big");
    for body in [
        vec![b'M'; 65535],
        b"after big".to_vec(),
        b"after big 2".to_vec(),
    ] {
        let id = p.put(7, 0, 60, &body);
        disk.insert(id, snap(&mut p, id, &body));
        ids.push((id, body));
    }
    // Bury three in an order unlike their ids.
    for k in [6, 2, 9] {
        let (id, body) = &ids[k];
        w.ok(
            &format!("reserve-job {id}"),
            &format!("RESERVED {id} {}", body.len()),
        );
        w.ok(&format!("bury {id} {}", 100 + k), "BURIED");
        disk.insert(*id, snap(&mut p, *id, body));
        bury_order.push(*id);
    }
    // Release with a new priority and a delay; delete some; kick one.
    let (id, body) = &ids[0];
    w.ok(
        &format!("reserve-job {id}"),
        &format!("RESERVED {id} {}", body.len()),
    );
    w.ok(&format!("release {id} 77 900"), "RELEASED");
    disk.insert(*id, snap(&mut p, *id, body));
    for k in [1, 3, 10] {
        let id = ids[k].0;
        p.ok(&format!("delete {id}"), "DELETED");
        disk.remove(&id);
    }
    let (id, body) = &ids[2];
    p.ok(&format!("kick-job {id}"), "KICKED");
    disk.insert(*id, snap(&mut p, *id, body));
    bury_order.retain(|x| x != id);
    // Held at the kill: not journaled, so its last record (the put) stands.
    let (id, body) = &ids[5];
    w.ok(
        &format!("reserve-job {id}"),
        &format!("RESERVED {id} {}", body.len()),
    );
    srv.kill();

    let r = read_ok(&tmp.0);
    assert!(r.files.len() > 3, "{:?}", r.files);
    let max = ids.iter().map(|(id, _)| *id).max().expect("ids");
    assert_eq!(r.max_id, max);
    let got: BTreeMap<u64, Snap> = r.jobs.iter().map(|j| (j.id, snap_of(j))).collect();
    assert_eq!(got, disk);
    let buried: Vec<u64> = r
        .jobs
        .iter()
        .filter(|j| j.state == ImportedState::Buried)
        .map(|j| j.id)
        .collect();
    assert_eq!(buried, bury_order);
    for j in &r.jobs {
        assert!(j.created_at_ns >= t0 && j.created_at_ns <= now_ns());
    }
    assert_eq!(r.warnings.len(), 1, "{:?}", r.warnings); // the 65535-byte job
}

#[test]
fn live_killed_during_a_burst() {
    let exe = need_beanstalkd!();
    for round in 0..3 {
        let tmp = TempDir::new("live-burst");
        let mut srv = Beanstalkd::start(&exe, &tmp.0, &["-s", "8192"]);
        let acked: Arc<Mutex<HashMap<u64, Vec<u8>>>> = Arc::default();
        // The listening socket is handed over already bound, so clients connect before
        // beanstalkd runs; on a busy machine the kill below could come before it had
        // even opened its binlog. One acknowledged put first: the burst's clock starts
        // with beanstalkd serving and its log open.
        let first = b"before the burst".to_vec();
        let id = srv.client().put(5, 0, 60, &first);
        acked.lock().expect("lock").insert(id, first);
        let stop = Arc::new(AtomicBool::new(false));
        let threads: Vec<_> = (0..3)
            .map(|t| {
                let mut c = srv.client();
                let acked = Arc::clone(&acked);
                let stop = Arc::clone(&stop);
                std::thread::spawn(move || {
                    let mut n = 0u32;
                    while !stop.load(Ordering::Relaxed) {
                        // Pipelined batches keep beanstalkd busy writing.
                        let bodies: Vec<Vec<u8>> = (0..16)
                            .map(|k| {
                                n += 1;
                                let mut b = format!("t{t} n{n} ").into_bytes();
                                b.extend(std::iter::repeat_n(b'.', ((n * 7 + k) % 150) as usize));
                                b
                            })
                            .collect();
                        let mut out = Vec::new();
                        for b in &bodies {
                            out.extend(format!("put 5 0 60 {}\r\n", b.len()).as_bytes());
                            out.extend(b);
                            out.extend(b"\r\n");
                        }
                        if c.w.write_all(&out).is_err() {
                            return;
                        }
                        for b in bodies {
                            let Ok(line) = c.line() else { return };
                            if let Some(id) = line.strip_prefix("INSERTED ") {
                                if let Ok(id) = id.parse() {
                                    acked.lock().expect("lock").insert(id, b);
                                }
                            }
                        }
                    }
                })
            })
            .collect();
        std::thread::sleep(Duration::from_millis(30 + 40 * round));
        srv.kill();
        stop.store(true, Ordering::Relaxed);
        for t in threads {
            let _ = t.join();
        }
        let acked = acked.lock().expect("lock").clone();
        let r = read_ok(&tmp.0);
        let got: HashMap<u64, &ImportedJob> = r.jobs.iter().map(|j| (j.id, j)).collect();
        for (id, body) in &acked {
            let j = got
                .get(id)
                .unwrap_or_else(|| panic!("acknowledged job {id} missing"));
            assert_eq!(&j.body, body);
        }
        assert!(r.max_id >= acked.keys().copied().max().unwrap_or(0));
        for w in &r.warnings {
            // A torn record, or a file killed between its creation and its first write.
            assert!(
                w.contains("incomplete record") || w.contains("never written"),
                "{w}"
            );
        }
    }
}

#[test]
fn live_restarted_directory() {
    let exe = need_beanstalkd!();
    let tmp = TempDir::new("live-restart");
    let args = ["-s", "1024"];
    let mut srv = Beanstalkd::start(&exe, &tmp.0, &args);
    let mut c = srv.client();
    let a = c.put(1, 0, 60, b"first run, buried");
    c.ok(&format!("reserve-job {a}"), &format!("RESERVED {a} 17"));
    c.ok(&format!("bury {a} 3"), "BURIED");
    let b = c.put(2, 0, 60, b"first run, ready");
    srv.kill();
    // beanstalkd replays the directory (burying a again in memory) and carries on.
    let mut srv = Beanstalkd::start(&exe, &tmp.0, &args);
    let mut c = srv.client();
    let s = c.stats_job(a);
    assert_eq!(s["state"], "buried");
    let d = c.put(4, 0, 60, b"second run");
    assert!(d > b);
    c.ok(&format!("delete {b}"), "DELETED");
    srv.kill();

    let r = read_ok(&tmp.0);
    let ids: Vec<u64> = r.jobs.iter().map(|j| j.id).collect();
    assert_eq!(ids, [a, d]);
    assert_eq!(r.jobs[0].state, ImportedState::Buried);
    assert_eq!(r.jobs[0].buries, 1); // as journaled; beanstalkd's replay would say 2
    assert_eq!(r.max_id, d);
    assert!(r.warnings.is_empty(), "{:?}", r.warnings);
}
