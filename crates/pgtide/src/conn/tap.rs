//! One connection's byte stream, shared between tokio-postgres and a raw
//! protocol session ([`Wire`]).
//!
//! tokio-postgres' `Client` does not expose its socket, its extended
//! query API sends Sync after every statement, and its `copy_out` hands
//! over one stream item per row. A loop that wants many Bind/Execute
//! messages under one Sync (`load::wire`), or many COPY rows per socket
//! read (`copyout`), must speak the protocol itself, on the same
//! connection, inside the same transaction. So such a connection (a
//! loader's, an export's or a copy's reader) is opened here on a socket we own
//! (`Config::connect_raw`: tokio-postgres still negotiates TLS, channel
//! binding and authentication, as for every other connection) and the
//! stream handed to tokio-postgres is a [`Tapped`] stream: the socket
//! itself, or, under TLS, the TLS stream (so a raw session writes
//! plaintext into the TLS layer, never under it).
//!
//! The stream has three modes:
//!
//! - **normal**: tokio-postgres reads and writes it; the default.
//! - **raw** ([`Wire::raw`]): the raw session reads and writes; the
//!   `Connection` task sees a stream that is not ready (it is parked and
//!   woken when the mode changes back). Only entered when the `Client`
//!   has no request in flight.
//! - **replay** ([`Wire::replay`]): the next request the `Client` writes
//!   is swallowed (it never reaches the server), and the bytes given are
//!   its answer. This is how a server's `ErrorResponse` that the raw
//!   session received becomes a genuine `tokio_postgres::Error` (with the
//!   full `DbError`: SQLSTATE, message, context), which tokio-postgres
//!   alone can build: the rest of pgtide (`BatchError`, rejects, error
//!   classes) then sees it exactly as if tokio-postgres had run the
//!   statement.

use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};

use bytes::{Buf, BytesMut};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio_postgres::tls::{ChannelBinding, TlsConnect, TlsStream};

/// A byte stream that can be boxed.
pub(crate) trait Io: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Io for T {}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Normal,
    Raw,
    /// Swallow the client's next write; answer it with `inject`.
    Replay {
        written: bool,
    },
    /// Out of step for good: every use fails, so the `Connection` ends.
    Dead,
}

struct State {
    io: Box<dyn Io>,
    mode: Mode,
    /// Bytes the `Connection` reads before the socket's.
    inject: BytesMut,
    /// The `Connection` task, parked while it may not use the stream.
    parked: Option<Waker>,
    /// Under TLS: what SCRAM's channel binding needs, asked once.
    channel_binding: Option<ChannelBinding>,
}

#[derive(Clone)]
struct Shared(Arc<Mutex<State>>);

impl Shared {
    fn new(io: Box<dyn Io>, channel_binding: Option<ChannelBinding>) -> Shared {
        Shared(Arc::new(Mutex::new(State {
            io,
            mode: Mode::Normal,
            inject: BytesMut::new(),
            parked: None,
            channel_binding,
        })))
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock leaves plain bytes behind: usable.
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn set_mode(&self, mode: Mode) {
        let mut s = self.lock();
        if s.mode != Mode::Dead {
            s.mode = mode;
        }
        if let Some(w) = s.parked.take() {
            w.wake();
        }
    }
}

/// The stream tokio-postgres' `Connection` owns.
pub(crate) struct Tapped(Shared);

impl std::fmt::Debug for Tapped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Tapped")
    }
}

impl Tapped {
    pub(crate) fn new(io: Box<dyn Io>) -> Tapped {
        Tapped(Shared::new(io, None))
    }

    /// The handle for raw sessions on this stream.
    pub(crate) fn wire(&self) -> Wire {
        Wire(self.0.clone())
    }
}

fn dead() -> io::Error {
    io::Error::new(
        io::ErrorKind::ConnectionAborted,
        "pipeline session out of step with the server; connection dropped",
    )
}

fn park(s: &mut State, cx: &Context<'_>) {
    s.parked = Some(cx.waker().clone());
}

