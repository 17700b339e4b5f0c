//! Results: their data model, the human-readable table, the JSON file, and the comparison of two
//! result files.
//!
//! It owns the names and units of the figures (a figure's name ends in its unit: `_ms`,
//! `_per_second`, `_mib`, `_percent`), so that two runs, against Ironplane and against an upstream
//! kube-apiserver, line up figure by figure. It must not measure anything.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::error::BenchError;
use crate::stats::{Histogram, micros_to_ms};

/// The version of the JSON layout; `compare` refuses files of another version.
pub const FORMAT_VERSION: u32 = 1;

/// Everything one scenario run reports.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ScenarioResult {
    pub format_version: u32,
    pub tool_version: String,
    /// The scenario's subcommand name: `startup`, `create`, `mixed`, `list`, `watch`, `memory`.
    pub scenario: String,
    /// The server URL the run aimed at.
    pub server: String,
    /// Whether the requests went over HTTP/2.
    pub http2: bool,
    /// The scenario's parameters, as given or defaulted.
    pub params: BTreeMap<String, String>,
    /// One row per measured operation (a verb, a list variant, a startup).
    pub rows: Vec<Row>,
    /// Figures that are not per operation: CPU, memory, events lost.
    pub figures: BTreeMap<String, f64>,
    /// The first few distinct error messages, to explain non-zero error counts.
    pub error_samples: Vec<String>,
    /// Verdicts and series a scenario states in words (the `cluster` scenario's SLO checks, its
    /// RSS over time), printed after the figures.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

/// The figures of one measured operation.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Row {
    pub label: String,
    /// Successful operations.
    pub count: u64,
    /// Failed operations (no answer, or a non-2xx answer that the scenario did not expect).
    pub errors: u64,
    pub median_ms: f64,
    /// Absent from files written before it was added; read as 0 there.
    #[serde(default)]
    pub p90_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
    /// Successful operations per second of the measured phase.
    pub per_second: f64,
    /// Response bytes per second, where the scenario measures it (LIST).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes_per_second: Option<f64>,
}

impl Row {
    /// A row from a latency histogram in microseconds, over a measured phase of `elapsed`.
    pub fn from_histogram(
        label: &str,
        histogram: &Histogram,
        errors: u64,
        elapsed: Duration,
    ) -> Row {
        let seconds = elapsed.as_secs_f64();
        Row {
            label: label.to_string(),
            count: histogram.count(),
            errors,
            median_ms: micros_to_ms(histogram.percentile(50.0)),
            p90_ms: micros_to_ms(histogram.percentile(90.0)),
            p99_ms: micros_to_ms(histogram.percentile(99.0)),
            max_ms: micros_to_ms(histogram.max()),
            per_second: finite(if seconds > 0.0 {
                histogram.count() as f64 / seconds
            } else {
                0.0
            }),
            bytes_per_second: None,
        }
    }

    /// The row's figures by name, for comparison.
    pub fn figures(&self) -> Vec<(&'static str, f64)> {
        let mut figures = vec![
            ("count", self.count as f64),
            ("errors", self.errors as f64),
            ("median_ms", self.median_ms),
            ("p90_ms", self.p90_ms),
            ("p99_ms", self.p99_ms),
            ("max_ms", self.max_ms),
            ("per_second", self.per_second),
        ];
        if let Some(b) = self.bytes_per_second {
            figures.push(("bytes_per_second", b));
        }
        figures
    }
}

/// Replaces NaN and infinities by 0, because JSON has no such numbers and a result file must
/// read back.
pub fn finite(value: f64) -> f64 {
    if value.is_finite() { value } else { 0.0 }
}

impl ScenarioResult {
    pub fn new(scenario: &str, server: &str, http2: bool) -> ScenarioResult {
        ScenarioResult {
            format_version: FORMAT_VERSION,
            tool_version: env!("CARGO_PKG_VERSION").to_string(),
            scenario: scenario.to_string(),
            server: server.to_string(),
            http2,
            params: BTreeMap::new(),
            rows: Vec::new(),
            figures: BTreeMap::new(),
            error_samples: Vec::new(),
            notes: Vec::new(),
        }
    }

    pub fn param(&mut self, name: &str, value: impl ToString) {
        self.params.insert(name.to_string(), value.to_string());
    }

    pub fn figure(&mut self, name: &str, value: f64) {
        self.figures.insert(name.to_string(), finite(value));
    }

    pub fn row(&self, label: &str) -> Option<&Row> {
        self.rows.iter().find(|r| r.label == label)
    }

    /// Total errors over all rows.
    pub fn total_errors(&self) -> u64 {
        self.rows.iter().map(|r| r.errors).sum()
    }

