//! One write to the socket per turn of an HTTP/2 connection's task, however many frames its
//! streams queued in that turn.
//!
//! h2 flushes its codec for every DATA frame it cannot copy into its own buffer (any frame over
//! 256 bytes on a vectored transport, so every watch event of a real object), and TLS turns each
//! flush into a record and a `writev`. When the watch cache hands an event to a thousand
//! watchers of one connection, that is a thousand records and syscalls, and the kernel's share
//! of a watch fan-out was most of the server's CPU. [`Coalescing`] sits between h2 and TLS: it
//! seals what h2 writes into TLS records without writing them, and answers the first flush of a
//! turn at once while waking the task again, so that the stream tasks woken with it queue their
//! frames first; the next turn writes everything in one go. What is sealed and not written is
//! bounded by [`MAX_KEPT`] (a large answer goes out in writes of that size, not one per frame),
//! and a shutdown writes it out.
//!
//! Records are sealed whole: the bytes of short frames are kept in plain text until they fill a
//! record (or a flush writes them), and a long frame is sealed from h2's buffer where it lies,
//! with whatever was kept before it, in as many full records as it fills; only its tail is kept.
//! So a large answer is copied once, into TLS's records, rather than once more into a buffer of
//! ours, and a watch event of a few hundred bytes does not cost a record of its own.
//!
//! Waiting pays only where other streams have frames on the way. A connection whose waits
//! gather nothing (one client's requests, or one large answer held back by flow control) backs
//! off: after a wait that found no more to write, the next flushes write at once, twice as many
//! after each such wait in a row, up to [`MAX_SKIPPED`]; a wait that gathered frames ends it.

use std::io::{self, IoSlice, Write};
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll, ready};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// Bytes sealed before they are written regardless of the turn: four full TLS records.
pub const MAX_KEPT: usize = 64 * 1024;

/// The plain text of one full TLS record (2^14 bytes, the most a record may hold).
pub const RECORD: usize = 16 * 1024;

/// The most flushes written at once, without waiting, after waits that gathered nothing.
pub const MAX_SKIPPED: u32 = 63;

/// The most of h2's buffers one write takes; h2 offers the rest again.
const MAX_SLICES: usize = 8;

/// A transport that seals plain text into what it will send without writing it yet: TLS
/// records, written out by its flush.
pub trait Seal {
    /// Takes all of `bufs`, in order.
    fn seal(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<()>;
}

impl<IO> Seal for tokio_rustls::server::TlsStream<IO> {
    fn seal(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<()> {
        let conn = self.get_mut().1;
        // rustls would otherwise take only part of a write past 64 KiB of records not yet
        // written; what [`Coalescing`] seals is bounded by its own count.
        conn.set_buffer_limit(None);
        let len: usize = bufs.iter().map(|b| b.len()).sum();
        let taken = conn.writer().write_vectored(bufs)?;
        if taken != len {
            return Err(io::Error::other(format!(
                "TLS took {taken} of {len} bytes to seal"
            )));
        }
        Ok(())
    }
}

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
    /// Plain text short of a full record, not sealed yet.
    kept: Vec<u8>,
    /// Bytes sealed and not written yet.
    sealed: usize,
    turns: Turns,
    /// The turn whose flush was answered without writing; the task was woken to write it.
    deferred_in: Option<u64>,
    /// How much was held (sealed or kept) when that flush was answered.
    held_at_deferral: usize,
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
            sealed: 0,
            turns,
            deferred_in: None,
            held_at_deferral: 0,
            backoff: 0,
            skipping: 0,
        }
    }

    /// What was written to this transport and has not gone out.
    fn held(&self) -> usize {
        self.sealed + self.kept.len()
    }
}

