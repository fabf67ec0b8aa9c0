//! The hot path allocates nothing and copies nothing: proven with a counting global
//! allocator (per thread, so parallel tests do not disturb each other) and pointer checks.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::hint::black_box;

use bytes::{BufMut, BytesMut};
use codec::{Limits, Packet, ProtocolVersion, decode};

struct CountingAllocator;

thread_local! {
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
}

fn count_one() {
    // `try_with`: the thread-local may already be gone while a thread shuts down.
    let _ = ALLOCATIONS.try_with(|count| count.set(count.get() + 1));
}

fn allocations() -> u64 {
    ALLOCATIONS.with(Cell::get)
}

// SAFETY: every method forwards to the system allocator with the caller's arguments
// unchanged, so `System`'s guarantees hold; counting touches only a thread-local `Cell`.
unsafe impl GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count_one();
        // SAFETY: the caller upholds `GlobalAlloc::alloc`'s contract, which we pass on.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count_one();
        // SAFETY: as for `alloc`.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count_one();
        // SAFETY: `ptr` came from this allocator, i.e. from `System`, with `layout`.
        unsafe { System.realloc(ptr, layout, new_size) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from this allocator, i.e. from `System`, with `layout`.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: CountingAllocator = CountingAllocator;

/// A QoS 1 PUBLISH with a 256-byte payload on topic "sensors/42/temperature".
fn publish_frame(v5: bool) -> Vec<u8> {
    let topic = b"sensors/42/temperature";
    let mut body = Vec::new();
    body.put_u16(topic.len() as u16);
    body.put_slice(topic);
    body.put_u16(7);
    if v5 {
        body.put_u8(0);
    }
    body.put_slice(&[0xA5; 256]);
    let mut frame = vec![0x32];
    let len = body.len();
    frame.extend_from_slice(&[(len % 128) as u8 | 0x80, (len / 128) as u8]);
    frame.extend_from_slice(&body);
    frame
}

fn assert_allocation_free(protocol: ProtocolVersion) {
    const FRAMES: usize = 100;
    let frame = publish_frame(protocol.is_v5());
    let mut buf = BytesMut::with_capacity(frame.len() * (FRAMES + 1));
    for _ in 0..=FRAMES {
        buf.extend_from_slice(&frame);
    }
    let limits = Limits::new(protocol);
    // The first split of a Vec-backed BytesMut moves it to a shared representation: one
    // allocation per receive buffer (made by `bytes`), not per packet.
    drop(decode(&mut buf, &limits));
    let before = allocations();
    for _ in 0..FRAMES {
        let packet = decode(&mut buf, &limits).expect("valid").expect("complete");
        assert!(matches!(packet, Packet::Publish(ref p) if p.payload().len() == 256));
        drop(black_box(packet));
    }
    assert_eq!(
        allocations() - before,
        0,
        "allocations while decoding {FRAMES} PUBLISH"
    );
    assert!(buf.is_empty());
}

#[test]
fn decoding_a_256_byte_3_1_1_publish_allocates_nothing() {
    assert_allocation_free(ProtocolVersion::V3_1_1);
}

#[test]
fn decoding_a_256_byte_5_0_publish_without_properties_allocates_nothing() {
    assert_allocation_free(ProtocolVersion::V5);
}

#[test]
fn the_allocation_counter_sees_allocations() {
    let before = allocations();
    drop(black_box(vec![1u8; 16]));
    assert_eq!(allocations() - before, 1);
}

#[test]
fn topic_and_payload_are_slices_of_the_received_buffer() {
    let frame = publish_frame(false);
    let mut buf = BytesMut::from(&frame[..]);
    let range = buf.as_ptr_range();
    let Ok(Some(Packet::Publish(publish))) =
        decode(&mut buf, &Limits::new(ProtocolVersion::V3_1_1))
    else {
        panic!("valid PUBLISH");
    };
    assert!(range.contains(&publish.topic().as_bytes().as_ptr()));
    assert!(range.contains(&publish.payload().as_ptr()));
    assert_eq!(publish.topic(), "sensors/42/temperature");
}
