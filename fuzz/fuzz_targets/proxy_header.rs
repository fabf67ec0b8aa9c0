//! PROXY protocol headers (v1 and v2) from arbitrary bytes: no panic; a complete header is no
//! longer than the input or the bound; fed in two pieces (split where the first byte's value
//! says) the reader comes to the same verdict as one parse and hands back the same rest.
#![no_main]

use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use transport::proxy::{MAX_HEADER_LEN, Parsed, ProxyReader, ReadStep, parse};

fuzz_target!(|data: &[u8]| {
    let whole = parse(data);
    if let Ok(Parsed::Done { len, .. }) = whole {
        assert!(len <= data.len() && len <= MAX_HEADER_LEN);
    }
    let cut = data.first().map_or(0, |&b| usize::from(b)).min(data.len());
    let mut reader = ProxyReader::new(None);
    let later = Bytes::copy_from_slice(&data[cut..]);
    let pieces = match reader.feed(Bytes::copy_from_slice(&data[..cut])) {
        Ok(ReadStep::NeedMore) => reader.feed(later),
        Ok(ReadStep::Done { header, rest }) => Ok(ReadStep::Done {
            header,
            rest: Bytes::from([&rest[..], &later[..]].concat()),
        }),
        Err(error) => Err(error),
    };
    match (whole, pieces) {
        (Ok(Parsed::Done { header, len }), Ok(ReadStep::Done { header: read, rest })) => {
            assert_eq!((header, &data[len..]), (read, &rest[..]));
        }
        (Ok(Parsed::NeedMore), Ok(ReadStep::NeedMore)) => {}
        (Err(a), Err(b)) if a == b => {}
        (whole, pieces) => panic!("whole {whole:?}, in pieces {pieces:?}"),
    }
});
