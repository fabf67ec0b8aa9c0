use bytes::Bytes;
use codec::{MqttStr, ProtocolVersion, QoS};
use session_store::SessionExpiry;

use super::*;

fn sent(client: &str, packet_id: u16, key: u64) -> JournalEntry {
    let step = JournalStep::Sent { key };
    entry(client, packet_id, step)
}

fn released(client: &str, packet_id: u16) -> JournalEntry {
    entry(client, packet_id, JournalStep::Released)
}

fn entry(client: &str, packet_id: u16, step: JournalStep) -> JournalEntry {
    JournalEntry {
        client_id: MqttStr::try_from(client).unwrap(),
        packet_id,
        step,
    }
}

fn copy(payload: &'static str, qos: QoS) -> StoredMessage {
    StoredMessage {
        topic: Bytes::from_static(b"t"),
        payload: Bytes::from_static(payload.as_bytes()),
        qos,
        retain: false,
        properties: Bytes::new(),
        expires_at: None,
        sub_ids: Vec::new(),
        accepted_at: None,
        key: 0,
    }
}

/// [`copy`] with the stored key `key`.
fn keyed(payload: &'static str, qos: QoS, key: u64) -> StoredMessage {
    StoredMessage {
        key,
        ..copy(payload, qos)
    }
}

fn session() -> StoredSession {
    let client_id = MqttStr::try_from("c").unwrap();
    StoredSession::new(client_id, ProtocolVersion::V5, SessionExpiry::Never, None)
}

/// The session's inflight entries as (packet id, payload or "PUBREL").
fn in_flight(session: &StoredSession) -> Vec<(u16, String)> {
    let shown = |state: &InflightState<StoredMessage>| match state {
        InflightState::AwaitingPubRec(m) | InflightState::AwaitingPubAck(m) => {
            String::from_utf8(m.payload.to_vec()).unwrap()
        }
        InflightState::AwaitingPubComp => "PUBREL".into(),
    };
    (session.inflight.iter())
        .map(|(id, state)| (id.get(), shown(state)))
        .collect()
}

fn payloads(copies: &[StoredMessage]) -> Vec<&str> {
    copies
        .iter()
        .map(|c| std::str::from_utf8(&c.payload).unwrap())
        .collect()
}

#[test]
fn what_the_client_has_is_not_queued_again() {
    let journal = [
        sent("c", 1, 10), // PUBREC came: delivered.
        sent("other", 1, 11),
        sent("c", 2, 12), // Still awaiting PUBREC: resent under 2.
        released("c", 1),
        sent("c", 3, 99), // Its message is not among those read: its id is released.
        sent("c", 4, 14),
        released("c", 4),
        entry("c", 4, JournalStep::Completed), // Done: nothing to resend.
    ];
    let deliveries = Deliveries::of(&journal, "c");
    let copies = vec![
        (10, copy("ten", QoS::ExactlyOnce)),
        (11, copy("eleven", QoS::ExactlyOnce)),
        (12, copy("twelve", QoS::ExactlyOnce)),
        (0, copy("no key", QoS::ExactlyOnce)),
        (13, copy("thirteen", QoS::ExactlyOnce)),
        (14, copy("fourteen", QoS::ExactlyOnce)),
    ];
    let mut session = session();
    let queued = apply(&mut session, copies, &deliveries);
    assert_eq!(payloads(&queued), ["eleven", "no key", "thirteen"]);
    let expected = [(2, "twelve"), (1, "PUBREL"), (3, "PUBREL")];
    let expected: Vec<(u16, String)> = expected.iter().map(|(i, p)| (*i, (*p).into())).collect();
    assert_eq!(
        in_flight(&session),
        expected,
        "in the order of their last steps"
    );
}

#[test]
fn a_packet_id_used_again_carries_only_its_latest_message() {
    let journal = [sent("c", 5, 1), released("c", 5), sent("c", 5, 2)];
    let deliveries = Deliveries::of(&journal, "c");
    let copies = vec![
        (1, copy("first", QoS::ExactlyOnce)),
        (2, copy("second", QoS::ExactlyOnce)),
    ];
    let mut session = session();
    let queued = apply(&mut session, copies, &deliveries);
    assert!(
        queued.is_empty(),
        "the first was completed before its id was used again"
    );
    assert_eq!(in_flight(&session), [(5, "second".to_owned())]);
}

#[test]
fn a_copy_below_qos_2_and_a_session_without_steps_are_queued() {
    let journal = [sent("c", 1, 7)];
    let deliveries = Deliveries::of(&journal, "c");
    let mut session = session();
    let queued = apply(
        &mut session,
        vec![(7, copy("q1", QoS::AtLeastOnce))],
        &deliveries,
    );
    assert_eq!(payloads(&queued), ["q1"]);
    assert_eq!(in_flight(&session), [(1, "PUBREL".to_owned())]);
    assert!(Deliveries::of(&journal, "someone else").is_empty());
}

#[test]
fn an_id_the_session_holds_already_is_left_to_it() {
    let journal = [sent("c", 4, 8)];
    let deliveries = Deliveries::of(&journal, "c");
    let mut session = session();
    let own = copy("own", QoS::ExactlyOnce);
    session.inflight.push((
        PacketId::new(4).unwrap(),
        InflightState::AwaitingPubRec(own),
    ));
    let queued = apply(
        &mut session,
        vec![(8, copy("eight", QoS::ExactlyOnce))],
        &deliveries,
    );
    assert_eq!(payloads(&queued), ["eight"], "queued, never dropped");
    assert_eq!(in_flight(&session), [(4, "own".to_owned())]);
}

