//! One write to TLS per turn of an HTTP/2 connection's task, however many frames its streams
//! queued in that turn.
//!
//! h2 flushes its codec for every DATA frame it cannot copy into its own buffer (any frame over
//! 256 bytes on a vectored transport, so every watch event of a real object), and TLS turns each
//! flush into a record and a `writev`. When the watch cache hands an event to a thousand
//! watchers of one connection, that is a thousand records and syscalls, and the kernel's share
//! of a watch fan-out was most of the server's CPU. [`Coalescing`] sits between h2 and TLS: it
//! keeps what h2 writes, and answers the first flush of a turn at once while waking the task
//! again, so that the stream tasks woken with it queue their frames first; the next turn writes
//! everything in one go. What it keeps is bounded by [`MAX_KEPT`] (a large answer goes out in
//! writes of that size, not one per frame), and a shutdown writes it out.
//!
//! Waiting pays only where other streams have frames on the way. A connection whose waits
//! gather nothing (one client's requests, or one large answer held back by flow control) backs
//! off: after a wait that found no more to write, the next flushes write at once, twice as many
//! after each such wait in a row, up to [`MAX_SKIPPED`]; a wait that gathered frames ends it.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll, ready};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// Bytes kept before they are written regardless of the turn: four full TLS records.
pub const MAX_KEPT: usize = 64 * 1024;

/// The most flushes written at once, without waiting, after waits that gathered nothing.
pub const MAX_SKIPPED: u32 = 63;

/// Counts the polls of one connection's future: a turn is one poll. The connection's driver
/// bumps it before each poll; [`Coalescing`] reads it.
#[derive(Clone, Default)]
pub struct Turns(Arc<AtomicU64>);

