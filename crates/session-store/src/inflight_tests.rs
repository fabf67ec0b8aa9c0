//! Tests of the inflight window.

use super::*;

fn pid(v: u16) -> PacketId {
    PacketId::new(v).unwrap()
}

/// A xorshift64 generator from `seed`: the tests' reproducible shuffles.
fn xorshift(mut state: u64) -> impl FnMut() -> u64 {
    move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    }
}

/// Admits and acknowledgements in a shuffled order over several wraps of the id space, one
/// entry held across whole wraps, and restored entries: every id handed out is one not in
/// flight (checked against the set of ids in flight), in order or not, and is the one
/// `next_packet_id` announced.
#[test]
fn an_admitted_id_is_never_one_in_flight_across_wraps() {
    let mut window = InflightWindow::new(100);
    let mut in_flight = std::collections::BTreeSet::new();
    let mut next = xorshift(0x9e37_79b9_7f4a_7c15);
    let mut random = move |bound: usize| (next() % bound as u64) as usize;
    let held = window.admit(QoS::AtLeastOnce, 0).unwrap();
    in_flight.insert(held.get());
    for step in 1..400_000u32 {
        if step == 150_000 {
            // A resumed session: entries restored under ids not handed out in order.
            for id in [40_000, 7, 65_535] {
                if in_flight.insert(id) {
                    window.restore(pid(id), InflightState::AwaitingPubAck(step));
                }
            }
        }
        let ack = window.has_room() && random(3) == 0 || !window.has_room();
        if ack && window.len() > 1 {
            let ids: Vec<PacketId> = window.iter().map(|(id, _)| id).collect();
            let skip = usize::from(ids[0] == held);
            let id = ids[skip + random(ids.len() - skip).min(2)];
            window.on_puback(id).unwrap();
            assert!(in_flight.remove(&id.get()));
        } else if window.has_room() {
            let announced = window.next_packet_id();
            let id = window.admit(QoS::AtLeastOnce, step).unwrap();
            assert_eq!(id, announced, "admit handed out another id than announced");
            assert!(
                in_flight.insert(id.get()),
                "id {id} handed out while in flight"
            );
        }
    }
    assert!(window.iter().any(|(id, _)| id == held), "held across wraps");
}

/// Acknowledgements of the oldest entry first, with the window at times full, at times
/// emptied, while now and then the entry right behind the oldest is held unacknowledged
/// through a whole wrap of the ids: every id handed out is one not in flight and the one
/// `next_packet_id` announced.
#[test]
fn ids_stay_free_when_the_oldest_entries_are_acknowledged_across_wraps() {
    let mut window = InflightWindow::new(128);
    let mut in_flight = std::collections::VecDeque::new();
    let mut held: Option<(PacketId, u32)> = None;
    let mut next = xorshift(0x2545_f491_4f6c_dd1d);
    let mut random = move |bound: u64| next() % bound;
    for step in 0..1_200_000u32 {
        if held.is_some_and(|(_, until)| step >= until) {
            held = None;
        }
        if held.is_none() && in_flight.len() >= 2 && random(2_000) == 0 {
            held = Some((in_flight[1], step + 150_000));
        }
        let roll = random(100);
        let at = usize::from(held.is_some_and(|(id, _)| in_flight.front() == Some(&id)));
        if (roll < 45 || !window.has_room()) && in_flight.len() > at {
            let id: PacketId = in_flight.remove(at).expect("in flight");
            window.on_puback(id).unwrap();
        } else if window.has_room() {
            let announced = window.next_packet_id();
            let id = window.admit(QoS::AtLeastOnce, ()).unwrap();
            assert_eq!(id, announced, "admit handed out another id than announced");
            assert!(
                !in_flight.contains(&id),
                "id {id} handed out while in flight"
            );
            in_flight.push_back(id);
        }
        assert_eq!(window.len(), in_flight.len());
    }
}

#[test]
fn qos1_flow_completes_on_puback() {
    let mut w = InflightWindow::new(2);
    let id = w.admit(QoS::AtLeastOnce, "a").unwrap();
    assert_eq!(w.on_puback(id), Ok("a"));
    assert!(w.is_empty());
    assert_eq!(w.on_puback(id), Err(AckError::UnknownPacketId(id)));
}

#[test]
fn qos2_flow_releases_message_on_pubrec_and_completes_on_pubcomp() {
    let mut w = InflightWindow::new(2);
    let id = w.admit(QoS::ExactlyOnce, "b").unwrap();
    assert_eq!(w.on_pubcomp(id), Err(AckError::WrongState(id)));
    assert_eq!(w.on_puback(id), Err(AckError::WrongState(id)));
    assert_eq!(w.on_pubrec(id), Ok(Some("b")));
    assert_eq!(w.on_pubrec(id), Ok(None), "a repeated PUBREC is accepted");
    w.mark_all_unsent();
    assert_eq!(
        w.take_resends(),
        vec![(id, None)],
        "the PUBREL is owed again"
    );
    assert_eq!(w.on_pubcomp(id), Ok(()));
    assert!(w.is_empty());
}

#[test]
fn window_is_bounded_and_gives_the_message_back() {
    let mut w = InflightWindow::new(1);
    w.admit(QoS::AtLeastOnce, 1).unwrap();
    assert_eq!(w.admit(QoS::AtLeastOnce, 2), Err(2));
    assert_eq!(w.admit(QoS::AtMostOnce, 3), Err(3), "QoS 0 never enters");
}