#[test]
fn a_restarted_node_leaves_out_what_was_delivered_or_is_resent_from_its_store() {
    let journal = [
        sent("c", 1, 10),
        released("c", 1), // Delivered.
        sent("c", 2, 20), // In flight, and in the store: resent from there.
        sent("c", 3, 30), // In flight, not in the store (its write was lost): comes again.
    ];
    let deliveries = Deliveries::of(&journal, "c");
    let stored = [2];
    assert!(deliveries.had_before_restart(10, &stored));
    assert!(deliveries.had_before_restart(20, &stored));
    assert!(!deliveries.had_before_restart(30, &stored));
    assert!(!deliveries.had_before_restart(40, &stored), "never sent");
    assert!(!deliveries.had_before_restart(0, &stored), "no key");
}

#[test]
fn a_mirrored_queue_loses_the_qos_2_messages_the_client_acknowledged_there() {
    let mut session = session();
    session.queued = vec![
        (1, keyed("acked", QoS::ExactlyOnce, 10)),
        (2, keyed("out", QoS::ExactlyOnce, 11)),
        (3, keyed("never sent", QoS::ExactlyOnce, 12)),
        (4, keyed("qos 1", QoS::AtLeastOnce, 13)),
        (5, keyed("no key", QoS::ExactlyOnce, 0)),
    ];
    let id = |n| PacketId::new(n).unwrap();
    session.inflight = vec![
        (
            id(3),
            InflightState::AwaitingPubRec(keyed("acked in flight", QoS::ExactlyOnce, 14)),
        ),
        (
            id(4),
            InflightState::AwaitingPubRec(keyed("still out", QoS::ExactlyOnce, 15)),
        ),
        (id(5), InflightState::AwaitingPubComp),
    ];
    let entries = [
        sent("c", 1, 10),
        released("c", 1),
        sent("c", 2, 11),
        sent("c", 3, 14),
        released("c", 3),
        sent("c", 4, 15),
    ];
    let deliveries = Deliveries::of(&entries, "c");
    assert_eq!(drop_acknowledged(&mut session, &deliveries), 2);
    assert_eq!(
        in_flight(&session),
        [(4, "still out".into()), (5, "PUBREL".into())],
        "an in-flight entry whose PUBREC came goes too"
    );
    let left: Vec<StoredMessage> = session.queued.iter().map(|(_, m)| m.clone()).collect();
    assert_eq!(
        payloads(&left),
        ["out", "never sent", "qos 1", "no key"],
        "only what its PUBREC says the client has goes; a PUBLISH still out may not have arrived"
    );
}

#[test]
fn a_qos_2_copy_another_run_sent_is_left_out_unless_the_dead_run_sent_it_too() {
    let mut copies = vec![
        (10, keyed("sent elsewhere", QoS::ExactlyOnce, 10)),
        (11, keyed("sent by both", QoS::ExactlyOnce, 11)),
        (12, keyed("never sent", QoS::ExactlyOnce, 12)),
        (13, keyed("qos 1 sent elsewhere", QoS::AtLeastOnce, 13)),
    ];
    let every = [
        sent("c", 1, 10),
        sent("c", 2, 11),
        sent("c", 3, 13),
        sent("d", 4, 12),
    ];
    let every_run = Deliveries::of(&every, "c");
    let dead_run = Deliveries::of(&[sent("c", 7, 11)], "c");
    assert_eq!(
        leave_out_sent_elsewhere(&mut copies, &every_run, Some(&dead_run)),
        1
    );
    let left: Vec<StoredMessage> = copies.into_iter().map(|(_, m)| m).collect();
    assert_eq!(
        payloads(&left),
        ["sent by both", "never sent", "qos 1 sent elsewhere"],
        "the dead run's own sends are placed by its journal; another client's do not count"
    );
}

#[test]
fn a_mirrored_qos_2_message_still_out_goes_back_in_flight_under_its_packet_id() {
    let mut session = session();
    session.queued = vec![
        (1, keyed("out second", QoS::ExactlyOnce, 11)),
        (2, keyed("out first", QoS::ExactlyOnce, 12)),
        (3, keyed("never sent", QoS::ExactlyOnce, 13)),
        (4, keyed("qos 1 sent", QoS::AtLeastOnce, 14)),
        (5, keyed("id held", QoS::ExactlyOnce, 15)),
        (6, keyed("acked", QoS::ExactlyOnce, 16)),
    ];
    session.inflight = vec![(PacketId::new(9).unwrap(), InflightState::AwaitingPubComp)];
    let entries = [
        sent("c", 2, 12),
        sent("c", 1, 11),
        sent("c", 3, 14),
        sent("c", 9, 15),
        sent("c", 4, 16),
        released("c", 4),
    ];
    let deliveries = Deliveries::of(&entries, "c");
    assert_eq!(resume_still_out(&mut session, &deliveries), 2);
    assert_eq!(
        in_flight(&session),
        [
            (9, "PUBREL".into()),
            (2, "out first".into()),
            (1, "out second".into())
        ],
        "in the journal's order, under the ids they went out with"
    );
    let left: Vec<StoredMessage> = session.queued.iter().map(|(_, m)| m.clone()).collect();
    assert_eq!(
        payloads(&left),
        ["never sent", "qos 1 sent", "id held", "acked"],
        "not what was never sent, nor QoS 1, nor under an id the session holds, nor what its PUBREC says the client has (dropped apart)"
    );
}
