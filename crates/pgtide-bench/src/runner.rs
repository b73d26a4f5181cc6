//! The loop every scenario shares: one scenario's run against one server,
//! with its connection and label, the runs per contender, and the
//! measurements, each shown to the caller as it completes.
//!
//! Every run of a contender starts from the same state: the scenario's
//! reset statement (untimed), then a `CHECKPOINT` so that no dirty buffers
//! of the previous run are written during this one (ignored where not
//! superuser). The run itself returns its own wall time, so whatever it
//! does before starting its clock or after stopping it (a remote
//! TRUNCATE, a row count) is untimed. A run that fails with a bug (a wrong
//! row count, a lost task) stops the scenario; any other error means the
//! contender cannot run here (no psql, an extension missing, a refused
//! option): it is reported as skipped, with the reason, and the others go
//! on.

use pgtide::conn::Target;
use pgtide::{ErrorKind, Result};
use tokio_postgres::Client;

use crate::{server_label, Measurement};

/// One scenario's run against one server.
pub struct Runner<'a> {
    /// A connection to the server the scenario runs against.
    pub client: Client,
    /// The server's label in reports ([`server_label`]).
    pub server: String,
    /// Runs per contender (at least 1).
    pub runs: usize,
    results: Vec<Measurement>,
    on_result: &'a mut dyn FnMut(&Measurement),
}

impl<'a> Runner<'a> {
    /// Connects to `target` and labels its server; `on_result` sees each
    /// measurement [`Runner::push`]ed.
    pub async fn connect(
        target: &Target,
        runs: usize,
        on_result: &'a mut dyn FnMut(&Measurement),
    ) -> Result<Self> {
        let client = target.connect().await?;
        let server = server_label(&client).await?;
        Ok(Runner {
            client,
            server,
            runs: runs.max(1),
            results: Vec::new(),
            on_result,
        })
    }

    /// An empty measurement labelled with this server.
    pub fn blank(&self, dataset: &str, contender: &str, rows: u64) -> Measurement {
        Measurement::new(dataset, contender, rows, &self.server)
    }

    /// A finished measurement: shown to `on_result`, kept for the report.
    pub fn push(&mut self, m: Measurement) {
        (self.on_result)(&m);
        self.results.push(m);
    }

    /// Every measurement pushed, in order.
    pub fn finish(self) -> Vec<Measurement> {
        self.results
    }

    /// Times the runs of one contender into `m` ([`Runner::time`]), then
    /// pushes it.
    pub async fn contender(
        &mut self,
        mut m: Measurement,
        reset: &str,
        one: impl AsyncFnMut(&Client) -> Result<f64>,
    ) -> Result<()> {
        self.time(&mut m, reset, one).await?;
        self.push(m);
        Ok(())
    }

    /// Times the runs of one contender into `m`: before each, `reset`
    /// (SQL; empty for none) and a CHECKPOINT; `one` runs once and returns
    /// its seconds. See the module documentation for errors.
    pub async fn time(
        &self,
        m: &mut Measurement,
        reset: &str,
        mut one: impl AsyncFnMut(&Client) -> Result<f64>,
    ) -> Result<()> {
        let ms = std::slice::from_mut(m);
        self.interleaved(ms, reset, async |c, _| one(c).await).await
    }

    /// Times the runs of several contenders into `ms`, interleaved (every
    /// contender once, then again), so that drift on a shared machine
    /// (checkpoints, autovacuum, neighbours) spreads over all of them
    /// instead of favouring one. `one(client, i)` runs contender `i` once;
    /// a skipped contender is not run again.
    pub async fn interleaved(
        &self,
        ms: &mut [Measurement],
        reset: &str,
        mut one: impl AsyncFnMut(&Client, usize) -> Result<f64>,
    ) -> Result<()> {
        for _ in 0..self.runs {
            for (i, m) in ms.iter_mut().enumerate() {
                if m.skipped.is_some() {
                    continue;
                }
                if !reset.is_empty() {
                    self.client.batch_execute(reset).await?;
                }
                let _ = self.client.batch_execute("CHECKPOINT").await;
                match one(&self.client, i).await {
                    Ok(seconds) => m.seconds.push(seconds),
                    Err(e) if e.kind() == ErrorKind::Bug => return Err(e),
                    Err(e) => m.skipped = Some(e.message().to_owned()),
                }
            }
        }
        Ok(())
    }
}
