//! Reading part of a JetStream stream through an ordered push consumer: the messages the
//! consumer had pending when it was created (from its start position, matching its filter),
//! no more. The mirror reads a dead node's queued copies this way (`mirror.rs`), and the
//! recovery of a dead node's session the messages it missed (`missed.rs`).

use async_nats::jetstream::{self, consumer, stream};
use futures_util::StreamExt;

/// Why a read stopped short.
#[derive(Debug, thiserror::Error)]
pub(super) enum ReadError {
    /// JetStream refused or failed a request (the consumer, its info, its messages).
    #[error("JetStream: {0}")]
    JetStream(async_nats::Error),
    /// The consumer's messages ended before the last one pending.
    #[error("the consumer stopped before its last pending message")]
    Stopped,
}

fn jetstream_error(error: impl Into<async_nats::Error>) -> ReadError {
    ReadError::JetStream(error.into())
}

/// Appends to `out`, in stream order, every message `config`'s consumer has pending when it
/// is created. What was read before a failure (or before the caller's timeout) stays in `out`.
pub(super) async fn read_pending(
    stream: &stream::Stream,
    config: consumer::push::OrderedConfig,
    out: &mut Vec<jetstream::Message>,
) -> Result<(), ReadError> {
    let mut consumer = stream
        .create_consumer(config)
        .await
        .map_err(jetstream_error)?;
    let pending = consumer.info().await.map_err(jetstream_error)?.num_pending;
    let mut messages = consumer.messages().await.map_err(jetstream_error)?;
    for _ in 0..pending {
        let message = messages.next().await.ok_or(ReadError::Stopped)?;
        out.push(message.map_err(jetstream_error)?);
    }
    Ok(())
}