#[test]
fn packet_ids_skip_those_in_flight_and_wrap() {
    let mut w = InflightWindow::new(u16::MAX);
    let first = w.admit(QoS::AtLeastOnce, 0u32).unwrap();
    assert_eq!(first, pid(1));
    for i in 1..u32::from(u16::MAX) - 1 {
        let id = w.admit(QoS::AtLeastOnce, i).unwrap();
        w.on_puback(id).unwrap();
    }
    // The id counter has wrapped; id 1 is still in flight and must be skipped.
    let mut seen = Vec::new();
    for i in 0..3 {
        let id = w.admit(QoS::AtLeastOnce, 100_000 + i).unwrap();
        seen.push(id);
    }
    assert!(!seen.contains(&first));
    assert!(seen.iter().all(|id| id.get() != 0));
}

#[test]
fn resend_keeps_send_order_and_drain_returns_unacked() {
    let mut w = InflightWindow::new(10);
    let a = w.admit(QoS::AtLeastOnce, "a").unwrap();
    let b = w.admit(QoS::ExactlyOnce, "b").unwrap();
    let c = w.admit(QoS::ExactlyOnce, "c").unwrap();
    w.on_pubrec(c).unwrap();
    w.mark_all_unsent();
    assert_eq!(
        w.take_resends(),
        vec![(a, Some("a")), (b, Some("b")), (c, None)]
    );
    let drained = w.drain_messages();
    assert_eq!(
        drained,
        vec![(QoS::AtLeastOnce, "a"), (QoS::ExactlyOnce, "b")]
    );
    assert!(w.is_empty());
}

/// Entries a restart found come back unsent, in the order restored, and new ids skip them.
#[test]
fn restored_entries_are_resent_in_order_and_their_ids_stay_taken() {
    let mut w = InflightWindow::new(10);
    let (a, b) = (PacketId::new(7).unwrap(), PacketId::new(3).unwrap());
    w.restore(a, InflightState::AwaitingPubAck("a"));
    w.restore(b, InflightState::AwaitingPubComp);
    w.restore(a, InflightState::AwaitingPubAck("again"));
    assert_eq!(w.len(), 2, "an id restored twice is kept once");
    assert_eq!(w.take_resends(), vec![(a, Some("a")), (b, None)]);
    let next = w.admit(QoS::AtLeastOnce, "c").unwrap();
    assert!(next != a && next != b);
}

/// A resumed session with a smaller Receive Maximum: re-sends what fits, in send order, and
/// the rest one by one as acknowledgements free the window; nothing new is admitted before.
#[test]
fn resends_stay_within_the_capacity_of_the_new_connection() {
    let mut w = InflightWindow::new(3);
    let a = w.admit(QoS::AtLeastOnce, "a").unwrap();
    let b = w.admit(QoS::ExactlyOnce, "b").unwrap();
    let c = w.admit(QoS::ExactlyOnce, "c").unwrap();
    w.on_pubrec(b).unwrap();
    assert!(w.take_resends().is_empty(), "all sent on this connection");
    w.mark_all_unsent();
    w.set_capacity(2);
    assert_eq!(w.take_resends(), vec![(a, Some("a")), (b, None)]);
    assert!(w.take_resends().is_empty(), "the window is full");
    assert!(!w.has_room());
    assert_eq!(w.admit(QoS::AtLeastOnce, "d"), Err("d"));
    w.on_puback(a).unwrap();
    assert_eq!(w.take_resends(), vec![(c, Some("c"))]);
    w.on_pubcomp(b).unwrap();
    assert!(w.take_resends().is_empty());
    assert!(w.has_room());
    assert!(w.admit(QoS::AtLeastOnce, "d").is_ok());
}

#[test]
fn take_qos1_where_leaves_qos2_flows() {
    let mut w = InflightWindow::new(10);
    w.admit(QoS::AtLeastOnce, 1).unwrap();
    let two = w.admit(QoS::ExactlyOnce, 2).unwrap();
    w.admit(QoS::AtLeastOnce, 3).unwrap();
    w.admit(QoS::AtLeastOnce, 4).unwrap();
    let taken: Vec<u32> = w
        .take_qos1_where(|m| *m != 3)
        .into_iter()
        .map(|(_, m)| m)
        .collect();
    assert_eq!(taken, vec![1, 4]);
    assert_eq!(w.len(), 2);
    assert_eq!(w.on_pubrec(two), Ok(Some(2)));
}

#[test]
fn shrinking_capacity_keeps_entries_and_blocks_new_ones() {
    let mut w = InflightWindow::new(3);
    for m in 0..3 {
        w.admit(QoS::AtLeastOnce, m).unwrap();
    }
    w.set_capacity(1);
    assert_eq!(w.len(), 3);
    assert!(!w.has_room());
}

/// A full window is due for a refill once half of it is free (rounded up), and a window of one
/// or two as soon as a slot is: small windows are never left idle.
#[test]
fn a_full_window_is_refilled_once_half_of_it_is_free() {
    for (capacity, due_at) in [(1u16, 0usize), (2, 1), (3, 1), (10, 5), (128, 64)] {
        let mut w = InflightWindow::new(capacity);
        let ids: Vec<PacketId> = (0..capacity)
            .map(|m| w.admit(QoS::AtLeastOnce, m).unwrap())
            .collect();
        assert!(!w.refill_due(), "capacity {capacity}: full");
        for id in ids {
            w.on_puback(id).unwrap();
            assert_eq!(
                w.refill_due(),
                w.len() <= due_at,
                "capacity {capacity}, {} in flight",
                w.len()
            );
            if w.len() <= due_at {
                break;
            }
        }
        assert_eq!(w.len(), due_at, "capacity {capacity}");
    }
}
