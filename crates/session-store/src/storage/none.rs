//! The `none` engine: sessions live in memory only.

use codec::MqttStr;

use super::{
    Committed, MessageSeq, PagedRecovered, Recovered, SessionStorage, SessionWrite, StorageError,
    StoredMessage,
};

/// Stores nothing: `commit` succeeds at once (skipping nothing), `load` finds nothing.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoStorage;

impl SessionStorage for NoStorage {
    fn load(&mut self) -> Result<Recovered, StorageError> {
        Ok(Recovered::default())
    }

    fn commit(&mut self, _batch: &[SessionWrite]) -> Result<Committed, StorageError> {
        Ok(Committed::default())
    }

    fn sync(&mut self) -> Result<(), StorageError> {
        Ok(())
    }

    fn queued_after(
        &mut self,
        _client_id: &MqttStr,
        _after: Option<MessageSeq>,
        _limit: usize,
    ) -> Result<Vec<(MessageSeq, StoredMessage)>, StorageError> {
        Ok(Vec::new())
    }

    fn load_paged(&mut self, _queued: usize) -> Result<PagedRecovered, StorageError> {
        Ok(PagedRecovered::default())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commits_succeed_and_nothing_is_recovered() {
        let mut storage = NoStorage;
        let write = SessionWrite::SessionRemoved {
            client_id: codec::MqttStr::from_static("c").unwrap(),
        };
        assert_eq!(storage.commit(&[write]).unwrap(), Committed::default());
        storage.sync().unwrap();
        assert_eq!(storage.load().unwrap(), Recovered::default());
    }
}
