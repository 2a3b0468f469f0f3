//! The connection tasks: producer, consumer, storm loop, idle holder.
//!
//! Each task sets up its connection, reports ready, waits for the common start, runs
//! batches of `--pipeline` commands (one write, then one reply per command), and hands its
//! counters to the main thread. Any reply that is not the one expected for its command is
//! an error; a reply that leaves the connection's state unknown also stops the run.

use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::body;
use crate::conn::{push_u64, Bufs, Cancel, Conn, Fail, Kind, Reply, POLL};
use crate::ctl::{Ctl, TaskStats, UntilDelivered, UntilStop};

/// Which tube a producer puts into.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tubes {
    /// The default tube (no `use`).
    Default,
    /// `use t<seq % k>` before every put (also for k = 1, so 1 and k tubes send the same
    /// number of commands).
    PerJob(usize),
}

/// What a consumer's latency samples measure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Latency {
    /// Each command's round trip.
    Command,
    /// Put sent (time in the body) to RESERVED received.
    EndToEnd,
    /// RESERVED received minus the job's due time (send time + delay).
    Lateness,
}

#[derive(Debug, Clone, Copy)]
pub struct ProducerCfg {
    /// Count puts as the run's operations and record their latency.
    pub measure: bool,
    pub tubes: Tubes,
    /// This producer's share of `--rate` (puts per second).
    pub rate: Option<f64>,
    pub pipeline: usize,
    /// Most jobs put and not yet reserved (0: no limit).
    pub window: u64,
}

#[derive(Debug, Clone, Copy)]
pub struct ConsumerCfg {
    pub latency: Latency,
    /// Watch `t0..t<k-1>` and ignore `default` (0: stay on default).
    pub watch: usize,
    /// `reserve` (blocking; flow scenarios) or `reserve-with-timeout 0` (drain a pre-fill).
    pub blocking: bool,
    pub pipeline: usize,
}

fn push_tube(out: &mut Vec<u8>, k: usize) {
    out.push(b't');
    push_u64(out, k as u64);
}

fn push_put(out: &mut Vec<u8>, ctl: &Ctl, seq: u64, ts: u64) {
    let o = &ctl.opts;
    out.extend_from_slice(b"put ");
    push_u64(out, u64::from(o.pri));
    out.push(b' ');
    push_u64(out, u64::from(o.delay));
    out.push(b' ');
    push_u64(out, u64::from(o.ttr));
    out.push(b' ');
    push_u64(out, o.body_size as u64);
    out.extend_from_slice(b"\r\n");
    body::write(out, seq, ts, o.body_size, &ctl.pad);
    out.extend_from_slice(b"\r\n");
}

fn unexpected(conn: &Conn, what: &str, r: &Reply) -> Fail {
    Fail::Protocol(format!("{what}: unexpected reply {}", conn.describe(r)))
}

/// Check an INSERTED reply: ids increase on a connection, and the job record agrees.
fn check_inserted(
    ctl: &Ctl,
    conn: &Conn,
    r: &Reply,
    seq: u64,
    last_id: &mut u64,
) -> Result<(), Fail> {
    if r.kind == Kind::Other && conn.bytes(&r.arg) == b"JOB_TOO_BIG" {
        return Err(Fail::Protocol(
            "put: JOB_TOO_BIG (raise the server's max job size, e.g. -z)".into(),
        ));
    }
    if r.kind != Kind::Inserted {
        return Err(unexpected(conn, "put", r));
    }
    if r.num <= *last_id {
        ctl.error(format_args!(
            "put: INSERTED {} after INSERTED {} on the same connection (ids must increase)",
            r.num, last_id
        ));
    }
    *last_id = r.num;
    if let Some(slots) = &ctl.slots {
        if let Err(e) = slots.inserted(seq, r.num) {
            ctl.error(e);
        }
    }
    Ok(())
}

/// Sleep until this batch's turn when an open-loop rate is set; the batch's nominal send
/// time (latency is measured from it, so a late server is not hidden by a late client).
async fn pace(ctl: &Ctl, rate: Option<f64>, done: u64) -> Instant {
    let now = Instant::now();
    let Some(rate) = rate else {
        return now;
    };
    let start = ctl.instant_of(ctl.started_ns.load(Relaxed));
    let due = start + Duration::from_secs_f64(done as f64 / rate);
    if due > now {
        tokio::time::sleep_until(due.into()).await;
    }
    due
}

fn report(ctl: &Ctl, role: &str, e: &Fail) {
    match e {
        Fail::Stopped => {}
        e => ctl.fatal(format_args!("{role}: {e}")),
    }
}

