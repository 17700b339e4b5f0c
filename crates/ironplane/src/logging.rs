//! Logs as kube-apiserver writes them (upstream: component-base/logs and klog): `-v` sets the
//! verbosity and `--logging-format` the encoding — `text`, klog's header then the message and its
//! key/value pairs (`I1129 06:40:00.123456    1234 server.rs:88] "msg" key="value"`), or `json`,
//! one object per line as component-base's JSON backend writes it (`ts` in milliseconds since the
//! epoch, `caller`, `msg`, `v` for info lines, `err` for errors, then the pairs).
//!
//! Levels map to klog's verbosities: errors are error lines, warnings and info are `v=0`,
//! request lines (`httplog`, target [`apiserver::filters::HTTPLOG_TARGET`]) are `v=3` and only
//! written from `-v=3` on, as upstream's, debug is `v=4` (written from `-v=2`, as before) and
//! trace `v=5` (from `-v=5`). `RUST_LOG`, when set, replaces the filter the verbosity gives.

use std::fmt::Write as _;
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{Map, Value};
use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::registry::LookupSpan;

/// `--logging-format`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Text,
    Json,
}

/// The filter `-v` gives.
pub fn filter(verbosity: u8) -> String {
    let base = match verbosity {
        0 | 1 => "info",
        2..=4 => "debug",
        _ => "trace",
    };
    let httplog = if verbosity >= 3 { "info" } else { "off" };
    format!("{base},{}={httplog}", apiserver::filters::HTTPLOG_TARGET)
}

/// Installs the process's logger.
pub fn init(verbosity: u8, format: Format) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(filter(verbosity)));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .event_format(Klog { format })
        .init();
}

/// klog's lines, in either encoding.
struct Klog {
    format: Format,
}

/// A field's value: strings are quoted in text and JSON strings; the rest is written as is.
enum FieldValue {
    Str(String),
    Raw(Value),
}

#[derive(Default)]
struct Fields {
    message: String,
    pairs: Vec<(&'static str, FieldValue)>,
}

impl Visit for Fields {
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.message = value.to_string();
        } else {
            self.pairs
                .push((field.name(), FieldValue::Str(value.to_string())));
        }
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        self.pairs
            .push((field.name(), FieldValue::Raw(value.into())));
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        self.pairs
            .push((field.name(), FieldValue::Raw(value.into())));
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        self.pairs
            .push((field.name(), FieldValue::Raw(value.into())));
    }

    fn record_f64(&mut self, field: &Field, value: f64) {
        self.pairs
            .push((field.name(), FieldValue::Raw(value.into())));
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        // `%value` fields arrive here too, their Debug being their Display.
        let text = format!("{value:?}");
        if field.name() == "message" {
            self.message = text;
        } else {
            self.pairs.push((field.name(), FieldValue::Str(text)));
        }
    }
}

/// klog's verbosity of a line: `None` for errors (which klog writes without one).
fn verbosity(level: Level, target: &str) -> Option<u8> {
    if target == apiserver::filters::HTTPLOG_TARGET {
        return Some(3);
    }
    match level {
        Level::ERROR => None,
        Level::WARN | Level::INFO => Some(0),
        Level::DEBUG => Some(4),
        Level::TRACE => Some(5),
    }
}

impl<S, N> FormatEvent<S, N> for Klog
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        _ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> std::fmt::Result {
        let meta = event.metadata();
        let mut fields = Fields::default();
        event.record(&mut fields);
        let caller = format!(
            "{}:{}",
            meta.file()
                .and_then(|f| f.rsplit('/').next())
                .unwrap_or(meta.target()),
            meta.line().unwrap_or(0)
        );
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default();
        let v = verbosity(*meta.level(), meta.target());
        // Errors carry their error under upstream's key.
        let pairs = fields.pairs.into_iter().map(|(key, value)| {
            let key = if v.is_none() && key == "error" {
                "err"
            } else {
                key
            };
            (key, value)
        });
        match self.format {
            Format::Json => {
                let mut line = Map::new();
                line.insert("ts".into(), Value::from(now.as_secs_f64() * 1000.0));
                line.insert("caller".into(), caller.into());
                line.insert("msg".into(), fields.message.into());
                if let Some(v) = v {
                    line.insert("v".into(), v.into());
                }
                for (key, value) in pairs {
                    let value = match value {
                        FieldValue::Str(s) => Value::String(s),
                        FieldValue::Raw(v) => v,
                    };
                    line.insert(key.to_string(), value);
                }
                writeln!(writer, "{}", Value::Object(line))
            }
            Format::Text => {
                let severity = match *meta.level() {
                    Level::ERROR => 'E',
                    Level::WARN => 'W',
                    _ => 'I',
                };
                let t = chrono::DateTime::<chrono::Utc>::from(UNIX_EPOCH + now);
                let mut line = format!(
                    "{severity}{} {:>7} {caller}] {:?}",
                    t.format("%m%d %H:%M:%S%.6f"),
                    std::process::id(),
                    fields.message
                );
                for (key, value) in pairs {
                    match value {
                        FieldValue::Str(s) => {
                            let _ = write!(line, " {key}={s:?}");
                        }
                        FieldValue::Raw(v) => {
                            let _ = write!(line, " {key}={v}");
                        }
                    }
                }
                writeln!(writer, "{line}")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_lines_need_verbosity_three() {
        assert!(filter(2).ends_with("httplog=off"), "{}", filter(2));
        assert!(filter(3).ends_with("httplog=info"), "{}", filter(3));
        assert_eq!(
            verbosity(Level::INFO, apiserver::filters::HTTPLOG_TARGET),
            Some(3)
        );
        assert_eq!(verbosity(Level::ERROR, "x"), None);
        assert_eq!(verbosity(Level::DEBUG, "x"), Some(4));
    }
}
