//! What a node's storage brings back after a restart: the log's entries, vote,
//! purge and truncation, a torn tail cut; the state machine's snapshot of the
//! queue, applied from the engine's journal records.

use std::collections::BTreeSet;

use beanpole_cluster::logstore::ZEROS_AHEAD;
use beanpole_cluster::types::{Batch, Entry, LogId, Membership, StorageError, Vote};
use beanpole_cluster::{LogStore, StateMachine};
use beanpole_engine::wal::format::{JobFields, JobRecord, Record, StoredState};
use bytes::Bytes;
use openraft::storage::{RaftLogStorage, RaftLogStorageExt, RaftStateMachine};
use openraft::{CommittedLeaderId, EntryPayload, RaftLogReader, RaftSnapshotBuilder};

fn log_id(term: u64, index: u64) -> LogId {
    LogId::new(CommittedLeaderId::new(term, 1), index)
}

fn put(id: u64, body: &[u8]) -> Record {
    Record::Job(JobRecord {
        fields: JobFields {
            id,
            pri: 5,
            delay: 0,
            ttr: 30,
            state: StoredState::Ready,
            created: 1_000,
            ready_at: 0,
            bury_seq: 0,
            reserves: 0,
            timeouts: 0,
            releases: 0,
            buries: 0,
            kicks: 0,
        },
        tube: b"jobs".to_vec(),
        body: body.to_vec(),
    })
}

fn batch(index: u64, at: i64, records: &[Record]) -> Entry {
    let mut bytes = Vec::new();
    for r in records {
        r.encode(&mut bytes);
    }
    Entry {
        log_id: log_id(1, index),
        payload: EntryPayload::Normal(Batch {
            at,
            records: Bytes::from(bytes),
        }),
    }
}

fn runtime() -> tokio::runtime::Runtime {
    match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => panic!("no runtime: {e}"),
    }
}

fn indexes(entries: &[Entry]) -> Vec<u64> {
    entries.iter().map(|e| e.log_id.index).collect()
}

#[test]
fn the_log_comes_back_as_it_was_left() -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let rt = runtime();
    rt.block_on(async {
        let mut log = LogStore::open(dir.path())?;
        let entries: Vec<Entry> = (1..=6)
            .map(|i| batch(i, i as i64, &[put(i, b"x")]))
            .collect();
        log.blocking_append(entries).await?;
        log.save_vote(&Vote::new_committed(1, 1)).await?;
        log.truncate(log_id(1, 5)).await?;
        log.purge(log_id(1, 2)).await?;
        log.save_committed(Some(log_id(1, 4))).await?;
        Ok::<_, Box<dyn std::error::Error>>(())
    })?;
    // The writer thread ends with the store; open again.
    rt.block_on(async {
        let mut log = LogStore::open(dir.path())?;
        let state = log.get_log_state().await?;
        assert_eq!(state.last_purged_log_id, Some(log_id(1, 2)));
        assert_eq!(state.last_log_id, Some(log_id(1, 4)));
        assert_eq!(indexes(&log.try_get_log_entries(0..100).await?), [3, 4]);
        assert_eq!(log.read_vote().await?, Some(Vote::new_committed(1, 1)));
        // Appends go on after the truncation point.
        log.blocking_append([batch(5, 9, &[Record::Delete { id: 3 }])])
            .await?;
        Ok::<_, Box<dyn std::error::Error>>(())
    })?;
    // A torn write at the end of the last segment is cut; the rest stays.
    let segment = std::fs::read_dir(dir.path())?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "rlog"))
        .max()
        .ok_or("no segment")?;
    let mut bytes = std::fs::read(&segment)?;
    bytes.extend_from_slice(&[40, 0, 0, 0, 1, 2, 3, 4, 5]);
    std::fs::write(&segment, &bytes)?;
    rt.block_on(async {
        let mut log = LogStore::open(dir.path())?;
        assert_eq!(log.warnings.len(), 1, "{:?}", log.warnings);
        assert_eq!(indexes(&log.try_get_log_entries(0..100).await?), [3, 4, 5]);
        assert_eq!(log.read_committed().await?, Some(log_id(1, 4)));
        Ok::<_, Box<dyn std::error::Error>>(())
    })?;
    // Damage in a segment that is not the last refuses to open.
    std::fs::write(segment.with_file_name(format!("{:020}.rlog", 999)), {
        let mut b = b"BPRAFTLG".to_vec();
        b.extend_from_slice(&1u32.to_le_bytes());
        b.extend_from_slice(&16u32.to_le_bytes());
        b
    })?;
    let mut damaged = std::fs::read(&segment)?;
    let last = damaged.len() - 1;
    damaged[last] ^= 0xff;
    std::fs::write(&segment, &damaged)?;
    match LogStore::open(dir.path()) {
        Err(beanpole_cluster::LogError::Corrupt { .. }) => {}
        other => panic!("opened a damaged log: {other:?}"),
    }
    Ok(())
}

