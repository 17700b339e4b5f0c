//! The watches open through flow control, by what they watch (upstream's `WatchTracker` in
//! k8s.io/apiserver/pkg/util/flowcontrol/watch_tracker.go): the mutating work estimate asks how
//! many of them a write will send events to.
//!
//! A watch is registered when flow control lets it run and unregistered when its response ends;
//! it is counted under its group, resource, namespace and name (a watch by
//! `fieldSelector=metadata.name=` has one). A write to an object interests the resource's
//! cluster-wide watches, its namespace's, and those of the object itself.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::request::RequestInfo;

#[derive(Clone, Debug, Default, Hash, PartialEq, Eq)]
struct Watched {
    group: String,
    resource: String,
    namespace: String,
    name: String,
}

#[derive(Default)]
pub struct WatchTracker {
    counts: Mutex<HashMap<Watched, usize>>,
}

/// An open watch; unregistered when dropped.
pub struct Registration {
    tracker: Arc<WatchTracker>,
    watched: Watched,
}

impl Drop for Registration {
    fn drop(&mut self) {
        let mut counts = self.tracker.lock();
        if let Some(n) = counts.get_mut(&self.watched) {
            *n -= 1;
            if *n == 0 {
                counts.remove(&self.watched);
            }
        }
    }
}

impl WatchTracker {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Watched, usize>> {
        // Counters stay consistent whatever panicked while holding the lock.
        self.counts.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Registers a watch request (anything else is not registered).
    pub fn register(self: &Arc<Self>, info: &RequestInfo) -> Option<Registration> {
        if !info.is_resource_request || info.verb != "watch" {
            return None;
        }
        let watched = Watched {
            group: info.api_group.clone(),
            resource: info.resource.clone(),
            namespace: info.namespace.clone(),
            name: info.name.clone(),
        };
        *self.lock().entry(watched.clone()).or_default() += 1;
        Some(Registration {
            tracker: self.clone(),
            watched,
        })
    }

    /// How many open watches a request would send events to (none for reads).
    pub fn interested(&self, info: &RequestInfo) -> usize {
        if !info.is_resource_request
            || matches!(info.verb.as_str(), "get" | "list" | "watch")
            || info.resource.is_empty()
        {
            return 0;
        }
        let counts = self.lock();
        if counts.is_empty() {
            return 0;
        }
        let mut key = Watched {
            group: info.api_group.clone(),
            resource: info.resource.clone(),
            ..Default::default()
        };
        let mut n = counts.get(&key).copied().unwrap_or(0);
        if !info.namespace.is_empty() {
            key.namespace = info.namespace.clone();
            n += counts.get(&key).copied().unwrap_or(0);
        }
        if !info.name.is_empty() {
            key.name = info.name.clone();
            n += counts.get(&key).copied().unwrap_or(0);
        }
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(method: &str, path: &str, query: &str) -> RequestInfo {
        RequestInfo::parse(&method.parse().unwrap(), path, query)
    }

    #[test]
    fn writes_interest_the_watches_of_their_resource_namespace_and_object() {
        let t = Arc::new(WatchTracker::default());
        let all = t.register(&info("GET", "/api/v1/configmaps", "watch=true"));
        let ns = t.register(&info(
            "GET",
            "/api/v1/namespaces/a/configmaps",
            "watch=true",
        ));
        let other_ns = t.register(&info(
            "GET",
            "/api/v1/namespaces/b/configmaps",
            "watch=true",
        ));
        let one = t.register(&info(
            "GET",
            "/api/v1/namespaces/a/configmaps",
            "watch=true&fieldSelector=metadata.name%3Dc",
        ));
        let pods = t.register(&info("GET", "/api/v1/pods", "watch=true"));
        assert!(
            t.register(&info("GET", "/api/v1/pods", "")).is_none(),
            "a list"
        );
        let put = info("PUT", "/api/v1/namespaces/a/configmaps/c", "");
        assert_eq!(t.interested(&put), 3);
        assert_eq!(
            t.interested(&info("PUT", "/api/v1/namespaces/a/configmaps/d", "")),
            2
        );
        assert_eq!(
            t.interested(&info("POST", "/api/v1/namespaces/b/configmaps", "")),
            2
        );
        assert_eq!(
            t.interested(&info("GET", "/api/v1/namespaces/a/configmaps/c", "")),
            0,
            "reads cause no events"
        );
        drop((all, one));
        assert_eq!(t.interested(&put), 1);
        drop((ns, other_ns, pods));
        assert_eq!(t.interested(&put), 0);
        assert!(t.lock().is_empty(), "nothing left behind");
    }
}
