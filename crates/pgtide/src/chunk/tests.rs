//! The chunker at every read size and chunk size, against a scan of the
//! whole input.

use super::*;
use copyfmt::scan;

/// A reader that hands out at most `step` bytes per read, to put read
/// boundaries everywhere.
struct Trickle {
    data: Vec<u8>,
    pos: usize,
    step: usize,
}

impl Read for Trickle {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.step.min(buf.len()).min(self.data.len() - self.pos);
        buf[..n].copy_from_slice(&self.data[self.pos..self.pos + n]);
        self.pos += n;
        Ok(n)
    }
}

fn chunks(data: &[u8], d: Dialect, header: Header, target: usize, step: usize) -> Vec<Chunk> {
    let reader = Trickle {
        data: data.to_vec(),
        pos: 0,
        step,
    };
    let mut c = Chunker::new("in", Box::new(reader), d, header, target, 0);
    let mut out = Vec::new();
    while let Some(chunk) = c.next_chunk().unwrap() {
        out.push(chunk);
    }
    out
}

/// Chunks reassemble the input, and each chunk's first line, record,
/// byte offset and line-ending errors are what a scan of the whole
/// input says.
fn check(data: &[u8], d: Dialect, header: Header) {
    let all: Vec<_> = scan::records(&d, data).collect();
    let skip = match header {
        Header::None => 0,
        Header::Skip | Header::Match => all.first().map_or(data.len(), |r| r.end),
    };
    let spans = &all[usize::from(header != Header::None).min(all.len())..];
    let body = &data[skip..];
    for target in [1, 2, 3, 5, 8, 13, 64, 1 << 20] {
        for step in [1, 3, 7, 1 << 16] {
            let got = chunks(data, d.clone(), header, target, step);
            let joined: Vec<u8> = got.iter().flat_map(|c| c.data.iter().copied()).collect();
            assert_eq!(joined, body, "target {target} step {step}");
            let mut record = 0usize;
            for c in &got {
                let span = &spans[record];
                let at = format!("target {target} step {step} record {record}");
                assert_eq!(c.first_byte, span.start as u64, "{at}");
                assert_eq!(c.first_line, 1 + span.line, "{at}");
                assert_eq!(c.first_record, 1 + record as u64);
                let mine = &spans[record..record + c.records as usize];
                let bad = mine.iter().filter(|s| s.eol_error.is_some()).count();
                assert_eq!(c.eol_errors, bad as u64, "{at}");
                record += c.records as usize;
            }
            assert_eq!(record, spans.len(), "target {target} step {step}");
            if target <= 2 {
                assert_eq!(
                    got.len(),
                    spans.len(),
                    "one record per chunk at target {target}"
                );
            }
        }
    }
}

/// Issue 8 A1: a lone `\r` ends records, at every read and chunk size;
/// records whose line breaks do not fit the file's style are counted.
#[test]
fn lone_cr_and_mixed_line_endings_at_every_read_and_chunk_size() {
    let cr = b"id,v\r1,\"a\r\nb\"\r2,b\r3,c\r";
    check(cr, Dialect::csv(), Header::Skip);
    check(cr, Dialect::csv(), Header::None);
    let mixed = b"1,a\n2,b\r\n3,\"c\r\"\n4,d\r5,e\n";
    check(mixed, Dialect::csv(), Header::None);
    check(b"1\ta\r\n2\tb\n3\tc\r\n4\r", Dialect::text(), Header::None);
    let got = chunks(cr, Dialect::csv(), Header::Skip, 1 << 20, 7);
    assert_eq!(got.len(), 1);
    assert_eq!((got[0].records, got[0].lines, got[0].eol), (3, 4, Eol::Cr));
}

#[test]
fn csv_chunks_keep_positions_at_every_read_and_chunk_size() {
    let data = b"h1,h2\n1,\"a\nb\"\n2,\"x,\"\"y\"\"\"\r\n3,plain\n4,\"\n\n\"\n5,end";
    check(data, Dialect::csv(), Header::Skip);
    check(data, Dialect::csv(), Header::None);
}

#[test]
fn text_chunks_keep_positions_at_every_read_and_chunk_size() {
    let data = b"1\ta\\\nb\n2\t\\\\\n3\t\\N\n4\tx\n";
    check(data, Dialect::text(), Header::None);
    check(data, Dialect::text(), Header::Skip);
}

/// Issue 8 C11: an unmatched quote does not buffer the whole input;
/// the error names the line where the runaway record starts.
#[test]
fn a_record_longer_than_the_cap_fails_with_its_first_line() {
    let mut data = b"h\n1,a\n2,\"b\n".to_vec();
    data.extend(std::iter::repeat_n(b'x', 5000));
    let reader = Trickle {
        data,
        pos: 0,
        step: 100,
    };
    let mut c =
        Chunker::new("in", Box::new(reader), Dialect::csv(), Header::Skip, 64, 0).max_record(1000);
    let e = loop {
        match c.next_chunk() {
            Ok(Some(_)) => {}
            Ok(None) => panic!("must fail"),
            Err(e) => break e,
        }
    };
    assert!(e.message().starts_with("in:3: "), "{}", e.message());
    assert!(e.message().contains("byte 6"), "{}", e.message());
    // The same input loads whole under a larger cap.
    let mut data = b"1,\"".to_vec();
    data.extend(std::iter::repeat_n(b'x', 5000));
    data.extend_from_slice(b"\"\n");
    let reader = Trickle {
        data,
        pos: 0,
        step: 100,
    };
    let mut c =
        Chunker::new("in", Box::new(reader), Dialect::csv(), Header::None, 64, 0).max_record(6000);
    assert_eq!(c.next_chunk().unwrap().unwrap().records, 1);
}

