//! The reference model and the harness that runs each step on it and on the store.

use super::*;

mod apply;
mod check;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum MState {
    Ready,
    Delayed {
        until: u64,
    },
    /// `seq` orders the buried list.
    Buried {
        seq: u64,
    },
    Reserved {
        by: usize,
        deadline: u64,
    },
}

impl MState {
    fn name(self) -> &'static str {
        match self {
            MState::Ready => "ready",
            MState::Delayed { .. } => "delayed",
            MState::Buried { .. } => "buried",
            MState::Reserved { .. } => "reserved",
        }
    }
}

#[derive(Debug, Clone)]
struct MJob {
    tube: &'static str,
    pri: u32,
    delay: u32,
    ttr: u32,
    created: u64,
    state: MState,
    reserves: u32,
    timeouts: u32,
    releases: u32,
    buries: u32,
    kicks: u32,
}

#[derive(Debug)]
struct MConn {
    id: ConnId,
    wake: Arc<Counter>,
    /// Deliveries taken from the mailbox: the wakeup count must match.
    delivered: usize,
    use_tube: &'static str,
    watch: Vec<&'static str>,
    /// (order among waiters, timeout_at) while blocked in reserve.
    wait: Option<(u64, Option<u64>)>,
    producer: bool,
    worker: bool,
}

#[derive(Debug, Default, Clone, Copy)]
struct MTube {
    total_jobs: u64,
    cmd_delete: u64,
    pause_ct: u64,
    /// (length, until) of the last pause.
    pause: Option<(u64, u64)>,
}

/// How deliveries found in mailboxes after a step are judged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Expect {
    /// Exactly this (connection, job) or nothing.
    Exactly(Option<(usize, u64)>),
    /// Any job that is ready in a watched tube (several jobs became ready).
    AnyJob,
    /// A tick: jobs, TIMED_OUT after the timeout, DEADLINE_SOON in the margin
    /// (`soon[c]` says whether c's margin had started at the tick's time).
    Tick { soon: [bool; CONNS] },
}

/// The store and a reference model of it, compared after every step.
pub(super) struct Harness {
    st: Store,
    now: u64,
    jobs: BTreeMap<u64, MJob>,
    /// Ids of deleted jobs (and ones never stored), which must stay unknown.
    gone: Vec<u64>,
    conns: Vec<MConn>,
    tubes: BTreeMap<&'static str, MTube>,
    last_id: u64,
    seq: u64,
    job_timeouts: u64,
    total_jobs: u64,
    total_connections: u64,
}

impl Harness {
    pub(super) fn new() -> Harness {
        let mut h = Harness {
            st: store(),
            now: 0,
            jobs: BTreeMap::new(),
            gone: Vec::new(),
            conns: Vec::new(),
            tubes: BTreeMap::new(),
            last_id: 0,
            seq: 0,
            job_timeouts: 0,
            total_jobs: 0,
            total_connections: 0,
        };
        h.tubes.insert("default", MTube::default());
        for _ in 0..CONNS {
            let c = h.new_conn();
            h.conns.push(c);
        }
        h
    }

    fn new_conn(&mut self) -> MConn {
        let wake = Arc::new(Counter::default());
        let id = self.st.connect(wake.clone());
        self.total_connections += 1;
        MConn {
            id,
            wake,
            delivered: 0,
            use_tube: "default",
            watch: vec!["default"],
            wait: None,
            producer: false,
            worker: false,
        }
    }

    fn next_seq(&mut self) -> u64 {
        self.seq += 1;
        self.seq
    }

    fn held(&self, c: usize) -> Vec<u64> {
        self.jobs
            .iter()
            .filter(|(_, j)| matches!(j.state, MState::Reserved { by, .. } if by == c))
            .map(|(&id, _)| id)
            .collect()
    }

    /// A job id to act on: often one `c` holds, else any live one, a deleted one
    /// or one never used.
    fn pick(&self, c: usize, pick: usize) -> u64 {
        let mut ids = self.held(c);
        ids.extend(self.jobs.keys().copied());
        ids.push(self.last_id + 1);
        if let Some(&g) = self.gone.last() {
            ids.push(g);
        }
        ids[pick % ids.len()]
    }

    fn paused(&self, tube: &str) -> bool {
        self.tubes
            .get(tube)
            .and_then(|t| t.pause)
            .is_some_and(|(_, until)| until > self.now)
    }

