//! Server connection ids that name their shard (QUIC-LB style, RFC 9000 §5.1 leaves their form
//! to the server): 8 bytes, the first the index of the shard that owns the connection, the rest
//! random. A datagram of an existing connection carries one of them as its destination, so any
//! shard the kernel hands it to can tell the owner from its first bytes without state.

use std::time::Duration;

use quinn_proto::{ConnectionId, ConnectionIdGenerator};

/// Length of the ids this server hands out.
pub const CID_LEN: usize = 8;

/// The most shards an id can name (one byte).
pub const MAX_SHARDS: usize = 256;

/// Makes the connection ids of one shard's endpoint.
#[derive(Debug)]
pub struct ShardCids {
    shard: u8,
}

impl ShardCids {
    /// Ids naming `shard` (below [`MAX_SHARDS`]).
    pub fn new(shard: usize) -> Self {
        let shard = u8::try_from(shard).expect("invariant: at most 256 shards serve QUIC");
        Self { shard }
    }
}

impl ConnectionIdGenerator for ShardCids {
    fn generate_cid(&mut self) -> ConnectionId {
        let mut bytes: [u8; CID_LEN] = rand::random();
        bytes[0] = self.shard;
        ConnectionId::new(&bytes)
    }

    fn cid_len(&self) -> usize {
        CID_LEN
    }

    fn cid_lifetime(&self) -> Option<Duration> {
        None
    }
}

/// The shard a datagram's connection belongs to, read from its first packet's destination id;
/// `None` when the receiving shard should handle it: an Initial or 0-RTT packet (its
/// destination id is the client's choice, not one of ours), a packet too short to read, or an
/// id naming no shard (answered by the receiving shard: a stateless reset or nothing).
pub fn owner_shard(datagram: &[u8], shard_count: usize) -> Option<usize> {
    let first = *datagram.first()?;
    let id_start = if first & 0x80 != 0 {
        // Long header: flags, version (4 bytes), destination id length, destination id.
        let packet_type = (first >> 4) & 0x03;
        let client_chosen = packet_type == 0x00 || packet_type == 0x01;
        let length = usize::from(*datagram.get(5)?);
        if client_chosen || length != CID_LEN {
            return None;
        }
        6
    } else {
        // Short header: flags, then the destination id (its length is ours).
        1
    };
    let id = datagram.get(id_start..id_start + CID_LEN)?;
    let shard = usize::from(id[0]);
    (shard < shard_count).then_some(shard)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn long(packet_type: u8, id: &[u8]) -> Vec<u8> {
        let mut packet = vec![0xc0 | packet_type << 4, 0, 0, 0, 1, id.len() as u8];
        packet.extend_from_slice(id);
        packet.extend_from_slice(&[0; 20]);
        packet
    }

    #[test]
    fn ids_name_their_shard_and_differ() {
        let mut ids = ShardCids::new(3);
        let (a, b) = (ids.generate_cid(), ids.generate_cid());
        assert_eq!((a[0], a.len()), (3, CID_LEN));
        assert_ne!(a, b);
    }

    #[test]
    fn short_and_handshake_packets_go_to_the_shard_their_id_names() {
        let id = [2, 9, 9, 9, 9, 9, 9, 9];
        let mut short = vec![0x40];
        short.extend_from_slice(&id);
        short.extend_from_slice(&[0; 20]);
        assert_eq!(owner_shard(&short, 4), Some(2));
        assert_eq!(owner_shard(&long(0x02, &id), 4), Some(2), "Handshake");
        assert_eq!(owner_shard(&short, 2), None, "no such shard");
    }

    #[test]
    fn client_chosen_ids_and_junk_stay_where_they_landed() {
        let id = [1; CID_LEN];
        assert_eq!(owner_shard(&long(0x00, &id), 4), None, "Initial");
        assert_eq!(owner_shard(&long(0x01, &id), 4), None, "0-RTT");
        assert_eq!(owner_shard(&long(0x02, &[1; 5]), 4), None, "not our length");
        assert_eq!(owner_shard(&[], 4), None);
        assert_eq!(owner_shard(&[0x40, 1, 2], 4), None, "too short");
    }
}
