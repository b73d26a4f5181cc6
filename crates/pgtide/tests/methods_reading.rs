//! How a field's text is read, method by method, where the reading
//! depends on more than the type (outside testing found both, each a
//! silent change): the session's `array_nulls` (binary encoded an
//! unquoted NULL in an array as a NULL element when it is off, where it
//! is the string `NULL`), and an interval column's typmod (the INSERT
//! methods read `5` as seconds where COPY reads it in the column's unit).

mod support;

use pgtide::copyopts::CopyFormat;
use pgtide::load::Method;
use support::{Case, Db};

#[tokio::test]
async fn array_nulls_off_is_read_by_every_method_as_copy_reads_it() {
    let db = Db::start().await;
    db.client
        .batch_execute(
            "DO $$ BEGIN EXECUTE format('ALTER DATABASE %I SET array_nulls = off', \
             current_database()); END $$; SET array_nulls = off",
        )
        .await
        .unwrap();
    let data = b"1,\"{a,NULL,b}\"\n2,{NULL}\n3,{null}\n4,\n";
    for method in Method::ALL {
        let case = Case::new("id int, v text[]", CopyFormat::Csv, data).method(method);
        db.check(&case).await;
    }
    // In an int[], the string NULL is not a number: every method refuses.
    for method in Method::ALL {
        let case = Case::new("v int[]", CopyFormat::Csv, b"\"{1,NULL}\"\n").method(method);
        let r = db.load_report(&case).await;
        let e = r
            .failure
            .unwrap_or_else(|| panic!("{method:?} loaded {{1,NULL}}"));
        assert_eq!(e.sqlstate(), Some("22P02"), "{method:?}: {e:?}");
    }
}

#[tokio::test]
async fn an_interval_columns_typmod_gives_a_bare_number_its_unit_in_every_method() {
    let db = Db::start().await;
    let def = "id int, a interval minute, b interval day, c interval year, \
               d interval hour to minute, e interval(2), f interval";
    let data = b"1,5,5,5,5,5.555,5\n2,90,2,3,1:30,,1 day\n3,,,,,,\n4,-7,1 week,2 years 3 months,1:2:3,7,7\n";
    for method in Method::ALL {
        for workers in [1, 3] {
            let case = Case::new(def, CopyFormat::Csv, data)
                .method(method)
                .workers(workers)
                .chunk(20);
            db.check(&case).await;
        }
    }
    // An array of them cannot be read so by an INSERT parameter: refused,
    // with the methods that can.
    for method in [Method::Pipeline, Method::Values, Method::Insert] {
        let case = Case::new("v interval day[]", CopyFormat::Csv, b"\"{5,7}\"\n").method(method);
        let e = db.load_err(&case).await;
        assert!(e.message().contains("interval day[]"), "{method:?}: {e:?}");
    }
    for method in [Method::Copy, Method::Binary] {
        let case = Case::new("v interval day[]", CopyFormat::Csv, b"\"{5,7}\"\n").method(method);
        db.check(&case).await;
    }
}