    fn soon(&self, c: usize, now: u64) -> bool {
        self.jobs.values().any(|j| {
            matches!(j.state, MState::Reserved { by, deadline } if by == c && now >= deadline.saturating_sub(S))
        })
    }

    fn ready_in(&self, tube: &str) -> impl Iterator<Item = (u32, u64)> + '_ {
        let tube = tube.to_owned();
        self.jobs
            .iter()
            .filter(move |(_, j)| j.state == MState::Ready && j.tube == tube)
            .map(|(&id, j)| (j.pri, id))
    }

    /// The longest-waiting connection watching `tube`, if the tube is not paused.
    fn first_waiter(&self, tube: &str) -> Option<usize> {
        if self.paused(tube) {
            return None;
        }
        self.conns
            .iter()
            .enumerate()
            .filter(|(_, c)| c.watch.contains(&tube))
            .filter_map(|(i, c)| c.wait.map(|(order, _)| (order, i)))
            .min()
            .map(|(_, i)| i)
    }

    fn reserve_in_model(&mut self, c: usize, id: u64) {
        let now = self.now;
        let job = self.jobs.get_mut(&id).unwrap();
        job.state = MState::Reserved {
            by: c,
            deadline: now + u64::from(job.ttr) * S,
        };
        job.reserves += 1;
    }

    fn alive_tubes(&self) -> BTreeSet<&'static str> {
        let mut alive: BTreeSet<&'static str> = BTreeSet::from(["default"]);
        for c in &self.conns {
            alive.insert(c.use_tube);
            alive.extend(c.watch.iter().copied());
        }
        alive.extend(self.jobs.values().map(|j| j.tube));
        alive
    }

    /// Forget the stats of tubes that were dropped; start those that appeared.
    fn sync_tubes(&mut self) {
        let alive = self.alive_tubes();
        self.tubes.retain(|name, _| alive.contains(name));
        for name in alive {
            self.tubes.entry(name).or_default();
        }
    }

    /// Take every mailbox and judge what was delivered; then the wakeups.
    fn drain(&mut self, expect: Expect) {
        let mut seen = Vec::new();
        for c in 0..CONNS {
            let d = self.st.take_delivery(self.conns[c].id);
            let Some((_, timeout_at)) = self.conns[c].wait else {
                assert_eq!(d, None, "conn {c} was not waiting");
                continue;
            };
            let Some(d) = d else { continue };
            self.conns[c].wait = None;
            self.conns[c].delivered += 1;
            match d {
                Delivery::Reserved { id, body } => {
                    assert_eq!(body, body_of(id));
                    let job = self
                        .jobs
                        .get(&id)
                        .unwrap_or_else(|| panic!("delivered unknown job {id}"));
                    assert_eq!(
                        job.state,
                        MState::Ready,
                        "job {id} delivered to conn {c} but not free"
                    );
                    assert!(
                        self.conns[c].watch.contains(&job.tube),
                        "job {id}: tube not watched by {c}"
                    );
                    assert!(
                        !self.paused(job.tube),
                        "job {id} delivered from a paused tube"
                    );
                    self.reserve_in_model(c, id);
                    seen.push((c, id));
                }
                Delivery::DeadlineSoon => {
                    let Expect::Tick { soon } = expect else {
                        panic!("DEADLINE_SOON outside a tick")
                    };
                    assert!(soon[c], "conn {c}: DEADLINE_SOON outside the margin");
                }
                Delivery::TimedOut => {
                    assert!(
                        matches!(expect, Expect::Tick { .. }),
                        "TIMED_OUT outside a tick"
                    );
                    assert!(
                        timeout_at.is_some_and(|t| t <= self.now),
                        "conn {c}: TIMED_OUT too early"
                    );
                }
            }
        }
        if let Expect::Exactly(want) = expect {
            assert_eq!(
                seen,
                want.into_iter().collect::<Vec<_>>(),
                "wrong waiter served"
            );
        }
        let wakeups = self.st.take_wakeups();
        for w in &wakeups {
            w.wake();
        }
        for (c, conn) in self.conns.iter().enumerate() {
            assert_eq!(
                conn.wake.count(),
                conn.delivered,
                "conn {c}: wakeups vs deliveries"
            );
        }
    }
}
