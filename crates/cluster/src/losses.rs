//! Connection losses told between nodes (docs/cluster.md, "Replays after a NATS connection
//! loss").
//!
//! When a node's NATS server dies, what the node published just before may be kept by
//! JetStream (its publisher acknowledged) and yet lost on the way to the other nodes: the
//! dead server was to forward it over its routes. The other nodes stay connected and see no
//! loss of their own. So a node whose main connection comes back announces the loss on
//! `<prefix>.lost` (`<origin> <unix milliseconds>`), and every node that hears it replays that
//! node run's messages from a little before the loss; the duplicate check drops those it had.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use futures_util::StreamExt;
use tracing::{debug, info, warn};

use super::link_state::Link;

/// Between attempts to subscribe to, or announce on, `<prefix>.lost`.
const RETRY: Duration = Duration::from_secs(1);

/// Announces this node's connection losses and hears the other nodes'.
pub(super) async fn losses(link: Arc<Link>) {
    tokio::join!(announce(&link), hear(&link));
}

/// `<prefix>.lost`.
fn subject(prefix: &str) -> String {
    format!("{prefix}.lost")
}

async fn announce(link: &Link) {
    loop {
        let at = link.replays.next_loss_to_announce().await;
        link.wait_connected().await;
        let notice = LossNotice {
            origin: link.origin.clone(),
            at,
        };
        let sent = link
            .client
            .publish(subject(&link.prefix), notice.encode())
            .await;
        match sent {
            Ok(()) => debug!("cluster: connection loss announced to the other nodes"),
            Err(e) => {
                warn!(error = %e, "cluster: could not announce a connection loss; retrying");
                link.replays.announce_again(at);
                tokio::time::sleep(RETRY).await;
            }
        }
    }
}

async fn hear(link: &Link) {
    let mut notices = loop {
        match link.client.subscribe(subject(&link.prefix)).await {
            Ok(subscriber) => break subscriber,
            Err(e) => {
                warn!(error = %e, "cluster: could not subscribe to other nodes' connection losses; retrying");
                tokio::time::sleep(RETRY).await;
            }
        }
    };
    while let Some(message) = notices.next().await {
        match LossNotice::decode(&message.payload) {
            Ok(notice) if notice.origin != link.origin => {
                info!(node = %notice.origin, "cluster: another node lost its NATS connection; replaying its messages");
                link.replays.other_node_lost(notice.origin, notice.at);
            }
            Ok(_) => {}
            Err(e) => debug!(error = %e, "cluster: malformed connection-loss notice ignored"),
        }
    }
}

/// A node run lost its main NATS connection at `at` (its own clock).
#[derive(Debug, Clone, PartialEq, Eq)]
struct LossNotice {
    origin: String,
    at: SystemTime,
}

/// Why a notice could not be read.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
enum NoticeError {
    #[error("not `<origin> <unix milliseconds>`")]
    Shape,
    #[error("the instant is not a number of milliseconds")]
    Instant,
}

impl LossNotice {
    fn encode(&self) -> Bytes {
        let millis = self
            .at
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap_or_default()
            .as_millis();
        Bytes::from(format!("{} {millis}", self.origin))
    }

    fn decode(payload: &[u8]) -> Result<Self, NoticeError> {
        let text = std::str::from_utf8(payload).map_err(|_| NoticeError::Shape)?;
        let (origin, millis) = text.split_once(' ').ok_or(NoticeError::Shape)?;
        if origin.is_empty() || origin.contains(char::is_whitespace) {
            return Err(NoticeError::Shape);
        }
        let millis: u64 = millis.parse().map_err(|_| NoticeError::Instant)?;
        Ok(Self {
            origin: origin.to_owned(),
            at: SystemTime::UNIX_EPOCH + Duration::from_millis(millis),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_notice_reads_back_what_was_written() {
        let notice = LossNotice {
            origin: "n1/00000000000000ab".into(),
            at: SystemTime::UNIX_EPOCH + Duration::from_millis(1_765_000_000_123),
        };
        let bytes = notice.encode();
        assert_eq!(&bytes[..], b"n1/00000000000000ab 1765000000123");
        assert_eq!(LossNotice::decode(&bytes), Ok(notice));
    }

    #[test]
    fn malformed_notices_are_refused() {
        assert_eq!(LossNotice::decode(b"n1"), Err(NoticeError::Shape));
        assert_eq!(LossNotice::decode(b" 12"), Err(NoticeError::Shape));
        assert_eq!(LossNotice::decode(b"n1 x"), Err(NoticeError::Instant));
        assert_eq!(LossNotice::decode(b"n1 1 2"), Err(NoticeError::Instant));
        assert_eq!(
            LossNotice::decode(&[0xff, b' ', b'1']),
            Err(NoticeError::Shape)
        );
    }
}