pub async fn producer(ctl: Arc<Ctl>, cfg: ProducerCfg) {
    let mut stats = TaskStats::new(cfg.measure);
    let res = producer_run(&ctl, cfg, &mut stats).await;
    if let Err(e) = res {
        report(&ctl, "producer", &e);
    }
    ctl.producers_alive.fetch_sub(1, Relaxed);
    ctl.finish(stats);
}

async fn producer_run(ctl: &Ctl, cfg: ProducerCfg, stats: &mut TaskStats) -> Result<(), Fail> {
    let o = &ctl.opts;
    let cancel = UntilStop(ctl);
    let per = o.body_size + 64 + if cfg.tubes == Tubes::Default { 0 } else { 16 };
    let conn = Conn::connect(ctl.addr, Bufs::new(16 * 1024, cfg.pipeline * per)).await;
    let mut conn = conn?;
    if !ctl.ready_and_wait().await {
        return Ok(());
    }
    let mut seqs: Vec<u64> = Vec::with_capacity(cfg.pipeline);
    let mut name: Vec<u8> = Vec::with_capacity(24);
    let mut last_id = 0u64;
    let mut sent = 0u64;
    loop {
        ctl.window_space(cfg.window, cfg.pipeline).await;
        let range = ctl.claim(cfg.pipeline);
        if range.is_empty() {
            return Ok(());
        }
        let t_send = pace(ctl, cfg.rate, sent).await;
        let ts = ctl.ns_of(t_send);
        seqs.clear();
        for seq in range {
            if let Tubes::PerJob(k) = cfg.tubes {
                conn.out.extend_from_slice(b"use ");
                push_tube(&mut conn.out, (seq % k as u64) as usize);
                conn.out.extend_from_slice(b"\r\n");
            }
            push_put(&mut conn.out, ctl, seq, ts);
            seqs.push(seq);
        }
        conn.flush(&cancel).await?;
        for &seq in &seqs {
            if let Tubes::PerJob(k) = cfg.tubes {
                let r = conn.reply(&cancel).await?;
                name.clear();
                push_tube(&mut name, (seq % k as u64) as usize);
                if r.kind != Kind::Using || conn.bytes(&r.arg) != name.as_slice() {
                    return Err(unexpected(&conn, "use", &r));
                }
                stats.commands += 1;
            }
            let r = conn.reply(&cancel).await?;
            check_inserted(ctl, &conn, &r, seq, &mut last_id)?;
            if let Some(h) = stats.hist.as_mut() {
                h.record(conn.recv_at.saturating_duration_since(t_send).as_nanos() as u64);
            }
        }
        let n = seqs.len() as u64;
        sent += n;
        stats.commands += n;
        ctl.produced.fetch_add(n, Relaxed);
        ctl.progress.fetch_add(n, Relaxed);
        if cfg.measure {
            stats.ops += n;
            stats.last_op = Some(conn.recv_at);
        }
    }
}

/// Cancellation for a consumer: flow consumers also stop once everything was delivered.
enum ConsumerCancel<'a> {
    Flow(UntilDelivered<'a>),
    Drain(UntilStop<'a>),
}

impl Cancel for ConsumerCancel<'_> {
    fn cancelled(&self) -> bool {
        match self {
            ConsumerCancel::Flow(c) => c.cancelled(),
            ConsumerCancel::Drain(c) => c.cancelled(),
        }
    }
}

pub async fn consumer(ctl: Arc<Ctl>, cfg: ConsumerCfg) {
    let mut stats = TaskStats::new(true);
    let mut held = None;
    if let Err(e) = consumer_run(&ctl, cfg, &mut stats, &mut held).await {
        report(&ctl, "consumer", &e);
    }
    ctl.finish(stats);
    // A flow consumer may end holding reserved jobs of an unfinished batch. Closing now
    // would make the server release them to consumers still waiting, which would then
    // see them a second time: keep the connection until the whole run has ended.
    if cfg.blocking {
        while !ctl.stopping() {
            tokio::time::sleep(POLL).await;
        }
    }
    drop(held);
}

