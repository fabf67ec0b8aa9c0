//! Taking a client id's owner record over with compare-and-set (`owners.rs`). A write that
//! JetStream does not confirm (timed out, a server restarting) may still have landed: the
//! record is read back before the claim gives up the session it rebuilt or was released,
//! rather than taking a failed write for another node's claim (the 300-fault runs dropped
//! recovered sessions so and rebuilt them again, each time reading what they missed anew).

use std::time::Duration;

use async_nats::jetstream::kv;
use bytes::Bytes;
use tracing::debug;

/// Writes of the record tried while its revision stays the one read.
const TAKE_TRIES: usize = 3;

/// Reads and writes of the owner records (`<base>_sessions`) that a restart's settling
/// (`lifecycle.rs`) and a claim ([`take_record`]) make; a trait so the tests can interleave
/// another node's write.
pub(super) trait OwnerRecords {
    /// The record's value and revision (`None`: none, or removed); `Err`: not read.
    async fn read(&self, key: &str) -> Result<Option<(Bytes, u64)>, ()>;
    /// Creates the record if there is none; whether it was created.
    async fn create(&self, key: &str, value: Bytes) -> bool;
    /// Replaces the record if it is still at `revision`; whether it was replaced.
    async fn update(&self, key: &str, value: Bytes, revision: u64) -> bool;
}

impl OwnerRecords for kv::Store {
    async fn read(&self, key: &str) -> Result<Option<(Bytes, u64)>, ()> {
        let entry = self.entry(key).await.map_err(drop)?;
        let entry = entry.filter(|e| e.operation == kv::Operation::Put);
        Ok(entry.map(|e| (e.value, e.revision)))
    }

    async fn create(&self, key: &str, value: Bytes) -> bool {
        kv::Store::create(self, key, value).await.is_ok()
    }

    async fn update(&self, key: &str, value: Bytes, revision: u64) -> bool {
        kv::Store::update(self, key, value, revision).await.is_ok()
    }
}

/// Whether the record names this run now.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Taken {
    Here,
    /// Another node's write came first (or the record could not be written or read).
    NotHere,
}

/// Replaces `key`'s record at `revision` with `own`, each write and read within `within`.
pub(super) async fn take_record(
    records: &impl OwnerRecords,
    key: &str,
    own: &Bytes,
    (revision, within): (u64, Duration),
) -> Taken {
    for _ in 0..TAKE_TRIES {
        let update = tokio::time::timeout(within, records.update(key, own.clone(), revision));
        if update.await == Ok(true) {
            return Taken::Here;
        }
        debug!(key, "cluster: owner record not written; read back");
        match tokio::time::timeout(within, records.read(key)).await {
            Ok(Ok(Some((value, _)))) if value == *own => return Taken::Here,
            Ok(Ok(Some((_, now)))) if now == revision => {} // Unchanged: write again.
            Ok(Ok(_)) => return Taken::NotHere,             // Another node's write, or removed.
            _ => {}                                         // Not read: try again.
        }
    }
    Taken::NotHere
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;

    /// One owner record in memory whose first `unconfirmed` writes report failure, landing or
    /// not (`lands`); `other`: another node's write before this node's first.
    struct Record {
        value: Mutex<(Bytes, u64)>,
        unconfirmed: Mutex<usize>,
        lands: bool,
        other: Mutex<Option<Bytes>>,
    }

    impl Record {
        fn new(unconfirmed: usize, lands: bool, other: Option<&'static str>) -> Self {
            Self {
                value: Mutex::new((Bytes::from_static(b"n2/dead"), 1)),
                unconfirmed: Mutex::new(unconfirmed),
                lands,
                other: Mutex::new(other.map(|v| Bytes::from_static(v.as_bytes()))),
            }
        }

        fn names(&self) -> Bytes {
            self.value.lock().unwrap().0.clone()
        }
    }

    impl OwnerRecords for Record {
        async fn read(&self, _: &str) -> Result<Option<(Bytes, u64)>, ()> {
            Ok(Some(self.value.lock().unwrap().clone()))
        }

        async fn create(&self, _: &str, _: Bytes) -> bool {
            unreachable!("a claim takes an existing record over")
        }

        async fn update(&self, _: &str, value: Bytes, revision: u64) -> bool {
            let mut record = self.value.lock().unwrap();
            if let Some(other) = self.other.lock().unwrap().take() {
                *record = (other, record.1 + 1);
            }
            if record.1 != revision {
                return false;
            }
            let mut unconfirmed = self.unconfirmed.lock().unwrap();
            if *unconfirmed > 0 {
                *unconfirmed -= 1;
                if self.lands {
                    *record = (value, revision + 1);
                }
                return false;
            }
            *record = (value, revision + 1);
            true
        }
    }

    const OWN: Bytes = Bytes::from_static(b"n1/run");
    const WITHIN: Duration = Duration::from_secs(5);

    #[tokio::test]
    async fn a_write_that_landed_unconfirmed_takes_the_record() {
        let record = Record::new(1, true, None);
        assert_eq!(
            take_record(&record, "k", &OWN, (1, WITHIN)).await,
            Taken::Here
        );
        assert_eq!(record.names(), OWN);
    }

    #[tokio::test]
    async fn a_write_that_did_not_land_is_made_again_while_the_record_is_unchanged() {
        let record = Record::new(2, false, None);
        assert_eq!(
            take_record(&record, "k", &OWN, (1, WITHIN)).await,
            Taken::Here
        );
        assert_eq!(record.names(), OWN);
        let record = Record::new(TAKE_TRIES, false, None);
        assert_eq!(
            take_record(&record, "k", &OWN, (1, WITHIN)).await,
            Taken::NotHere,
            "given up after the tries"
        );
    }

    #[tokio::test]
    async fn another_nodes_write_wins() {
        let record = Record::new(0, false, Some("n3/run"));
        assert_eq!(
            take_record(&record, "k", &OWN, (1, WITHIN)).await,
            Taken::NotHere
        );
        assert_eq!(record.names(), Bytes::from_static(b"n3/run"));
    }
}