    /// The human-readable table.
    pub fn to_table(&self) -> String {
        let mut out = String::new();
        let protocol = if self.http2 { "HTTP/2" } else { "HTTP/1.1" };
        let _ = writeln!(
            out,
            "scenario {}  server {} ({protocol})",
            self.scenario, self.server
        );
        if !self.params.is_empty() {
            let params: Vec<String> = self
                .params
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect();
            let _ = writeln!(out, "  {}", params.join(" "));
        }
        let _ = writeln!(
            out,
            "  {:<30} {:>10} {:>8} {:>11} {:>10} {:>10} {:>10} {:>10} {:>10}",
            "operation",
            "count",
            "errors",
            "per s",
            "median ms",
            "p90 ms",
            "p99 ms",
            "max ms",
            "MiB/s"
        );
        for row in &self.rows {
            let mib = row
                .bytes_per_second
                .map(|b| format!("{:.1}", b / (1024.0 * 1024.0)))
                .unwrap_or_else(|| "-".to_string());
            let _ = writeln!(
                out,
                "  {:<30} {:>10} {:>8} {:>11.1} {:>10.3} {:>10.3} {:>10.3} {:>10.3} {:>10}",
                row.label,
                row.count,
                row.errors,
                row.per_second,
                row.median_ms,
                row.p90_ms,
                row.p99_ms,
                row.max_ms,
                mib
            );
        }
        if !self.figures.is_empty() {
            let _ = writeln!(out, "  figures:");
            for (name, value) in &self.figures {
                let _ = writeln!(out, "    {name:<40} {}", format_number(*value));
            }
        }
        if !self.notes.is_empty() {
            let _ = writeln!(out, "  notes:");
            for note in &self.notes {
                let _ = writeln!(out, "    {note}");
            }
        }
        if !self.error_samples.is_empty() {
            let _ = writeln!(out, "  first errors:");
            for sample in &self.error_samples {
                let _ = writeln!(out, "    {sample}");
            }
        }
        out
    }

    /// Writes the result as pretty JSON.
    pub fn save(&self, path: &Path) -> Result<(), BenchError> {
        let text = serde_json::to_string_pretty(self).map_err(|e| BenchError::File {
            path: path.to_path_buf(),
            message: e.to_string(),
        })?;
        std::fs::write(path, text + "\n").map_err(|e| BenchError::File {
            path: path.to_path_buf(),
            message: format!("cannot write: {e}"),
        })
    }

    /// Reads a result written by [`ScenarioResult::save`].
    pub fn load(path: &Path) -> Result<ScenarioResult, BenchError> {
        let file_error = |message: String| BenchError::File {
            path: path.to_path_buf(),
            message,
        };
        let text = std::fs::read(path).map_err(|e| file_error(format!("cannot read: {e}")))?;
        let result: ScenarioResult = serde_json::from_slice(&text)
            .map_err(|e| file_error(format!("not an ironplane-bench result: {e}")))?;
        if result.format_version != FORMAT_VERSION {
            return Err(file_error(format!(
                "result format version {} is not {FORMAT_VERSION}",
                result.format_version
            )));
        }
        Ok(result)
    }
}

fn format_number(value: f64) -> String {
    if value.fract() == 0.0 && value.abs() < 1e15 {
        format!("{value:.0}")
    } else if value.abs() >= 100.0 {
        format!("{value:.1}")
    } else {
        format!("{value:.3}")
    }
}

/// One figure of two runs, side by side.
#[derive(Clone, Debug, PartialEq)]
pub struct Comparison {
    /// `<row>.<figure>` for row figures, `<figure>` for the others.
    pub figure: String,
    pub a: f64,
    pub b: f64,
    /// `b / a`; `None` when `a` is 0 and `b` is not (the ratio is unbounded).
    pub ratio: Option<f64>,
}

/// `b / a`, with 0/0 read as "the same" (1.0) so that two runs without errors compare as equal.
pub fn ratio(a: f64, b: f64) -> Option<f64> {
    if a == 0.0 {
        if b == 0.0 { Some(1.0) } else { None }
    } else {
        let r = b / a;
        r.is_finite().then_some(r)
    }
}

/// Every figure present in both results, with its ratio: row figures for rows of the same label,
/// then the other figures of the same name.
pub fn compare(a: &ScenarioResult, b: &ScenarioResult) -> Vec<Comparison> {
    let mut out = Vec::new();
    for row_a in &a.rows {
        let Some(row_b) = b.row(&row_a.label) else {
            continue;
        };
        let figures_b: BTreeMap<&str, f64> = row_b.figures().into_iter().collect();
        for (name, value_a) in row_a.figures() {
            if let Some(&value_b) = figures_b.get(name) {
                out.push(Comparison {
                    figure: format!("{}.{name}", row_a.label),
                    a: value_a,
                    b: value_b,
                    ratio: ratio(value_a, value_b),
                });
            }
        }
    }
    for (name, &value_a) in &a.figures {
        if let Some(&value_b) = b.figures.get(name) {
            out.push(Comparison {
                figure: name.clone(),
                a: value_a,
                b: value_b,
                ratio: ratio(value_a, value_b),
            });
        }
    }
    out
}