impl AsyncRead for Tapped {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let mut s = self.0.lock();
        let injectable = match s.mode {
            Mode::Normal => true,
            Mode::Replay { written } => written,
            Mode::Raw | Mode::Dead => false,
        };
        if injectable && !s.inject.is_empty() {
            let n = s.inject.len().min(buf.remaining());
            buf.put_slice(&s.inject[..n]);
            s.inject.advance(n);
            return Poll::Ready(Ok(()));
        }
        match s.mode {
            Mode::Normal => Pin::new(&mut s.io).poll_read(cx, buf),
            Mode::Dead => Poll::Ready(Err(dead())),
            _ => {
                park(&mut s, cx);
                Poll::Pending
            }
        }
    }
}

impl AsyncWrite for Tapped {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        let mut s = self.0.lock();
        match s.mode {
            Mode::Normal => Pin::new(&mut s.io).poll_write(cx, data),
            Mode::Dead => Poll::Ready(Err(dead())),
            Mode::Raw => {
                park(&mut s, cx);
                Poll::Pending
            }
            Mode::Replay { .. } => {
                // The request never reaches the server; its answer is
                // ready to be read.
                s.mode = Mode::Replay { written: true };
                if let Some(w) = s.parked.take() {
                    w.wake();
                }
                Poll::Ready(Ok(data.len()))
            }
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let mut s = self.0.lock();
        match s.mode {
            Mode::Normal => Pin::new(&mut s.io).poll_flush(cx),
            // Nothing of the client's is buffered below us.
            _ => Poll::Ready(Ok(())),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0.lock().io).poll_shutdown(cx)
    }
}

impl TlsStream for Tapped {
    fn channel_binding(&self) -> ChannelBinding {
        self.0
            .lock()
            .channel_binding
            .take()
            .unwrap_or_else(ChannelBinding::none)
    }
}

/// A TLS connector whose stream is [`Tapped`]: the raw session then talks
/// through TLS. `slot` receives the wire of the TLS stream when TLS is
/// used.
pub(crate) struct TapTls<T> {
    pub(crate) inner: T,
    pub(crate) slot: Arc<Mutex<Option<Wire>>>,
}

type TlsFuture = Pin<
    Box<
        dyn std::future::Future<Output = Result<Tapped, Box<dyn std::error::Error + Sync + Send>>>
            + Send,
    >,
>;

impl<T> TlsConnect<Tapped> for TapTls<T>
where
    T: TlsConnect<Tapped> + Send + 'static,
    T::Stream: Send + 'static,
    T::Future: Send + 'static,
{
    type Stream = Tapped;
    type Error = Box<dyn std::error::Error + Sync + Send>;
    type Future = TlsFuture;

    fn connect(self, stream: Tapped) -> TlsFuture {
        let TapTls { inner, slot } = self;
        Box::pin(async move {
            let tls = inner.connect(stream).await.map_err(Into::into)?;
            let binding = tls.channel_binding();
            let tapped = Tapped(Shared::new(Box::new(tls), Some(binding)));
            *slot.lock().unwrap_or_else(|p| p.into_inner()) = Some(tapped.wire());
            Ok(tapped)
        })
    }
}

/// The raw side of a connection opened by `Target::connect_wire`.
#[derive(Clone)]
pub struct Wire(Shared);

