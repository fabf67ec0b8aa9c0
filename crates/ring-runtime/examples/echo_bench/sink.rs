//! The receiving end of the streaming benchmarks (shared with zerocopy_bench and
//! fixed_send_bench).

use std::io::Read;
use std::net::TcpStream;
use std::sync::mpsc;

/// Reads `stream` to its end on a thread of its own; the receiver gets how many bytes came.
pub fn drain(mut stream: TcpStream) -> mpsc::Receiver<usize> {
    let (done_tx, done_rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut buf = vec![0u8; 1 << 20];
        let mut total = 0usize;
        while let Ok(read) = stream.read(&mut buf) {
            if read == 0 {
                break;
            }
            total += read;
        }
        done_tx.send(total).unwrap();
    });
    done_rx
}
