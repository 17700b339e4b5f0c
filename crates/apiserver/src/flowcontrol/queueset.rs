//! One priority level's queues (upstream: k8s.io/apiserver/pkg/util/flowcontrol/fairqueuing/
//! queueset): fair queuing for server requests, with shuffle sharding.
//!
//! A request asks for seats. While the level has seats free and nothing waits, it runs at once;
//! otherwise a `Queue` level puts it in one queue of the flow's hand (the least loaded of
//! `hand_size` queues dealt from the flow's hash, so one heavy flow fills only its own hand)
//! and a `Reject` level (no queues) turns it away. A request that finds its queue at
//! `queue_length_limit` is rejected. When seats come free, waiting requests are dispatched from
//! the queue with the least virtual dispatch time: each queue advances its `next_dispatch_r` by
//! the seat-seconds of what it dispatched, and the level's virtual clock `current_r` advances at
//! the rate a fair share of the level's seats gives each busy queue, as upstream's does; a
//! request whose seats do not fit blocks its level rather than being overtaken, so wide
//! requests are not starved. Requests are estimated at 3 s of service, corrected when they end.
//!
//! What it must not do: hold its lock across an await, or lose seats when a waiting or running
//! request is dropped (the client went away): `Waiter` and `Ticket` give them back on drop.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime};

use super::width::WorkEstimate;
use crate::request::RequestInfo;

/// The service time a request is assumed to take until it ends (upstream's
/// `estimatedServiceDuration`).
const ESTIMATED_SERVICE_SECONDS: f64 = 3.0;

/// What a request is, for the dump endpoints.
#[derive(Clone, Debug)]
pub struct RequestDump {
    pub flow_schema: String,
    pub distinguisher: String,
    pub user: String,
    pub info: std::sync::Arc<RequestInfo>,
    pub work: WorkEstimate,
    pub arrive: SystemTime,
    pub start: Option<SystemTime>,
}

impl RequestDump {
    /// The seats the request takes from its dispatch to the end of its additional latency
    /// (upstream's `MaxSeats`).
    pub fn seats(&self) -> u64 {
        self.work.max_seats()
    }
}

/// Queuing parameters; `None` for a `Reject` level or the exempt level.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Queuing {
    pub queues: usize,
    pub hand_size: usize,
    pub queue_length_limit: usize,
}

struct Waiting {
    id: u64,
    dump: RequestDump,
    ready: tokio::sync::oneshot::Sender<()>,
}

#[derive(Default)]
struct Queue {
    waiting: VecDeque<Waiting>,
    next_dispatch_r: f64,
    executing: u64,
    seats_in_use: u64,
}

impl Queue {
    fn waiting_seats(&self) -> u64 {
        self.waiting.iter().map(|w| w.dump.seats()).sum()
    }

    fn is_idle(&self) -> bool {
        self.waiting.is_empty() && self.executing == 0
    }
}

struct Executing {
    queue: Option<usize>,
    started: Instant,
    dump: RequestDump,
}

/// Counters since the queue set was made, as upstream's dump shows them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    pub dispatched: u64,
    pub rejected: u64,
    pub timed_out: u64,
    pub cancelled: u64,
}

struct State {
    /// Seats the level may use at once; `None` is no limit (the exempt level).
    limit: Option<u64>,
    queuing: Option<Queuing>,
    queues: Vec<Queue>,
    seats_in_use: u64,
    executing: BTreeMap<u64, Executing>,
    current_r: f64,
    last_advanced: Instant,
    robin: usize,
    next_id: u64,
    counts: Counts,
    /// Seats asked for (running and waiting) now, and at most since the last
    /// `take_demand_high_watermark`: what borrowing between levels reads.
    waiting_seats: u64,
    demand_high: u64,
}

pub struct QueueSet {
    state: Mutex<State>,
}

/// Why a request was turned away.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rejection {
    /// A `Reject` level without free seats.
    ConcurrencyLimit,
    /// The chosen queue holds `queue_length_limit` requests.
    QueueFull,
    /// It waited as long as it may.
    TimedOut,
}

