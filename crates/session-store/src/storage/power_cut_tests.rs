//! Power cuts, simulated by the thousand: a seeded random workload of the broker's store
//! writes (`random_writes.rs`: sessions, subscriptions, QoS 1/2 queues and inflight, inbound
//! QoS 2 ids, retained, removals) goes through a real engine on the simulated disk
//! (`disk/sim.rs`), which records every write and sync. Then the disk is rebuilt as it stood at
//! every one of them, the power cut there three ways (every unsynced change lost; a prefix of
//! each file's kept; that and the next write torn at a sector), the engine opened on what is
//! left, and its `load` compared with the model: it must be the state of every batch whose
//! commit had returned, plus perhaps the whole batch being committed, nothing else (so no
//! acknowledged message lost, nothing never written, no QoS 2 id lost or doubled). With
//! `SyncMode::Deferred` (the broker's `sync = "interval"`; a `sync` after about one batch in
//! four) it must be the state of a batch between the last `sync` that returned and the one
//! in progress. Every eighth recovered store is cut again and reopened: recovery's own writes
//! must be durable.
//!
//! `RINGMQ_POWER_CUTS` sets the cut points per engine and sync mode (default 2,000: the test
//! command's run); `scripts/power-cuts.sh` runs 100,000 and more. A failure names its seed, operation
//! and cut, and `RINGMQ_POWER_CUT_SEED` starts the runs from that seed.

use std::path::Path;

use super::disk::Disk;
use super::disk::sim::{Cut, Op, Platter, SimDisk};
use super::logged::Checkpoints;
use super::random_writes::{Rng, Writes};
use super::*;

/// The store's directory on the simulated disk.
const DIR: &str = "/store";
/// Batches per run: enough for many epochs of the log with its small files.
pub(super) const BATCHES: usize = 160;

/// The durable engines with an I/O seam, in each sync mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Engine {
    /// The log engine, with files of 4 KiB growing to 16 KiB (an epoch every few commits,
    /// checkpoints and growth often), checkpoints stepped from the seed.
    Log,
    Redb,
    /// The log engine with [`SyncMode::Deferred`] (the broker's `sync = "interval"`).
    LogDeferred,
    /// redb with [`SyncMode::Deferred`].
    RedbDeferred,
}

impl Engine {
    fn sync_mode(self) -> SyncMode {
        match self {
            Self::Log | Self::Redb => SyncMode::EveryCommit,
            Self::LogDeferred | Self::RedbDeferred => SyncMode::Deferred,
        }
    }

    pub(super) fn open(
        self,
        disk: &dyn Disk,
        seed: u64,
    ) -> Result<Box<dyn SessionStorage>, StorageError> {
        let dir = Path::new(DIR);
        let sync = self.sync_mode();
        let cache = 1 << 20;
        Ok(match self {
            Self::Log | Self::LogDeferred => {
                let log = LogSize {
                    bytes: 4 << 10,
                    max_bytes: 16 << 10,
                };
                let checkpoints = Checkpoints::Stepped { seed };
                Box::new(LoggedStorage::open_on(
                    disk,
                    dir,
                    sync,
                    cache,
                    log,
                    checkpoints,
                )?)
            }
            Self::Redb | Self::RedbDeferred => {
                Box::new(RedbStorage::open_on(disk, dir, sync, cache)?)
            }
        })
    }
}

/// One workload's record: every operation of the disk, and the model's state each time a
/// commit returned (with how many operations had been done by then).
pub(super) struct Run {
    pub(super) ops: Vec<Op>,
    pub(super) returned: Vec<(usize, Recovered)>,
    /// Whether commits were durable only at a `sync` ([`SyncMode::Deferred`]).
    pub(super) deferred: bool,
    /// Each `sync` that returned, as the operations done by then and how many commits it made
    /// durable.
    pub(super) syncs: Vec<(usize, usize)>,
}

/// Runs `BATCHES` random batches from `seed` through `engine` on a fresh simulated disk.
fn workload(engine: Engine, seed: u64) -> Run {
    let disk = SimDisk::default();
    let mut storage = engine.open(&disk, seed).expect("test: open a fresh store");
    storage.load().expect("test: load a fresh store");
    let mut model = RecordingStorage::default();
    let mut state = model.load().expect("test: the model loads");
    let mut returned = vec![(disk.op_count(), state.clone())];
    let mut writes = Writes::new(seed);
    let mut syncs = Vec::new();
    let mut rng = Rng(seed ^ 0x5eed | 1);
    for step in 0..BATCHES {
        let batch = writes.batch(&state);
        let expected = model.commit(&batch).expect("test: the model commits");
        let committed = storage.commit(&batch);
        assert_eq!(committed.ok(), Some(expected), "seed {seed} step {step}");
        state = model.load().expect("test: the model loads");
        returned.push((disk.op_count(), state.clone()));
        if engine.sync_mode() == SyncMode::Deferred && rng.below(4) == 0 {
            storage.sync().expect("test: sync");
            syncs.push((disk.op_count(), step + 1));
        }
    }
    drop(storage);
    Run {
        ops: disk.ops(),
        returned,
        deferred: engine.sync_mode() == SyncMode::Deferred,
        syncs,
    }
}

