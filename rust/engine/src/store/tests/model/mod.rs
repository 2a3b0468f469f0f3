//! The property test: random command sequences from three connections, with the
//! store compared against a small reference model (`harness`) after every step.

use super::*;

mod harness;

use harness::Harness;

const TUBES: [&str; 3] = ["default", "a", "b"];
const CONNS: usize = 3;

#[derive(Debug, Clone)]
enum Step {
    Put {
        c: usize,
        pri: u32,
        delay: u32,
        ttr: u32,
    },
    BeginPutOnly {
        c: usize,
    },
    Reserve {
        c: usize,
        timeout: Option<u32>,
    },
    ReserveJob {
        c: usize,
        pick: usize,
    },
    Delete {
        c: usize,
        pick: usize,
    },
    Release {
        c: usize,
        pick: usize,
        pri: u32,
        delay: u32,
    },
    Bury {
        c: usize,
        pick: usize,
        pri: u32,
    },
    Touch {
        c: usize,
        pick: usize,
    },
    Kick {
        c: usize,
        bound: u32,
    },
    KickJob {
        pick: usize,
    },
    Use {
        c: usize,
        t: usize,
    },
    Watch {
        c: usize,
        t: usize,
    },
    Ignore {
        c: usize,
        t: usize,
    },
    Pause {
        t: usize,
        delay: u32,
    },
    Reconnect {
        c: usize,
    },
    Abandon {
        c: usize,
    },
    Advance {
        ns: u64,
    },
}

fn pri() -> impl Strategy<Value = u32> + Clone {
    prop_oneof![Just(0u32), Just(1), Just(1023), Just(1024), Just(u32::MAX)]
}

fn delay() -> impl Strategy<Value = u32> + Clone {
    prop_oneof![3 => Just(0u32), 1 => 1..4u32]
}

fn step() -> impl Strategy<Value = Step> {
    let c = 0..CONNS;
    let t = 0..TUBES.len();
    let pick = 0..64usize;
    let timeout = prop_oneof![Just(None), Just(Some(0u32)), (1..4u32).prop_map(Some)];
    let advance = prop_oneof![
        Just(0u64),
        0..3 * S,
        (0..=6u64).prop_map(|k| k * S / 2),
        (1..=3u64).prop_map(|k| k * S - 1),
    ];
    prop_oneof![
        8 => (c.clone(), pri(), delay(), 0..4u32)
            .prop_map(|(c, pri, delay, ttr)| Step::Put { c, pri, delay, ttr }),
        1 => c.clone().prop_map(|c| Step::BeginPutOnly { c }),
        8 => (c.clone(), timeout).prop_map(|(c, timeout)| Step::Reserve { c, timeout }),
        2 => (c.clone(), pick.clone()).prop_map(|(c, pick)| Step::ReserveJob { c, pick }),
        3 => (c.clone(), pick.clone()).prop_map(|(c, pick)| Step::Delete { c, pick }),
        3 => (c.clone(), pick.clone(), pri(), delay())
            .prop_map(|(c, pick, pri, delay)| Step::Release { c, pick, pri, delay }),
        2 => (c.clone(), pick.clone(), pri()).prop_map(|(c, pick, pri)| Step::Bury { c, pick, pri }),
        2 => (c.clone(), pick.clone()).prop_map(|(c, pick)| Step::Touch { c, pick }),
        2 => (c.clone(), 0..4u32).prop_map(|(c, bound)| Step::Kick { c, bound }),
        1 => pick.prop_map(|pick| Step::KickJob { pick }),
        3 => (c.clone(), t.clone()).prop_map(|(c, t)| Step::Use { c, t }),
        3 => (c.clone(), t.clone()).prop_map(|(c, t)| Step::Watch { c, t }),
        2 => (c.clone(), t.clone()).prop_map(|(c, t)| Step::Ignore { c, t }),
        1 => (t, 0..3u32).prop_map(|(t, delay)| Step::Pause { t, delay }),
        1 => c.clone().prop_map(|c| Step::Reconnect { c }),
        1 => c.prop_map(|c| Step::Abandon { c }),
        6 => advance.prop_map(|ns| Step::Advance { ns }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::default())]

    #[test]
    fn random_operations_keep_the_model(steps in proptest::collection::vec(step(), 1..200)) {
        let mut h = Harness::new();
        h.check();
        for step in &steps {
            h.apply(step);
            h.check();
        }
    }
}