impl Rejection {
    /// Upstream's `reason` label of `apiserver_flowcontrol_rejected_requests_total`.
    pub fn reason(self) -> &'static str {
        match self {
            Self::ConcurrencyLimit => "concurrency-limit",
            Self::QueueFull => "queue-full",
            Self::TimedOut => "time-out",
        }
    }
}

pub enum Admission {
    Dispatched(Ticket),
    Queued(Waiter),
    Rejected(Rejection),
}

/// A running request's seats; given back when dropped, or its additional latency after that.
pub struct Ticket {
    set: Arc<QueueSet>,
    id: u64,
    additional_latency: Duration,
}

/// A queued request: `wait` until dispatched or the deadline; dropping it leaves the queue.
pub struct Waiter {
    set: Arc<QueueSet>,
    id: u64,
    queue: usize,
    ready: Option<tokio::sync::oneshot::Receiver<()>>,
    /// Dispatched or given up: nothing left for `drop` to undo.
    settled: bool,
    additional_latency: Duration,
}

/// The queue indices of a flow's hand: `hand_size` distinct queues of `deck`, dealt from the
/// hash as upstream's shuffle-sharding dealer does (each card the hash modulo the cards left,
/// the hash divided down), so that two flows share a whole hand only rarely.
pub fn deal(hash: u64, deck: usize, hand_size: usize) -> Vec<usize> {
    let hand_size = hand_size.min(deck);
    let mut hash = hash;
    let mut hand: Vec<usize> = Vec::with_capacity(hand_size);
    for i in 0..hand_size {
        let left = (deck - i) as u64;
        let mut card = (hash % left) as usize;
        hash /= left;
        // The card-th of the cards not yet dealt, counted in order.
        let mut dealt = hand.clone();
        dealt.sort_unstable();
        for d in dealt {
            if card >= d {
                card += 1;
            }
        }
        hand.push(card);
    }
    hand
}

/// The hash of a flow: its schema and distinguisher.
pub fn flow_hash(flow_schema: &str, distinguisher: &str) -> u64 {
    let digest = ring::digest::digest(
        &ring::digest::SHA256,
        format!("{flow_schema}\0{distinguisher}").as_bytes(),
    );
    let mut bytes = [0u8; 8];
    bytes.copy_from_slice(&digest.as_ref()[..8]);
    u64::from_le_bytes(bytes)
}

