//! stats, stats-job and stats-tube figures, drain mode, and timers that must not pile up.

use super::*;

// ----- stats --------------------------------------------------------------------

#[test]
fn stats_job_fields() {
    let mut st = store();
    let c = conn(&mut st);
    st.use_tube(c, b"jobs");
    st.watch(c, b"jobs");
    let id = put(&mut st, c, 7, 3, 10, S);
    let j = job(&st, id, 2 * S + S / 2);
    assert_eq!(j.id, id);
    assert_eq!(j.tube, b"jobs");
    assert_eq!(
        (j.state, j.pri, j.age, j.delay, j.ttr, j.time_left, j.file),
        ("delayed", 7, 1, 3, 10, 1, 0)
    );
    assert_eq!(
        (j.reserves, j.timeouts, j.releases, j.buries, j.kicks),
        (0, 0, 0, 0, 0)
    );

    tick(&mut st, 4 * S);
    let j = job(&st, id, 4 * S);
    assert_eq!((j.state, j.age, j.time_left), ("ready", 3, 0));

    assert_eq!(reserve_now(&mut st, c, 4 * S), id);
    assert_eq!(job(&st, id, 4 * S).time_left, 10);
    assert_eq!(job(&st, id, 4 * S + S / 2).time_left, 9);
    assert_eq!(job(&st, id, 4 * S).reserves, 1);

    assert!(st.release(c, id, 8, 0, 5 * S));
    let j = job(&st, id, 5 * S);
    assert_eq!((j.state, j.pri, j.releases, j.delay), ("ready", 8, 1, 0));

    assert_eq!(reserve_now(&mut st, c, 5 * S), id);
    assert!(st.bury(c, id, 9));
    let j = job(&st, id, 5 * S);
    assert_eq!((j.state, j.pri, j.buries, j.time_left), ("buried", 9, 1, 0));

    assert_eq!(st.kick(c, 1, 6 * S), 1);
    assert_eq!(job(&st, id, 6 * S).kicks, 1);
    assert_eq!(reserve_now(&mut st, c, 6 * S), id);
    tick(&mut st, 16 * S);
    let j = job(&st, id, 16 * S);
    assert_eq!(
        (j.state, j.timeouts, j.reserves, j.age),
        ("ready", 1, 3, 15)
    );
    assert!(st.stats_job(999, 0).is_none());
}

#[test]
fn stats_tube_fields() {
    let mut st = store();
    let c1 = conn(&mut st);
    let c2 = conn(&mut st);
    let c3 = conn(&mut st);
    st.use_tube(c1, b"t");
    st.use_tube(c2, b"t");
    st.watch(c2, b"t");
    st.watch(c3, b"t");
    st.ignore(c3, b"default").unwrap();
    let urgent = put(&mut st, c1, 0, 0, 60, 0);
    let _normal = put(&mut st, c1, 1024, 0, 60, 0);
    let reserved = put(&mut st, c1, 1023, 0, 60, 0);
    let buried = put(&mut st, c1, 0, 0, 60, 0);
    let _delayed = put(&mut st, c1, 0, 5, 60, 0);
    let deleted = put(&mut st, c1, 5000, 0, 60, 0);
    assert!(st.delete(c1, deleted));
    assert_eq!(
        st.reserve_job(c2, reserved, 0).map(|(i, _)| i),
        Some(reserved)
    );
    assert_eq!(st.reserve_job(c2, buried, 0).map(|(i, _)| i), Some(buried));
    assert!(st.bury(c2, buried, 0));
    assert!(st.pause_tube(b"t", 30, 0));
    reserve_waits(&mut st, c3, None, 0);

    let t = tube(&st, "t", 10 * S + 1);
    assert_eq!(t.name, b"t");
    assert_eq!(
        (t.urgent, t.ready, t.reserved, t.delayed, t.buried),
        (1, 2, 1, 1, 1)
    );
    assert_eq!(t.total_jobs, 6);
    assert_eq!((t.using, t.watching, t.waiting), (2, 2, 1));
    assert_eq!(
        (t.cmd_delete, t.cmd_pause_tube, t.pause, t.pause_time_left),
        (1, 1, 30, 19)
    );
    let d = tube(&st, "default", 0);
    assert_eq!(
        (d.using, d.watching, d.waiting, d.total_jobs, d.ready),
        (1, 2, 0, 0, 0)
    );
    assert!(st.stats_tube(b"nope", 0).is_none());
    // Urgent is about ready jobs only: reserving the urgent one drops the count.
    assert_eq!(st.reserve_job(c2, urgent, 0).map(|(i, _)| i), Some(urgent));
    assert_eq!(tube(&st, "t", 0).urgent, 0);
}