impl Turns {
    /// Marks the start of a poll of the connection.
    pub fn next(&self) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }

    fn current(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// A transport whose writes are gathered per turn. See the module documentation.
pub struct Coalescing<T> {
    inner: T,
    kept: Vec<u8>,
    /// How much of `kept` the transport has taken.
    written: usize,
    turns: Turns,
    /// The turn whose flush was answered without writing; the task was woken to write it.
    deferred_in: Option<u64>,
    /// How much was kept when that flush was answered.
    kept_at_deferral: usize,
    /// How many flushes the last wait that gathered nothing made write at once (0 after a wait
    /// that gathered frames), and how many of them are still to come.
    backoff: u32,
    skipping: u32,
}

impl<T> Coalescing<T> {
    pub fn new(inner: T, turns: Turns) -> Self {
        Coalescing {
            inner,
            kept: Vec::new(),
            written: 0,
            turns,
            deferred_in: None,
            kept_at_deferral: 0,
            backoff: 0,
            skipping: 0,
        }
    }
}

impl<T: AsyncWrite + Unpin> Coalescing<T> {
    /// Writes out everything kept.
    fn poll_write_kept(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while self.written < self.kept.len() {
            let n = ready!(Pin::new(&mut self.inner).poll_write(cx, &self.kept[self.written..]))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            self.written += n;
        }
        if self.deferred_in.take().is_some() {
            self.learn(self.kept.len() > self.kept_at_deferral);
        }
        self.kept.clear();
        self.written = 0;
        Poll::Ready(Ok(()))
    }

    /// Takes in whether a wait gathered more to write: see the module documentation.
    fn learn(&mut self, gathered: bool) {
        if gathered {
            self.backoff = 0;
        } else {
            self.backoff = (self.backoff * 2 + 1).min(MAX_SKIPPED);
            self.skipping = self.backoff;
        }
    }

    /// Room for `len` more bytes: what is kept is written first when they would not fit.
    fn poll_room(&mut self, cx: &mut Context<'_>, len: usize) -> Poll<io::Result<()>> {
        if !self.kept.is_empty() && self.kept.len() + len > MAX_KEPT {
            ready!(self.poll_write_kept(cx))?;
        }
        Poll::Ready(Ok(()))
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for Coalescing<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Coalescing<T> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        ready!(this.poll_room(cx, buf.len()))?;
        if this.kept.is_empty() && buf.len() >= MAX_KEPT {
            return Pin::new(&mut this.inner).poll_write(cx, buf);
        }
        this.kept.extend_from_slice(buf);
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let len: usize = bufs.iter().map(|b| b.len()).sum();
        ready!(this.poll_room(cx, len))?;
        if this.kept.is_empty() && len >= MAX_KEPT {
            return Pin::new(&mut this.inner).poll_write_vectored(cx, bufs);
        }
        for b in bufs {
            this.kept.extend_from_slice(b);
        }
        Poll::Ready(Ok(len))
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.kept.is_empty() {
            return Pin::new(&mut this.inner).poll_flush(cx);
        }
        let turn = this.turns.current();
        match this.deferred_in {
            // Written in a later turn, after the tasks woken with this one had theirs.
            Some(t) if t != turn => {}
            // Already deferred in this turn; the wake-up is on its way.
            Some(_) => return Poll::Ready(Ok(())),
            // Backing off after waits that gathered nothing.
            None if this.skipping > 0 => this.skipping -= 1,
            None => {
                this.deferred_in = Some(turn);
                this.kept_at_deferral = this.kept.len();
                cx.waker().wake_by_ref();
                return Poll::Ready(Ok(()));
            }
        }
        ready!(this.poll_write_kept(cx))?;
        Pin::new(&mut this.inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        ready!(this.poll_write_kept(cx))?;
        Pin::new(&mut this.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;
    use std::task::Waker;

    /// A transport that records each write it takes.
    #[derive(Clone, Default)]
    struct Recorder(Arc<Mutex<Vec<Vec<u8>>>>);

    impl AsyncWrite for Recorder {
        fn poll_write(
            self: Pin<&mut Self>,
            _: &mut Context<'_>,
            buf: &[u8],
        ) -> Poll<io::Result<usize>> {
            self.0.lock().unwrap().push(buf.to_vec());
            Poll::Ready(Ok(buf.len()))
        }
        fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            Poll::Ready(Ok(()))
        }
        fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            Poll::Ready(Ok(()))
        }
    }

    /// A waker that counts its wake-ups.
    struct Counting(AtomicU64);
    impl std::task::Wake for Counting {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
        fn wake_by_ref(self: &Arc<Self>) {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// A transport over a fresh recorder, in its first turn.
    fn in_first_turn() -> (Recorder, Turns, Coalescing<Recorder>) {
        let recorder = Recorder::default();
        let turns = Turns::default();
        let io = Coalescing::new(recorder.clone(), turns.clone());
        turns.next();
        (recorder, turns, io)
    }

    /// Writes `data`, which the transport takes whole at once.
    fn write(io: &mut Coalescing<Recorder>, cx: &mut Context<'_>, data: &[u8]) {
        assert!(matches!(
            Pin::new(io).poll_write(cx, data),
            Poll::Ready(Ok(n)) if n == data.len()
        ));
    }

    /// Flushes, which the transport answers at once (writing or not).
    fn flush(io: &mut Coalescing<Recorder>, cx: &mut Context<'_>) {
        assert!(matches!(Pin::new(io).poll_flush(cx), Poll::Ready(Ok(()))));
    }

    fn write_and_flush(io: &mut Coalescing<Recorder>, cx: &mut Context<'_>, data: &[u8]) {
        write(io, cx, data);
        flush(io, cx);
    }

    #[test]
    fn the_flushes_of_one_turn_become_one_write_in_the_next() {
        let (recorder, turns, mut io) = in_first_turn();
        let wakes = Arc::new(Counting(AtomicU64::new(0)));
        let waker = Waker::from(wakes.clone());
        let mut cx = Context::from_waker(&waker);

        for frame in [b"one ".as_slice(), b"two ", b"three"] {
            write_and_flush(&mut io, &mut cx, frame);
        }
        assert!(
            recorder.0.lock().unwrap().is_empty(),
            "nothing written in the first turn"
        );
        assert_eq!(
            wakes.0.load(Ordering::Relaxed),
            1,
            "the task is woken once to write"
        );

        turns.next();
        write_and_flush(&mut io, &mut cx, b" four");
        assert_eq!(
            *recorder.0.lock().unwrap(),
            vec![b"one two three four".to_vec()]
        );

        // Nothing kept: a flush goes straight through, with no wake-up.
        flush(&mut io, &mut cx);
        assert_eq!(wakes.0.load(Ordering::Relaxed), 1);
    }

    #[test]
    fn waits_that_gather_nothing_back_off_and_one_that_gathers_ends_it() {
        let (recorder, turns, mut io) = in_first_turn();
        let mut cx = Context::from_waker(Waker::noop());
        let writes = |n: usize| {
            assert_eq!(recorder.0.lock().unwrap().len(), n);
        };
        // A lone frame waits a turn, and nothing joins it: one useless wait.
        write_and_flush(&mut io, &mut cx, b"a");
        writes(0);
        turns.next();
        flush(&mut io, &mut cx);
        writes(1);
        // So the next flush writes at once; the one after waits again, gathers nothing again,
        // and the next three write at once.
        write_and_flush(&mut io, &mut cx, b"b");
        writes(2);
        write_and_flush(&mut io, &mut cx, b"c");
        writes(2);
        turns.next();
        flush(&mut io, &mut cx);
        writes(3);
        for (i, frame) in [b"d", b"e", b"f"].into_iter().enumerate() {
            write_and_flush(&mut io, &mut cx, frame);
            writes(4 + i);
        }
        // A wait that gathers frames of other streams is worth it: waits are back to every flush.
        write_and_flush(&mut io, &mut cx, b"g");
        turns.next();
        write_and_flush(&mut io, &mut cx, b"h");
        writes(7);
        assert_eq!(recorder.0.lock().unwrap()[6], b"gh");
        write_and_flush(&mut io, &mut cx, b"i");
        writes(7);
    }

    #[test]
    fn what_is_kept_is_bounded_and_a_shutdown_writes_it() {
        let (recorder, turns, mut io) = in_first_turn();
        let mut cx = Context::from_waker(Waker::noop());
        let frame = vec![7u8; MAX_KEPT / 2 + 1];
        write(&mut io, &mut cx, &frame);
        assert!(recorder.0.lock().unwrap().is_empty());
        // The second frame would not fit: the first is written before it is kept.
        write(&mut io, &mut cx, &frame);
        assert_eq!(recorder.0.lock().unwrap().len(), 1);
        // A write as large as the bound, with nothing kept, is not copied.
        let mut big = Coalescing::new(Recorder::default(), turns.clone());
        write(&mut big, &mut cx, &vec![1u8; MAX_KEPT]);
        assert!(big.kept.is_empty());
        assert!(matches!(
            Pin::new(&mut io).poll_shutdown(&mut cx),
            Poll::Ready(Ok(()))
        ));
        let writes = recorder.0.lock().unwrap();
        assert_eq!(writes.len(), 2);
        assert_eq!(writes.iter().map(Vec::len).sum::<usize>(), 2 * frame.len());
    }
}
