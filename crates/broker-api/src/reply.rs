//! [`Reply`]: the answer a side thread waits for, sent once by a shard, without the shard
//! knowing how the waiter waits (a tokio channel on the cluster thread, a blocking one
//! elsewhere).

use std::fmt;

/// Sends one answer to whoever waits for it.
pub struct Reply<T>(Box<dyn FnOnce(T) -> Result<(), T> + Send>);

impl<T> Reply<T> {
    /// A reply that hands its answer to `send`, which gives it back when nobody waits any more.
    pub fn new(send: impl FnOnce(T) -> Result<(), T> + Send + 'static) -> Self {
        Self(Box::new(send))
    }

    /// Sends the answer; `Err` gives it back when nobody waits for it any more.
    pub fn send(self, answer: T) -> Result<(), T> {
        (self.0)(answer)
    }
}

impl<T> fmt::Debug for Reply<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Reply")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_comes_back_when_nobody_waits() {
        let (sender, receiver) = std::sync::mpsc::sync_channel(1);
        let reply = Reply::new(move |answer| sender.send(answer).map_err(|e| e.0));
        assert_eq!(reply.send(7), Ok(()));
        assert_eq!(receiver.recv(), Ok(7));
        let (sender, receiver) = std::sync::mpsc::sync_channel::<u8>(1);
        drop(receiver);
        let reply = Reply::new(move |answer| sender.send(answer).map_err(|e| e.0));
        assert_eq!(reply.send(9), Err(9));
    }
}