async fn consumer_run(
    ctl: &Ctl,
    cfg: ConsumerCfg,
    stats: &mut TaskStats,
    held: &mut Option<Conn>,
) -> Result<(), Fail> {
    let o = &ctl.opts;
    let cancel = if cfg.blocking {
        ConsumerCancel::Flow(UntilDelivered(ctl))
    } else {
        ConsumerCancel::Drain(UntilStop(ctl))
    };
    let rcap = (o.body_size + 64) * cfg.pipeline.min(8) + 16 * 1024;
    let conn = Conn::connect(
        ctl.addr,
        Bufs::new(rcap, cfg.pipeline * 32 + cfg.watch * 16),
    )
    .await;
    let conn = held.insert(conn?);
    if cfg.watch > 0 {
        let setup = UntilStop(ctl);
        for k in 0..cfg.watch {
            conn.out.extend_from_slice(b"watch ");
            push_tube(&mut conn.out, k);
            conn.out.extend_from_slice(b"\r\n");
        }
        conn.out.extend_from_slice(b"ignore default\r\n");
        conn.flush(&setup).await?;
        for k in 0..=cfg.watch {
            let want = if k < cfg.watch {
                k as u64 + 2
            } else {
                cfg.watch as u64
            };
            let r = conn.reply(&setup).await?;
            if r.kind != Kind::Watching || r.num != want {
                return Err(unexpected(conn, "watch/ignore", &r));
            }
        }
    }
    if !ctl.ready_and_wait().await {
        return Ok(());
    }
    let reserve: &[u8] = if cfg.blocking {
        b"reserve\r\n"
    } else {
        b"reserve-with-timeout 0\r\n"
    };
    let delay_ns = u64::from(o.delay) * 1_000_000_000;
    let mut ids: Vec<u64> = Vec::with_capacity(cfg.pipeline);
    loop {
        if ctl.stopping()
            || (cfg.blocking && ctl.all_delivered())
            || (!cfg.blocking && ctl.past_deadline())
        {
            return Ok(());
        }
        for _ in 0..cfg.pipeline {
            conn.out.extend_from_slice(reserve);
        }
        let sent = Instant::now();
        conn.flush(&cancel).await?;
        ids.clear();
        let mut empty = false;
        for _ in 0..cfg.pipeline {
            let r = match conn.reply(&cancel).await {
                Ok(r) => r,
                // The run ended (or, for a flow consumer, every job was delivered) while
                // this batch waited. Its jobs are not deleted: the server would answer
                // the deletes only after the reserves still pending before them.
                Err(Fail::Stopped) => return Ok(()),
                Err(e) => return Err(e),
            };
            stats.commands += 1;
            match r.kind {
                Kind::Reserved => {}
                Kind::TimedOut if !cfg.blocking => {
                    empty = true;
                    continue;
                }
                _ => return Err(unexpected(conn, "reserve", &r)),
            }
            let id = r.num;
            ids.push(id);
            let recv_ns = ctl.ns_of(conn.recv_at);
            match body::check(conn.bytes(&r.arg), o.body_size, &ctl.pad) {
                Ok((seq, ts)) => {
                    if let Some(slots) = &ctl.slots {
                        if let Err(e) = slots.reserved(seq, id) {
                            ctl.error(e);
                        }
                    }
                    let h = stats.hist.as_mut();
                    match (cfg.latency, h) {
                        (Latency::EndToEnd, Some(h)) => h.record(recv_ns.saturating_sub(ts)),
                        (Latency::Lateness, Some(h)) => {
                            let due = ts + delay_ns;
                            if recv_ns < due {
                                ctl.error(format_args!(
                                    "job {id} was reserved {} µs before its delay ended",
                                    (due - recv_ns) / 1000
                                ));
                            }
                            h.record(recv_ns.saturating_sub(due));
                        }
                        (Latency::Command, Some(h)) => {
                            h.record(conn.recv_at.saturating_duration_since(sent).as_nanos() as u64);
                        }
                        _ => {}
                    }
                }
                Err(e) => ctl.error(format_args!("reserve: job {id}: {e}")),
            }
            ctl.delivered.fetch_add(1, Relaxed);
            if cfg.blocking {
                stats.ops += 1;
                stats.last_op = Some(conn.recv_at);
            }
        }
        ctl.reserved_some();
        if !ids.is_empty() {
            for &id in &ids {
                conn.out.extend_from_slice(b"delete ");
                push_u64(&mut conn.out, id);
                conn.out.extend_from_slice(b"\r\n");
            }
            let sent = Instant::now();
            // Deletes are always finished, even when the run is ending.
            let finish = UntilStop(ctl);
            conn.flush(&finish).await?;
            for &id in &ids {
                let r = conn.reply(&finish).await?;
                stats.commands += 1;
                if r.kind != Kind::Deleted {
                    return Err(unexpected(conn, &format!("delete {id}"), &r));
                }
                if !cfg.blocking {
                    if let (Latency::Command, Some(h)) = (cfg.latency, stats.hist.as_mut()) {
                        h.record(conn.recv_at.saturating_duration_since(sent).as_nanos() as u64);
                    }
                }
            }
            if !cfg.blocking {
                stats.ops += ids.len() as u64;
                stats.last_op = Some(conn.recv_at);
            }
            ctl.progress.fetch_add(ids.len() as u64, Relaxed);
        }
        if empty || (cfg.blocking && cancel.cancelled()) {
            return Ok(());
        }
    }
}