impl QueueSet {
    pub fn new(limit: Option<u64>, queuing: Option<Queuing>) -> Arc<Self> {
        let queues = queuing
            .map(|q| (0..q.queues).map(|_| Queue::default()).collect())
            .unwrap_or_default();
        Arc::new(Self {
            state: Mutex::new(State {
                limit,
                queuing,
                queues,
                seats_in_use: 0,
                executing: BTreeMap::new(),
                current_r: 0.0,
                last_advanced: Instant::now(),
                robin: 0,
                next_id: 0,
                counts: Counts::default(),
                waiting_seats: 0,
                demand_high: 0,
            }),
        })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock leaves consistent counters (every change is a few
        // assignments), so a poisoned lock is taken over rather than failing every request.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn queuing(&self) -> Option<Queuing> {
        self.lock().queuing
    }

    /// The most seats asked for at once since the last call; starts the next period at what
    /// is asked for now.
    pub fn take_demand_high_watermark(&self) -> u64 {
        let mut s = self.lock();
        let high = s.demand_high;
        s.demand_high = s.seats_in_use + s.waiting_seats;
        high
    }

    /// The seats the level may use now.
    pub fn limit(&self) -> Option<u64> {
        self.lock().limit
    }

    /// A new concurrency limit (the configuration changed); waiting requests that now fit run.
    pub fn set_limit(&self, limit: Option<u64>) {
        let mut s = self.lock();
        s.advance();
        s.limit = limit;
        s.dispatch_as_much_as_possible();
    }

    /// Admits a request of `flow` (its hash), now, later, or never.
    pub fn enqueue(self: &Arc<Self>, flow: u64, dump: RequestDump) -> Admission {
        let additional_latency = dump.work.additional_latency;
        let mut s = self.lock();
        s.advance();
        let id = s.next_id;
        s.next_id += 1;
        let Some(queuing) = s.queuing.filter(|q| q.queues > 0) else {
            if !s.can_accommodate(dump.seats()) {
                s.counts.rejected += 1;
                return Admission::Rejected(Rejection::ConcurrencyLimit);
            }
            s.start(id, None, dump);
            s.note_demand();
            return Admission::Dispatched(Ticket {
                set: self.clone(),
                id,
                additional_latency,
            });
        };
        // The least loaded queue of the flow's hand.
        let hand = deal(flow, s.queues.len(), queuing.hand_size);
        let Some(index) = hand.into_iter().min_by_key(|&i| {
            let q = &s.queues[i];
            q.waiting_seats() + q.seats_in_use
        }) else {
            s.counts.rejected += 1;
            return Admission::Rejected(Rejection::QueueFull);
        };
        if s.queues[index].waiting.len() >= queuing.queue_length_limit {
            s.counts.rejected += 1;
            return Admission::Rejected(Rejection::QueueFull);
        }
        let current_r = s.current_r;
        let queue = &mut s.queues[index];
        if queue.is_idle() {
            queue.next_dispatch_r = current_r;
        }
        let (ready, rx) = tokio::sync::oneshot::channel();
        let seats = dump.seats();
        queue.waiting.push_back(Waiting { id, dump, ready });
        s.waiting_seats += seats;
        s.note_demand();
        s.dispatch_as_much_as_possible();
        if s.executing.contains_key(&id) {
            return Admission::Dispatched(Ticket {
                set: self.clone(),
                id,
                additional_latency,
            });
        }
        Admission::Queued(Waiter {
            set: self.clone(),
            id,
            queue: index,
            ready: Some(rx),
            settled: false,
            additional_latency,
        })
    }

    fn finish(&self, id: u64) {
        let mut s = self.lock();
        s.advance();
        let now = s.last_advanced;
        let Some(done) = s.executing.remove(&id) else {
            return;
        };
        s.seats_in_use -= done.dump.seats();
        if let Some(q) = done.queue.and_then(|i| s.queues.get_mut(i)) {
            q.executing -= 1;
            q.seats_in_use -= done.dump.seats();
            // The dispatch charged the estimate; charge what the request really took, by the
            // instant this operation advanced the virtual clock to.
            let actual = now.duration_since(done.started).as_secs_f64();
            q.next_dispatch_r -= done.dump.seats() as f64 * (ESTIMATED_SERVICE_SECONDS - actual);
        }
        s.dispatch_as_much_as_possible();
    }

    /// A snapshot for the dump endpoints and the metrics.
    pub fn dump(&self) -> Dump {
        let s = self.lock();
        let mut queues = Vec::with_capacity(s.queues.len());
        for (i, q) in s.queues.iter().enumerate() {
            queues.push(QueueDump {
                waiting: q.waiting.iter().map(|w| w.dump.clone()).collect(),
                executing: s
                    .executing
                    .values()
                    .filter(|e| e.queue == Some(i))
                    .map(|e| e.dump.clone())
                    .collect(),
                executing_count: q.executing,
                seats_in_use: q.seats_in_use,
                next_dispatch_r: q.next_dispatch_r,
                waiting_seats: q.waiting_seats(),
            });
        }
        Dump {
            queues,
            queueless_executing: s
                .executing
                .values()
                .filter(|e| e.queue.is_none())
                .map(|e| e.dump.clone())
                .collect(),
            waiting: s.queues.iter().map(|q| q.waiting.len() as u64).sum(),
            executing: s.executing.len() as u64,
            seats_in_use: s.seats_in_use,
            counts: s.counts,
        }
    }
}

/// What `QueueSet::dump` shows of one queue.
#[derive(Clone, Debug)]
pub struct QueueDump {
    pub waiting: Vec<RequestDump>,
    pub executing: Vec<RequestDump>,
    pub executing_count: u64,
    pub seats_in_use: u64,
    pub next_dispatch_r: f64,
    pub waiting_seats: u64,
}

#[derive(Clone, Debug)]
pub struct Dump {
    pub queues: Vec<QueueDump>,
    pub queueless_executing: Vec<RequestDump>,
    pub waiting: u64,
    pub executing: u64,
    pub seats_in_use: u64,
    pub counts: Counts,
}

impl State {
    /// Moves the virtual clock on: each busy queue is served at a fair share of the seats the
    /// level's demand can use. Every operation calls it first, and `last_advanced` is then the
    /// operation's "now".
    fn advance(&mut self) {
        let now = Instant::now();
        let elapsed = now.duration_since(self.last_advanced).as_secs_f64();
        self.last_advanced = now;
        let busy = self.queues.iter().filter(|q| !q.is_idle()).count();
        if busy == 0 {
            return;
        }
        let demand: u64 = self
            .queues
            .iter()
            .map(|q| q.waiting_seats() + q.seats_in_use)
            .sum();
        let usable = self.limit.map_or(demand, |l| demand.min(l));
        self.current_r += elapsed * usable as f64 / busy as f64;
    }