impl<T: AsyncWrite + Seal + Unpin> Coalescing<T> {
    /// Writes out what is sealed, and first seals what is kept when `with_kept`.
    fn poll_write_out(&mut self, cx: &mut Context<'_>, with_kept: bool) -> Poll<io::Result<()>> {
        let held = self.held();
        if with_kept && !self.kept.is_empty() {
            self.inner.seal(&[IoSlice::new(&self.kept)])?;
            self.sealed += self.kept.len();
            self.kept.clear();
        }
        ready!(Pin::new(&mut self.inner).poll_flush(cx))?;
        self.sealed = 0;
        if self.deferred_in.take().is_some() {
            self.learn(held > self.held_at_deferral);
        }
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

    /// Takes `bufs` (at most [`MAX_KEPT`] of them): whole records are sealed, kept bytes first,
    /// and the rest is kept.
    fn take(&mut self, cx: &mut Context<'_>, bufs: &[IoSlice<'_>]) -> Poll<io::Result<usize>> {
        if self.sealed >= MAX_KEPT {
            ready!(self.poll_write_out(cx, false))?;
        }
        let bufs = &bufs[..bufs.len().min(MAX_SLICES)];
        let offered: usize = bufs.iter().map(|b| b.len()).sum();
        let len = offered.min(MAX_KEPT);
        let total = self.kept.len() + len;
        if total < RECORD {
            extend_with(&mut self.kept, bufs, 0, len);
            return Poll::Ready(Ok(len));
        }
        // The kept bytes, then as much of `bufs` as fills whole records.
        let whole = total - total % RECORD;
        let from_bufs = whole - self.kept.len();
        let mut slices = [IoSlice::new(&[]); MAX_SLICES + 1];
        let mut n = 0;
        if !self.kept.is_empty() {
            slices[0] = IoSlice::new(&self.kept);
            n = 1;
        }
        for part in parts(bufs, 0, from_bufs) {
            slices[n] = IoSlice::new(part);
            n += 1;
        }
        self.inner.seal(&slices[..n])?;
        self.sealed += whole;
        self.kept.clear();
        extend_with(&mut self.kept, bufs, from_bufs, len);
        Poll::Ready(Ok(len))
    }
}

