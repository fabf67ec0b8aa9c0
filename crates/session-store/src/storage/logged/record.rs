//! One group commit as the log holds it: a header (body length, CRC-32 of the epoch and the
//! body, the epoch) and the body, the commit's key writes in order. Each write is an op byte
//! (delete, put, put of a key the store did not hold), the key and, for a put, the value, each
//! with a 4-byte big-endian length.

use crate::storage::keyed::KeyWrite;

/// Body length (u32), CRC-32 (u32), epoch (u64).
pub(super) const HEADER: usize = 16;

const DELETE: u8 = 0;
const PUT: u8 = 1;
const PUT_ABSENT: u8 = 2;

/// The bytes [`encode`] appends for `writes`.
pub(super) fn encoded_len(writes: &[KeyWrite]) -> usize {
    let body: usize = (writes.iter())
        .map(|w| write_len(w.key.len(), w.value.as_ref().map(Vec::len)))
        .sum();
    HEADER + 4 + body
}

/// The bytes one write takes in a record's body: a key of `key_len`, a value of `value_len`
/// (`None`: a deletion).
pub(super) fn write_len(key_len: usize, value_len: Option<usize>) -> usize {
    1 + 4 + key_len + value_len.map_or(0, |len| 4 + len)
}

/// Appends the record of `writes` in `epoch` to `out`.
pub(super) fn encode(epoch: u64, writes: &[KeyWrite], out: &mut Vec<u8>) {
    let start = out.len();
    out.resize(start + HEADER, 0);
    put_len(out, writes.len());
    for write in writes {
        out.push(match (&write.value, write.absent_before) {
            (None, _) => DELETE,
            (Some(_), false) => PUT,
            (Some(_), true) => PUT_ABSENT,
        });
        put_len(out, write.key.len());
        out.extend_from_slice(&write.key);
        if let Some(value) = &write.value {
            put_len(out, value.len());
            out.extend_from_slice(value);
        }
    }
    let body_len = out.len() - start - HEADER;
    out[start + 8..start + HEADER].copy_from_slice(&epoch.to_be_bytes());
    let crc = crc32fast::hash(&out[start + 8..]);
    let body_len = u32::try_from(body_len).expect("invariant: a group commit is under 4 GiB");
    out[start..start + 4].copy_from_slice(&body_len.to_be_bytes());
    out[start + 4..start + 8].copy_from_slice(&crc.to_be_bytes());
}

fn put_len(out: &mut Vec<u8>, len: usize) {
    let len = u32::try_from(len).expect("invariant: a key or value is under 4 GiB");
    out.extend_from_slice(&len.to_be_bytes());
}

/// A record found in a log: its epoch and body.
#[derive(Debug)]
pub(super) struct Found<'a> {
    pub(super) epoch: u64,
    pub(super) body: &'a [u8],
}

/// The whole record at the start of `bytes`, if one is there intact (a torn, zeroed or
/// overwritten tail is not).
pub(super) fn read(bytes: &[u8]) -> Option<Found<'_>> {
    let header = bytes.get(..HEADER)?;
    let body_len = usize::try_from(u32::from_be_bytes(header[..4].try_into().ok()?)).ok()?;
    let crc = u32::from_be_bytes(header[4..8].try_into().ok()?);
    let covered = bytes.get(8..HEADER.checked_add(body_len)?)?;
    if crc32fast::hash(covered) != crc {
        return None;
    }
    Some(Found {
        epoch: u64::from_be_bytes(header[8..].try_into().ok()?),
        body: &covered[8..],
    })
}

/// A record's body that does not decode although its checksum matched.
#[derive(Debug)]
pub(super) struct Malformed;

/// The key writes of a record's body.
pub(super) fn decode(body: &[u8]) -> Result<Vec<KeyWrite>, Malformed> {
    let mut reader = Reader(body);
    let count = reader.len()?;
    // No pre-allocation from a stored length.
    let mut writes = Vec::new();
    for _ in 0..count {
        let op = reader.take(1)?[0];
        let key = reader.slice()?.to_vec();
        let (value, absent_before) = match op {
            DELETE => (None, false),
            PUT => (Some(reader.slice()?.to_vec()), false),
            PUT_ABSENT => (Some(reader.slice()?.to_vec()), true),
            _ => return Err(Malformed),
        };
        writes.push(KeyWrite {
            key,
            value,
            absent_before,
        });
    }
    if !reader.0.is_empty() {
        return Err(Malformed);
    }
    Ok(writes)
}

struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], Malformed> {
        if self.0.len() < n {
            return Err(Malformed);
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }
    fn len(&mut self) -> Result<usize, Malformed> {
        let bytes: [u8; 4] = self.take(4)?.try_into().map_err(|_| Malformed)?;
        usize::try_from(u32::from_be_bytes(bytes)).map_err(|_| Malformed)
    }
    fn slice(&mut self) -> Result<&'a [u8], Malformed> {
        let len = self.len()?;
        self.take(len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(key: &[u8], value: Option<&[u8]>, absent_before: bool) -> KeyWrite {
        KeyWrite {
            key: key.to_vec(),
            value: value.map(<[u8]>::to_vec),
            absent_before,
        }
    }

    #[test]
    fn a_record_reads_back_as_its_writes() {
        let writes = vec![
            write(b"qa", Some(b"message"), true),
            write(b"ia", Some(b""), false),
            write(b"sa", None, false),
        ];
        let mut out = vec![9];
        encode(7, &writes, &mut out);
        assert_eq!(out.len(), 1 + encoded_len(&writes));
        let found = read(&out[1..]).unwrap();
        assert_eq!(found.epoch, 7);
        assert_eq!(decode(found.body).unwrap(), writes);
    }

    #[test]
    fn a_torn_or_damaged_record_is_not_read() {
        let mut out = Vec::new();
        encode(1, &[write(b"qa", Some(b"message"), true)], &mut out);
        assert!(read(&out[..out.len() - 1]).is_none());
        let last = out.len() - 1;
        out[last] ^= 1;
        assert!(read(&out).is_none());
        assert!(read(&[0; HEADER + 4]).is_none());
    }
}
