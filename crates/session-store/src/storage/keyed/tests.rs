//! The planned writes of a batch over a plain in-memory store (salvage's `KeyImage`): each key once, and what a
//! batch writes adds up to the flows it describes.

use std::collections::HashSet;

use super::Keyed;
use super::keys::{AWAITING, awaiting_ids_key, awaiting_key};
use crate::SessionExpiry;
use crate::storage::SessionWrite;
use crate::storage::contract_writes::{acked, queued_and_sent, released, saved, text};
use crate::storage::encoding;
use crate::storage::salvage::image::KeyImage;
use codec::{PacketId, QoS};

fn commit(keyed: &mut Keyed, kv: &mut KeyImage, batch: &[SessionWrite]) {
    let mut writes = Vec::new();
    let committed = keyed.plan(kv, batch, &mut writes).unwrap();
    assert!(committed.skipped.is_empty(), "{:?}", committed.skipped);
    let mut keys = HashSet::new();
    for write in &writes {
        assert!(
            keys.insert(write.key.clone()),
            "{:?} written twice",
            write.key
        );
    }
    for write in writes {
        kv.apply(write);
    }
}

#[test]
fn an_inflight_key_is_written_once_in_a_batch_that_ends_its_flow_and_starts_another() {
    let (mut keyed, mut kv) = (Keyed::default(), KeyImage::default());
    let first = [
        saved("a", SessionExpiry::Never),
        queued_and_sent("a", 1, 7, QoS::ExactlyOnce),
        queued_and_sent("a", 2, 8, QoS::ExactlyOnce),
        queued_and_sent("a", 5, 9, QoS::AtLeastOnce),
    ];
    commit(&mut keyed, &mut kv, &first);
    // 7: released and completed in this batch, then sent again; 8: completed and sent again;
    // 9: acknowledged (its entry of the batch before deleted) and sent again.
    let second = [
        released(7),
        acked(7),
        queued_and_sent("a", 3, 7, QoS::AtLeastOnce),
        released(8),
        acked(8),
        queued_and_sent("a", 4, 8, QoS::ExactlyOnce),
        released(8),
        acked(9),
        queued_and_sent("a", 6, 9, QoS::AtLeastOnce),
    ];
    commit(&mut keyed, &mut kv, &second);
    let inflight: Vec<&Vec<u8>> =
        kv.0.keys()
            .filter(|key| key[0] == super::INFLIGHT)
            .collect();
    assert_eq!(inflight.len(), 3, "the new flows of 7, 8 and 9");
    let mut reloaded = Keyed::default();
    let sessions = reloaded.load(&kv, usize::MAX).unwrap().recovered.sessions;
    let ids: Vec<u16> = sessions[0]
        .inflight
        .iter()
        .map(|(id, _)| id.get())
        .collect();
    assert_eq!(ids, [7, 8, 9]);
}

fn qos2(received: bool, id: u16) -> SessionWrite {
    let (client_id, packet_id) = (text("a"), PacketId::new(id).unwrap());
    if received {
        SessionWrite::Qos2Received {
            client_id,
            packet_id,
        }
    } else {
        SessionWrite::Qos2Released {
            client_id,
            packet_id,
        }
    }
}

/// The keys of client "a"'s inbound QoS 2 ids: `(ids under the one key, ids under keys of the
/// older layout)`.
fn awaiting(kv: &KeyImage) -> (Option<Vec<u16>>, Vec<u16>) {
    let key = awaiting_ids_key(&text("a"));
    let ids = (kv.0.get(&key)).map(|value| {
        let ids = encoding::decode_awaiting_ids(value).unwrap();
        ids.iter().map(|id| id.get()).collect()
    });
    let legacy = (kv.0.keys())
        .filter(|key| key[0] == AWAITING)
        .map(|key| u16::from_be_bytes([key[key.len() - 2], key[key.len() - 1]]))
        .collect();
    (ids, legacy)
}

#[test]
fn inbound_qos2_ids_are_one_key_written_once_per_batch_and_gone_with_the_last() {
    let (mut keyed, mut kv) = (Keyed::default(), KeyImage::default());
    let batch = [
        saved("a", SessionExpiry::Never),
        qos2(true, 3),
        qos2(true, 1),
        qos2(true, 2),
        qos2(false, 1),
    ];
    commit(&mut keyed, &mut kv, &batch);
    assert_eq!(awaiting(&kv), (Some(vec![3, 2]), vec![]));
    let mut reloaded = Keyed::default();
    let sessions = reloaded.load(&kv, 0).unwrap().recovered.sessions;
    let ids: Vec<u16> = sessions[0]
        .awaiting_release
        .iter()
        .map(|id| id.get())
        .collect();
    assert_eq!(ids, [2, 3], "loaded in id order");
    commit(&mut reloaded, &mut kv, &[qos2(false, 3), qos2(false, 2)]);
    assert_eq!(awaiting(&kv), (None, vec![]), "no key once none is left");
}

#[test]
fn ids_under_the_older_layout_are_loaded_and_deleted_when_the_ids_are_next_written() {
    let (mut keyed, mut kv) = (Keyed::default(), KeyImage::default());
    commit(&mut keyed, &mut kv, &[saved("a", SessionExpiry::Never)]);
    for id in [4, 5] {
        let key = awaiting_key(&text("a"), PacketId::new(id).unwrap());
        kv.0.insert(key, Vec::new());
    }
    let mut reloaded = Keyed::default();
    let sessions = reloaded.load(&kv, 0).unwrap().recovered.sessions;
    assert_eq!(sessions[0].awaiting_release.len(), 2);
    commit(&mut reloaded, &mut kv, &[qos2(true, 6), qos2(false, 4)]);
    assert_eq!(awaiting(&kv), (Some(vec![5, 6]), vec![]));
    // A duplicate of an id loaded from the older layout is refused, as any other.
    let mut writes = Vec::new();
    let committed = reloaded.plan(&kv, &[qos2(true, 5)], &mut writes).unwrap();
    assert_eq!(committed.skipped.len(), 1);
    // Removing the session deletes its ids' key.
    let removed = SessionWrite::SessionRemoved {
        client_id: text("a"),
    };
    let mut keyed = Keyed::default();
    keyed.load(&kv, 0).unwrap();
    commit(&mut keyed, &mut kv, &[removed]);
    assert_eq!(awaiting(&kv), (None, vec![]));
    assert!(kv.0.is_empty(), "{:?}", kv.0.keys().collect::<Vec<_>>());
}
