//! Latency histograms, percentiles, and process CPU and memory readings from `/proc`.
//!
//! It owns the percentile rule (nearest rank over a log-linear histogram whose buckets are at most
//! 1/128 wide relative to their value, exact below 256 µs) and the reading of
//! `/proc/<pid>/stat` and `/proc/<pid>/status`. It must not know about scenarios or requests: it
//! counts numbers.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Values below this are kept exactly, one bucket each.
const EXACT_BELOW: u64 = 256;
/// Sub-buckets per power of two above `EXACT_BELOW`: the relative width of a bucket is at most
/// 1/128, under 0.8 %.
const SUB_BITS: u32 = 7;
const SUB_BUCKETS: u64 = 1 << SUB_BITS;
/// The largest exponent kept; larger values land in the last bucket (2^48 µs is nine years).
const MAX_EXPONENT: u32 = 47;
const BUCKETS: usize =
    EXACT_BELOW as usize + ((MAX_EXPONENT - 8 + 1) as usize) * SUB_BUCKETS as usize;

fn bucket_index(value: u64) -> usize {
    if value < EXACT_BELOW {
        return value as usize;
    }
    let exponent = (63 - value.leading_zeros()).min(MAX_EXPONENT);
    let value = value.min((1u64 << (MAX_EXPONENT + 1)) - 1);
    let shift = exponent - SUB_BITS;
    let mantissa = (value >> shift) - SUB_BUCKETS;
    EXACT_BELOW as usize + (exponent as usize - 8) * SUB_BUCKETS as usize + mantissa as usize
}

/// The largest value that falls into bucket `index`.
fn bucket_high(index: usize) -> u64 {
    if (index as u64) < EXACT_BELOW {
        return index as u64;
    }
    let k = index as u64 - EXACT_BELOW;
    let exponent = k / SUB_BUCKETS + 8;
    let mantissa = k % SUB_BUCKETS + SUB_BUCKETS;
    ((mantissa + 1) << (exponent - SUB_BITS as u64)) - 1
}

/// A latency histogram in microseconds. One per worker; merged at the end, so the hot path takes
/// no lock.
#[derive(Clone)]
pub struct Histogram {
    buckets: Vec<u64>,
    count: u64,
    max: u64,
    sum: u128,
}

impl Default for Histogram {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for Histogram {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Histogram")
            .field("count", &self.count)
            .field("max", &self.max)
            .finish()
    }
}

impl Histogram {
    pub fn new() -> Self {
        Histogram {
            buckets: vec![0; BUCKETS],
            count: 0,
            max: 0,
            sum: 0,
        }
    }

    /// Records one value in microseconds.
    pub fn record(&mut self, micros: u64) {
        self.buckets[bucket_index(micros)] += 1;
        self.count += 1;
        self.max = self.max.max(micros);
        self.sum += u128::from(micros);
    }

    /// Records one duration, rounded down to whole microseconds.
    pub fn record_duration(&mut self, duration: Duration) {
        self.record(u64::try_from(duration.as_micros()).unwrap_or(u64::MAX));
    }

    pub fn merge(&mut self, other: &Histogram) {
        for (mine, theirs) in self.buckets.iter_mut().zip(&other.buckets) {
            *mine += theirs;
        }
        self.count += other.count;
        self.max = self.max.max(other.max);
        self.sum += other.sum;
    }

    pub fn count(&self) -> u64 {
        self.count
    }

    /// The largest value recorded, exactly.
    pub fn max(&self) -> u64 {
        self.max
    }

    pub fn mean(&self) -> f64 {
        if self.count == 0 {
            0.0
        } else {
            self.sum as f64 / self.count as f64
        }
    }

    /// The `p`-th percentile (0 < p <= 100) by the nearest-rank rule: the smallest recorded value
    /// such that at least p % of the values are at or below it. Values from 256 µs up are
    /// reported as their bucket's upper bound (never above the true maximum), so the answer is
    /// within 0.8 % of the exact one. An empty histogram answers 0.
    pub fn percentile(&self, p: f64) -> u64 {
        if self.count == 0 {
            return 0;
        }
        let p = p.clamp(0.0, 100.0);
        let rank = ((p / 100.0) * self.count as f64).ceil() as u64;
        let rank = rank.clamp(1, self.count);
        let mut seen = 0u64;
        for (index, &n) in self.buckets.iter().enumerate() {
            seen += n;
            if seen >= rank {
                return bucket_high(index).min(self.max);
            }
        }
        self.max
    }
}

/// A histogram that many tasks record into at once (the watch scenario's thousands of watchers),
/// with relaxed atomic adds instead of one histogram per task.
pub struct AtomicHistogram {
    buckets: Vec<AtomicU64>,
    max: AtomicU64,
    sum: AtomicU64,
}

impl Default for AtomicHistogram {
    fn default() -> Self {
        Self::new()
    }
}

