//! The durable engines against the model over random write sequences (seeded, reproducible,
//! `random_writes.rs`): same skips for every batch, same `load`, `load_paged` and
//! `queued_after`, with reopens (and commits before any load) in between.

use super::contract_writes::text;
use super::engine_tests::{Open, reopen, temp_dir};
use super::random_writes::{CLIENTS, Rng, Writes};
use super::*;

/// Compares every read of `engine` with the model's.
fn same_reads(engine: &mut impl SessionStorage, model: &mut RecordingStorage, rng: &mut Rng) {
    let loaded = model.load().unwrap();
    assert_eq!(engine.load().unwrap(), loaded);
    let n = usize::try_from(rng.below(4)).unwrap();
    assert_eq!(engine.load_paged(n).unwrap(), model.load_paged(n).unwrap());
    for client in CLIENTS {
        let after = match rng.below(3) {
            0 => None,
            _ => Some(rng.below(40)),
        };
        let limit = usize::try_from(rng.below(5)).unwrap();
        assert_eq!(
            engine.queued_after(&text(client), after, limit).unwrap(),
            model.queued_after(&text(client), after, limit).unwrap(),
            "queued_after({client}, {after:?}, {limit})"
        );
    }
}

/// Runs `batches` random batches from `seed` against an engine opened with `sync` and the model.
fn agree_with_the_model<S: SessionStorage>(
    open: Open<S>,
    sync: SyncMode,
    seed: u64,
    batches: usize,
) {
    let dir = temp_dir();
    let path = dir.path().join("db");
    let mut writes = Writes::new(seed);
    let mut rng = Rng(seed ^ 0x9e37_79b9_7f4a_7c15);
    let mut model = RecordingStorage::default();
    let mut engine = Some(open(&path, sync).unwrap());
    for step in 0..batches {
        let batch = writes.batch(&model.load().unwrap());
        let storage = engine.as_mut().unwrap();
        let expected = model.commit(&batch).unwrap();
        assert_eq!(
            storage.commit(&batch).unwrap(),
            expected,
            "seed {seed} step {step}: {batch:?}"
        );
        match rng.below(10) {
            0 => same_reads(storage, &mut model, &mut rng),
            1 => {
                storage.sync().unwrap();
                drop(engine.take());
                engine = Some(reopen(open, &path, sync));
            }
            _ => {}
        }
    }
    same_reads(engine.as_mut().unwrap(), &mut model, &mut rng);
}

macro_rules! model_suite {
    ($open:expr) => {
        use super::*;

        #[test]
        fn every_commit_agrees_with_the_model() {
            for seed in 1..=6 {
                agree_with_the_model($open, SyncMode::EveryCommit, seed, 120);
            }
        }

        #[test]
        fn deferred_agrees_with_the_model() {
            for seed in 101..=106 {
                agree_with_the_model($open, SyncMode::Deferred, seed, 120);
            }
        }
    };
}

mod sled {
    model_suite!(SledStorage::open);
}

mod redb {
    model_suite!(RedbStorage::open);
}

mod log_checkpointing {
    model_suite!(LoggedStorage::open_tiny);
}

mod log_replaying {
    model_suite!(LoggedStorage::open_roomy);
}
