//! The header formats of HAProxy's `proxy-protocol.txt`, whole and split over reads, and the
//! headers a receiver must refuse.

use std::net::SocketAddr;

use bytes::Bytes;

use super::error::{ProxyError, V1Part};
use super::*;

fn addr(text: &str) -> SocketAddr {
    text.parse().expect("valid socket address")
}

fn done(buf: &[u8]) -> (ProxyHeader, usize) {
    match parse(buf) {
        Ok(Parsed::Done { header, len }) => (header, len),
        other => panic!("{other:?} for {buf:?}"),
    }
}

fn v2(command: u8, family: u8, block: &[u8]) -> Vec<u8> {
    let mut header = b"\r\n\r\n\0\r\nQUIT\n".to_vec();
    header.push(0x20 | command);
    header.push(family);
    header.extend_from_slice(&(block.len() as u16).to_be_bytes());
    header.extend_from_slice(block);
    header
}

fn v4_block() -> Vec<u8> {
    let mut block = vec![192, 0, 2, 7, 198, 51, 100, 1];
    block.extend_from_slice(&51000u16.to_be_bytes());
    block.extend_from_slice(&1883u16.to_be_bytes());
    block
}

#[test]
fn v1_tcp4_and_tcp6_name_both_ends() {
    let line = b"PROXY TCP4 192.0.2.7 198.51.100.1 51000 1883\r\n";
    let (header, len) = done(line);
    assert_eq!(len, line.len());
    assert_eq!(header.version, ProxyVersion::V1);
    let addresses = header.addresses.expect("addresses");
    assert_eq!(addresses.source, addr("192.0.2.7:51000"));
    assert_eq!(addresses.destination, addr("198.51.100.1:1883"));
    let (header, _) = done(b"PROXY TCP6 2001:db8::7 2001:db8::1 65535 0\r\n");
    assert_eq!(header.source(), Some(addr("[2001:db8::7]:65535")));
}

#[test]
fn v1_unknown_means_the_connections_own_peer() {
    for line in [
        &b"PROXY UNKNOWN\r\n"[..],
        b"PROXY UNKNOWN ffff:f...f:ffff ffff:f...f:ffff 65535 65535\r\n",
    ] {
        let (header, len) = done(line);
        assert_eq!((header.source(), len), (None, line.len()));
    }
}

#[test]
fn v1_longest_line_is_accepted_and_one_more_byte_refused() {
    let longest = b"PROXY UNKNOWN ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff 65535 65535\r\n";
    assert_eq!(longest.len(), V1_MAX_LEN);
    assert_eq!(done(longest).1, V1_MAX_LEN);
    let mut over = longest[..V1_MAX_LEN - 2].to_vec();
    over.extend_from_slice(b"f\r\n");
    assert_eq!(parse(&over), Err(ProxyError::V1TooLong));
    assert_eq!(parse(&[b'P'; 200][..]), Err(ProxyError::NoHeader));
    let no_crlf = [&b"PROXY TCP4 "[..], &[b'1'; 120]].concat();
    assert_eq!(parse(&no_crlf), Err(ProxyError::V1TooLong));
}

#[test]
fn v1_malformed_lines_are_refused_naming_the_part() {
    let cases: [(&[u8], V1Part); 10] = [
        (b"PROXY TCP5 1.2.3.4 5.6.7.8 1 2\r\n", V1Part::Protocol),
        (b"PROXY tcp4 1.2.3.4 5.6.7.8 1 2\r\n", V1Part::Protocol),
        (b"PROXY TCP4 1.2.3.4 5.6.7.8 1\r\n", V1Part::Fields),
        (b"PROXY TCP4 1.2.3.4  5.6.7.8 1 2\r\n", V1Part::Fields),
        (b"PROXY TCP4 1.2.3.4 5.6.7.8 1 2 \r\n", V1Part::Fields),
        (b"PROXY TCP4 ::1 5.6.7.8 1 2\r\n", V1Part::Address),
        (b"PROXY TCP4 01.2.3.4 5.6.7.8 1 2\r\n", V1Part::Address),
        (b"PROXY TCP4 1.2.3.4 5.6.7.8 01 2\r\n", V1Part::Port),
        (b"PROXY TCP4 1.2.3.4 5.6.7.8 1 65536\r\n", V1Part::Port),
        (b"PROXY TCP4 1.2.3.4\t5.6.7.8 1 2\r\n", V1Part::Text),
    ];
    for (line, part) in cases {
        assert_eq!(
            parse(line),
            Err(ProxyError::V1Malformed(part)),
            "{}",
            String::from_utf8_lossy(line)
        );
    }
}

#[test]
fn a_connection_without_a_header_is_refused_at_once() {
    let connect = [0x10, 0x0c, 0x00, 0x04, b'M', b'Q', b'T', b'T'];
    assert_eq!(parse(&connect), Err(ProxyError::NoHeader));
    assert_eq!(parse(b"PROXZ"), Err(ProxyError::NoHeader));
    assert_eq!(parse(b"\r\n\r\n\0\r\nQUIX"), Err(ProxyError::NoHeader));
    assert_eq!(parse(b"GET / HTTP/1.1\r\n"), Err(ProxyError::NoHeader));
    assert_eq!(parse(b""), Ok(Parsed::NeedMore));
}

