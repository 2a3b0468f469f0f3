//! `beanpole-bench`: a load generator for any beanstalkd-protocol server.
//!
//! It runs one scenario against HOST:PORT, checks every reply and every reserved body, and
//! prints exactly one JSON line on stdout (diagnostics go to stderr). Exit status: 0 for a
//! clean run, 1 when any error was counted, 2 for a usage error or an unreachable server.

mod args;
mod body;
mod conn;
mod ctl;
mod hist;
mod pool;
mod sys;
mod tasks;
mod tls;

use std::fmt::Write as _;
use std::io::{BufRead, Write as _};
use std::net::{SocketAddr, ToSocketAddrs};
use std::process::ExitCode;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use args::{Opts, Scenario};
use ctl::{Ctl, Slots, TaskStats};
use hist::Hist;
use pool::{Job, Pool};
use tasks::{ConsumerCfg, Latency, ProducerCfg, Tubes};

/// Longest wait for every connection of a phase to be set up.
const SETUP_LIMIT: Duration = Duration::from_secs(60);
/// Longest wait for tasks to end once the run is stopping.
const STOP_LIMIT: Duration = Duration::from_secs(10);
/// Connections per task in the idle scenario.
const IDLE_PER_TASK: usize = 250;

fn main() -> ExitCode {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let opts = match args::parse(&argv) {
        Ok(o) => o,
        Err(e) if e.is_empty() => {
            print!("{}", args::USAGE);
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("beanpole-bench: {e}\n\n{}", args::USAGE);
            return ExitCode::from(2);
        }
    };
    if let Some(ca) = &opts.tls_ca {
        if let Err(e) = tls::enable(ca) {
            eprintln!("beanpole-bench: {e}");
            return ExitCode::from(2);
        }
    }
    sys::raise_nofile();
    let addr = match (opts.host.as_str(), opts.port).to_socket_addrs() {
        Ok(mut it) => match it.next() {
            Some(a) => a,
            None => {
                eprintln!("beanpole-bench: {} has no address", opts.host);
                return ExitCode::from(2);
            }
        },
        Err(e) => {
            eprintln!("beanpole-bench: cannot resolve {}: {e}", opts.host);
            return ExitCode::from(2);
        }
    };
    // Fail fast (exit 2) when nothing listens there.
    if let Err(e) = std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(5)) {
        eprintln!("beanpole-bench: cannot connect to {addr}: {e}");
        return ExitCode::from(2);
    }
    let mut pool = match Pool::new(opts.runtime, opts.threads) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("beanpole-bench: cannot start the runtime: {e}");
            return ExitCode::from(2);
        }
    };
    let code = run(&mut pool, opts, addr);
    pool.shutdown();
    code
}

/// What one phase measured.
struct Phase {
    stats: Vec<TaskStats>,
    t0: Instant,
    t_end: Instant,
    cpu_us: u64,
    server_cpu_us: Option<u64>,
}

