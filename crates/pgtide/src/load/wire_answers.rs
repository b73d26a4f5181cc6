//! The answers to one window of `--method pipeline` (`wire.rs`), taken
//! message by message. The state lives here rather than in a future, so
//! that reading can pause while the next window is built and go on while
//! it is written.

use bytes::BytesMut;
use postgres_protocol::message::backend::Message;

/// What went wrong in a window.
pub(super) enum Failed {
    /// The server refused `record` (`None`: the Parse, no row): its
    /// ErrorResponse, whole.
    Server {
        record: Option<u64>,
        response: BytesMut,
    },
    /// The socket broke, or the server said something out of place.
    Broken,
}

/// A window written: `n` rows, the first being record `first` of the
/// batch, after a Parse when `parse`.
pub(super) struct Sent {
    pub parse: bool,
    pub first: u64,
    pub n: usize,
}

/// How a window ended, at its ReadyForQuery.
pub(super) enum Answered {
    /// Every row ran: the rows inserted (with `--sql`, the rows run).
    Rows(u64),
    /// Whether the Parse succeeded, and what failed.
    Failed { parsed: bool, failed: Failed },
    /// A window behind a failed one, refused whole in the aborted
    /// transaction, as it must be.
    Refused,
}

/// The answers read so far to one window.
pub(super) struct Answering {
    sent: Sent,
    /// Written behind a window that failed: it must be refused whole.
    behind: bool,
    parsed: bool,
    done: usize,
    rows: u64,
    error: Option<Failed>,
}

impl Answering {
    pub fn new(sent: Sent, behind: bool) -> Answering {
        Answering {
            parsed: !sent.parse,
            sent,
            behind,
            done: 0,
            rows: 0,
            error: None,
        }
    }

    /// Whether the window carries the Parse.
    pub fn parses(&self) -> bool {
        self.sent.parse
    }

    /// The window is behind one that failed.
    pub fn behind(&mut self) {
        self.behind = true;
    }

    /// Takes one message (`frame`: its bytes, kept for an ErrorResponse);
    /// `Some` at the window's ReadyForQuery. The stream is taken only after
    /// a client request that read its ReadyForQuery, and windows are
    /// answered in order, so a ReadyForQuery before the window's end is out
    /// of place (the connection is then killed, never left to hang), as is
    /// any message the window cannot have caused.
    pub fn feed(
        &mut self,
        message: Message,
        frame: Option<BytesMut>,
        user: bool,
    ) -> Option<Answered> {
        let fine = self.error.is_none();
        match message {
            Message::ReadyForQuery(_) => return Some(self.end()),
            Message::ParseComplete if !self.parsed => self.parsed = true,
            Message::BindComplete | Message::DataRow(_) if fine => {}
            Message::CommandComplete(body) if fine && self.done < self.sent.n => {
                self.done += 1;
                self.rows += if user {
                    1
                } else {
                    body.tag()
                        .ok()
                        .and_then(|t| t.rsplit(' ').next()?.parse().ok())
                        .unwrap_or(0)
                };
            }
            Message::EmptyQueryResponse if fine && self.done < self.sent.n => self.done += 1,
            Message::ErrorResponse(_) if fine => {
                let record = self.parsed.then_some(self.sent.first + self.done as u64);
                self.error = frame.map(|response| Failed::Server { record, response });
            }
            Message::NoticeResponse(_)
            | Message::ParameterStatus(_)
            | Message::NotificationResponse(_) => {}
            _ => {
                self.error = Some(Failed::Broken);
                return Some(self.end());
            }
        }
        None
    }

    fn end(&mut self) -> Answered {
        let error = self.error.take();
        let parsed = self.parsed;
        if self.behind {
            // Any statement run means the transaction was not aborted
            // after all: nothing about this connection can be trusted.
            return match error {
                Some(Failed::Server { .. }) if self.done == 0 => Answered::Refused,
                _ => Answered::Failed {
                    parsed,
                    failed: Failed::Broken,
                },
            };
        }
        match error {
            None if self.done == self.sent.n => Answered::Rows(self.rows),
            None => Answered::Failed {
                parsed,
                failed: Failed::Broken,
            },
            Some(failed) => Answered::Failed { parsed, failed },
        }
    }
}