/// Storm: connect, use, put, quit, in a loop; an operation is one whole connection.
pub async fn storm(ctl: Arc<Ctl>, rate: Option<f64>) {
    let mut stats = TaskStats::new(true);
    if let Err(e) = storm_run(&ctl, rate, &mut stats).await {
        report(&ctl, "storm", &e);
    }
    ctl.finish(stats);
}

async fn storm_run(ctl: &Ctl, rate: Option<f64>, stats: &mut TaskStats) -> Result<(), Fail> {
    let o = &ctl.opts;
    let cancel = UntilStop(ctl);
    let mut bufs = Bufs::new(8 * 1024, o.body_size + 128);
    let mut last_id = 0u64;
    let mut done = 0u64;
    if !ctl.ready_and_wait().await {
        return Ok(());
    }
    loop {
        let range = ctl.claim(1);
        if range.is_empty() {
            return Ok(());
        }
        let seq = range.start;
        let t0 = pace(ctl, rate, done).await;
        let mut conn = Conn::connect(ctl.addr, bufs).await?;
        conn.out.extend_from_slice(b"use storm\r\n");
        if o.pipeline == 1 {
            conn.flush(&cancel).await?;
            let r = conn.reply(&cancel).await?;
            if r.kind != Kind::Using || conn.bytes(&r.arg) != b"storm" {
                return Err(unexpected(&conn, "use storm", &r));
            }
        }
        push_put(&mut conn.out, ctl, seq, ctl.ns_of(t0));
        if o.pipeline == 1 {
            conn.flush(&cancel).await?;
        } else {
            conn.out.extend_from_slice(b"quit\r\n");
            conn.flush(&cancel).await?;
            let r = conn.reply(&cancel).await?;
            if r.kind != Kind::Using || conn.bytes(&r.arg) != b"storm" {
                return Err(unexpected(&conn, "use storm", &r));
            }
        }
        let r = conn.reply(&cancel).await?;
        check_inserted(ctl, &conn, &r, seq, &mut last_id)?;
        if o.pipeline == 1 {
            conn.out.extend_from_slice(b"quit\r\n");
            conn.flush(&cancel).await?;
        }
        conn.expect_eof(&cancel).await?;
        let end = Instant::now();
        stats.commands += 3;
        stats.ops += 1;
        stats.last_op = Some(end);
        if let Some(h) = stats.hist.as_mut() {
            h.record(end.saturating_duration_since(t0).as_nanos() as u64);
        }
        done += 1;
        ctl.produced.fetch_add(1, Relaxed);
        ctl.progress.fetch_add(1, Relaxed);
        bufs = conn.into_bufs();
    }
}

/// Idle: open `count` connections (each checked with one round trip), report, and hold
/// them until the run stops.
pub async fn idle(ctl: Arc<Ctl>, count: usize) {
    let mut stats = TaskStats::new(true);
    let mut held = Vec::with_capacity(count);
    let res = idle_open(&ctl, count, &mut stats, &mut held).await;
    if let Err(e) = res {
        report(&ctl, "idle", &e);
    }
    ctl.finish(stats);
    while !ctl.stopping() {
        tokio::time::sleep(POLL).await;
    }
    drop(held);
}

async fn idle_open(
    ctl: &Ctl,
    count: usize,
    stats: &mut TaskStats,
    held: &mut Vec<crate::tls::Stream>,
) -> Result<(), Fail> {
    let cancel = UntilStop(ctl);
    let mut bufs = Bufs::new(8 * 1024, 64);
    if !ctl.ready_and_wait().await {
        return Ok(());
    }
    for _ in 0..count {
        let t0 = Instant::now();
        let mut conn = Conn::connect(ctl.addr, bufs).await?;
        conn.out.extend_from_slice(b"list-tube-used\r\n");
        conn.flush(&cancel).await?;
        let r = conn.reply(&cancel).await?;
        if r.kind != Kind::Using || conn.bytes(&r.arg) != b"default" {
            return Err(unexpected(&conn, "list-tube-used", &r));
        }
        let end = Instant::now();
        stats.ops += 1;
        stats.commands += 1;
        stats.last_op = Some(end);
        if let Some(h) = stats.hist.as_mut() {
            h.record(end.saturating_duration_since(t0).as_nanos() as u64);
        }
        ctl.produced.fetch_add(1, Relaxed);
        ctl.progress.fetch_add(1, Relaxed);
        let (stream, b) = conn.into_parts();
        held.push(stream);
        bufs = b;
    }
    Ok(())
}
