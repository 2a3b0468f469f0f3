//! One step, applied to the store and to the model.

use super::*;

impl Harness {
    pub(in crate::store::tests::model) fn apply(&mut self, step: &Step) {
        // A connection blocked in reserve sends nothing but can hang up.
        let blocked = |c: &usize| self.conns[*c].wait.is_some();
        let skip = match step {
            Step::Put { c, .. }
            | Step::BeginPutOnly { c }
            | Step::Reserve { c, .. }
            | Step::ReserveJob { c, .. }
            | Step::Delete { c, .. }
            | Step::Release { c, .. }
            | Step::Bury { c, .. }
            | Step::Touch { c, .. }
            | Step::Kick { c, .. }
            | Step::Use { c, .. }
            | Step::Watch { c, .. }
            | Step::Ignore { c, .. } => blocked(c),
            _ => false,
        };
        if skip {
            return;
        }
        let now = self.now;
        match *step {
            Step::Put { c, pri, delay, ttr } => {
                let conn = self.conns[c].id;
                let id = self.st.begin_put(conn);
                assert!(id > self.last_id, "ids must increase");
                self.last_id = id;
                self.conns[c].producer = true;
                assert_eq!(
                    self.st.put(conn, id, pri, delay, ttr, body_of(id), now),
                    Ok(id)
                );
                let tube = self.conns[c].use_tube;
                let state = if delay > 0 {
                    MState::Delayed {
                        until: now + u64::from(delay) * S,
                    }
                } else {
                    MState::Ready
                };
                self.jobs.insert(
                    id,
                    MJob {
                        tube,
                        pri,
                        delay,
                        ttr: ttr.max(1),
                        created: now,
                        state,
                        reserves: 0,
                        timeouts: 0,
                        releases: 0,
                        buries: 0,
                        kicks: 0,
                    },
                );
                self.total_jobs += 1;
                self.tubes.entry(tube).or_default().total_jobs += 1;
                let want = if delay == 0 {
                    self.first_waiter(tube).map(|w| (w, id))
                } else {
                    None
                };
                self.drain(Expect::Exactly(want));
            }
            Step::BeginPutOnly { c } => {
                let id = self.st.begin_put(self.conns[c].id);
                assert!(id > self.last_id, "ids must increase");
                self.last_id = id;
                self.gone.push(id);
                self.conns[c].producer = true;
            }
            Step::Reserve { c, timeout } => {
                let conn = self.conns[c].id;
                self.conns[c].worker = true;
                let watch = self.conns[c].watch.clone();
                let soon = self.soon(c, now);
                let any_ready = watch.iter().any(|t| self.ready_in(t).next().is_some());
                let best = watch
                    .iter()
                    .filter(|t| !self.paused(t))
                    .flat_map(|t| self.ready_in(t))
                    .min();
                let want = if soon && !any_ready {
                    ReserveOutcome::Now(Delivery::DeadlineSoon)
                } else if let Some((_, id)) = best {
                    ReserveOutcome::Now(Delivery::Reserved {
                        id,
                        body: body_of(id),
                    })
                } else if timeout == Some(0) {
                    ReserveOutcome::Now(if soon {
                        Delivery::DeadlineSoon
                    } else {
                        Delivery::TimedOut
                    })
                } else {
                    ReserveOutcome::Waiting
                };
                assert_eq!(self.st.reserve(conn, timeout, now), want);
                match want {
                    ReserveOutcome::Now(Delivery::Reserved { id, .. }) => {
                        self.reserve_in_model(c, id)
                    }
                    ReserveOutcome::Waiting => {
                        let order = self.next_seq();
                        self.conns[c].wait = Some((order, timeout.map(|t| now + u64::from(t) * S)));
                    }
                    ReserveOutcome::Now(_) => {}
                }
                self.drain(Expect::Exactly(None));
            }
            Step::ReserveJob { c, pick } => {
                let id = self.pick(c, pick);
                let free = self
                    .jobs
                    .get(&id)
                    .is_some_and(|j| !matches!(j.state, MState::Reserved { .. }));
                let got = self.st.reserve_job(self.conns[c].id, id, now);
                if free {
                    assert_eq!(got, Some((id, body_of(id))));
                    self.conns[c].worker = true;
                    self.reserve_in_model(c, id);
                } else {
                    assert_eq!(got, None, "reserve-job {id}");
                }
            }
            Step::Delete { c, pick } => {
                let id = self.pick(c, pick);
                let allowed = self
                    .jobs
                    .get(&id)
                    .is_some_and(|j| !matches!(j.state, MState::Reserved { by, .. } if by != c));
                assert_eq!(
                    self.st.delete(self.conns[c].id, id),
                    allowed,
                    "delete {id} by {c}"
                );
                if allowed {
                    let job = self.jobs.remove(&id).unwrap();
                    self.tubes.get_mut(job.tube).unwrap().cmd_delete += 1;
                    self.gone.push(id);
                }
            }
            Step::Release {
                c,
                pick,
                pri,
                delay,
            } => {
                let id = self.pick(c, pick);
                let mine = self.held(c).contains(&id);
                assert_eq!(
                    self.st.release(self.conns[c].id, id, pri, delay, now),
                    mine,
                    "release {id}"
                );
                if mine {
                    let job = self.jobs.get_mut(&id).unwrap();
                    job.pri = pri;
                    job.delay = delay;
                    job.releases += 1;
                    job.state = if delay > 0 {
                        MState::Delayed {
                            until: now + u64::from(delay) * S,
                        }
                    } else {
                        MState::Ready
                    };
                    let tube = job.tube;
                    let want = if delay == 0 {
                        self.first_waiter(tube).map(|w| (w, id))
                    } else {
                        None
                    };
                    self.drain(Expect::Exactly(want));
                }
            }
            Step::Bury { c, pick, pri } => {
                let id = self.pick(c, pick);
                let mine = self.held(c).contains(&id);
                assert_eq!(self.st.bury(self.conns[c].id, id, pri), mine, "bury {id}");
                if mine {
                    let seq = self.next_seq();
                    let job = self.jobs.get_mut(&id).unwrap();
                    job.pri = pri;
                    job.buries += 1;
                    job.state = MState::Buried { seq };
                }
            }
            Step::Touch { c, pick } => {
                let id = self.pick(c, pick);
                let mine = self.held(c).contains(&id);
                assert_eq!(self.st.touch(self.conns[c].id, id, now), mine, "touch {id}");
                if mine {
                    let job = self.jobs.get_mut(&id).unwrap();
                    job.state = MState::Reserved {
                        by: c,
                        deadline: now + u64::from(job.ttr) * S,
                    };
                }
            }
            Step::Kick { c, bound } => {
                let tube = self.conns[c].use_tube;
                let mut buried: Vec<(u64, u64)> = self
                    .jobs
                    .iter()
                    .filter(|(_, j)| j.tube == tube)
                    .filter_map(|(&id, j)| match j.state {
                        MState::Buried { seq } => Some((seq, id)),
                        _ => None,
                    })
                    .collect();
                let mut delayed: Vec<(u64, u64)> = self
                    .jobs
                    .iter()
                    .filter(|(_, j)| j.tube == tube)
                    .filter_map(|(&id, j)| match j.state {
                        MState::Delayed { until } => Some((until, id)),
                        _ => None,
                    })
                    .collect();
                buried.sort_unstable();
                delayed.sort_unstable();
                let from = if buried.is_empty() { delayed } else { buried };
                let kicked: Vec<u64> = from
                    .iter()
                    .take(bound as usize)
                    .map(|&(_, id)| id)
                    .collect();
                assert_eq!(
                    self.st.kick(self.conns[c].id, bound, now),
                    kicked.len() as u32,
                    "kick {bound}"
                );
                for id in kicked {
                    let job = self.jobs.get_mut(&id).unwrap();
                    job.kicks += 1;
                    job.state = MState::Ready;
                }
                self.drain(Expect::AnyJob);
            }
            Step::KickJob { pick } => {
                let id = self.pick(0, pick);
                let kickable = self.jobs.get(&id).is_some_and(|j| {
                    matches!(j.state, MState::Buried { .. } | MState::Delayed { .. })
                });
                assert_eq!(self.st.kick_job(id, now), kickable, "kick-job {id}");
                if kickable {
                    let job = self.jobs.get_mut(&id).unwrap();
                    job.kicks += 1;
                    job.state = MState::Ready;
                    let tube = job.tube;
                    let want = self.first_waiter(tube).map(|w| (w, id));
                    self.drain(Expect::Exactly(want));
                }
            }
            Step::Use { c, t } => {
                self.st.use_tube(self.conns[c].id, TUBES[t].as_bytes());
                self.conns[c].use_tube = TUBES[t];
            }
            Step::Watch { c, t } => {
                let n = self.st.watch(self.conns[c].id, TUBES[t].as_bytes());
                let watch = &mut self.conns[c].watch;
                if !watch.contains(&TUBES[t]) {
                    watch.push(TUBES[t]);
                }
                assert_eq!(n, watch.len());
            }
            Step::Ignore { c, t } => {
                let got = self.st.ignore(self.conns[c].id, TUBES[t].as_bytes());
                let watch = &mut self.conns[c].watch;
                let want = match watch.iter().position(|&w| w == TUBES[t]) {
                    Some(_) if watch.len() < 2 => Err(NotIgnored),
                    Some(i) => {
                        watch.swap_remove(i);
                        Ok(watch.len())
                    }
                    None => Ok(watch.len()),
                };
                assert_eq!(got, want);
            }
            Step::Pause { t, delay } => {
                let name = TUBES[t];
                let exists = self.tubes.contains_key(name);
                assert_eq!(self.st.pause_tube(name.as_bytes(), delay, now), exists);
                if exists {
                    let length = u64::from(delay) * S;
                    let tube = self.tubes.get_mut(name).unwrap();
                    tube.pause = (delay > 0).then_some((length, now + length));
                    tube.pause_ct += 1;
                    // A zero delay ends any pause at once: the tube's waiters are served.
                    self.drain(Expect::AnyJob);
                }
            }
            Step::Reconnect { c } => {
                let old = self.conns[c].id;
                self.conns[c].wait = None;
                for id in self.held(c) {
                    self.jobs.get_mut(&id).unwrap().state = MState::Ready;
                }
                self.conns[c].watch.clear();
                self.conns[c].use_tube = "default";
                self.st.disconnect(old, now);
                self.drain(Expect::AnyJob);
                self.sync_tubes();
                self.conns[c] = self.new_conn();
            }
            Step::Abandon { c } => {
                let got = self.st.abandon_wait(self.conns[c].id);
                if self.conns[c].wait.take().is_some() {
                    assert_eq!(got, Some(Delivery::TimedOut));
                } else {
                    assert_eq!(got, None);
                }
            }
            Step::Advance { ns } => {
                self.now += ns;
                let now = self.now;
                let soon: [bool; CONNS] =
                    std::array::from_fn(|c| self.conns[c].wait.is_some() && self.soon(c, now));
                self.st.tick(now);
                for job in self.jobs.values_mut() {
                    match job.state {
                        MState::Delayed { until } if until <= now => job.state = MState::Ready,
                        MState::Reserved { deadline, .. } if deadline <= now => {
                            job.state = MState::Ready;
                            job.timeouts += 1;
                            self.job_timeouts += 1;
                        }
                        _ => {}
                    }
                }
                self.drain(Expect::Tick { soon });
                // Whoever still waits has neither timed out nor entered the margin.
                for (c, conn) in self.conns.iter().enumerate() {
                    if let Some((_, timeout_at)) = conn.wait {
                        assert!(
                            !timeout_at.is_some_and(|t| t <= now),
                            "conn {c} should have timed out"
                        );
                        assert!(!self.soon(c, now), "conn {c} should have had DEADLINE_SOON");
                    }
                }
            }
        }
    }
}
