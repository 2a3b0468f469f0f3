use std::sync::Arc;

use bytes::Bytes;

use super::*;

struct NoWake;
impl Wakeup for NoWake {
    fn wake(&self) {}
}

fn store() -> Store {
    Store::new(65535)
}

fn body(s: &str) -> Bytes {
    Bytes::from(format!("{s}\r\n"))
}

fn put(st: &mut Store, conn: ConnId, pri: u32, delay: u32, text: &str, now: u64) -> u64 {
    let id = st.begin_put(conn);
    st.put(conn, id, pri, delay, 60, body(text), now)
        .unwrap_or(0)
}

#[test]
fn reserve_order_is_priority_then_id() {
    let mut st = store();
    let c = st.connect(Arc::new(NoWake));
    put(&mut st, c, 5, 0, "a", 0);
    put(&mut st, c, 1, 0, "b", 0);
    put(&mut st, c, 5, 0, "c", 0);
    let mut got = vec![];
    for _ in 0..3 {
        match st.reserve(c, Some(0), 0) {
            ReserveOutcome::Now(Delivery::Reserved { id, .. }) => got.push(id),
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(got, vec![2, 1, 3]);
    assert_eq!(
        st.reserve(c, Some(0), 0),
        ReserveOutcome::Now(Delivery::TimedOut)
    );
}
