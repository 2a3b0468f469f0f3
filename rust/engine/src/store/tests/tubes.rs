//! Tubes made and dropped on demand, watch/ignore, and what a disconnect undoes.

use super::*;

// ----- tubes --------------------------------------------------------------------

#[test]
fn tubes_are_created_on_demand_and_dropped_when_unused() {
    let mut st = store();
    assert_eq!(tubes(&st), vec!["default"]);
    let c = conn(&mut st);
    assert_eq!(st.tube_used(c), b"default");
    assert_eq!(watched(&st, c), vec!["default"]);
    st.use_tube(c, b"a");
    assert_eq!(st.tube_used(c), b"a");
    assert_eq!(tubes(&st), vec!["default", "a"]);
    assert_eq!(st.watch(c, b"b"), 2);
    assert_eq!(st.watch(c, b"b"), 2);
    assert_eq!(tubes(&st), vec!["default", "a", "b"]);
    assert_eq!(st.stats().current_tubes, 3);
    st.use_tube(c, b"default");
    ok(&st);
    assert_eq!(tubes(&st), vec!["default", "b"]);
    // A job keeps its tube alive.
    st.use_tube(c, b"x");
    let id = put(&mut st, c, 0, 0, 60, 0);
    st.use_tube(c, b"default");
    assert_eq!(tubes(&st), vec!["default", "b", "x"]);
    assert_eq!(st.ignore(c, b"b"), Ok(1));
    assert_eq!(tubes(&st), vec!["default", "x"]);
    assert!(st.delete(c, id));
    ok(&st);
    assert_eq!(tubes(&st), vec!["default"]);
    assert_eq!(st.stats_tube(b"x", 0).map(|t| t.total_jobs), None);
    // default stays even when nothing refers to it.
    assert_eq!(st.watch(c, b"other"), 2);
    assert_eq!(st.ignore(c, b"default"), Ok(1));
    st.use_tube(c, b"other");
    assert_eq!(tubes(&st), vec!["default", "other"]);
    st.disconnect(c, 0);
    ok(&st);
    assert_eq!(tubes(&st), vec!["default"]);
    assert_eq!(st.stats().current_tubes, 1);
    // Stats of a tube start afresh when it is created again.
    let c = conn(&mut st);
    st.use_tube(c, b"x");
    assert_eq!(tube(&st, "x", 0).total_jobs, 0);
}

#[test]
fn list_tubes_after_a_drop_puts_the_last_tube_in_its_place() {
    let mut st = store();
    let c = conn(&mut st);
    for name in ["a", "b", "c", "d"] {
        st.watch(c, name.as_bytes());
    }
    assert_eq!(tubes(&st), vec!["default", "a", "b", "c", "d"]);
    assert_eq!(st.ignore(c, b"a"), Ok(4));
    assert_eq!(tubes(&st), vec!["default", "d", "b", "c"]);
    assert_eq!(watched(&st, c), vec!["default", "d", "b", "c"]);
    st.watch(c, b"a");
    assert_eq!(tubes(&st), vec!["default", "d", "b", "c", "a"]);
    assert_eq!(st.ignore(c, b"d"), Ok(4));
    assert_eq!(tubes(&st), vec!["default", "a", "b", "c"]);
    assert_eq!(watched(&st, c), vec!["default", "a", "b", "c"]);
    ok(&st);
}

#[test]
fn ignore_rules() {
    let mut st = store();
    let c = conn(&mut st);
    assert_eq!(st.ignore(c, b"default"), Err(NotIgnored));
    assert_eq!(st.ignore(c, b"missing"), Ok(1));
    assert_eq!(tubes(&st), vec!["default"]);
    assert_eq!(st.watch(c, b"a"), 2);
    assert_eq!(st.ignore(c, b"default"), Ok(1));
    assert_eq!(watched(&st, c), vec!["a"]);
    assert_eq!(st.ignore(c, b"a"), Err(NotIgnored));
    assert_eq!(st.ignore(c, b"default"), Ok(1));
    assert_eq!(watched(&st, c), vec!["a"]);
    ok(&st);
}

