use std::sync::Arc;
use std::sync::atomic::AtomicUsize;

use super::*;

#[test]
fn full_mailbox_keeps_the_batch_and_order() {
    let mailboxes = vec![Mailbox::new(1).unwrap(), Mailbox::new(1).unwrap()];
    let mut outboxes = Outboxes::new(2, 3);
    let mut local = LocalInbox::default();
    let to = ShardId::new(1);
    outboxes.post(to, 1).unwrap();
    outboxes.flush(&mailboxes, ShardId::new(0), &mut local);
    assert!(!outboxes.is_blocked());
    outboxes.post(to, 2).unwrap();
    outboxes.post(to, 3).unwrap();
    outboxes.flush(&mailboxes, ShardId::new(0), &mut local);
    assert!(outboxes.is_blocked(), "capacity 1: second batch refused");
    outboxes.post(to, 4).unwrap();
    assert!(matches!(
        outboxes.post(to, 5),
        Err(RuntimeError::MailboxFull { pending: 3, .. })
    ));
    assert_eq!(mailboxes[1].pop(), Some(vec![1]));
    outboxes.flush(&mailboxes, ShardId::new(0), &mut local);
    assert!(!outboxes.is_blocked());
    assert_eq!(mailboxes[1].pop(), Some(vec![2, 3, 4]));
    assert_eq!(outboxes.pending(to), 0);
}

/// Control messages are never refused, stay in order with data messages, and are reported
/// when kept beyond the bound; data messages are refused there.
#[test]
fn control_messages_pass_a_full_outbox_in_order() {
    let mailboxes = vec![Mailbox::new(1).unwrap(), Mailbox::new(1).unwrap()];
    let mut outboxes = Outboxes::new(2, 2);
    let mut local = LocalInbox::default();
    let to = ShardId::new(1);
    outboxes.post(to, 1).unwrap();
    outboxes.flush(&mailboxes, ShardId::new(0), &mut local);
    outboxes.post(to, 2).unwrap();
    assert!(!outboxes.post_reliable(to, 3).unwrap());
    outboxes.flush(&mailboxes, ShardId::new(0), &mut local);
    assert!(outboxes.is_blocked());
    assert!(matches!(
        outboxes.post(to, 4),
        Err(RuntimeError::MailboxFull { .. })
    ));
    assert!(
        outboxes.post_reliable(to, 5).unwrap(),
        "kept beyond the bound"
    );
    assert!(outboxes.post_reliable(to, 6).unwrap());
    assert!(
        outboxes.post_reliable(ShardId::new(7), 0).is_err(),
        "no such shard"
    );
    assert_eq!(mailboxes[1].pop(), Some(vec![1]));
    outboxes.flush(&mailboxes, ShardId::new(0), &mut local);
    assert_eq!(mailboxes[1].pop(), Some(vec![2, 3, 5, 6]));
}

/// Urgent messages travel their own queue: a full ordered lane does not hold them back, and
/// they are never refused.
#[test]
fn urgent_messages_pass_a_full_ordered_lane() {
    let mailboxes = vec![Mailbox::new(1).unwrap(), Mailbox::new(1).unwrap()];
    let mut outboxes = Outboxes::new(2, 1);
    let mut local = LocalInbox::default();
    let (me, to) = (ShardId::new(0), ShardId::new(1));
    outboxes.post(to, 1).unwrap();
    outboxes.flush(&mailboxes, me, &mut local);
    outboxes.post(to, 2).unwrap();
    assert!(!outboxes.post_urgent(to, 10).unwrap());
    outboxes.flush(&mailboxes, me, &mut local);
    assert!(outboxes.is_blocked(), "the ordered lane is full");
    assert_eq!(mailboxes[1].pop_from(Lane::Urgent), Some(vec![10]));
    assert!(!outboxes.post_urgent(to, 11).unwrap());
    assert!(
        outboxes.post_urgent(to, 12).unwrap(),
        "kept beyond the bound, not refused"
    );
    assert!(outboxes.post_urgent(me, 13).is_ok());
    outboxes.flush(&mailboxes, me, &mut local);
    assert_eq!(mailboxes[1].pop_from(Lane::Urgent), Some(vec![11, 12]));
    assert_eq!(local.urgent, vec![13]);
    assert_eq!(mailboxes[1].pop(), Some(vec![1]));
    outboxes.flush(&mailboxes, me, &mut local);
    assert_eq!(mailboxes[1].pop(), Some(vec![2]));
    assert!(!outboxes.has_pending());
}

#[test]
fn own_shard_batch_is_delivered_locally() {
    let mailboxes = vec![Mailbox::<u8>::new(4).unwrap()];
    let mut outboxes = Outboxes::new(1, 8);
    let mut local = LocalInbox::default();
    outboxes.post(ShardId::new(0), 9).unwrap();
    outboxes.flush(&mailboxes, ShardId::new(0), &mut local);
    assert_eq!(local.ordered, vec![9]);
    assert!(mailboxes[0].pop().is_none());
    assert!(outboxes.post(ShardId::new(3), 1).is_err());
}

/// Several senders hammer one small mailbox while the receiver sleeps on the eventfd between
/// drains. Every message arrives, in order per sender, and wake-ups are coalesced (never more
/// eventfd wake-ups than batches). A lost wake-up would leave the receiver asleep with messages
/// queued: the 20 s poll is only a hang detector.
#[test]
fn stress_no_lost_wakeups_order_per_sender() {
    const SENDERS: usize = 3;
    const BATCHES: usize = 3000;
    const PER_BATCH: usize = 7;
    let mailbox = Arc::new(Mailbox::<(usize, usize)>::new(8).unwrap());
    let wakeups = Arc::new(AtomicUsize::new(0));
    let senders: Vec<_> = (0..SENDERS)
        .map(|sender| {
            let mailbox = Arc::clone(&mailbox);
            std::thread::spawn(move || {
                let mut seq = 0;
                for _ in 0..BATCHES {
                    let mut batch: Vec<_> = (0..PER_BATCH).map(|i| (sender, seq + i)).collect();
                    seq += PER_BATCH;
                    while let Err(refused) = mailbox.push(batch) {
                        batch = refused;
                        std::thread::yield_now();
                    }
                }
            })
        })
        .collect();
    let mut next = [0usize; SENDERS];
    let total = SENDERS * BATCHES * PER_BATCH;
    let mut received = 0;
    while received < total {
        let woke = mailbox.waker().eventfd().wait_readable(20_000).unwrap();
        assert!(
            woke,
            "receiver never woken with {received}/{total} messages"
        );
        mailbox.waker().eventfd().drain().unwrap();
        wakeups.fetch_add(1, Ordering::Relaxed);
        mailbox.waker().rearm();
        while let Some(batch) = mailbox.pop() {
            for (sender, seq) in batch {
                assert_eq!(seq, next[sender], "per-sender order");
                next[sender] += 1;
                received += 1;
            }
        }
    }
    for sender in senders {
        sender.join().unwrap();
    }
    assert!(mailbox.pop().is_none());
    assert!(wakeups.load(Ordering::Relaxed) <= SENDERS * BATCHES);
}