#[test]
fn the_committed_id_is_overwritten_in_place_and_a_damaged_one_is_taken_as_absent(
) -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let rt = runtime();
    let save = |committed: Option<LogId>| {
        rt.block_on(async {
            let mut log = LogStore::open(dir.path())?;
            log.save_committed(committed).await?;
            Ok::<_, Box<dyn std::error::Error>>(())
        })
    };
    let read = || {
        rt.block_on(async {
            let mut log = LogStore::open(dir.path())?;
            let committed = log.read_committed().await?;
            Ok::<_, Box<dyn std::error::Error>>((committed, std::mem::take(&mut log.warnings)))
        })
    };
    rt.block_on(async {
        let mut log = LogStore::open(dir.path())?;
        let entries: Vec<Entry> = (1..=10)
            .map(|i| batch(i, i as i64, &[put(i, b"x")]))
            .collect();
        log.blocking_append(entries).await?;
        Ok::<_, Box<dyn std::error::Error>>(())
    })?;
    // One beyond the log's end (a leader saves commits before its own fsync,
    // and a power loss may keep the one and not the other) is the log's end.
    save(Some(log_id(3, 70)))?;
    assert_eq!(read()?, (Some(log_id(1, 10)), vec![]));
    save(Some(log_id(3, 7)))?;
    assert_eq!(read()?, (Some(log_id(3, 7)), vec![]));
    // A shorter value over a longer one leaves nothing of the longer behind.
    save(None)?;
    assert_eq!(read()?, (None, vec![]));
    save(Some(log_id(4, 9)))?;
    let path = dir.path().join("committed");
    let mut bytes = std::fs::read(&path)?;
    let last = bytes.len() - 1;
    bytes[last] ^= 0xff;
    std::fs::write(&path, &bytes)?;
    let (committed, warnings) = read()?;
    assert_eq!(committed, None);
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(warnings[0].contains("taken as absent"), "{warnings:?}");
    Ok(())
}

#[test]
fn the_state_machine_applies_journal_records_and_restarts_from_its_snapshot(
) -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let rt = runtime();
    let members = Membership::new(vec![BTreeSet::from([1, 2, 3])], ());
    let jobs = rt.block_on(async {
        let mut sm = StateMachine::open(dir.path())?;
        let view = sm.view();
        let replies = sm
            .apply([
                Entry {
                    log_id: log_id(1, 1),
                    payload: EntryPayload::Membership(members.clone()),
                },
                batch(2, 50, &[put(1, b"one"), put(2, b"two")]),
                batch(
                    3,
                    40,
                    &[
                        Record::Reserve { id: 1 },
                        Record::Release {
                            id: 1,
                            pri: 9,
                            delay: 0,
                            ready_at: 0,
                        },
                        Record::Delete { id: 2 },
                    ],
                ),
            ])
            .await?;
        let counts: Vec<u32> = replies.iter().map(|r| r.records).collect();
        assert_eq!(counts, [0, 2, 3]);
        // The replicated clock never goes back, whatever an entry says.
        assert_eq!(view.lock().clock, 50);
        // A damaged batch is refused, as a storage error, once it is applied:
        // entries are applied when the state is next looked at (here the
        // next apply), after their answer.
        let mut bad = batch(4, 60, &[put(3, b"three")]);
        if let EntryPayload::Normal(b) = &mut bad.payload {
            let mut bytes = b.records.to_vec();
            bytes[10] ^= 1;
            b.records = Bytes::from(bytes);
        }
        let answered = sm.apply([bad]).await?;
        assert_eq!(answered[0].records, 1);
        let refused: Result<_, StorageError> = sm.apply([batch(5, 70, &[put(4, b"four")])]).await;
        assert!(refused.is_err());
        // Nothing after it is applied either.
        assert_eq!(view.lock().applied, Some(log_id(1, 3)));
        let snap = sm.get_snapshot_builder().await.build_snapshot().await?;
        assert_eq!(snap.meta.last_log_id, Some(log_id(1, 3)));
        let state = view.lock();
        let jobs: Vec<_> = state.replica.jobs().map(|j| j.to_owned()).collect();
        Ok::<_, Box<dyn std::error::Error>>(jobs)
    })?;
    assert_eq!(jobs.len(), 1);
    assert_eq!((jobs[0].fields.id, jobs[0].fields.pri), (1, 9));
    assert_eq!((jobs[0].fields.reserves, jobs[0].fields.releases), (1, 1));
    rt.block_on(async {
        let mut sm = StateMachine::open(dir.path())?;
        let (applied, membership) = sm.applied_state().await?;
        assert_eq!(applied, Some(log_id(1, 3)));
        assert_eq!(membership.membership(), &members);
        let view = sm.view();
        let state = view.lock();
        let back: Vec<_> = state.replica.jobs().map(|j| j.to_owned()).collect();
        assert_eq!(back, jobs);
        assert_eq!(state.replica.next_id(), 3);
        assert_eq!(state.clock, 50);
        Ok::<_, Box<dyn std::error::Error>>(())
    })?;
    Ok(())
}

