//! The `/debug/api_priority_and_fairness/dump_*` documents (upstream: apf_controller_debug.go):
//! comma-separated rows whose columns are aligned as Go's `tabwriter` aligns them with a minimum
//! width of 8, padding of 1 and spaces (each cell but a row's last is followed by `,` and a tab
//! stop).

use std::time::SystemTime;

use super::FlowControl;
use super::queueset::RequestDump;

/// Aligns rows of cells as `tabwriter.NewWriter(w, 8, 0, 1, ' ', 0)` does for rows written as
/// `cell,\tcell,\t…last`: every column but each row's last is padded to the widest of its
/// cells plus one, at least 8. (Go's tabwriter aligns column blocks of consecutive rows; the
/// dumps' rows all have the same columns, so one width per column is the same.)
fn tabulate(rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = Vec::new();
    for row in rows {
        for (i, cell) in row.iter().enumerate().take(row.len().saturating_sub(1)) {
            // The cell as written carries its comma.
            let w = (cell.chars().count() + 1 + 1).max(8);
            if widths.len() <= i {
                widths.push(w);
            } else {
                widths[i] = widths[i].max(w);
            }
        }
    }
    let mut out = String::new();
    for row in rows {
        let last = row.len().saturating_sub(1);
        for (i, cell) in row.iter().enumerate() {
            if i == last {
                out.push_str(cell);
            } else {
                let text = format!("{cell},");
                out.push_str(&text);
                for _ in text.chars().count()..widths[i] {
                    out.push(' ');
                }
            }
        }
        out.push('\n');
    }
    out
}

fn strings<const N: usize>(cells: [&str; N]) -> Vec<String> {
    cells.iter().map(|s| s.to_string()).collect()
}

/// Go's `time.Time.UTC().Format(time.RFC3339Nano)`: trailing zeros of the fraction dropped.
fn rfc3339_nano(t: SystemTime) -> String {
    let t: chrono::DateTime<chrono::Utc> = t.into();
    let s = t.format("%Y-%m-%dT%H:%M:%S%.9f").to_string();
    let s = s.trim_end_matches('0').trim_end_matches('.');
    format!("{s}Z")
}

pub fn dump_priority_levels(fc: &FlowControl) -> String {
    let mut rows = vec![strings([
        "PriorityLevelName",
        "ActiveQueues",
        "IsIdle",
        "IsQuiescing",
        "WaitingRequests",
        "ExecutingRequests",
        "DispatchedRequests",
        "RejectedRequests",
        "TimedoutRequests",
        "CancelledRequests",
    ])];
    for level in fc.levels() {
        let d = level.queues.dump();
        let active = d.queues.iter().filter(|q| !q.waiting.is_empty()).count();
        rows.push(vec![
            level.config.name.clone(),
            active.to_string(),
            (d.waiting == 0 && d.executing == 0).to_string(),
            "false".into(),
            d.waiting.to_string(),
            d.executing.to_string(),
            d.counts.dispatched.to_string(),
            d.counts.rejected.to_string(),
            d.counts.timed_out.to_string(),
            d.counts.cancelled.to_string(),
        ]);
    }
    tabulate(&rows)
}

pub fn dump_queues(fc: &FlowControl) -> String {
    let mut rows = vec![strings([
        "PriorityLevelName",
        "Index",
        "PendingRequests",
        "ExecutingRequests",
        "SeatsInUse",
        "NextDispatchR",
        "InitialSeatsSum",
        "MaxSeatsSum",
        "TotalWorkSum",
    ])];
    for level in fc.levels() {
        for (i, q) in level.queues.dump().queues.iter().enumerate() {
            // Upstream prints virtual times in seat-seconds with 8 decimals ("%.8fss").
            let total_work = q.waiting_seats as f64 * 3.0;
            rows.push(vec![
                level.config.name.clone(),
                i.to_string(),
                q.waiting.len().to_string(),
                q.executing_count.to_string(),
                q.seats_in_use.to_string(),
                format!("{:.8}ss", q.next_dispatch_r),
                q.waiting_seats.to_string(),
                q.waiting_seats.to_string(),
                format!("{total_work:.8}ss"),
            ]);
        }
    }
    tabulate(&rows)
}

pub fn dump_requests(fc: &FlowControl, include_details: bool) -> String {
    let mut header = strings([
        "PriorityLevelName",
        "FlowSchemaName",
        "QueueIndex",
        "RequestIndexInQueue",
        "FlowDistingsher",
        "ArriveTime",
        "InitialSeats",
        "FinalSeats",
        "AdditionalLatency",
        "StartTime",
    ]);
    if include_details {
        header.extend(strings([
            "UserName",
            "Verb",
            "APIPath",
            "Namespace",
            "Name",
            "APIVersion",
            "Resource",
            "SubResource",
        ]));
    }
    let mut rows = vec![header];
    for level in fc.levels() {
        let d = level.queues.dump();
        let row = |queue: i64, index: i64, r: &RequestDump| {
            let mut row = vec![
                level.config.name.clone(),
                r.flow_schema.clone(),
                queue.to_string(),
                index.to_string(),
                r.distinguisher.clone(),
                rfc3339_nano(r.arrive),
                r.work.initial_seats.to_string(),
                r.work.final_seats.to_string(),
                apimachinery::duration::go_string(r.work.additional_latency),
                // Go's zero time for a request that has not started.
                r.start
                    .map(rfc3339_nano)
                    .unwrap_or_else(|| "0001-01-01T00:00:00Z".into()),
            ];
            if include_details {
                let group_version = if r.info.api_group.is_empty() {
                    r.info.api_version.clone()
                } else {
                    format!("{}/{}", r.info.api_group, r.info.api_version)
                };
                row.extend([
                    r.user.clone(),
                    r.info.verb.clone(),
                    r.info.path.clone(),
                    r.info.namespace.clone(),
                    r.info.name.clone(),
                    group_version,
                    r.info.resource.clone(),
                    r.info.subresource.clone(),
                ]);
            }
            row
        };
        for (iq, q) in d.queues.iter().enumerate() {
            for (ir, r) in q.waiting.iter().enumerate() {
                rows.push(row(iq as i64, ir as i64, r));
            }
            for r in &q.executing {
                rows.push(row(iq as i64, -1, r));
            }
        }
        for r in &d.queueless_executing {
            rows.push(row(-1, -1, r));
        }
    }
    tabulate(&rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_are_aligned_as_gos_tabwriter_aligns_them() {
        let rows = vec![
            strings(["PriorityLevelName", "IsIdle", "X"]),
            strings(["exempt", "true", "0"]),
        ];
        assert_eq!(
            tabulate(&rows),
            "PriorityLevelName, IsIdle, X\nexempt,            true,   0\n"
        );
    }

    #[test]
    fn the_priority_levels_dump_lists_the_mandatory_levels() {
        let fc = FlowControl::new(10);
        let text = dump_priority_levels(&fc);
        let lines: Vec<&str> = text.lines().collect();
        assert!(
            lines[0].starts_with("PriorityLevelName, ActiveQueues, IsIdle,"),
            "{text}"
        );
        assert!(lines[1].starts_with("catch-all,"), "{text}");
        assert!(lines[2].starts_with("exempt,"), "{text}");
        assert_eq!(
            lines[2].split(',').map(str::trim).collect::<Vec<_>>(),
            ["exempt", "0", "true", "false", "0", "0", "0", "0", "0", "0"]
        );
    }
}