impl AtomicHistogram {
    pub fn new() -> Self {
        AtomicHistogram {
            buckets: (0..BUCKETS).map(|_| AtomicU64::new(0)).collect(),
            max: AtomicU64::new(0),
            sum: AtomicU64::new(0),
        }
    }

    pub fn record(&self, micros: u64) {
        self.buckets[bucket_index(micros)].fetch_add(1, Ordering::Relaxed);
        self.max.fetch_max(micros, Ordering::Relaxed);
        self.sum.fetch_add(micros, Ordering::Relaxed);
    }

    pub fn record_duration(&self, duration: Duration) {
        self.record(u64::try_from(duration.as_micros()).unwrap_or(u64::MAX));
    }

    /// A plain copy of the current counts.
    pub fn snapshot(&self) -> Histogram {
        let buckets: Vec<u64> = self
            .buckets
            .iter()
            .map(|b| b.load(Ordering::Relaxed))
            .collect();
        let count = buckets.iter().sum();
        Histogram {
            buckets,
            count,
            max: self.max.load(Ordering::Relaxed),
            sum: u128::from(self.sum.load(Ordering::Relaxed)),
        }
    }
}

/// Microseconds to milliseconds, for reports.
pub fn micros_to_ms(micros: u64) -> f64 {
    micros as f64 / 1000.0
}

/// CPU time and memory of one process, read from `/proc`.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ProcSample {
    /// utime + stime, in seconds.
    pub cpu_seconds: f64,
    /// Resident set size (VmRSS), in bytes.
    pub rss_bytes: u64,
}

/// Clock ticks per second of `/proc/<pid>/stat` times. `getconf CLK_TCK` asks the C library once;
/// 100 is the value on every Linux architecture the tool is likely to meet.
pub fn clock_ticks_per_second() -> f64 {
    static TICKS: std::sync::OnceLock<f64> = std::sync::OnceLock::new();
    *TICKS.get_or_init(|| {
        std::process::Command::new("getconf")
            .arg("CLK_TCK")
            .output()
            .ok()
            .and_then(|out| String::from_utf8(out.stdout).ok())
            .and_then(|s| s.trim().parse::<f64>().ok())
            .filter(|t| *t > 0.0)
            .unwrap_or(100.0)
    })
}

/// Parsed fields of `/proc/<pid>/stat` that the tool uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StatFields {
    /// The state letter: `R`, `S`, `Z` (zombie), ...
    pub state: char,
    pub pgrp: u32,
    /// utime + stime in clock ticks.
    pub cpu_ticks: u64,
}

/// Parses `/proc/<pid>/stat`. The command name (field 2) is in parentheses and may itself hold
/// spaces and parentheses, so the fields are counted from the last `)`.
pub fn parse_stat(text: &str) -> Option<StatFields> {
    let rest = &text[text.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // After ')': [0] state (field 3), [2] pgrp (field 5), [11] utime (14), [12] stime (15).
    let state = fields.first()?.chars().next()?;
    let pgrp = fields.get(2)?.parse().ok()?;
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some(StatFields {
        state,
        pgrp,
        cpu_ticks: utime + stime,
    })
}

/// Parses the `VmRSS:` line of `/proc/<pid>/status` into bytes.
pub fn parse_vm_rss(text: &str) -> Option<u64> {
    let line = text.lines().find(|l| l.starts_with("VmRSS:"))?;
    let mut parts = line["VmRSS:".len()..].split_whitespace();
    let value: u64 = parts.next()?.parse().ok()?;
    let unit = parts.next().unwrap_or("kB");
    let factor = match unit {
        "kB" => 1024,
        "mB" | "MB" => 1024 * 1024,
        _ => 1,
    };
    Some(value * factor)
}

/// Reads CPU time and RSS of `pid` (`"self"` for the tool itself). `None` when the process is
/// gone or `/proc` is unavailable.
pub fn sample_process(pid: &str) -> Option<ProcSample> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let fields = parse_stat(&stat)?;
    // A zombie has no VmRSS line; count it as zero rather than losing the CPU figure.
    let rss_bytes = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| parse_vm_rss(&s))
        .unwrap_or(0);
    Some(ProcSample {
        cpu_seconds: fields.cpu_ticks as f64 / clock_ticks_per_second(),
        rss_bytes,
    })
}

/// Sums CPU time and RSS over every process whose process group is `pgrp` (a server started by a
/// shell command may be a child of that shell).
pub fn sample_process_group(pgrp: u32) -> Option<ProcSample> {
    let mut total = ProcSample::default();
    let mut found = false;
    for pid in process_group_members(pgrp) {
        if let Some(sample) = sample_process(&pid.to_string()) {
            total.cpu_seconds += sample.cpu_seconds;
            total.rss_bytes += sample.rss_bytes;
            found = true;
        }
    }
    found.then_some(total)
}

