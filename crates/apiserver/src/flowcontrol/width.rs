//! How many seats a request takes (upstream: k8s.io/apiserver/pkg/util/flowcontrol/request,
//! `WorkEstimate.InitialSeats`). One seat, except for LISTs and for WATCHes that begin with a
//! list (`sendInitialEvents=true`, or a legacy watch from resourceVersion "" or "0"): those
//! take a seat for every 100 objects they are expected to read, at most 10, as upstream's
//! object-count estimate says — a single named object reads one; a list served from the watch
//! cache reads everything stored; a list from storage with a selector reads everything plus the
//! page, one without reads twice the page.
//!
//! The counts come from an `ObjectCounts`; a resource it does not know costs the minimum seat,
//! as upstream's estimator treats a resource its tracker has not counted.

use crate::request::RequestInfo;

const MINIMUM_SEATS: u64 = 1;
/// Upstream's `MaximumListSeatsLimit` without the size-based estimate.
const MAXIMUM_LIST_SEATS: u64 = 10;
const OBJECTS_PER_SEAT: f64 = 100.0;

/// The number of stored objects of a resource, by API group and resource.
pub trait ObjectCounts: Send + Sync {
    fn count(&self, group: &str, resource: &str) -> Option<i64>;
}

struct ListOptions {
    limit: i64,
    resource_version: String,
    resource_version_match: String,
    selector: bool,
    send_initial_events: bool,
}

fn list_options(query: &str) -> ListOptions {
    let mut o = ListOptions {
        limit: 0,
        resource_version: String::new(),
        resource_version_match: String::new(),
        selector: false,
        send_initial_events: false,
    };
    for (k, v) in form_urlencoded::parse(query.as_bytes()) {
        match k.as_ref() {
            "limit" => o.limit = v.parse().unwrap_or(0),
            "resourceVersion" => o.resource_version = v.into_owned(),
            "resourceVersionMatch" => o.resource_version_match = v.into_owned(),
            "labelSelector" | "fieldSelector" => o.selector |= !v.is_empty(),
            "sendInitialEvents" => o.send_initial_events = v == "true",
            _ => {}
        }
    }
    o
}

pub fn estimate(info: &RequestInfo, query: &str, counts: Option<&dyn ObjectCounts>) -> u64 {
    if !info.is_resource_request || !matches!(info.verb.as_str(), "list" | "watch") {
        return MINIMUM_SEATS;
    }
    let o = list_options(query);
    if info.verb == "watch"
        && !o.send_initial_events
        && !(o.resource_version.is_empty() || o.resource_version == "0")
    {
        return MINIMUM_SEATS;
    }
    let Some(stored) = counts.and_then(|c| c.count(&info.api_group, &info.resource)) else {
        return MINIMUM_SEATS;
    };
    // Served from the watch cache: a watch, or a list that does not ask for a consistent
    // read at an exact revision or from storage with a limit (upstream's delegation rule,
    // simplified to what decides most lists: an empty resourceVersion reads storage).
    let from_cache = info.verb == "watch"
        || (!o.resource_version.is_empty() && o.resource_version_match != "Exact");
    let limit = if o.limit > 0 && o.limit < stored {
        o.limit
    } else {
        stored
    };
    let objects = if !info.name.is_empty() {
        1
    } else if from_cache {
        stored
    } else if o.selector {
        stored + limit
    } else {
        2 * limit
    };
    ((objects as f64 / OBJECTS_PER_SEAT).ceil() as u64).clamp(MINIMUM_SEATS, MAXIMUM_LIST_SEATS)
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Pods(i64);
    impl ObjectCounts for Pods {
        fn count(&self, group: &str, resource: &str) -> Option<i64> {
            (group.is_empty() && resource == "pods").then_some(self.0)
        }
    }

    fn seats(method: &str, path: &str, query: &str, stored: i64) -> u64 {
        let info = RequestInfo::parse(&method.parse().unwrap(), path, query);
        estimate(&info, query, Some(&Pods(stored)))
    }

    #[test]
    fn lists_and_initial_watches_cost_by_the_objects_they_read() {
        // From storage without a selector: twice the page.
        assert_eq!(seats("GET", "/api/v1/pods", "", 250), 5);
        assert_eq!(seats("GET", "/api/v1/pods", "limit=50", 250), 1);
        // With a selector: everything plus the page.
        assert_eq!(
            seats("GET", "/api/v1/pods", "labelSelector=a%3Db&limit=50", 250),
            3
        );
        // From the cache: everything stored; at most 10 seats.
        assert_eq!(seats("GET", "/api/v1/pods", "resourceVersion=0", 250), 3);
        assert_eq!(
            seats("GET", "/api/v1/pods", "resourceVersion=0", 100_000),
            10
        );
        // A legacy watch lists first; one from a revision does not.
        assert_eq!(seats("GET", "/api/v1/pods", "watch=true", 250), 3);
        assert_eq!(
            seats("GET", "/api/v1/pods", "watch=true&resourceVersion=12", 250),
            1
        );
        assert_eq!(
            seats(
                "GET",
                "/api/v1/pods",
                "watch=true&resourceVersion=12&sendInitialEvents=true",
                250
            ),
            3
        );
        // Everything else, and resources without a count, take one seat.
        assert_eq!(seats("GET", "/api/v1/namespaces/a/pods/p", "", 250), 1);
        assert_eq!(seats("POST", "/api/v1/namespaces/a/pods", "", 250), 1);
        assert_eq!(seats("GET", "/api/v1/configmaps", "", 250), 1);
        assert_eq!(seats("GET", "/healthz", "", 250), 1);
    }
}
