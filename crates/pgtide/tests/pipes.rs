//! Inputs that can be read only once: a named pipe, as a shell's `<(zcat
//! f.gz)` gives one. Nothing may read from such an input before the load
//! does (outside testing: `pgtide load <(cat f.csv)` lost the rows of the
//! first 64 KiB, which the look at the file's format had read), and a
//! check that opens and closes it breaks its writer's pipe.

mod support;

use std::sync::Arc;
use std::time::Duration;

use pgtide::copyopts::CopyFormat;
use pgtide::ident::QualifiedName;
use pgtide::load::{self, LoadOptions};
use pgtide::progress::Progress;
use support::pipe::Pipe;
use support::Db;

fn rows(n: usize) -> Vec<u8> {
    (0..n)
        .flat_map(|i| format!("{i},row {i}\n").into_bytes())
        .collect()
}

/// Guessing the format of a pipe reads nothing from it: everything
/// written is still there for the load (before: the guess read up to 64
/// KiB and the load started after them, or waited for ever when the
/// writer had finished).
#[test]
fn guessing_the_format_reads_nothing_from_a_pipe() {
    let pipe = Pipe::new();
    let data = rows(3000);
    let (_go, writer) = pipe.write(vec![data.clone()]);
    let (format, why) = pgtide::source::guess_format(&pipe.name()).unwrap();
    assert_eq!(format, CopyFormat::Csv, "{why}");
    let (tx, rx) = std::sync::mpsc::channel();
    let name = pipe.name();
    std::thread::spawn(move || {
        let mut read = Vec::new();
        let mut source = pgtide::source::Source::open(&name).unwrap();
        std::io::Read::read_to_end(&mut source.reader, &mut read).unwrap();
        tx.send(read).unwrap();
    });
    let read = rx
        .recv_timeout(Duration::from_secs(20))
        .expect("the pipe still has a writer and its data");
    assert_eq!(read.len(), data.len(), "every byte written is read once");
    assert!(read == data);
    writer.join().unwrap().unwrap();
}

/// A load from a named pipe loads every row (the checks before it only
/// look the pipe up), and a pipe is refused where it would be read twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_load_from_a_pipe_loads_every_row_and_nothing_reads_it_twice() {
    let db = Db::start().await;
    db.client
        .batch_execute("CREATE TABLE piped (id int, v text)")
        .await
        .unwrap();
    let pipe = Pipe::new();
    let (_go, writer) = pipe.write(vec![rows(20000)]);
    let table = QualifiedName::parse("piped").unwrap();
    let mut o = LoadOptions::new(vec![pipe.name()], table, CopyFormat::Csv);
    o.chunk_bytes = 64 * 1024;
    let load = load::run(&db.target, &o, Arc::new(Progress::new(1)));
    let report = tokio::time::timeout(Duration::from_secs(60), load)
        .await
        .expect("the load is not left waiting for a writer the checks sent away")
        .unwrap();
    assert!(report.failure.is_none(), "{:?}", report.failure);
    assert_eq!((report.rows_read, report.rows_loaded), (20000, 20000));
    writer
        .join()
        .unwrap()
        .expect("the writer's pipe stayed whole");
    let n: i64 = db
        .client
        .query_one("SELECT count(DISTINCT id) FROM piped", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(n, 20000);

    let other = Pipe::new();
    o.inputs = vec![other.name()];
    o.resume = Some(pgtide::load::ledger::ResumeMode::Edges);
    let e = load::run(&db.target, &o, Arc::new(Progress::new(1)))
        .await
        .expect_err("--resume reads its input again");
    assert!(e.message().contains("or a pipe"), "{e}");
}