#[test]
fn v2_tcp_over_ipv4_and_ipv6() {
    let header = v2(1, 0x11, &v4_block());
    let (parsed, len) = done(&header);
    assert_eq!((parsed.version, len), (ProxyVersion::V2, 28));
    let addresses = parsed.addresses.expect("addresses");
    assert_eq!(addresses.source, addr("192.0.2.7:51000"));
    assert_eq!(addresses.destination, addr("198.51.100.1:1883"));
    let mut block = vec![0u8; 36];
    block[15] = 7;
    block[31] = 1;
    block[32..34].copy_from_slice(&443u16.to_be_bytes());
    block[34..36].copy_from_slice(&8883u16.to_be_bytes());
    let (parsed, _) = done(&v2(1, 0x21, &block));
    assert_eq!(parsed.source(), Some(addr("[::7]:443")));
}

#[test]
fn v2_local_unspec_udp_and_unix_keep_the_connections_own_peer() {
    for (command, family, block) in [
        (0, 0x11, v4_block()),
        (0, 0x00, Vec::new()),
        (1, 0x00, Vec::new()),
        (1, 0x12, v4_block()),
        (1, 0x31, vec![0; 216]),
    ] {
        let header = v2(command, family, &block);
        assert_eq!(
            done(&header),
            (
                ProxyHeader {
                    version: ProxyVersion::V2,
                    addresses: None
                },
                header.len()
            )
        );
    }
}

#[test]
fn v2_tlvs_are_skipped_up_to_the_bound() {
    let mut block = v4_block();
    block.extend_from_slice(&[0x05, 0x00, 0x02, 0xab, 0xcd]);
    let header = v2(1, 0x11, &block);
    assert_eq!(done(&header).1, header.len());
    let largest = v2(
        1,
        0x11,
        &[&v4_block()[..], &[0; MAX_HEADER_LEN - 28]].concat(),
    );
    assert_eq!(done(&largest).1, MAX_HEADER_LEN);
    let over = v2(
        1,
        0x11,
        &[&v4_block()[..], &[0; MAX_HEADER_LEN - 27]].concat(),
    );
    assert_eq!(
        parse(&over[..16]),
        Err(ProxyError::V2TooLong(MAX_HEADER_LEN + 1))
    );
}

#[test]
fn v2_invalid_heads_are_refused() {
    let mut bad_version = v2(1, 0x11, &v4_block());
    bad_version[12] = 0x11;
    assert_eq!(parse(&bad_version), Err(ProxyError::V2Version(1)));
    assert_eq!(
        parse(&v2(2, 0x11, &v4_block())),
        Err(ProxyError::V2Command(2))
    );
    assert_eq!(
        parse(&v2(1, 0x41, &v4_block())),
        Err(ProxyError::V2Family(0x41))
    );
    assert_eq!(
        parse(&v2(1, 0x13, &v4_block())),
        Err(ProxyError::V2Family(0x13))
    );
    assert!(matches!(
        parse(&v2(1, 0x21, &v4_block())),
        Err(ProxyError::V2ShortAddresses {
            len: 12,
            needed: 36,
            ..
        })
    ));
}

#[test]
fn split_headers_complete_at_their_last_byte() {
    let v1 = b"PROXY TCP4 192.0.2.7 198.51.100.1 51000 1883\r\n".to_vec();
    for header in [v1, v2(1, 0x11, &v4_block())] {
        for cut in 0..header.len() {
            assert_eq!(parse(&header[..cut]), Ok(Parsed::NeedMore), "cut at {cut}");
        }
    }
}

#[test]
fn the_reader_keeps_a_split_header_and_returns_what_follows() {
    let mut wire = v2(1, 0x11, &v4_block());
    wire.extend_from_slice(b"\x10MQTT");
    let mut reader = ProxyReader::new(None);
    for byte in &wire[..27] {
        let step = reader
            .feed(Bytes::copy_from_slice(&[*byte]))
            .expect("a prefix");
        assert_eq!(step, ReadStep::NeedMore);
    }
    assert_eq!(reader.held(), 27);
    let ReadStep::Done { header, rest } = reader
        .feed(Bytes::copy_from_slice(&wire[27..]))
        .expect("done")
    else {
        panic!("not done");
    };
    assert_eq!(header.source(), Some(addr("192.0.2.7:51000")));
    assert_eq!(&rest[..], b"\x10MQTT");
    let mut whole = ProxyReader::new(None);
    let step = whole.feed(Bytes::from(b"PROXY UNKNOWN\r\nrest".to_vec()));
    assert!(matches!(step, Ok(ReadStep::Done { rest, .. }) if &rest[..] == b"rest"));
    assert_eq!(whole.held(), 0);
    let mut refused = ProxyReader::new(None);
    assert_eq!(
        refused.feed(Bytes::from_static(b"\x10\x0c")),
        Err(ProxyError::NoHeader)
    );
}

#[test]
fn trust_is_loopback_by_default() {
    let trust = ProxyTrust::default();
    assert!(trust.trusts("127.0.0.1".parse().unwrap()));
    assert!(trust.trusts("::1".parse().unwrap()));
    assert!(trust.trusts("::ffff:127.0.0.9".parse().unwrap()));
    assert!(!trust.trusts("10.0.0.1".parse().unwrap()));
}
