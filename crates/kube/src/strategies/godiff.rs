//! Upstream's `diff.Diff` (k8s.io/apimachinery/pkg/util/diff), which immutability errors embed:
//! both values as Go's `json.MarshalIndent(v, "", " ")` prints them, compared line by line with
//! go-difflib's unified diff (three lines of context, no file header). The matcher is Python
//! difflib's `SequenceMatcher`, which go-difflib ports: longest matching blocks, popular lines
//! of long inputs left out of the index ("autojunk").
//!
//! Pod updates, PersistentVolumes and claims embed it.

use std::collections::{HashMap, HashSet};

/// Go's `json.Indent` with prefix "" and indent " " of compact JSON text: every element on its
/// own line, `": "` after keys, empty objects and arrays kept as `{}` and `[]`.
pub fn indent(compact: &str) -> String {
    let mut out = String::with_capacity(compact.len() * 2);
    let mut depth = 0usize;
    let mut in_string = false;
    let mut escaped = false;
    let mut chars = compact.chars().peekable();
    let newline = |out: &mut String, depth: usize| {
        out.push('\n');
        for _ in 0..depth {
            out.push(' ');
        }
    };
    while let Some(c) = chars.next() {
        if in_string {
            out.push(c);
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == '"' {
                in_string = false;
            }
            continue;
        }
        match c {
            '"' => {
                in_string = true;
                out.push(c);
            }
            '{' | '[' => {
                out.push(c);
                let close = if c == '{' { '}' } else { ']' };
                if chars.peek() == Some(&close) {
                    if let Some(close) = chars.next() {
                        out.push(close);
                    }
                } else {
                    depth += 1;
                    newline(&mut out, depth);
                }
            }
            '}' | ']' => {
                depth = depth.saturating_sub(1);
                newline(&mut out, depth);
                out.push(c);
            }
            ',' => {
                out.push(c);
                newline(&mut out, depth);
            }
            ':' => out.push_str(": "),
            c if c.is_whitespace() => {}
            c => out.push(c),
        }
    }
    out
}