#[test]
fn stats_counts() {
    let mut st = store();
    let s = st.stats();
    assert_eq!(
        (
            s.current_tubes,
            s.current_connections,
            s.total_connections,
            s.max_job_size
        ),
        (1, 0, 0, 65535)
    );
    let c1 = conn(&mut st);
    let c2 = conn(&mut st);
    let c3 = conn(&mut st);
    put(&mut st, c1, 0, 0, 60, 0);
    put(&mut st, c1, 2000, 0, 60, 0);
    put(&mut st, c1, 5, 0, 60, 0);
    put(&mut st, c1, 5, 10, 60, 0);
    let b = put(&mut st, c1, 1, 0, 60, 0);
    assert_eq!(st.reserve_job(c2, b, 0).map(|(i, _)| i), Some(b));
    assert!(st.bury(c2, b, 1));
    let r = reserve_now(&mut st, c2, 0);
    st.watch(c3, b"empty");
    st.ignore(c3, b"default").unwrap();
    reserve_waits(&mut st, c3, None, 0);
    st.count(Op::Put);
    st.count(Op::Put);
    st.count(Op::StatsJob);

    let s = st.stats();
    assert_eq!(
        (s.urgent, s.ready, s.reserved, s.delayed, s.buried),
        (1, 2, 1, 1, 1)
    );
    assert_eq!((s.total_jobs, s.job_timeouts), (5, 0));
    assert_eq!(
        (s.current_tubes, s.current_connections, s.total_connections),
        (2, 3, 3)
    );
    assert_eq!(
        (s.current_producers, s.current_workers, s.current_waiting),
        (1, 2, 1)
    );
    assert_eq!(
        (
            s.ops[Op::Put.index()],
            s.ops[Op::StatsJob.index()],
            s.ops[Op::Reserve.index()]
        ),
        (2, 1, 0)
    );
    assert!(!s.draining);

    st.disconnect(c2, 0);
    st.disconnect(c3, 0);
    ok(&st);
    let s = st.stats();
    assert_eq!(state(&st, r, 0), "ready");
    assert_eq!((s.urgent, s.ready, s.reserved), (2, 3, 0));
    assert_eq!(
        (
            s.current_connections,
            s.total_connections,
            s.current_workers,
            s.current_waiting
        ),
        (1, 3, 0, 0)
    );
    assert_eq!((s.current_producers, s.current_tubes), (1, 1));
    st.disconnect(c1, 0);
    assert_eq!(st.stats().current_producers, 0);
}

#[test]
fn drain_mode_refuses_puts() {
    let mut st = store();
    let c = conn(&mut st);
    assert!(!st.draining());
    st.set_draining(true);
    assert!(st.draining());
    assert!(st.stats().draining);
    let id = st.begin_put(c);
    assert_eq!(id, 1);
    assert_eq!(
        st.put(c, id, 0, 0, 60, body_of(id), 0),
        Err(PutRefused::Draining)
    );
    ok(&st);
    assert_eq!(st.peek(id), None);
    assert_eq!(st.stats().total_jobs, 0);
    assert_eq!(st.stats().ready, 0);
    assert_eq!(tube(&st, "default", 0).total_jobs, 0);
    st.set_draining(false);
    assert_eq!(put(&mut st, c, 0, 0, 60, 0), 2);
}

#[test]
fn ids_are_taken_by_begin_put_even_without_a_put() {
    let mut st = store();
    let c = conn(&mut st);
    assert_eq!(st.begin_put(c), 1);
    assert_eq!(st.begin_put(c), 2);
    assert_eq!(put(&mut st, c, 0, 0, 60, 0), 3);
    assert_eq!(st.peek(1), None);
    assert_eq!(st.peek(2), None);
    assert_eq!(st.peek(3), Some((3, body_of(3))));
    assert_eq!(st.alloc_id(), 4);
    assert_eq!(put(&mut st, c, 0, 0, 60, 0), 5);
    assert_eq!(st.stats().current_producers, 1);
}

