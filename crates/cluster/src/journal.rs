//! The delivery journal's records (docs/cluster.md, "Exactly once across a node's death"):
//! before a QoS 2 PUBLISH to a mirrored session leaves, and before the PUBREL that answers its
//! PUBREC, the shard's turn hands the step to the cluster thread, which writes the turn's steps
//! as one message to the stream `<base>_journal` (subject `<prefix>.journal.<node run>`) and
//! lets the packets go once JetStream has kept it (`journal_writer.rs`). The node that takes a
//! session over after this node's death reads the run's journal (`journal_read.rs`) and knows,
//! for each message the replay stream gives back, whether its client has it already.
//!
//! One message holds records one after another:
//!
//! | field | bytes |
//! |---|---|
//! | step: 1 sent, 2 released, 3 completed | 1 |
//! | packet id | 2 (big-endian) |
//! | message key (sent only) | 8 (big-endian) |
//! | client id length | 2 (big-endian) |
//! | client id | that many, UTF-8 |

use bytes::{Buf, BufMut, Bytes, BytesMut};
use codec::MqttStr;

use broker_api::cluster::{JournalEntry, JournalStep};

const SENT: u8 = 1;
const RELEASED: u8 = 2;
const COMPLETED: u8 = 3;

/// Why a journal message could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(super) enum JournalError {
    #[error("a record ends early")]
    Truncated,
    #[error("unknown step {0}")]
    Step(u8),
    #[error("packet id 0")]
    PacketId,
    #[error("a client id is not valid UTF-8")]
    ClientId,
}

/// The records of `entries`, one after another, cut at record boundaries into messages of at
/// most `max_bytes` (one record more than that goes alone): a turn of a large fan-out stays
/// under the NATS servers' `max_payload`.
pub(super) fn encode<'a>(
    entries: impl IntoIterator<Item = &'a JournalEntry>,
    max_bytes: usize,
) -> Vec<Bytes> {
    let mut messages = Vec::new();
    let mut out = BytesMut::new();
    for entry in entries {
        let id = entry.client_id.as_bytes();
        if !out.is_empty() && out.len() + 13 + id.len() > max_bytes {
            messages.push(out.split().freeze());
        }
        out.reserve(13 + id.len());
        match entry.step {
            JournalStep::Sent { key } => {
                out.put_u8(SENT);
                out.put_u16(entry.packet_id);
                out.put_u64(key);
            }
            JournalStep::Released => {
                out.put_u8(RELEASED);
                out.put_u16(entry.packet_id);
            }
            JournalStep::Completed => {
                out.put_u8(COMPLETED);
                out.put_u16(entry.packet_id);
            }
        }
        // Client ids are MQTT strings: at most 65,535 bytes.
        out.put_u16(u16::try_from(id.len()).unwrap_or(u16::MAX));
        out.put_slice(id);
    }
    if !out.is_empty() {
        messages.push(out.freeze());
    }
    messages
}

/// The records of one journal message, in order.
pub(super) fn decode(mut bytes: Bytes) -> Result<Vec<JournalEntry>, JournalError> {
    let mut entries = Vec::new();
    while bytes.has_remaining() {
        let step = bytes.get_u8();
        let packet_id = take_u16(&mut bytes)?;
        if packet_id == 0 {
            return Err(JournalError::PacketId);
        }
        let step = match step {
            SENT => {
                if bytes.remaining() < 8 {
                    return Err(JournalError::Truncated);
                }
                JournalStep::Sent {
                    key: bytes.get_u64(),
                }
            }
            RELEASED => JournalStep::Released,
            COMPLETED => JournalStep::Completed,
            other => return Err(JournalError::Step(other)),
        };
        let len = usize::from(take_u16(&mut bytes)?);
        if bytes.remaining() < len {
            return Err(JournalError::Truncated);
        }
        let client_id =
            MqttStr::from_bytes(bytes.split_to(len)).map_err(|_| JournalError::ClientId)?;
        entries.push(JournalEntry {
            client_id,
            packet_id,
            step,
        });
    }
    Ok(entries)
}

fn take_u16(bytes: &mut Bytes) -> Result<u16, JournalError> {
    if bytes.remaining() < 2 {
        return Err(JournalError::Truncated);
    }
    Ok(bytes.get_u16())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(client: &str, packet_id: u16, step: JournalStep) -> JournalEntry {
        JournalEntry {
            client_id: MqttStr::try_from(client).unwrap(),
            packet_id,
            step,
        }
    }

    #[test]
    fn records_read_back_in_order() {
        let entries = vec![
            entry("a", 1, JournalStep::Sent { key: u64::MAX - 3 }),
            entry("bé", 65_535, JournalStep::Released),
            entry("bé", 65_535, JournalStep::Completed),
            entry("", 7, JournalStep::Sent { key: 0 }),
        ];
        let messages = encode(&entries, usize::MAX);
        assert_eq!(messages.len(), 1);
        assert_eq!(decode(messages[0].clone()).unwrap(), entries);
        assert!(encode(&[], usize::MAX).is_empty());
        assert!(decode(Bytes::new()).unwrap().is_empty());
    }

    #[test]
    fn a_long_run_of_records_is_cut_at_record_boundaries() {
        let entries: Vec<JournalEntry> = (1..=100)
            .map(|id| entry("client", id, JournalStep::Sent { key: u64::from(id) }))
            .collect();
        let messages = encode(&entries, 100);
        assert!(messages.iter().all(|m| m.len() <= 100));
        let back: Vec<JournalEntry> = messages
            .into_iter()
            .flat_map(|m| decode(m).unwrap())
            .collect();
        assert_eq!(back, entries);
    }

    #[test]
    fn a_damaged_message_is_refused_not_misread() {
        let whole = encode(
            &[entry("client", 3, JournalStep::Sent { key: 9 })],
            usize::MAX,
        )
        .remove(0);
        for cut in 1..whole.len() {
            assert_eq!(
                decode(whole.slice(..cut)),
                Err(JournalError::Truncated),
                "cut at {cut}"
            );
        }
        let mut bad_step = whole.to_vec();
        bad_step[0] = 9;
        assert_eq!(decode(bad_step.into()), Err(JournalError::Step(9)));
        let mut no_id = whole.to_vec();
        no_id[1..3].copy_from_slice(&[0, 0]);
        assert_eq!(decode(no_id.into()), Err(JournalError::PacketId));
        let mut bad_utf8 = whole.to_vec();
        let last = bad_utf8.len() - 1;
        bad_utf8[last] = 0xFF;
        assert_eq!(decode(bad_utf8.into()), Err(JournalError::ClientId));
    }
}