/// difflib's `SplitLines`: lines keeping their newline, the last one given one.
fn split_lines(s: &str) -> Vec<String> {
    let mut lines: Vec<String> = s.split_inclusive('\n').map(str::to_string).collect();
    match lines.last_mut() {
        Some(last) if !last.ends_with('\n') => last.push('\n'),
        Some(_) => lines.push("\n".into()),
        None => lines.push("\n".into()),
    }
    lines
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Match {
    a: usize,
    b: usize,
    size: usize,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Tag {
    Equal,
    Replace,
    Delete,
    Insert,
}

#[derive(Clone, Copy, Debug)]
struct OpCode {
    tag: Tag,
    i1: usize,
    i2: usize,
    j1: usize,
    j2: usize,
}

struct Matcher<'s> {
    a: &'s [String],
    b: &'s [String],
    /// Where each line of `b` occurs, popular lines left out.
    b2j: HashMap<&'s str, Vec<usize>>,
}

impl<'s> Matcher<'s> {
    fn new(a: &'s [String], b: &'s [String]) -> Self {
        let mut b2j: HashMap<&str, Vec<usize>> = HashMap::new();
        for (i, line) in b.iter().enumerate() {
            b2j.entry(line.as_str()).or_default().push(i);
        }
        // Autojunk: in inputs of 200 lines or more, lines occurring more than 1% (+1) of the
        // time are not indexed.
        let n = b.len();
        if n >= 200 {
            let ntest = n / 100 + 1;
            let popular: HashSet<&str> = b2j
                .iter()
                .filter(|(_, idx)| idx.len() > ntest)
                .map(|(s, _)| *s)
                .collect();
            for s in popular {
                b2j.remove(s);
            }
        }
        Self { a, b, b2j }
    }

    fn find_longest_match(&self, alo: usize, ahi: usize, blo: usize, bhi: usize) -> Match {
        let (mut besti, mut bestj, mut bestsize) = (alo, blo, 0usize);
        let mut j2len: HashMap<usize, usize> = HashMap::new();
        for i in alo..ahi {
            let mut new_j2len: HashMap<usize, usize> = HashMap::new();
            if let Some(js) = self.b2j.get(self.a[i].as_str()) {
                for &j in js {
                    if j < blo {
                        continue;
                    }
                    if j >= bhi {
                        break;
                    }
                    let k = j
                        .checked_sub(1)
                        .and_then(|p| j2len.get(&p))
                        .copied()
                        .unwrap_or(0)
                        + 1;
                    new_j2len.insert(j, k);
                    if k > bestsize {
                        besti = i + 1 - k;
                        bestj = j + 1 - k;
                        bestsize = k;
                    }
                }
            }
            j2len = new_j2len;
        }
        // No line is junk (no junk function), so extending covers popular lines too.
        while besti > alo && bestj > blo && self.a[besti - 1] == self.b[bestj - 1] {
            besti -= 1;
            bestj -= 1;
            bestsize += 1;
        }
        while besti + bestsize < ahi
            && bestj + bestsize < bhi
            && self.a[besti + bestsize] == self.b[bestj + bestsize]
        {
            bestsize += 1;
        }
        Match {
            a: besti,
            b: bestj,
            size: bestsize,
        }
    }

    fn matching_blocks(&self) -> Vec<Match> {
        // In-order traversal of difflib's recursion, with an explicit stack.
        enum Task {
            Range(usize, usize, usize, usize),
            Emit(Match),
        }
        let mut stack = vec![Task::Range(0, self.a.len(), 0, self.b.len())];
        let mut matched = Vec::new();
        while let Some(task) = stack.pop() {
            match task {
                Task::Emit(m) => matched.push(m),
                Task::Range(alo, ahi, blo, bhi) => {
                    let m = self.find_longest_match(alo, ahi, blo, bhi);
                    if m.size == 0 {
                        continue;
                    }
                    let (i, j, k) = (m.a, m.b, m.size);
                    if i + k < ahi && j + k < bhi {
                        stack.push(Task::Range(i + k, ahi, j + k, bhi));
                    }
                    stack.push(Task::Emit(m));
                    if alo < i && blo < j {
                        stack.push(Task::Range(alo, i, blo, j));
                    }
                }
            }
        }
        let mut out = Vec::new();
        let (mut i1, mut j1, mut k1) = (0, 0, 0);
        for m in matched {
            if i1 + k1 == m.a && j1 + k1 == m.b {
                k1 += m.size;
            } else {
                if k1 > 0 {
                    out.push(Match {
                        a: i1,
                        b: j1,
                        size: k1,
                    });
                }
                (i1, j1, k1) = (m.a, m.b, m.size);
            }
        }
        if k1 > 0 {
            out.push(Match {
                a: i1,
                b: j1,
                size: k1,
            });
        }
        out.push(Match {
            a: self.a.len(),
            b: self.b.len(),
            size: 0,
        });
        out
    }

    fn opcodes(&self) -> Vec<OpCode> {
        let (mut i, mut j) = (0, 0);
        let mut codes = Vec::new();
        for m in self.matching_blocks() {
            let tag = if i < m.a && j < m.b {
                Some(Tag::Replace)
            } else if i < m.a {
                Some(Tag::Delete)
            } else if j < m.b {
                Some(Tag::Insert)
            } else {
                None
            };
            if let Some(tag) = tag {
                codes.push(OpCode {
                    tag,
                    i1: i,
                    i2: m.a,
                    j1: j,
                    j2: m.b,
                });
            }
            (i, j) = (m.a + m.size, m.b + m.size);
            if m.size > 0 {
                codes.push(OpCode {
                    tag: Tag::Equal,
                    i1: m.a,
                    i2: i,
                    j1: m.b,
                    j2: j,
                });
            }
        }
        codes
    }

    fn grouped_opcodes(&self, n: usize) -> Vec<Vec<OpCode>> {
        let mut codes = self.opcodes();
        if codes.is_empty() {
            codes.push(OpCode {
                tag: Tag::Equal,
                i1: 0,
                i2: 1,
                j1: 0,
                j2: 1,
            });
        }
        if let Some(c) = codes.first_mut().filter(|c| c.tag == Tag::Equal) {
            c.i1 = c.i1.max(c.i2.saturating_sub(n));
            c.j1 = c.j1.max(c.j2.saturating_sub(n));
        }
        if let Some(c) = codes.last_mut().filter(|c| c.tag == Tag::Equal) {
            c.i2 = c.i2.min(c.i1 + n);
            c.j2 = c.j2.min(c.j1 + n);
        }
        let nn = n + n;
        let mut groups = Vec::new();
        let mut group = Vec::new();
        for c in codes {
            let (mut i1, mut j1) = (c.i1, c.j1);
            if c.tag == Tag::Equal && c.i2 - c.i1 > nn {
                group.push(OpCode {
                    tag: c.tag,
                    i1,
                    i2: c.i2.min(i1 + n),
                    j1,
                    j2: c.j2.min(j1 + n),
                });
                groups.push(std::mem::take(&mut group));
                i1 = i1.max(c.i2.saturating_sub(n));
                j1 = j1.max(c.j2.saturating_sub(n));
            }
            group.push(OpCode {
                tag: c.tag,
                i1,
                i2: c.i2,
                j1,
                j2: c.j2,
            });
        }
        let only_equal = group.len() == 1 && group[0].tag == Tag::Equal;
        if !group.is_empty() && !only_equal {
            groups.push(group);
        }
        groups
    }
}

/// difflib's `formatRangeUnified`.
fn range(start: usize, stop: usize) -> String {
    let mut beginning = start + 1;
    let length = stop - start;
    if length == 1 {
        return beginning.to_string();
    }
    if length == 0 {
        beginning -= 1;
    }
    format!("{beginning},{length}")
}

/// go-difflib's unified diff of two texts, three lines of context, no header.
pub fn unified_diff(a: &str, b: &str) -> String {
    let a = split_lines(a);
    let b = split_lines(b);
    let matcher = Matcher::new(&a, &b);
    let mut out = String::new();
    for group in matcher.grouped_opcodes(3) {
        let (Some(first), Some(last)) = (group.first(), group.last()) else {
            continue;
        };
        out.push_str(&format!(
            "@@ -{} +{} @@\n",
            range(first.i1, last.i2),
            range(first.j1, last.j2)
        ));
        for c in &group {
            if c.tag == Tag::Equal {
                for line in &a[c.i1..c.i2] {
                    out.push(' ');
                    out.push_str(line);
                }
                continue;
            }
            if matches!(c.tag, Tag::Replace | Tag::Delete) {
                for line in &a[c.i1..c.i2] {
                    out.push('-');
                    out.push_str(line);
                }
            }
            if matches!(c.tag, Tag::Replace | Tag::Insert) {
                for line in &b[c.j1..c.j2] {
                    out.push('+');
                    out.push_str(line);
                }
            }
        }
    }
    out
}

/// `diff.Diff(old, new)` of two values given as Go's compact JSON.
pub fn go_diff(old_compact: &str, new_compact: &str) -> String {
    unified_diff(&indent(old_compact), &indent(new_compact))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn indent_is_gos() {
        assert_eq!(
            indent(r#"{"A":["x"],"B":null,"C":{},"D":{"E":"a,b:{"}}"#),
            "{\n \"A\": [\n  \"x\"\n ],\n \"B\": null,\n \"C\": {},\n \"D\": {\n  \"E\": \"a,b:{\"\n }\n}"
        );
    }

    #[test]
    fn diff_matches_upstreams_recording() {
        // pvc-update-access-modes of the upstream corpus.
        let old = r#"{"AccessModes":["ReadWriteOnce"],"Selector":null,"Resources":{"Limits":null,"Requests":{"storage":"1Gi"}},"VolumeName":"","StorageClassName":null,"VolumeMode":"Filesystem","DataSource":null,"DataSourceRef":null,"VolumeAttributesClassName":null}"#;
        let new = old.replace("ReadWriteOnce", "ReadWriteMany");
        assert_eq!(
            go_diff(old, &new),
            "@@ -1,6 +1,6 @@\n {\n  \"AccessModes\": [\n-  \"ReadWriteOnce\"\n+  \"ReadWriteMany\"\n  ],\n  \"Selector\": null,\n  \"Resources\": {\n"
        );
    }

    #[test]
    fn distant_changes_make_two_hunks() {
        let a: String = (0..20).map(|i| format!("{i}\n")).collect();
        let b: String = (0..20)
            .map(|i| match i {
                2 => "two\n".to_string(),
                17 => "seventeen\n".to_string(),
                i => format!("{i}\n"),
            })
            .collect();
        let d = unified_diff(&a, &b);
        assert_eq!(d.matches("@@ -").count(), 2, "{d}");
        assert!(d.starts_with("@@ -1,6 +1,6 @@\n 0\n 1\n-2\n+two\n"), "{d}");
    }
}
