//! Kubernetes-aware version order (upstream: `version.CompareKubeAwareVersionStrings`): GA
//! versions first, newest major first, then betas, then alphas, then every other name
//! alphabetically. Discovery lists a CRD's versions in this order and prefers the first, and the
//! aggregator orders APIServices of equal version priority by it.

use std::cmp::Ordering;

/// `(major, stability, minor)` for names like `v2`, `v1beta3`, `v1alpha1`; stability 2 is GA.
fn parse(v: &str) -> Option<(u64, u8, u64)> {
    let rest = v.strip_prefix('v')?;
    let digits = rest
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(rest.len());
    let (major, tail) = rest.split_at(digits);
    if major.is_empty() || major.starts_with('0') {
        return None;
    }
    let major = major.parse().ok()?;
    if tail.is_empty() {
        return Some((major, 2, 0));
    }
    let (stability, minor) = if let Some(m) = tail.strip_prefix("beta") {
        (1, m)
    } else {
        (0, tail.strip_prefix("alpha")?)
    };
    if minor.is_empty() || minor.starts_with('0') || !minor.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some((major, stability, minor.parse().ok()?))
}

/// Orders versions by priority: `Less` means `a` comes first.
pub fn compare(a: &str, b: &str) -> Ordering {
    match (parse(a), parse(b)) {
        (Some((ma, sa, na)), Some((mb, sb, nb))) => sb.cmp(&sa).then(mb.cmp(&ma)).then(nb.cmp(&na)),
        (Some(_), None) => Ordering::Less,
        (None, Some(_)) => Ordering::Greater,
        (None, None) => a.cmp(b),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn upstream_order() {
        // The example list of upstream's documentation for CRD version priority.
        let mut v = vec![
            "v11alpha2",
            "foo10",
            "v10",
            "v2",
            "v1",
            "v12alpha1",
            "v10beta3",
            "v3beta1",
            "foo1",
        ];
        v.sort_by(|a, b| compare(a, b));
        assert_eq!(
            v,
            [
                "v10",
                "v2",
                "v1",
                "v10beta3",
                "v3beta1",
                "v12alpha1",
                "v11alpha2",
                "foo1",
                "foo10"
            ]
        );
    }
}