/// Spawn `jobs`, wait until all are set up, start them together, and collect their stats
/// while watching for stalls and the time limit.
fn run_phase(
    pool: &mut Pool,
    ctl: &Arc<Ctl>,
    rx: &mpsc::Receiver<TaskStats>,
    jobs: Vec<Job>,
    timed: bool,
) -> Phase {
    let n = jobs.len();
    let o = &ctl.opts;
    ctl.ready.store(0, Relaxed);
    ctl.start.send_replace(false);
    for j in jobs {
        pool.spawn(j);
    }
    let mut stats = Vec::with_capacity(n);
    let setup_start = Instant::now();
    while ctl.ready.load(Relaxed) + stats.len() < n {
        match rx.recv_timeout(Duration::from_millis(5)) {
            Ok(s) => stats.push(s),
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        }
        if setup_start.elapsed() > SETUP_LIMIT {
            ctl.fatal(format_args!(
                "only {} of {n} connections were set up after {} s",
                ctl.ready.load(Relaxed),
                SETUP_LIMIT.as_secs()
            ));
            break;
        }
    }
    let server0 = o.server_pid.and_then(sys::proc_cpu_us);
    let cpu0 = sys::self_cpu_us();
    let t0 = Instant::now();
    ctl.started_ns.store(ctl.ns_of(t0), Relaxed);
    if let Some(d) = o.duration.filter(|_| timed) {
        let end = t0 + Duration::from_secs_f64(d);
        ctl.deadline_ns.store(ctl.ns_of(end), Relaxed);
    }
    ctl.start.send_replace(true);

    let signal =
        || ctl.progress.load(Relaxed) + ctl.produced.load(Relaxed) + ctl.delivered.load(Relaxed);
    let mut last = (signal(), Instant::now());
    let mut stopped_at: Option<Instant> = None;
    while stats.len() < n {
        match rx.recv_timeout(Duration::from_millis(20)) {
            Ok(s) => {
                stats.push(s);
                continue;
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        }
        let now = Instant::now();
        let p = signal();
        if p != last.0 {
            last = (p, now);
        } else if !ctl.stopping() && now - last.1 > Duration::from_secs_f64(o.stall) {
            ctl.fatal(format_args!(
                "stalled: no operation completed for {:.1} s ({} puts acknowledged, {} jobs \
                 reserved, {} of {n} connections still running)",
                o.stall,
                ctl.produced.load(Relaxed),
                ctl.delivered.load(Relaxed),
                n - stats.len()
            ));
        }
        if !ctl.stopping() && now - t0 > Duration::from_secs_f64(o.timeout) {
            ctl.fatal(format_args!("the run exceeded --timeout {} s", o.timeout));
        }
        if ctl.stopping() {
            let since = *stopped_at.get_or_insert(now);
            if now - since > STOP_LIMIT {
                ctl.error(format_args!(
                    "{} of {n} connections did not end within {} s of the stop",
                    n - stats.len(),
                    STOP_LIMIT.as_secs()
                ));
                break;
            }
        }
    }
    let t_end = Instant::now();
    let cpu1 = sys::self_cpu_us();
    let server1 = o.server_pid.and_then(sys::proc_cpu_us);
    Phase {
        stats,
        t0,
        t_end,
        cpu_us: cpu1.saturating_sub(cpu0),
        server_cpu_us: server0.zip(server1).map(|(a, b)| b.saturating_sub(a)),
    }
}

fn share(rate: Option<f64>, n: usize) -> Option<f64> {
    rate.map(|r| r / n as f64)
}

fn boxed(f: impl std::future::Future<Output = ()> + Send + 'static) -> Job {
    Box::pin(f)
}

fn run(pool: &mut Pool, opts: Opts, addr: SocketAddr) -> ExitCode {
    let sc = opts.scenario;
    let tracked = sc.is_flow() || sc == Scenario::ReserveDelete;
    let slots = tracked.then(|| Slots::new(opts.jobs));
    let (tx, rx) = mpsc::channel();
    let ctl = Arc::new(Ctl::new(opts.clone(), addr, slots, tx));
    if let Some(j) = opts.jobs {
        ctl.seq_limit.store(j, Relaxed);
    }
    let o = &opts;
    let mut jobs: Vec<Job> = Vec::new();
    let latency_kind;
    match sc {
        Scenario::Put => {
            latency_kind = "command";
            ctl.producers_alive.store(o.connections, Relaxed);
            for _ in 0..o.connections {
                let cfg = ProducerCfg {
                    measure: true,
                    tubes: Tubes::Default,
                    rate: share(o.rate, o.connections),
                    pipeline: o.pipeline,
                    window: 0,
                };
                jobs.push(boxed(tasks::producer(ctl.clone(), cfg)));
            }
        }
        Scenario::ReserveDelete => {
            latency_kind = "command";
            // Pre-fill (not measured), then drain with reserve + delete.
            let fillers = o.connections.clamp(1, 4);
            ctl.producers_alive.store(fillers, Relaxed);
            let fill: Vec<Job> = (0..fillers)
                .map(|_| {
                    let cfg = ProducerCfg {
                        measure: false,
                        tubes: Tubes::Default,
                        rate: None,
                        pipeline: 256,
                        window: 0,
                    };
                    boxed(tasks::producer(ctl.clone(), cfg))
                })
                .collect();
            run_phase(pool, &ctl, &rx, fill, false);
            if ctl.stopping() || ctl.errors.load(Relaxed) > 0 {
                return finish_failed(&ctl);
            }
            for _ in 0..o.connections {
                let cfg = ConsumerCfg {
                    latency: Latency::Command,
                    watch: 0,
                    blocking: false,
                    pipeline: o.pipeline,
                };
                jobs.push(boxed(tasks::consumer(ctl.clone(), cfg)));
            }
        }
        Scenario::Rt | Scenario::ManyTubes | Scenario::Delayed | Scenario::Big => {
            latency_kind = if sc == Scenario::Delayed {
                "lateness"
            } else {
                "end-to-end"
            };
            let many = sc == Scenario::ManyTubes;
            ctl.producers_alive.store(o.producers, Relaxed);
            for _ in 0..o.producers {
                let cfg = ProducerCfg {
                    measure: false,
                    tubes: if many {
                        Tubes::PerJob(o.tubes)
                    } else {
                        Tubes::Default
                    },
                    rate: share(o.rate, o.producers),
                    pipeline: o.pipeline,
                    window: o.window.unwrap_or(0),
                };
                jobs.push(boxed(tasks::producer(ctl.clone(), cfg)));
            }
            for _ in 0..o.consumers {
                let cfg = ConsumerCfg {
                    latency: if sc == Scenario::Delayed {
                        Latency::Lateness
                    } else {
                        Latency::EndToEnd
                    },
                    watch: if many { o.tubes } else { 0 },
                    blocking: true,
                    pipeline: o.pipeline,
                };
                jobs.push(boxed(tasks::consumer(ctl.clone(), cfg)));
            }
        }
        Scenario::Storm => {
            latency_kind = "connection";
            for _ in 0..o.connections {
                jobs.push(boxed(tasks::storm(
                    ctl.clone(),
                    share(o.rate, o.connections),
                )));
            }
        }
        Scenario::Idle => {
            latency_kind = "connection";
            let mut left = o.connections;
            while left > 0 {
                let k = left.min(IDLE_PER_TASK);
                left -= k;
                jobs.push(boxed(tasks::idle(ctl.clone(), k)));
            }
        }
    }
    let phase = run_phase(pool, &ctl, &rx, jobs, true);
    let stopped_early = ctl.stopping();
    if !stopped_early && (sc.is_flow() || o.duration.is_none()) {
        // Every job put must have been reserved (flows, also after a --duration: they
        // drain) or drained (reserve-delete with a job count).
        let produced = ctl.produced.load(Relaxed);
        let delivered = ctl.delivered.load(Relaxed);
        if tracked && delivered != produced {
            ctl.error(format_args!(
                "{produced} puts were acknowledged but {delivered} jobs were reserved"
            ));
        }
    }
    let line = result_line(&ctl, &phase, latency_kind);
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
    drop(out);
    if sc == Scenario::Idle {
        hold(o.hold);
    }
    ctl.stop.store(true, Relaxed);
    if ctl.errors.load(Relaxed) > 0 {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}

fn finish_failed(ctl: &Ctl) -> ExitCode {
    let phase = Phase {
        stats: Vec::new(),
        t0: Instant::now(),
        t_end: Instant::now(),
        cpu_us: 0,
        server_cpu_us: None,
    };
    println!("{}", result_line(ctl, &phase, "command"));
    ExitCode::from(1)
}

/// Idle: keep the connections until stdin reaches end of file or `secs` pass.
fn hold(secs: f64) {
    let (tx, rx) = mpsc::channel::<()>();
    std::thread::spawn(move || {
        let mut line = String::new();
        let stdin = std::io::stdin();
        let mut lock = stdin.lock();
        while matches!(lock.read_line(&mut line), Ok(n) if n > 0) {
            line.clear();
        }
        let _ = tx.send(());
    });
    let _ = rx.recv_timeout(Duration::from_secs_f64(secs));
}

fn fmt_f(v: f64) -> String {
    if v.is_finite() {
        format!("{v:.3}")
    } else {
        "null".into()
    }
}

fn result_line(ctl: &Ctl, phase: &Phase, latency_kind: &str) -> String {
    let o = &ctl.opts;
    let mut hist = Hist::new();
    let mut ops = 0u64;
    let mut commands = 0u64;
    let mut last: Option<Instant> = None;
    for s in &phase.stats {
        ops += s.ops;
        commands += s.commands;
        if let Some(h) = &s.hist {
            hist.merge(h);
        }
        if let Some(t) = s.last_op {
            last = Some(last.map_or(t, |l| l.max(t)));
        }
    }
    let end = last.unwrap_or(phase.t_end).max(phase.t0);
    let seconds = (end - phase.t0).as_secs_f64();
    let per_op = |us: u64| {
        if ops == 0 {
            f64::NAN
        } else {
            us as f64 / ops as f64
        }
    };
    let mut s = String::with_capacity(1024);
    let _ = write!(
        s,
        "{{\"scenario\":\"{}\",\"server\":\"{}\",\"params\":{{",
        o.scenario.name(),
        ctl.addr
    );
    o.json_params(&mut s);
    let q = |x: f64| fmt_f(hist.quantile(x) / 1000.0);
    let _ = write!(
        s,
        "}},\"ops\":{ops},\"seconds\":{},\"ops_per_s\":{},\"latency\":\"{latency_kind}\",\
         \"p50_us\":{},\"p90_us\":{},\"p99_us\":{},\"p999_us\":{},\"max_us\":{},\
         \"mean_us\":{},\"samples\":{},\"commands\":{commands},\"puts\":{},\"reserved\":{},\
         \"errors\":{},\"client_cpu_us_per_op\":{},\"server_cpu_us_per_op\":{},\
         \"server_cpu_s\":{}}}",
        fmt_f(seconds),
        fmt_f(if seconds > 0.0 {
            ops as f64 / seconds
        } else {
            0.0
        }),
        q(0.5),
        q(0.9),
        q(0.99),
        q(0.999),
        fmt_f(hist.max() as f64 / 1000.0),
        fmt_f(hist.mean() / 1000.0),
        hist.count(),
        ctl.produced.load(Relaxed),
        ctl.delivered.load(Relaxed),
        ctl.errors.load(Relaxed),
        fmt_f(per_op(phase.cpu_us)),
        phase
            .server_cpu_us
            .map_or("null".into(), |us| fmt_f(per_op(us))),
        phase
            .server_cpu_us
            .map_or("null".into(), |us| fmt_f(us as f64 / 1e6)),
    );
    s
}