#[test]
fn stale_timers_do_not_pile_up_after_deletes() {
    let mut st = store();
    let c = conn(&mut st);
    let delayed: Vec<u64> = (0..300).map(|_| put(&mut st, c, 0, 100, 60, 0)).collect();
    for id in delayed {
        assert!(st.delete(c, id));
        ok(&st);
    }
    let ready: Vec<u64> = (0..300).map(|_| put(&mut st, c, 0, 0, 60, 0)).collect();
    for &id in &ready {
        assert_eq!(reserve_now(&mut st, c, 0), id);
    }
    for id in ready {
        assert!(st.delete(c, id));
        ok(&st);
    }
}

#[test]
fn released_jobs_ttr_timers_are_pruned() {
    // A released job keeps its last TTR deadline in its record; its timer entry is
    // stale all the same. Kept by compaction, 1,000 such entries made every later
    // command rebuild the heap without removing anything (a reserve cost O(n log n)).
    let mut st = store();
    let c = conn(&mut st);
    let ids: Vec<u64> = (0..1000).map(|_| put(&mut st, c, 0, 0, 60, 0)).collect();
    for &id in &ids {
        assert_eq!(reserve_now(&mut st, c, 0), id);
    }
    for &id in &ids {
        assert!(st.release(c, id, 0, 0, S));
    }
    for &id in &ids[..10] {
        assert_eq!(reserve_now(&mut st, c, 2 * S), id);
    }
    ok(&st);
    assert!(st.timers.len() <= 2 * 10 + 64, "{} timers", st.timers.len());
}

#[test]
fn stale_timers_do_not_pile_up_after_tubes_go() {
    let mut st = store();
    let c = conn(&mut st);
    let names: Vec<String> = (0..300).map(|i| format!("t{i}")).collect();
    for name in &names {
        st.watch(c, name.as_bytes());
        assert!(st.pause_tube(name.as_bytes(), 100, 0));
    }
    ok(&st);
    st.disconnect(c, 0);
    ok(&st);
    assert_eq!(tubes(&st), vec!["default"]);
}

#[test]
fn repeated_deadlines_at_one_instant_do_not_pile_up_timers() {
    // Commands can share a clock reading; re-arming the same deadline again and
    // again must not grow the timer heap without bound.
    let mut st = store();
    let c = conn(&mut st);
    let id = put(&mut st, c, 0, 0, 60, 0);
    assert_eq!(reserve_now(&mut st, c, 0), id);
    for _ in 0..500 {
        assert!(st.touch(c, id, 0));
        ok(&st);
    }
    for _ in 0..500 {
        assert!(st.release(c, id, 0, 5, 0));
        assert_eq!(st.reserve_job(c, id, 0).map(|(i, _)| i), Some(id));
        ok(&st);
    }
    tick(&mut st, 60 * S);
    assert_eq!(st.stats().job_timeouts, 1);
    assert_eq!(job(&st, id, 60 * S).timeouts, 1);
}

// ----- admin calls --------------------------------------------------------------

#[test]
fn stats_tubes_agrees_with_stats_tube_for_every_tube() {
    let mut st = store();
    let wide = conn(&mut st);
    for i in 0..12 {
        st.watch(wide, format!("t{i}").as_bytes());
    }
    let narrow = conn(&mut st);
    st.watch(narrow, b"t3");
    st.use_tube(narrow, b"t3");
    put(&mut st, narrow, 1, 0, 10, S);
    put(&mut st, narrow, 2000, 5, 10, S);
    assert!(matches!(st.reserve(wide, None, S), ReserveOutcome::Now(_)));
    assert!(matches!(st.reserve(wide, None, S), ReserveOutcome::Waiting));
    let all = st.stats_tubes(2 * S);
    let names: Vec<Vec<u8>> = st.list_tubes().iter().map(|n| n.to_vec()).collect();
    assert_eq!(all.len(), names.len());
    for (t, name) in all.iter().zip(&names) {
        let one = st.stats_tube(name, 2 * S).unwrap();
        assert_eq!(format!("{t:?}"), format!("{one:?}"));
    }
    assert!(all.iter().any(|t| t.waiting == 1));
}

#[test]
fn kick_tube_kicks_in_the_named_tube() {
    let mut st = store();
    let c = conn(&mut st);
    st.use_tube(c, b"late");
    put(&mut st, c, 1, 5, 10, S);
    put(&mut st, c, 1, 5, 10, S);
    st.use_tube(c, b"default");
    assert_eq!(st.kick_tube(b"late", 1, 2 * S), Some(1));
    assert_eq!(st.stats_tube(b"late", 2 * S).unwrap().ready, 1);
    assert_eq!(st.kick_tube(b"nope", 1, 2 * S), None);
    ok(&st);
}
