//! Reading part of a JetStream stream through an ordered push consumer: the messages on the
//! consumer's filter from its start position up to the last one the stream's **leader** held
//! when the read began, no more. The mirror reads a dead node's queued copies this way
//! (`mirror.rs`), the recovery of a dead node's session the messages it missed (`missed.rs`)
//! and the delivery journal (`journal_read.rs`).
//!
//! Why the leader: an ephemeral consumer may sit on a replica still catching up after an
//! outage (NATS 2.9, nats-server issue 4162), whose own count of the messages pending stops
//! short of the newest. Reading to that count would miss the tail of a read: a delivery journal
//! read so would miss a dead node's last deliveries, and the QoS 2 messages it had delivered in
//! its last seconds would come again (docs/cluster.md, "Exactly once across a node's death").
//! Not measured: no read in the 100-fault run of seed 5050 went past its consumer's count (a
//! read that does is logged). The read waits until the consumer reaches the leader's last
//! message (the caller bounds the wait).

use std::time::Duration;

use async_nats::jetstream::stream::LastRawMessageErrorKind;
use async_nats::jetstream::{self, consumer, stream};
use futures_util::StreamExt;
use time::OffsetDateTime;
use tracing::info;

/// How long the consumer may deliver nothing before the leader is asked whether the last
/// message is still there (removed by age or a purge meanwhile, it never comes).
const IDLE_CHECK: Duration = Duration::from_millis(250);

/// Why a read stopped short.
#[derive(Debug, thiserror::Error)]
pub(super) enum ReadError {
    /// JetStream refused or failed a request (the consumer, the leader's last message, the
    /// consumer's messages).
    #[error("JetStream: {0}")]
    JetStream(async_nats::Error),
    /// The consumer's messages ended before the last one.
    #[error("the consumer stopped before the last message")]
    Stopped,
}

fn jetstream_error(error: impl Into<async_nats::Error>) -> ReadError {
    ReadError::JetStream(error.into())
}

/// Appends to `out`, in stream order, every message on `config`'s filter from its start
/// position up to the last one the stream's leader holds when the read begins. What was read
/// before a failure (or before the caller's timeout) stays in `out`.
pub(super) async fn read_pending(
    stream: &stream::Stream,
    config: consumer::push::OrderedConfig,
    out: &mut Vec<jetstream::Message>,
) -> Result<(), ReadError> {
    let mut read = PendingRead::open(stream, config).await?;
    while let Some(message) = read.next().await? {
        out.push(message);
    }
    Ok(())
}

/// A read of a stream's messages on a filter up to the last one its leader held when the read
/// began, one message at a time ([`read_pending`] collects them all; a node replay hands each
/// on as it comes).
pub(super) struct PendingRead {
    stream: stream::Stream,
    /// `None`: nothing to read (no message on the filter, or none from the start position).
    messages: Option<consumer::push::Ordered>,
    /// The leader's last message on the filter when the read began.
    last: u64,
    /// What the consumer's own server counted at its creation (a read once stopped there).
    counted: u64,
    read: u64,
}

impl PendingRead {
    /// Asks the leader for its last message on `config`'s filter, then makes the consumer.
    pub(super) async fn open(
        stream: &stream::Stream,
        config: consumer::push::OrderedConfig,
    ) -> Result<Self, ReadError> {
        let mut read = Self {
            stream: stream.clone(),
            messages: None,
            last: 0,
            counted: 0,
            read: 0,
        };
        let Some(last) = leaders_last(stream, &config).await? else {
            return Ok(read);
        };
        let consumer = stream
            .create_consumer(config)
            .await
            .map_err(jetstream_error)?;
        read.counted = consumer.cached_info().num_pending;
        read.last = last;
        read.messages = Some(consumer.messages().await.map_err(jetstream_error)?);
        Ok(read)
    }

    /// The next message, in stream order; `None` once the leader's last one was read (or it is
    /// no longer kept). A consumer that delivers nothing for a while is waited for as long as
    /// the leader still holds the last message: the caller bounds the wait.
    pub(super) async fn next(&mut self) -> Result<Option<jetstream::Message>, ReadError> {
        let Some(messages) = self.messages.as_mut() else {
            return Ok(None);
        };
        let message = loop {
            match tokio::time::timeout(IDLE_CHECK, messages.next()).await {
                Ok(next) => break next.ok_or(ReadError::Stopped)?.map_err(jetstream_error)?,
                Err(_) if still_kept(&self.stream, self.last).await? => {}
                Err(_) => {
                    self.messages = None;
                    return Ok(None);
                }
            }
        };
        let sequence = message.info().map_err(jetstream_error)?.stream_sequence;
        self.read += 1;
        if sequence >= self.last {
            self.messages = None;
            if self.read > self.counted {
                info!(
                    counted = self.counted,
                    read = self.read,
                    "cluster: a stream read went past what its consumer counted at its creation (the consumer's server was behind the stream's leader)"
                );
            }
        }
        Ok(Some(message))
    }
}

/// The sequence of the last message on `config`'s filter (every subject when it has none) that
/// the stream's leader holds; `None` when there is none, or it is older than the consumer's
/// start time (the consumer delivers nothing).
async fn leaders_last(
    stream: &stream::Stream,
    config: &consumer::push::OrderedConfig,
) -> Result<Option<u64>, ReadError> {
    let filter = match config.filter_subject.as_str() {
        "" => ">",
        filter => filter,
    };
    let last = match stream.get_last_raw_message_by_subject(filter).await {
        Ok(last) => last,
        Err(e) if e.kind() == LastRawMessageErrorKind::NoMessageFound => return Ok(None),
        Err(e) => return Err(jetstream_error(e)),
    };
    Ok(delivered_from(&config.deliver_policy, last.time).then_some(last.sequence))
}

/// Whether a consumer with `policy` delivers a message kept at `kept_at` (the policies the
/// reads use: from the start, or from a time).
fn delivered_from(policy: &consumer::DeliverPolicy, kept_at: OffsetDateTime) -> bool {
    match policy {
        consumer::DeliverPolicy::ByStartTime { start_time } => kept_at >= *start_time,
        _ => true,
    }
}

/// Whether the stream's leader still holds message `sequence`.
async fn still_kept(stream: &stream::Stream, sequence: u64) -> Result<bool, ReadError> {
    match stream.get_raw_message(sequence).await {
        Ok(_) => Ok(true),
        Err(e) if e.kind() == LastRawMessageErrorKind::NoMessageFound => Ok(false),
        Err(e) => Err(jetstream_error(e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_read_from_a_time_after_the_last_message_expects_nothing() {
        let at = OffsetDateTime::from_unix_timestamp(1_000).unwrap();
        let from = |secs| consumer::DeliverPolicy::ByStartTime {
            start_time: OffsetDateTime::from_unix_timestamp(secs).unwrap(),
        };
        assert!(delivered_from(&from(999), at));
        assert!(delivered_from(&from(1_000), at));
        assert!(!delivered_from(&from(1_001), at));
        assert!(delivered_from(&consumer::DeliverPolicy::All, at));
    }
}