/// The live (not zombie) pids whose process group is `pgrp`.
pub fn process_group_members(pgrp: u32) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut pids = Vec::new();
    for entry in entries.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<u32>().ok())
        else {
            continue;
        };
        if let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat"))
            && let Some(fields) = parse_stat(&stat)
            && fields.pgrp == pgrp
            && !matches!(fields.state, 'Z' | 'X')
        {
            pids.push(pid);
        }
    }
    pids
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_percentiles_for_small_values() {
        let mut h = Histogram::new();
        for v in 1..=100 {
            h.record(v);
        }
        assert_eq!(h.count(), 100);
        assert_eq!(h.percentile(50.0), 50);
        assert_eq!(h.percentile(99.0), 99);
        assert_eq!(h.percentile(100.0), 100);
        assert_eq!(h.percentile(0.0), 1);
        assert_eq!(h.max(), 100);
        assert!((h.mean() - 50.5).abs() < 1e-9);
    }

    #[test]
    fn nearest_rank_on_uneven_counts() {
        let mut h = Histogram::new();
        // 3 values: p50 is rank ceil(1.5) = 2, p99 is rank 3.
        for v in [10, 20, 30] {
            h.record(v);
        }
        assert_eq!(h.percentile(50.0), 20);
        assert_eq!(h.percentile(99.0), 30);
        // One outlier in a thousand is above p99 but is the max.
        let mut h = Histogram::new();
        for _ in 0..999 {
            h.record(5);
        }
        h.record(200);
        assert_eq!(h.percentile(99.0), 5);
        assert_eq!(h.percentile(99.95), 200);
        assert_eq!(h.max(), 200);
    }

    #[test]
    fn large_values_are_within_bucket_precision() {
        let mut h = Histogram::new();
        let values: Vec<u64> = (1..=10_000).map(|i| i * 1_237).collect();
        for &v in &values {
            h.record(v);
        }
        for p in [50.0, 90.0, 99.0, 99.9] {
            let rank = ((p / 100.0) * values.len() as f64).ceil() as usize;
            let exact = values[rank - 1] as f64;
            let got = h.percentile(p) as f64;
            assert!(got >= exact, "p{p}: {got} < {exact}");
            assert!(
                (got - exact) / exact < 1.0 / 128.0,
                "p{p}: {got} vs {exact}"
            );
        }
        assert_eq!(h.max(), 12_370_000);
        assert_eq!(h.percentile(100.0), 12_370_000);
    }

    #[test]
    fn buckets_are_contiguous_and_increasing() {
        let mut previous_high = None;
        for index in 0..BUCKETS {
            let high = bucket_high(index);
            if let Some(prev) = previous_high {
                assert!(high > prev, "bucket {index}");
                // The first value of this bucket maps back to it.
                assert_eq!(bucket_index(prev + 1), index);
            }
            assert_eq!(bucket_index(high), index);
            previous_high = Some(high);
        }
        assert_eq!(bucket_index(u64::MAX), BUCKETS - 1);
    }

    #[test]
    fn merge_and_empty() {
        let empty = Histogram::new();
        assert_eq!(empty.percentile(50.0), 0);
        assert_eq!(empty.mean(), 0.0);
        let mut a = Histogram::new();
        a.record(1);
        let mut b = Histogram::new();
        b.record(3);
        b.record(1000);
        a.merge(&b);
        assert_eq!(a.count(), 3);
        assert_eq!(a.percentile(50.0), 3);
        assert_eq!(a.max(), 1000);
    }

    #[test]
    fn atomic_histogram_snapshot() {
        let h = AtomicHistogram::new();
        for v in [1, 2, 3, 4] {
            h.record(v);
        }
        h.record_duration(Duration::from_millis(2));
        let s = h.snapshot();
        assert_eq!(s.count(), 5);
        assert_eq!(s.max(), 2000);
        assert_eq!(s.percentile(50.0), 3);
    }

    #[test]
    fn proc_parsing() {
        let stat = "1234 (my (odd) name) S 1 1200 1200 0 -1 4194560 100 0 0 0 250 75 0 0 20 0 4 0 100 1000 200 18446744073709551615";
        assert_eq!(
            parse_stat(stat),
            Some(StatFields {
                state: 'S',
                pgrp: 1200,
                cpu_ticks: 325
            })
        );
        assert_eq!(parse_stat("garbage"), None);
        let status = "Name:\tx\nVmPeak:\t  100 kB\nVmRSS:\t   2048 kB\nThreads: 3\n";
        assert_eq!(parse_vm_rss(status), Some(2048 * 1024));
        assert_eq!(parse_vm_rss("Name: x\n"), None);
    }

    #[test]
    fn own_process_can_be_sampled() {
        let sample = sample_process("self").unwrap();
        assert!(sample.rss_bytes > 0);
        assert!(sample.cpu_seconds >= 0.0);
        assert!(clock_ticks_per_second() > 0.0);
    }
}