#[test]
fn disconnect_returns_reserved_jobs_and_drops_tubes_in_beanstalkd_order() {
    let mut st = store();
    let c1 = conn(&mut st);
    let c2 = conn(&mut st);
    let held = put(&mut st, c2, 0, 0, 60, 0);
    let other = put(&mut st, c2, 1, 0, 60, 0);
    assert_eq!(reserve_now(&mut st, c1, 0), held);
    assert_eq!(reserve_now(&mut st, c1, 0), other);
    assert_eq!(st.stats().reserved, 2);
    for name in ["a", "b", "c"] {
        st.watch(c1, name.as_bytes());
    }
    st.use_tube(c1, b"d");
    for name in ["f", "g", "h"] {
        st.watch(c2, name.as_bytes());
    }
    // Ignoring default swap-removes it from the watch list: c takes its place.
    assert_eq!(st.ignore(c1, b"default"), Ok(3));
    assert_eq!(watched(&st, c1), vec!["c", "a", "b"]);
    assert_eq!(
        tubes(&st),
        vec!["default", "a", "b", "c", "d", "f", "g", "h"]
    );

    st.disconnect(c1, S);
    ok(&st);
    assert_eq!(state(&st, held, S), "ready");
    assert_eq!(state(&st, other, S), "ready");
    assert_eq!(st.stats().reserved, 0);
    assert_eq!(st.stats().ready, 2);
    assert_eq!(job(&st, held, S).timeouts, 0);
    // The watch list [c, a, b] is emptied by removing element 0 each time (the
    // last taking its place): c, b, a; then the used tube d goes. Each dropped
    // tube's place in the listing is taken by the last tube:
    //   [default a b c d f g h] -c-> [default a b h d f g] -b-> [default a g h d f]
    //   -a-> [default f g h d] -d-> [default f g h]
    assert_eq!(tubes(&st), vec!["default", "f", "g", "h"]);
    assert_eq!(st.stats().current_connections, 1);
    assert_eq!(st.stats().total_connections, 2);
}

#[test]
fn disconnect_drops_watched_tubes_before_the_used_one() {
    let mut st = store();
    let c1 = conn(&mut st);
    let c2 = conn(&mut st);
    for name in ["a", "b", "c"] {
        st.watch(c1, name.as_bytes());
    }
    st.use_tube(c1, b"d");
    st.watch(c2, b"e");
    st.watch(c2, b"f");
    // Watch list [default, a, b, c]: default (kept), then c, b, a; then d.
    //   [default a b c d e f] -c-> [default a b f d e] -b-> [default a e f d]
    //   -a-> [default d e f] -d-> [default f e]
    st.disconnect(c1, 0);
    ok(&st);
    assert_eq!(tubes(&st), vec!["default", "f", "e"]);
}

#[test]
fn disconnect_hands_returned_jobs_to_waiting_reserves() {
    let mut st = store();
    let c1 = conn(&mut st);
    let (c2, wake) = connect(&mut st);
    let id = put(&mut st, c1, 0, 0, 60, 0);
    assert_eq!(reserve_now(&mut st, c1, 0), id);
    reserve_waits(&mut st, c2, None, 0);
    st.disconnect(c1, S);
    ok(&st);
    assert_eq!(mailbox_job(&mut st, c2), id);
    wake_all(&mut st);
    assert_eq!(wake.count(), 1);
    assert!(st.delete(c2, id));
}

#[test]
fn connection_ids_are_reused_after_disconnect_without_confusion() {
    let mut st = store();
    let c1 = conn(&mut st);
    let id = put(&mut st, c1, 0, 0, 60, 0);
    assert_eq!(reserve_now(&mut st, c1, 0), id);
    reserve_waits(&mut st, c1, Some(10), 0);
    st.disconnect(c1, 0);
    ok(&st);
    // The slot is likely reused; the old connection's wait timer (10 s) and queue
    // entries must not touch the new one.
    let c2 = conn(&mut st);
    assert_eq!(reserve_now(&mut st, c2, 0), id);
    reserve_waits(&mut st, c2, None, S);
    tick(&mut st, 20 * S);
    assert_eq!(st.take_delivery(c2), None);
    assert_eq!(st.stats().current_waiting, 1);
}