/// The parts of `bufs` between the `from`th and the `to`th byte of their concatenation.
fn parts<'a>(bufs: &'a [IoSlice<'_>], from: usize, to: usize) -> impl Iterator<Item = &'a [u8]> {
    let mut at = 0;
    bufs.iter().filter_map(move |b| {
        let (start, end) = (at, at + b.len());
        at = end;
        let (lo, hi) = (from.max(start), to.min(end));
        (lo < hi).then(|| &b[lo - start..hi - start])
    })
}

fn extend_with(out: &mut Vec<u8>, bufs: &[IoSlice<'_>], from: usize, to: usize) {
    for part in parts(bufs, from, to) {
        out.extend_from_slice(part);
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

impl<T: AsyncWrite + Seal + Unpin> AsyncWrite for Coalescing<T> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.get_mut().take(cx, &[IoSlice::new(buf)])
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        self.get_mut().take(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.held() == 0 {
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
                this.held_at_deferral = this.held();
                cx.waker().wake_by_ref();
                return Poll::Ready(Ok(()));
            }
        }
        this.poll_write_out(cx, true)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        ready!(this.poll_write_out(cx, true))?;
        Pin::new(&mut this.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;
    use std::task::Waker;

    /// A transport that records what is sealed into it, and each write a flush makes of that.
    #[derive(Clone, Default)]
    struct Recorder(Arc<Mutex<Recorded>>);

    #[derive(Default)]
    struct Recorded {
        /// Sealed, not written yet.
        sealed: Vec<u8>,
        /// The length of each seal.
        seals: Vec<usize>,
        writes: Vec<Vec<u8>>,
    }

    impl Recorder {
        fn writes(&self) -> Vec<Vec<u8>> {
            self.0.lock().unwrap().writes.clone()
        }
    }

    impl Seal for Recorder {
        fn seal(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<()> {
            let mut r = self.0.lock().unwrap();
            let len = bufs.iter().map(|b| b.len()).sum();
            r.seals.push(len);
            for b in bufs {
                r.sealed.extend_from_slice(b);
            }
            Ok(())
        }
    }

    impl AsyncWrite for Recorder {
        fn poll_write(
            self: Pin<&mut Self>,
            _: &mut Context<'_>,
            _: &[u8],
        ) -> Poll<io::Result<usize>> {
            unreachable!("Coalescing seals, then flushes")
        }
        fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            let mut r = self.0.lock().unwrap();
            if !r.sealed.is_empty() {
                let w = std::mem::take(&mut r.sealed);
                r.writes.push(w);
            }
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
            recorder.writes().is_empty(),
            "nothing written in the first turn"
        );
        assert_eq!(
            wakes.0.load(Ordering::Relaxed),
            1,
            "the task is woken once to write"
        );

        turns.next();
        write_and_flush(&mut io, &mut cx, b" four");
        assert_eq!(recorder.writes(), vec![b"one two three four".to_vec()]);

        // Nothing kept: a flush goes straight through, with no wake-up.
        flush(&mut io, &mut cx);
        assert_eq!(wakes.0.load(Ordering::Relaxed), 1);
    }

    #[test]
    fn waits_that_gather_nothing_back_off_and_one_that_gathers_ends_it() {
        let (recorder, turns, mut io) = in_first_turn();
        let mut cx = Context::from_waker(Waker::noop());
        let writes = |n: usize| {
            assert_eq!(recorder.writes().len(), n);
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
        assert_eq!(recorder.writes()[6], b"gh");
        write_and_flush(&mut io, &mut cx, b"i");
        writes(7);
    }

    #[test]
    fn what_is_sealed_is_bounded_and_a_shutdown_writes_it() {
        let (recorder, _turns, mut io) = in_first_turn();
        let mut cx = Context::from_waker(Waker::noop());
        let frame = vec![7u8; RECORD * 3 / 2];
        // Two frames seal three records and nothing is written yet.
        write(&mut io, &mut cx, &frame);
        write(&mut io, &mut cx, &frame);
        assert!(recorder.writes().is_empty());
        assert_eq!(io.sealed, 3 * RECORD);
        // The third brings what is sealed to the bound; the fourth finds it there and writes
        // it out before taking its own bytes.
        write(&mut io, &mut cx, &frame);
        assert!(recorder.writes().is_empty());
        write(&mut io, &mut cx, &frame);
        assert_eq!(recorder.writes().len(), 1);
        assert_eq!(recorder.writes()[0].len(), 4 * RECORD);
        // A shutdown writes the rest, the kept tail included.
        assert!(matches!(
            Pin::new(&mut io).poll_shutdown(&mut cx),
            Poll::Ready(Ok(()))
        ));
        let writes = recorder.writes();
        assert_eq!(writes.len(), 2);
        assert_eq!(writes.concat(), [&frame[..]; 4].concat());
    }

    #[test]
    fn long_frames_are_sealed_in_whole_records_where_they_lie() {
        let (recorder, turns, mut io) = in_first_turn();
        let mut cx = Context::from_waker(Waker::noop());
        // h2's DATA frames as a large answer sends them: a 9-byte header, then 16 KiB of data.
        let header = [1u8; 9];
        let mut sent = Vec::new();
        for i in 0..6u8 {
            let data = vec![i; RECORD];
            let bufs = [IoSlice::new(&header), IoSlice::new(&data)];
            let taken = Pin::new(&mut io).poll_write_vectored(&mut cx, &bufs);
            assert!(matches!(taken, Poll::Ready(Ok(n)) if n == header.len() + RECORD));
            sent.extend_from_slice(&header);
            sent.extend_from_slice(&data);
            // Only the tail short of a record is copied.
            assert_eq!(io.kept.len(), (i as usize + 1) * header.len());
        }
        turns.next();
        flush(&mut io, &mut cx);
        turns.next();
        flush(&mut io, &mut cx);
        let r = recorder.0.lock().unwrap();
        let (last, whole) = r.seals.split_last().unwrap();
        assert!(whole.iter().all(|n| n % RECORD == 0), "{:?}", r.seals);
        assert_eq!(*last, 6 * header.len(), "the flush seals the tail");
        assert_eq!(r.writes.concat(), sent);
    }

    #[test]
    fn short_frames_are_kept_until_they_fill_a_record() {
        let (recorder, _turns, mut io) = in_first_turn();
        let mut cx = Context::from_waker(Waker::noop());
        let event = [3u8; 1000];
        for _ in 0..16 {
            write(&mut io, &mut cx, &event);
        }
        assert_eq!(io.sealed, 0);
        write(&mut io, &mut cx, &event);
        assert_eq!(io.sealed, RECORD);
        assert_eq!(io.kept.len(), 17 * event.len() - RECORD);
        assert_eq!(recorder.0.lock().unwrap().seals, vec![RECORD]);
        assert!(recorder.writes().is_empty());
        // A write of nothing takes nothing.
        assert!(matches!(
            Pin::new(&mut io).poll_write(&mut cx, &[]),
            Poll::Ready(Ok(0))
        ));
    }
}