/// The comparison as a table.
pub fn compare_table(a: &ScenarioResult, b: &ScenarioResult, a_name: &str, b_name: &str) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "a: {a_name}  ({} against {})", a.scenario, a.server);
    let _ = writeln!(out, "b: {b_name}  ({} against {})", b.scenario, b.server);
    if a.scenario != b.scenario {
        let _ = writeln!(out, "warning: the two files are of different scenarios");
    }
    let differing: Vec<String> = a
        .params
        .iter()
        // The namespace is random unless given; that it differs says nothing about the runs.
        .filter(|(k, _)| k.as_str() != "namespace")
        .filter(|(k, v)| b.params.get(*k).is_some_and(|w| w != *v))
        .map(|(k, v)| {
            format!(
                "{k}: {v} vs {}",
                b.params.get(k).map(String::as_str).unwrap_or("")
            )
        })
        .collect();
    if !differing.is_empty() {
        let _ = writeln!(out, "note: parameters differ: {}", differing.join(", "));
    }
    let _ = writeln!(
        out,
        "  {:<44} {:>14} {:>14} {:>9}",
        "figure", "a", "b", "b/a"
    );
    for c in compare(a, b) {
        let ratio = c
            .ratio
            .map(|r| format!("{r:.3}"))
            .unwrap_or_else(|| "inf".to_string());
        let _ = writeln!(
            out,
            "  {:<44} {:>14} {:>14} {:>9}",
            c.figure,
            format_number(c.a),
            format_number(c.b),
            ratio
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> ScenarioResult {
        let mut h = Histogram::new();
        // Below 256 µs the histogram is exact, so the figures are too.
        for v in [50, 100, 150, 200] {
            h.record(v);
        }
        let mut result = ScenarioResult::new("create", "https://127.0.0.1:6443", true);
        result.param("concurrency", 4);
        result
            .rows
            .push(Row::from_histogram("create", &h, 1, Duration::from_secs(2)));
        result.figure("bench_cpu_percent", 12.5);
        result.figure("nan_becomes_zero", f64::NAN);
        result.error_samples.push("POST ...: 500".to_string());
        result
    }

    #[test]
    fn row_from_histogram() {
        let result = sample();
        let row = result.row("create").unwrap();
        assert_eq!(row.count, 4);
        assert_eq!(row.errors, 1);
        assert_eq!(row.median_ms, 0.1);
        assert_eq!(row.p99_ms, 0.2);
        assert_eq!(row.max_ms, 0.2);
        assert_eq!(row.per_second, 2.0);
        assert_eq!(result.figures["nan_becomes_zero"], 0.0);
    }

    #[test]
    fn json_round_trip() {
        let mut result = sample();
        result.rows[0].bytes_per_second = Some(1234.5);
        let dir = std::env::temp_dir().join(format!("bench-report-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("a.json");
        result.save(&path).unwrap();
        let back = ScenarioResult::load(&path).unwrap();
        assert_eq!(back, result);

        // A file of another layout version is refused with a clear message.
        let mut old = serde_json::to_value(&result).unwrap();
        old["format_version"] = serde_json::json!(99);
        std::fs::write(&path, old.to_string()).unwrap();
        let err = ScenarioResult::load(&path).unwrap_err().to_string();
        assert!(err.contains("version 99"), "{err}");
        std::fs::write(&path, "{}").unwrap();
        assert!(
            ScenarioResult::load(&path)
                .unwrap_err()
                .to_string()
                .contains("not an ironplane-bench result")
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn ratios() {
        assert_eq!(ratio(2.0, 3.0), Some(1.5));
        assert_eq!(ratio(0.0, 0.0), Some(1.0));
        assert_eq!(ratio(0.0, 5.0), None);
        assert_eq!(ratio(4.0, 0.0), Some(0.0));
    }

    #[test]
    fn compare_matches_rows_and_figures() {
        let a = sample();
        let mut b = sample();
        b.rows[0].median_ms = 0.05;
        b.rows[0].errors = 0;
        b.rows.push(Row {
            label: "only-in-b".to_string(),
            count: 1,
            errors: 0,
            median_ms: 1.0,
            p90_ms: 1.0,
            p99_ms: 1.0,
            max_ms: 1.0,
            per_second: 1.0,
            bytes_per_second: None,
        });
        b.figure("bench_cpu_percent", 25.0);
        let comparisons = compare(&a, &b);
        let find = |name: &str| {
            comparisons
                .iter()
                .find(|c| c.figure == name)
                .unwrap()
                .clone()
        };
        assert_eq!(find("create.median_ms").ratio, Some(0.5));
        assert_eq!(find("create.errors").ratio, Some(0.0));
        assert_eq!(find("create.count").ratio, Some(1.0));
        assert_eq!(find("bench_cpu_percent").ratio, Some(2.0));
        assert!(
            comparisons
                .iter()
                .all(|c| !c.figure.starts_with("only-in-b"))
        );

        let table = compare_table(&a, &b, "a.json", "b.json");
        assert!(table.contains("create.median_ms"));
        assert!(table.contains("0.500"));
    }

    #[test]
    fn table_lists_rows_and_figures() {
        let table = sample().to_table();
        assert!(table.contains("scenario create"));
        assert!(table.contains("HTTP/2"));
        assert!(table.contains("concurrency=4"));
        assert!(table.contains("bench_cpu_percent"));
        assert!(table.contains("first errors"));
    }
}