#[test]
fn the_current_segment_holds_zeros_ahead_of_its_frames_and_reads_back_around_them(
) -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let rt = runtime();
    let segment = || -> Result<std::path::PathBuf, Box<dyn std::error::Error>> {
        Ok(std::fs::read_dir(dir.path())?
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "rlog"))
            .max()
            .ok_or("no segment")?)
    };
    let append = |from: u64, to: u64| {
        rt.block_on(async {
            let mut log = LogStore::open(dir.path())?;
            let entries: Vec<Entry> = (from..=to)
                .map(|i| batch(i, i as i64, &[put(i, format!("job {i:>40}").as_bytes())]))
                .collect();
            log.blocking_append(entries).await?;
            Ok::<_, Box<dyn std::error::Error>>(std::mem::take(&mut log.warnings))
        })
    };
    let read = || {
        rt.block_on(async {
            let mut log = LogStore::open(dir.path())?;
            let entries = indexes(&log.try_get_log_entries(0..1000).await?);
            Ok::<_, Box<dyn std::error::Error>>((entries, std::mem::take(&mut log.warnings)))
        })
    };
    append(1, 10)?;
    let size = std::fs::metadata(segment()?)?.len();
    assert!(size > ZEROS_AHEAD, "{size} bytes: no zeros ahead");
    // Appends after a restart overwrite the zeros: the file does not grow.
    append(11, 20)?;
    assert_eq!(std::fs::metadata(segment()?)?.len(), size);
    assert_eq!(read()?, ((1..=20).collect::<Vec<_>>(), vec![]));

    // Anything but zeros after the frames (a write torn out of order) is cut,
    // or it would lie behind the next frames.
    let path = segment()?;
    let mut bytes = std::fs::read(&path)?;
    let end = bytes.len() - 100;
    bytes[end] = 7;
    std::fs::write(&path, &bytes)?;
    let (entries, warnings) = read()?;
    assert_eq!(entries, (1..=20).collect::<Vec<_>>());
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    append(21, 21)?;
    assert_eq!(read()?, ((1..=21).collect::<Vec<_>>(), vec![]));

    // Stray bytes after the frames of a segment that is not the last are
    // damage: opening refuses.
    let mut bytes = std::fs::read(&path)?;
    let frames_end = bytes.len() - ZEROS_AHEAD as usize;
    bytes[frames_end + 10] = 7;
    std::fs::write(&path, &bytes)?;
    let next = path.with_file_name(format!("{:020}.rlog", 999));
    std::fs::write(&next, {
        let mut b = b"BPRAFTLG".to_vec();
        b.extend_from_slice(&2u32.to_le_bytes());
        b.extend_from_slice(&16u32.to_le_bytes());
        b
    })?;
    match LogStore::open(dir.path()) {
        Err(beanpole_cluster::LogError::Corrupt { .. }) => {}
        other => panic!("opened a damaged log: {other:?}"),
    }
    std::fs::remove_file(&next)?;

    // A version 1 segment (frames up to the file's end) reads as before.
    bytes[frames_end + 10] = 0;
    bytes.truncate(frames_end);
    bytes[8..12].copy_from_slice(&1u32.to_le_bytes());
    std::fs::write(&path, &bytes)?;
    assert_eq!(read()?, ((1..=21).collect::<Vec<_>>(), vec![]));
    Ok(())
}