    /// Takes a waiting request out of its queue; its seats, or `None` when it is not there
    /// (it was dispatched).
    fn remove_waiting(&mut self, queue: usize, id: u64) -> Option<u64> {
        let q = self.queues.get_mut(queue)?;
        let pos = q.waiting.iter().position(|w| w.id == id)?;
        q.waiting.remove(pos).map(|w| w.dump.seats())
    }

    fn note_demand(&mut self) {
        self.demand_high = self.demand_high.max(self.seats_in_use + self.waiting_seats);
    }

    /// Whether a request of `seats` may start now: it fits in what is free, or it is wider
    /// than the whole level and nothing runs (so that it runs at all).
    fn can_accommodate(&self, seats: u64) -> bool {
        match self.limit {
            None => true,
            Some(limit) => self.seats_in_use + seats <= limit || self.seats_in_use == 0,
        }
    }

    fn start(&mut self, id: u64, queue: Option<usize>, mut dump: RequestDump) {
        self.seats_in_use += dump.seats();
        self.counts.dispatched += 1;
        dump.start = Some(SystemTime::now());
        self.executing.insert(
            id,
            Executing {
                queue,
                // The instant the virtual clock was advanced to under this same lock: the
                // request's service is measured on the clock that `current_r` follows (upstream
                // reads its clock once per operation), so a thread stalled between the two
                // reads cannot make a queue look served for less than it was.
                started: self.last_advanced,
                dump,
            },
        );
    }