/// The states a store cut after `done` operations may come back with: that of the last
/// commit returned by then, or of the one in progress; with [`SyncMode::Deferred`], also
/// that of any commit since the last `sync` that returned.
pub(super) fn allowed(run: &Run, done: usize) -> &[(usize, Recovered)] {
    let returned = run.returned.partition_point(|(ops, _)| *ops <= done);
    let last = returned.saturating_sub(1);
    let end = (last + 2).min(run.returned.len());
    if !run.deferred {
        return &run.returned[last..end];
    }
    let synced = run.syncs.partition_point(|(ops, _)| *ops <= done);
    let durable = synced.checked_sub(1).map_or(0, |i| run.syncs[i].1);
    &run.returned[durable.min(last)..end]
}

/// Opens `engine` on `platter` and loads it.
pub(super) fn recover(
    engine: Engine,
    platter: Platter,
    seed: u64,
) -> Result<(SimDisk, Recovered), String> {
    let disk = SimDisk::holding(platter);
    let mut storage = engine.open(&disk, seed).map_err(|e| format!("open: {e}"))?;
    let recovered = storage.load().map_err(|e| format!("load: {e}"))?;
    Ok((disk, recovered))
}

/// Cuts the power after each of `run`'s operations (each of the three ways), until `budget`
/// cut points are checked; how many were.
fn check_cuts(engine: Engine, seed: u64, run: &Run, budget: usize) -> usize {
    let mut platter = Platter::default();
    let mut checked = 0;
    for done in 0..=run.ops.len() {
        if done > 0 {
            platter.apply(&run.ops[done - 1]);
        }
        for (way, cut) in Cut::ALL.into_iter().enumerate() {
            if checked == budget {
                return checked;
            }
            let mut rng = Rng((seed << 24) ^ ((done as u64) << 2) ^ way as u64 | 1);
            let crashed = platter.cut(cut, &mut |n| rng.below(n.max(1)));
            let place = format!("{engine:?} seed {seed} cut after operation {done} ({cut:?})");
            let (disk, recovered) = recover(engine, crashed, seed)
                .unwrap_or_else(|e| panic!("{place}: recovery failed: {e}"));
            let states = allowed(run, done);
            assert!(
                states.iter().any(|(_, state)| *state == recovered),
                "{place}: recovered a state that no commit left (the last returned commit had \
                 {} sessions)",
                states[0].1.sessions.len()
            );
            if done % 8 == 0 {
                let again = disk.platter().cut(Cut::DropUnsynced, &mut |_| 0);
                let (_, reopened) = recover(engine, again, seed)
                    .unwrap_or_else(|e| panic!("{place}, cut again: recovery failed: {e}"));
                assert_eq!(
                    reopened, recovered,
                    "{place}: recovery's writes were not durable"
                );
            }
            checked += 1;
        }
    }
    checked
}

/// The cut points to check per engine, and the first seed.
fn budget() -> (usize, u64) {
    fn var<T: std::str::FromStr>(name: &str) -> Option<T> {
        std::env::var(name).ok().and_then(|v| v.parse().ok())
    }
    let cuts = var("RINGMQ_POWER_CUTS").unwrap_or(2_000);
    (cuts, var("RINGMQ_POWER_CUT_SEED").unwrap_or(1))
}

/// Runs workloads from the first seed on until the budget of cut points is checked.
fn power_cuts(engine: Engine) {
    let (budget, first_seed) = budget();
    let started = std::time::Instant::now();
    let (mut checked, mut seed, mut ops) = (0, first_seed, 0);
    while checked < budget {
        let run = workload(engine, seed);
        ops += run.ops.len();
        checked += check_cuts(engine, seed, &run, budget - checked);
        seed += 1;
    }
    eprintln!(
        "power cuts, {engine:?} engine: {checked} cut points over {ops} operations of seeds \
         {first_seed}..{seed}, none lost anything ({:.1} s)",
        started.elapsed().as_secs_f64()
    );
}

#[test]
fn the_log_engine_loses_no_committed_write_to_a_power_cut() {
    power_cuts(Engine::Log);
}

#[test]
fn the_redb_engine_loses_no_committed_write_to_a_power_cut() {
    power_cuts(Engine::Redb);
}

#[test]
fn the_log_engine_loses_nothing_synced_to_a_power_cut() {
    power_cuts(Engine::LogDeferred);
}

#[test]
fn the_redb_engine_loses_nothing_synced_to_a_power_cut() {
    power_cuts(Engine::RedbDeferred);
}
