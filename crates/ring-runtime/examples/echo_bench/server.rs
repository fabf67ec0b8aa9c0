//! The servers under test, each on one thread: ring-runtime (uring or epoll) and tokio.

use std::net::SocketAddr;

use bytes::Bytes;
use ring_runtime::{BackendChoice, ConnId, Handler, Runtime, RuntimeConfig, ShardCtx};

/// Echoes every byte.
struct Echo;

impl Handler for Echo {
    type Message = ();

    fn on_accept(&mut self, _ctx: &mut ShardCtx<()>, _conn: ConnId, _peer: SocketAddr) {}

    fn on_data(&mut self, ctx: &mut ShardCtx<()>, conn: ConnId, data: Bytes) {
        let _ = ctx.send(conn, data);
    }
}

/// Runs the server of `kind` until killed; prints its address first.
pub fn serve(kind: &str) {
    ring_runtime::raise_fd_limit(20_000).unwrap();
    match kind {
        "tokio" => serve_tokio(),
        "uring" | "epoll" => serve_ring(kind),
        other => panic!("unknown server {other}"),
    }
}

fn serve_ring(kind: &str) {
    let config = RuntimeConfig {
        shards: Some(1),
        pin_threads: false,
        listen: vec!["127.0.0.1:0".parse().unwrap()],
        listen_backlog: 8192,
        backend: BackendChoice::parse(kind).unwrap(),
        ..RuntimeConfig::default()
    };
    let handle = Runtime::start(config, |_| Echo).unwrap();
    println!("{}", handle.local_addrs()[0]);
    handle.join().unwrap();
}

fn serve_tokio() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .build()
        .unwrap();
    runtime.block_on(async {
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let listener = socket.listen(8192).unwrap();
        println!("{}", listener.local_addr().unwrap());
        loop {
            let (stream, _) = listener.accept().await.unwrap();
            stream.set_nodelay(true).unwrap();
            tokio::spawn(echo_tokio(stream));
        }
    });
}

async fn echo_tokio(mut stream: tokio::net::TcpStream) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        match stream.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(read) => {
                if stream.write_all(&buf[..read]).await.is_err() {
                    return;
                }
            }
        }
    }
}