impl Wire {
    /// Takes the stream from tokio-postgres until the guard is dropped
    /// (or until [`Wire::replay`], [`Wire::error`] or [`Wire::kill`]).
    ///
    /// Call only when the `Client` has no request in flight. A request
    /// that returned before its ReadyForQuery (tokio-postgres' `prepare`
    /// and `copy_in` finish at ParseComplete/RowDescription and
    /// CommandComplete) may leave that ReadyForQuery unread, and the
    /// connection task still waits for it (it pairs each request with the
    /// answer up to its ReadyForQuery): a raw session must never read it,
    /// or the client's next request hangs. A dropped named `Statement`
    /// makes the task send Close + Sync on its own, so a CloseComplete
    /// may come too. So the stream is taken only after a request that
    /// read its ReadyForQuery: `copyout` makes a sync point first
    /// (`batch_execute("")`: once it is answered, every earlier request
    /// is), `load::wire` after its `copy_in` of a refused record, and
    /// `load::wire_copy` runs only between such requests; each treats a
    /// message it did not ask for as out of step and kills the connection.
    pub fn raw(&self) -> Raw<'_> {
        self.0.set_mode(Mode::Raw);
        Raw(&self.0)
    }

    /// Answers the `Client`'s next request with `answer` (whole backend
    /// messages ending with ReadyForQuery) instead of sending it. Call
    /// with no request in flight, then make exactly one request (e.g.
    /// `batch_execute("")`), then [`Wire::normal`].
    pub fn replay(&self, answer: &[u8]) {
        // The answer and the mode under one lock: queued while the mode
        // was still Normal, the answer could be read by the connection
        // before its request was written, as a message nobody asked for,
        // and tokio-postgres closed the connection (outside testing: a
        // `--single-transaction --rejects` load of many bad rows stopped
        // with "connection closed" in most runs).
        let mut s = self.0.lock();
        s.inject.extend_from_slice(answer);
        if s.mode != Mode::Dead {
            s.mode = Mode::Replay { written: false };
        }
        if let Some(w) = s.parked.take() {
            w.wake();
        }
    }

    /// Ends the connection for tokio-postgres: its next read or write
    /// fails, and the client reports the connection closed.
    pub fn kill(&self) {
        self.0.set_mode(Mode::Dead);
    }

    /// Back to normal after [`Wire::replay`]; what is left of the answer
    /// is still read first.
    pub fn normal(&self) {
        self.0.set_mode(Mode::Normal);
    }

    /// The `tokio_postgres::Error` of a server's ErrorResponse that a raw
    /// session read (`response`: the whole message, tag included), built
    /// by tokio-postgres itself through [`Wire::replay`], so it carries
    /// the full `DbError` (SQLSTATE, message, detail, context) as if the
    /// client had run the statement. Call with no request in flight,
    /// before or after the [`Raw`] guard is dropped (before: nothing the
    /// socket holds, such as its end, is read first). The ReadyForQuery that
    /// ends the replayed answer says "failed transaction"; tokio-postgres
    /// does not read its status.
    pub async fn error(
        &self,
        client: &tokio_postgres::Client,
        response: &[u8],
    ) -> tokio_postgres::Error {
        let mut answer = Vec::with_capacity(response.len() + 6);
        answer.extend_from_slice(response);
        answer.extend_from_slice(&[b'Z', 0, 0, 0, 5, b'E']);
        self.replay(&answer);
        let result = client.batch_execute("").await;
        self.normal();
        match result {
            Err(error) => error,
            // Not an ErrorResponse after all: out of step.
            Ok(()) => self.close(client).await,
        }
    }

    /// Ends the connection (a raw session found it broken or out of step)
    /// and returns the error the client's next request gets: "connection
    /// closed", which `error::classify` calls a lost connection.
    pub async fn close(&self, client: &tokio_postgres::Client) -> tokio_postgres::Error {
        self.kill();
        match client.batch_execute("").await {
            Err(error) => error,
            Ok(()) => unreachable!("a killed stream answers nothing"),
        }
    }
}

/// The stream in raw mode; dropping it gives the stream back.
pub struct Raw<'a>(&'a Shared);

impl Drop for Raw<'_> {
    /// Back to normal, unless the raw session chose another mode while it
    /// held the stream: a replay (its answer must come before anything the
    /// socket has, e.g. the end of a terminated session) or dead.
    fn drop(&mut self) {
        let mut s = self.0.lock();
        if s.mode == Mode::Raw {
            s.mode = Mode::Normal;
        }
        if let Some(w) = s.parked.take() {
            w.wake();
        }
    }
}

impl AsyncRead for Raw<'_> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0.lock().io).poll_read(cx, buf)
    }
}

impl AsyncWrite for Raw<'_> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.0.lock().io).poll_write(cx, data)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0.lock().io).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0.lock().io).poll_shutdown(cx)
    }
}