    fn dispatch_as_much_as_possible(&mut self) {
        loop {
            // The queue with the least virtual dispatch time, ties broken round-robin.
            let n = self.queues.len();
            let mut best: Option<usize> = None;
            for k in 0..n {
                let i = (self.robin + k) % n;
                let q = &self.queues[i];
                if q.waiting.is_empty() {
                    continue;
                }
                if best.is_none_or(|b| q.next_dispatch_r < self.queues[b].next_dispatch_r) {
                    best = Some(i);
                }
            }
            let Some(i) = best else { return };
            let Some(seats) = self.queues[i].waiting.front().map(|w| w.dump.seats()) else {
                return;
            };
            if !self.can_accommodate(seats) {
                return;
            }
            let Some(w) = self.queues[i].waiting.pop_front() else {
                return;
            };
            self.waiting_seats -= seats;
            self.robin = (i + 1) % n;
            let q = &mut self.queues[i];
            q.executing += 1;
            q.seats_in_use += seats;
            q.next_dispatch_r += seats as f64 * ESTIMATED_SERVICE_SECONDS;
            self.start(w.id, Some(i), w.dump);
            // A waiter that is gone has taken itself out under this lock, so the receiver is
            // alive; were it not, the seats come back when its `Waiter` drops.
            let _ = w.ready.send(());
        }
    }
}

impl Waiter {
    /// Waits until dispatched, or until `deadline` (then it is rejected as timed out).
    pub async fn wait(mut self, deadline: tokio::time::Instant) -> Result<Ticket, Rejection> {
        let Some(rx) = self.ready.take() else {
            return Err(Rejection::TimedOut);
        };
        let dispatched = tokio::time::timeout_at(deadline, rx).await.is_ok();
        let mut s = self.set.lock();
        self.settled = true;
        if !dispatched {
            // Still queued: it leaves the queue. Otherwise it was dispatched just now.
            if let Some(seats) = s.remove_waiting(self.queue, self.id) {
                s.waiting_seats -= seats;
                s.counts.timed_out += 1;
                s.counts.rejected += 1;
                return Err(Rejection::TimedOut);
            }
        }
        drop(s);
        Ok(Ticket {
            set: self.set.clone(),
            id: self.id,
            additional_latency: self.additional_latency,
        })
    }
}

impl Drop for Waiter {
    fn drop(&mut self) {
        if self.settled {
            return;
        }
        let mut s = self.set.lock();
        if let Some(seats) = s.remove_waiting(self.queue, self.id) {
            s.waiting_seats -= seats;
            s.counts.cancelled += 1;
            return;
        }
        drop(s);
        // Dispatched while nobody waited any more: the seats come back at once.
        self.set.finish(self.id);
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        // A write keeps its final seats for the watch events it causes, after it ends.
        if !self.additional_latency.is_zero()
            && let Ok(runtime) = tokio::runtime::Handle::try_current()
        {
            let (set, id, after) = (self.set.clone(), self.id, self.additional_latency);
            runtime.spawn(async move {
                tokio::time::sleep(after).await;
                set.finish(id);
            });
            return;
        }
        self.set.finish(self.id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(flow: &str, seats: u64) -> RequestDump {
        RequestDump {
            flow_schema: "fs".into(),
            distinguisher: flow.into(),
            user: flow.into(),
            info: std::sync::Arc::new(RequestInfo::parse(&http::Method::GET, "/api/v1/pods", "")),
            work: WorkEstimate::seats(seats),
            arrive: SystemTime::now(),
            start: None,
        }
    }

    fn queued(a: Admission) -> Waiter {
        match a {
            Admission::Queued(w) => w,
            Admission::Dispatched(_) => panic!("dispatched"),
            Admission::Rejected(r) => panic!("rejected: {r:?}"),
        }
    }

    fn dispatched(a: Admission) -> Ticket {
        match a {
            Admission::Dispatched(t) => t,
            Admission::Queued(_) => panic!("queued"),
            Admission::Rejected(r) => panic!("rejected: {r:?}"),
        }
    }

    #[test]
    fn hands_are_distinct_queues_of_the_deck() {
        for hash in [0u64, 1, 7, 12345, u64::MAX, flow_hash("fs", "jane")] {
            let hand = deal(hash, 8, 4);
            assert_eq!(hand.len(), 4);
            let mut sorted = hand.clone();
            sorted.sort_unstable();
            sorted.dedup();
            assert_eq!(sorted.len(), 4, "{hand:?}");
            assert!(hand.iter().all(|&c| c < 8));
        }
        assert_eq!(deal(5, 3, 6).len(), 3, "a hand is at most the deck");
        assert_ne!(flow_hash("fs", "a"), flow_hash("fs", "b"));
    }

    #[test]
    fn a_reject_level_runs_what_fits_and_rejects_the_rest() {
        let qs = QueueSet::new(Some(2), None);
        let a = dispatched(qs.enqueue(1, request("a", 1)));
        let _b = dispatched(qs.enqueue(1, request("a", 1)));
        assert!(matches!(
            qs.enqueue(1, request("a", 1)),
            Admission::Rejected(Rejection::ConcurrencyLimit)
        ));
        drop(a);
        let _c = dispatched(qs.enqueue(1, request("a", 1)));
        // Wider than the level: runs alone only.
        assert!(matches!(
            qs.enqueue(1, request("a", 5)),
            Admission::Rejected(_)
        ));
        let d = qs.dump();
        assert_eq!(
            (
                d.executing,
                d.seats_in_use,
                d.counts.dispatched,
                d.counts.rejected
            ),
            (2, 2, 3, 2)
        );
        drop(_b);
        drop(_c);
        let _wide = dispatched(qs.enqueue(1, request("a", 5)));
    }

    #[tokio::test]
    async fn queued_requests_run_as_seats_free_up_fairly_between_flows() {
        let queuing = Queuing {
            queues: 16,
            hand_size: 1,
            queue_length_limit: 10,
        };
        let qs = QueueSet::new(Some(1), Some(queuing));
        let (flood, calm) = (flow_hash("fs", "flood"), flow_hash("fs", "calm"));
        assert_ne!(
            deal(flood, 16, 1),
            deal(calm, 16, 1),
            "pick flows in other queues"
        );
        let running = dispatched(qs.enqueue(flood, request("flood", 1)));
        let flooders: Vec<Waiter> = (0..5)
            .map(|_| queued(qs.enqueue(flood, request("flood", 1))))
            .collect();
        let calm_waiter = queued(qs.enqueue(calm, request("calm", 1)));
        assert_eq!(qs.dump().waiting, 6);
        // One seat frees up: the calm flow's queue has dispatched nothing yet, so it goes
        // first even though five flood requests came before it.
        drop(running);
        let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(1);
        let calm_ticket = calm_waiter.wait(deadline).await.expect("dispatched");
        let d = qs.dump();
        assert_eq!((d.waiting, d.executing), (5, 1));
        assert_eq!(
            d.queues.iter().map(|q| q.executing.len()).sum::<usize>(),
            1,
            "{:?}",
            d.queues
                .iter()
                .map(|q| q.executing_count)
                .collect::<Vec<_>>()
        );
        // A waiter that gives up leaves its queue; one that times out is rejected.
        let mut flooders = flooders.into_iter();
        drop(flooders.next());
        assert_eq!(qs.dump().counts.cancelled, 1);
        let timed_out = flooders
            .next()
            .unwrap()
            .wait(tokio::time::Instant::now() + std::time::Duration::from_millis(10))
            .await;
        assert_eq!(timed_out.err(), Some(Rejection::TimedOut));
        drop(calm_ticket);
        let next = flooders
            .next()
            .unwrap()
            .wait(tokio::time::Instant::now() + std::time::Duration::from_secs(1))
            .await;
        assert!(next.is_ok());
        let d = qs.dump();
        assert_eq!(
            (d.counts.dispatched, d.counts.timed_out, d.counts.cancelled),
            (3, 1, 1)
        );
    }

    #[test]
    fn a_full_queue_rejects() {
        let queuing = Queuing {
            queues: 1,
            hand_size: 1,
            queue_length_limit: 2,
        };
        let qs = QueueSet::new(Some(1), Some(queuing));
        let _running = dispatched(qs.enqueue(0, request("a", 1)));
        let _w1 = queued(qs.enqueue(0, request("a", 1)));
        let _w2 = queued(qs.enqueue(0, request("a", 1)));
        assert!(matches!(
            qs.enqueue(0, request("a", 1)),
            Admission::Rejected(Rejection::QueueFull)
        ));
    }

    #[tokio::test]
    async fn a_write_keeps_its_final_seats_for_its_additional_latency() {
        let set = QueueSet::new(Some(4), None);
        let mut write = request("w", 1);
        write.work = WorkEstimate {
            initial_seats: 1,
            final_seats: 3,
            additional_latency: Duration::from_millis(100),
        };
        let ticket = dispatched(set.enqueue(1, write));
        assert_eq!(set.dump().seats_in_use, 3, "its most seats from its start");
        assert!(matches!(
            set.enqueue(2, request("r", 2)),
            Admission::Rejected(Rejection::ConcurrencyLimit)
        ));
        drop(ticket);
        assert_eq!(set.dump().seats_in_use, 3, "still held after it ends");
        tokio::time::sleep(Duration::from_millis(400)).await;
        assert_eq!(set.dump().seats_in_use, 0, "given back after the latency");
        drop(dispatched(set.enqueue(2, request("r", 2))));
    }

    #[test]
    fn the_exempt_level_never_limits() {
        let qs = QueueSet::new(None, None);
        let tickets: Vec<Ticket> = (0..100)
            .map(|_| dispatched(qs.enqueue(0, request("a", 10))))
            .collect();
        assert_eq!(qs.dump().executing, 100);
        drop(tickets);
        assert_eq!(qs.dump().seats_in_use, 0);
    }
}