/// Every record is measured, not only one still being read when a read
/// ends: a whole record over the cap fails with its line and byte,
/// whatever the read and chunk sizes (outside testing: records of 100,000
/// bytes loaded under a cap of 1,000), and one at the cap loads.
#[test]
fn every_whole_record_over_the_cap_fails() {
    let mut data = b"1,a\n2,\"b\nc\"\n".to_vec();
    let long_at = data.len() as u64;
    data.extend_from_slice(b"3,");
    data.extend(std::iter::repeat_n(b'x', 997)); // 1,000 bytes with "3," and the line break
    data.extend_from_slice(b"\n4,d\n");
    for step in [7, 100, 1 << 20] {
        for target in [1, 64, 1 << 20] {
            let run = |max: usize| {
                let reader = Trickle {
                    data: data.clone(),
                    pos: 0,
                    step,
                };
                let mut c = Chunker::new(
                    "in",
                    Box::new(reader),
                    Dialect::csv(),
                    Header::None,
                    target,
                    0,
                )
                .max_record(max);
                let mut records = 0;
                loop {
                    match c.next_chunk() {
                        Ok(Some(chunk)) => records += chunk.records,
                        Ok(None) => return Ok(records),
                        Err(e) => return Err(e),
                    }
                }
            };
            let e = run(999).expect_err("a record of 1,000 bytes over a cap of 999");
            assert!(
                e.message().starts_with("in:4: "),
                "{step} {target}: {}",
                e.message()
            );
            assert!(
                e.message().contains(&format!("byte {long_at}")),
                "{}",
                e.message()
            );
            assert_eq!(run(1000).unwrap(), 4, "{step} {target}");
        }
    }
    // The header is a record too.
    let mut c = Chunker::new(
        "in",
        Box::new(&b"a_long_header,b\n1,2\n"[..]),
        Dialect::csv(),
        Header::Skip,
        64,
        0,
    )
    .max_record(10);
    let e = c
        .next_chunk()
        .expect_err("a 16-byte header over a cap of 10");
    assert!(e.message().starts_with("in:1: "), "{}", e.message());
}

#[test]
fn end_marker_stops_the_input() {
    let data = b"1\ta\n\\.\n2\tb\n";
    let got = chunks(data, Dialect::text(), Header::None, 1, 1);
    assert_eq!(got.len(), 1);
    assert_eq!(&got[0].data[..], b"1\ta\n");
}

/// Binary input ends at its trailer: bytes after it (two files
/// concatenated) are an error, as for the server, at every read and chunk
/// size; a file that ends there loads its tuples. As the server reads
/// them: a trailer cut to its first byte ends the data there (no tuple
/// of one byte; the byte is left unconsumed, as after a marker), and an
/// empty input is no binary file.
#[test]
fn binary_data_after_the_trailer_is_an_error() {
    use copyfmt::binary::{write_header, write_trailer, RowWriter};
    let file = |tuples: &[&[u8]]| {
        let mut out = Vec::new();
        write_header(&mut out);
        for t in tuples {
            let mut row = RowWriter::begin_row(&mut out, 1);
            row.value(t).unwrap();
            row.finish().unwrap();
        }
        write_trailer(&mut out);
        out
    };
    let one = file(&[b"a", b"b"]);
    let two = [one.clone(), file(&[b"c"])].concat();
    for target in [1, 8, 1 << 20] {
        for step in [1, 3, 1 << 16] {
            let run = |data: &[u8]| {
                let reader = Trickle {
                    data: data.to_vec(),
                    pos: 0,
                    step,
                };
                let mut c = Chunker::new(
                    "in",
                    Box::new(reader),
                    Dialect::binary(),
                    Header::None,
                    target,
                    0,
                );
                let mut records = 0;
                let mut bytes = 0;
                loop {
                    match c.next_chunk() {
                        Ok(Some(chunk)) => {
                            records += chunk.records;
                            bytes += chunk.data.len();
                        }
                        Ok(None) => {
                            let end = c.ended_by_marker().then(|| c.unconsumed());
                            let header = c.header().map_or(0, |h| h.len());
                            assert_eq!(header + bytes + end.unwrap_or(0), data.len());
                            return Ok(records);
                        }
                        Err(e) => return Err(e.to_string()),
                    }
                }
            };
            assert_eq!(run(&one), Ok(2), "target {target} step {step}");
            assert_eq!(
                run(&one[..one.len() - 1]),
                Ok(2),
                "target {target} step {step}"
            );
            assert_eq!(run(&one[..20]), Ok(0), "target {target} step {step}");
            let err = run(b"").unwrap_err();
            assert!(err.contains("signature not recognized"), "{err}");
            let err = run(&two).unwrap_err();
            assert!(
                err.contains("after EOF marker"),
                "target {target} step {step}: {err}"
            );
        }
    }
}
