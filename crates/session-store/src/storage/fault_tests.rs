//! I/O faults under the engines with a seam (`disk/sim.rs`): short writes change nothing; a
//! write or sync that fails (EIO, ENOSPC) fails its commit with an error naming the file and
//! the cause, the log engine refuses every commit after it (a failed `fdatasync` may have
//! dropped pages a later sync would not bring back), and a power cut then recovers every
//! commit that returned, as after any cut.

use super::disk::sim::{Cut, Fault, SimDisk};
use super::power_cut_tests::{BATCHES, Engine, Run, allowed, recover};
use super::random_writes::{Rng, Writes};
use super::*;

const EIO: i32 = 5;
const ENOSPC: i32 = 28;

/// Opens a store on `disk`, injects `fault` and runs the random workload of `seed` until a
/// commit fails (or all [`BATCHES`] are done); the model's states at each commit that
/// returned, and the failure.
fn until_failure(
    engine: Engine,
    disk: &SimDisk,
    seed: u64,
    fault: Fault,
) -> (Run, Option<StorageError>) {
    let mut storage = engine.open(disk, seed).expect("test: open a fresh store");
    storage.load().expect("test: load a fresh store");
    disk.inject(fault);
    let mut model = RecordingStorage::default();
    let mut state = model.load().expect("test: the model loads");
    let mut returned = vec![(disk.op_count(), state.clone())];
    let mut writes = Writes::new(seed);
    let mut failure = None;
    for _ in 0..BATCHES {
        let batch = writes.batch(&state);
        match storage.commit(&batch) {
            Ok(committed) => assert_eq!(committed, model.commit(&batch).unwrap()),
            Err(e) => {
                model.commit(&batch).unwrap();
                let next = model.load().unwrap();
                returned.push((usize::MAX, next));
                if let Engine::Log = engine {
                    let again = storage.commit(&writes.batch(&state));
                    assert!(
                        again.is_err(),
                        "seed {seed}: a commit after a failure succeeded"
                    );
                }
                failure = Some(e);
                break;
            }
        }
        state = model.load().unwrap();
        returned.push((disk.op_count(), state.clone()));
    }
    let ops = disk.ops();
    let deferred = false;
    (
        Run {
            ops,
            returned,
            deferred,
            syncs: Vec::new(),
        },
        failure,
    )
}

/// Fails the `nth` write or sync of a workload with `errno`, then cuts the power every way.
fn fail_then_cut(engine: Engine, seed: u64, nth: usize, errno: i32) {
    let disk = SimDisk::default();
    let (run, failure) = until_failure(engine, &disk, seed, Fault::Fail { nth, errno });
    let Some(failure) = failure else {
        return; // The workload did fewer than `nth` writes and syncs.
    };
    let text = failure.to_string();
    let cause = std::io::Error::from_raw_os_error(errno).to_string();
    assert!(
        text.contains(&cause),
        "{engine:?} seed {seed}: {text} names no cause"
    );
    assert!(
        text.contains("/store"),
        "{engine:?} seed {seed}: {text} names no file"
    );
    // The commit that failed is the last entry: as if it were in progress at the cut.
    let done = run.returned[run.returned.len() - 2].0;
    let mut rng = Rng(seed ^ nth as u64 | 1);
    for cut in Cut::ALL {
        let crashed = disk.platter().cut(cut, &mut |n| rng.below(n.max(1)));
        let place = format!("{engine:?} seed {seed}, operation {nth} failed ({cause}), {cut:?}");
        let (_, recovered) =
            recover(engine, crashed, seed).unwrap_or_else(|e| panic!("{place}: {e}"));
        let states = allowed(&run, done);
        assert!(
            states.iter().any(|(_, state)| *state == recovered),
            "{place}: lost or invented a write"
        );
    }
}

fn faults(engine: Engine) {
    for nth in (3..400).step_by(7) {
        fail_then_cut(engine, 40 + nth as u64, nth, EIO);
        fail_then_cut(engine, 41 + nth as u64, nth + 3, ENOSPC);
    }
}

#[test]
fn the_log_engine_fails_cleanly_on_a_failed_write_or_sync() {
    faults(Engine::Log);
}

#[test]
fn the_redb_engine_fails_cleanly_on_a_failed_write_or_sync() {
    faults(Engine::Redb);
}

/// Every write shortened to half: the engines write the rest, and lose nothing.
fn short_writes(engine: Engine) {
    let disk = SimDisk::default();
    let (run, failure) = until_failure(engine, &disk, 7, Fault::ShortWrites);
    assert!(failure.is_none(), "{engine:?}: {failure:?}");
    let crashed = disk.platter().cut(Cut::DropUnsynced, &mut |_| 0);
    let (_, recovered) = recover(engine, crashed, 7).expect("test: recover");
    assert_eq!(recovered, run.returned.last().unwrap().1);
}

#[test]
fn short_writes_lose_nothing() {
    short_writes(Engine::Log);
    short_writes(Engine::Redb);
}
