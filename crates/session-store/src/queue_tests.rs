use super::*;

/// A test message weighing its value in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct W(u64);

impl Weighed for W {
    fn weight(&self) -> u64 {
        self.0
    }
}

impl Weighed for &str {
    fn weight(&self) -> u64 {
        self.len() as u64
    }
}

fn limits(max_len: usize, max_bytes: u64, total: u64, policy: OverflowPolicy) -> QueueLimits {
    QueueLimits {
        max_len,
        max_bytes,
        policy,
        budget: Arc::new(ByteBudget::new(total)),
    }
}

fn values(q: &MessageQueue<W>) -> Vec<u64> {
    q.iter().map(|w| w.0).collect()
}

#[test]
fn drop_oldest_keeps_the_newest() {
    let l = limits(2, 1000, 1000, OverflowPolicy::DropOldest);
    let mut q = MessageQueue::new();
    assert_eq!(q.push(W(1), &l), Pushed::Queued);
    assert_eq!(q.push(W(2), &l), Pushed::Queued);
    assert!(matches!(q.push(W(3), &l), Pushed::DroppedOldest(d) if d.len() == 1));
    assert_eq!(values(&q), vec![2, 3]);
}

#[test]
fn refuse_gives_the_message_back() {
    let l = limits(1, 1000, 1000, OverflowPolicy::Refuse);
    let mut q = MessageQueue::new();
    assert_eq!(q.push("a", &l), Pushed::Queued);
    assert_eq!(
        q.push("b", &l),
        Pushed::Refused {
            message: "b",
            dropped: vec![]
        }
    );
    assert_eq!(q.pop(), Some("a"));
    assert!(q.is_empty());
}

#[test]
fn the_byte_bound_drops_as_many_oldest_as_needed() {
    let l = limits(100, 10, 1000, OverflowPolicy::DropOldest);
    let mut q = MessageQueue::new();
    for w in [3, 3, 3] {
        assert_eq!(q.push(W(w), &l), Pushed::Queued);
    }
    assert!(matches!(q.push(W(7), &l), Pushed::DroppedOldest(d) if d.len() == 2));
    assert_eq!(values(&q), vec![3, 7]);
    assert_eq!(q.bytes(), 10);
    assert_eq!(l.budget.used(), 10);
}

#[test]
fn the_byte_bound_refuses_under_the_refuse_policy() {
    let l = limits(100, 10, 1000, OverflowPolicy::Refuse);
    let mut q = MessageQueue::new();
    assert_eq!(q.push(W(8), &l), Pushed::Queued);
    assert_eq!(
        q.push(W(3), &l),
        Pushed::Refused {
            message: W(3),
            dropped: vec![]
        }
    );
    assert_eq!(l.budget.used(), 8);
}

#[test]
fn a_message_larger_than_a_whole_queue_is_refused_without_dropping() {
    let l = limits(100, 10, 1000, OverflowPolicy::DropOldest);
    let mut q = MessageQueue::new();
    q.push(W(5), &l);
    assert_eq!(
        q.push(W(11), &l),
        Pushed::Refused {
            message: W(11),
            dropped: vec![]
        }
    );
    assert_eq!(values(&q), vec![5]);
}

#[test]
fn the_shared_budget_bounds_all_queues_together() {
    let l = limits(100, 100, 10, OverflowPolicy::DropOldest);
    let (mut a, mut b) = (MessageQueue::new(), MessageQueue::new());
    assert_eq!(a.push(W(6), &l), Pushed::Queued);
    // b holds nothing it could drop: refused.
    assert_eq!(
        b.push(W(6), &l),
        Pushed::Refused {
            message: W(6),
            dropped: vec![]
        }
    );
    assert_eq!(b.push(W(4), &l), Pushed::Queued);
    // a drops its own oldest to make room under the shared budget.
    assert!(matches!(a.push(W(5), &l), Pushed::DroppedOldest(d) if d.len() == 1));
    assert_eq!(l.budget.used(), 9);
    drop(a);
    assert_eq!(l.budget.used(), 4, "a dropped queue gives its bytes back");
    assert_eq!(b.pop(), Some(W(4)));
    assert_eq!(l.budget.used(), 0);
}

#[test]
fn take_where_and_retain_give_bytes_back() {
    let l = limits(10, 1000, 1000, OverflowPolicy::Refuse);
    let mut q = MessageQueue::new();
    for i in 0..6 {
        q.push(W(i), &l);
    }
    let taken: Vec<u64> = q.take_where(|m| m.0 % 3 == 0).iter().map(|w| w.0).collect();
    assert_eq!(taken, vec![0, 3]);
    assert_eq!(values(&q), vec![1, 2, 4, 5]);
    assert_eq!(q.retain(|m| m.0 % 2 == 0), 2);
    assert_eq!(q.len(), 2);
    assert_eq!(l.budget.used(), 6);
    q.push_front(W(1), &l);
    assert_eq!(q.bytes(), 7);
    q.retain(|_| false);
    assert_eq!(l.budget.used(), 0);
    assert!(q.filled.is_none(), "an emptied queue holds no allocation");
}

#[test]
fn an_empty_queue_costs_one_pointer() {
    assert_eq!(std::mem::size_of::<MessageQueue<W>>(), 8);
}
