//! `/healthz`, `/livez` and `/readyz`: named checks, `?verbose` listings, `exclude=` (by name or
//! by group) and per-check paths, with upstream's text. Readiness waits for every post-start hook and for shutdown not to have
//! begun; liveness only for the process to serve.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// A named check; `ok` is read at request time.
#[derive(Clone)]
pub struct Check {
    pub name: String,
    /// The group an `exclude=` of its name also excludes (upstream's `NamedGroupedCheck`: the
    /// `--etcd-servers-overrides` clusters' checks are in `etcd` and `etcd-readiness`).
    pub group: Option<String>,
    pub ok: Arc<AtomicBool>,
    /// Woken at every `set`, for work that must wait for a hook (`passed`).
    changed: Arc<tokio::sync::Notify>,
}

impl Check {
    pub fn new(name: impl Into<String>, ok: bool) -> Self {
        Self {
            name: name.into(),
            group: None,
            ok: Arc::new(AtomicBool::new(ok)),
            changed: Arc::new(tokio::sync::Notify::new()),
        }
    }

    /// A check that `exclude=<group>` excludes too.
    pub fn grouped(name: impl Into<String>, group: impl Into<String>, ok: bool) -> Self {
        Self {
            group: Some(group.into()),
            ..Self::new(name, ok)
        }
    }

    pub fn set(&self, ok: bool) {
        self.ok.store(ok, Ordering::Release);
        self.changed.notify_waiters();
    }

    /// Returns once the check passes (at once if it does already).
    pub async fn passed(&self) {
        loop {
            let changed = self.changed.notified();
            tokio::pin!(changed);
            // Registered before the flag is read, so a `set` in between is not missed.
            changed.as_mut().enable();
            if self.is_ok() {
                return;
            }
            changed.await;
        }
    }

    pub fn is_ok(&self) -> bool {
        self.ok.load(Ordering::Acquire)
    }

    /// Passes once every condition holds. With a `deadline`, it passes when that has gone by
    /// whatever the conditions say, and the names of those that still do not hold are returned:
    /// upstream's storage readiness hook stops waiting with a warning rather than keep the server
    /// unready. Upstream looks every 100 ms; here the first looks come sooner (a tenth of the
    /// time waited so far, from 1 ms up to 100 ms), because a server ready in a few tens of
    /// milliseconds would otherwise wait most of a period for a condition long met.
    pub async fn pass_when_all(
        &self,
        conditions: Vec<Condition>,
        deadline: Option<std::time::Duration>,
    ) -> Vec<String> {
        let started = tokio::time::Instant::now();
        loop {
            let waiting: Vec<String> = conditions
                .iter()
                .filter(|(_, holds)| !holds())
                .map(|(name, _)| name.clone())
                .collect();
            if waiting.is_empty() || deadline.is_some_and(|d| started.elapsed() >= d) {
                self.set(true);
                return waiting;
            }
            let period = (started.elapsed() / 10).clamp(
                std::time::Duration::from_millis(1),
                std::time::Duration::from_millis(100),
            );
            tokio::time::sleep(period).await;
        }
    }
}

/// A named condition a check waits for, read each time it is looked at.
pub type Condition = (String, Box<dyn Fn() -> bool + Send + Sync>);

#[derive(Clone, Default)]
pub struct Health {
    /// Checks of every endpoint (`ping`, `etcd`/storage, `log`).
    pub common: Vec<Check>,
    /// Checks of `/readyz` only, listed after the common ones (`etcd-readiness`), as upstream's
    /// `AddReadyzChecks`.
    pub readyz: Vec<Check>,
    /// `poststarthook/<name>` checks, part of every endpoint as upstream has them.
    pub post_start_hooks: Vec<Check>,
    /// `shutdown`: fails /readyz once SIGTERM arrived, so load balancers stop sending traffic.
    pub shutdown: Option<Check>,
    /// Checks of /healthz and /readyz only (upstream's `addHealthChecksWithoutLivez`: the KMS
    /// plugins' `kms-providers`, whose failure must not get the server restarted).
    pub not_livez: Vec<Check>,
}

pub struct HealthAnswer {
    pub code: u16,
    pub body: String,
}

impl Health {
    fn checks(&self, endpoint: &str) -> Vec<&Check> {
        let mut out: Vec<&Check> = self.common.iter().collect();
        if endpoint == "readyz" {
            out.extend(self.readyz.iter());
        }
        // Registered with the storage checks, before the hooks, as upstream lists them.
        if endpoint != "livez" {
            out.extend(self.not_livez.iter());
        }
        out.extend(self.post_start_hooks.iter());
        if endpoint == "readyz" {
            out.extend(self.shutdown.iter());
        }
        out
    }

    /// Answers `/<endpoint>[/<check>]?verbose&exclude=...`.
    pub fn answer(&self, endpoint: &str, sub: Option<&str>, query: &str) -> Option<HealthAnswer> {
        let checks = self.checks(endpoint);
        if let Some(name) = sub {
            let c = checks.into_iter().find(|c| c.name == name)?;
            return Some(if c.is_ok() {
                HealthAnswer {
                    code: 200,
                    body: "ok".into(),
                }
            } else {
                HealthAnswer {
                    code: 500,
                    body: format!("internal server error: {name} failed"),
                }
            });
        }
        let params: Vec<(String, String)> = form_urlencoded::parse(query.as_bytes())
            .into_owned()
            .collect();
        let verbose = params.iter().any(|(k, _)| k == "verbose");
        let excluded: BTreeSet<&str> = params
            .iter()
            .filter(|(k, _)| k == "exclude")
            .map(|(_, v)| v.as_str())
            .collect();
        // Upstream lists an excluded check in its place, and warns of names that matched none.
        let mut unmatched = excluded.clone();
        let mut lines = Vec::new();
        let mut failed = false;
        for c in &checks {
            if excluded.contains(c.name.as_str()) {
                unmatched.remove(c.name.as_str());
                lines.push(format!("[+]{} excluded: ok", c.name));
                continue;
            }
            if let Some(group) = c.group.as_deref().filter(|g| excluded.contains(g)) {
                unmatched.remove(group);
                lines.push(format!("[+]{} excluded with {group}: ok", c.name));
                continue;
            }
            let ok = c.is_ok();
            crate::metrics::observe_healthcheck(&c.name, endpoint, ok);
            if ok {
                lines.push(format!("[+]{} ok", c.name));
            } else {
                failed = true;
                lines.push(format!("[-]{} failed: reason withheld", c.name));
            }
        }
        if !unmatched.is_empty() {
            // Go's `%q` of each name, in order, joined by commas.
            let quoted: Vec<String> = unmatched.iter().map(|n| format!("{n:?}")).collect();
            lines.push(format!(
                "warn: some health checks cannot be excluded: no matches for {}",
                quoted.join(",")
            ));
        }
        if failed {
            Some(HealthAnswer {
                code: 500,
                body: format!("{}\n{endpoint} check failed\n", lines.join("\n")),
            })
        } else if verbose {
            Some(HealthAnswer {
                code: 200,
                body: format!("{}\n{endpoint} check passed\n", lines.join("\n")),
            })
        } else {
            Some(HealthAnswer {
                code: 200,
                body: "ok".into(),
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readyz_fails_until_hooks_finish() {
        let hook = Check::new("poststarthook/bootstrap", false);
        let h = Health {
            common: vec![Check::new("ping", true)],
            readyz: vec![],
            post_start_hooks: vec![hook.clone()],
            shutdown: None,
            not_livez: vec![Check::new("kms-providers", true)],
        };
        let a = h.answer("readyz", None, "verbose").unwrap();
        assert_eq!(a.code, 500);
        assert!(a.body.contains("[-]poststarthook/bootstrap failed"));
        hook.set(true);
        let a = h.answer("readyz", None, "verbose").unwrap();
        assert_eq!(a.code, 200);
        assert!(a.body.ends_with("readyz check passed\n"));
        assert_eq!(h.answer("readyz", Some("ping"), "").unwrap().body, "ok");
        assert!(h.answer("readyz", Some("nope"), "").is_none());
        // The KMS check is in /healthz and /readyz, never /livez.
        assert_eq!(
            h.answer("healthz", Some("kms-providers"), "").unwrap().code,
            200
        );
        assert!(h.answer("livez", Some("kms-providers"), "").is_none());
        assert!(
            !h.answer("livez", None, "verbose")
                .unwrap()
                .body
                .contains("kms")
        );
    }

    #[test]
    fn readyz_only_checks_follow_the_common_ones_on_readyz_alone() {
        let readiness = Check::new("etcd-readiness", false);
        let h = Health {
            common: vec![Check::new("ping", true), Check::new("etcd", true)],
            readyz: vec![readiness.clone()],
            not_livez: vec![],
            post_start_hooks: vec![Check::new("poststarthook/x", true)],
            shutdown: None,
        };
        let ready = h.answer("readyz", None, "verbose").unwrap();
        assert_eq!(ready.code, 500);
        assert_eq!(
            ready.body,
            "[+]ping ok\n[+]etcd ok\n[-]etcd-readiness failed: reason withheld\n\
             [+]poststarthook/x ok\nreadyz check failed\n"
        );
        assert_eq!(
            h.answer("readyz", Some("etcd-readiness"), "").unwrap().code,
            500
        );
        let live = h.answer("livez", None, "verbose").unwrap();
        assert_eq!(live.code, 200);
        assert!(!live.body.contains("etcd-readiness"), "{}", live.body);
        assert!(h.answer("livez", Some("etcd-readiness"), "").is_none());
        readiness.set(true);
        assert_eq!(h.answer("readyz", None, "").unwrap().code, 200);
    }

    /// `exclude=` as upstream's handler takes it: the check listed in its place as excluded,
    /// a group excluding its members, and a warning naming what matched nothing.
    #[test]
    fn excluded_checks_are_listed_in_place_and_unknown_names_warned_of() {
        let h = Health {
            common: vec![
                Check::new("ping", true),
                Check::grouped("etcd", "etcd", false),
                Check::grouped("etcd-override-0", "etcd", false),
            ],
            readyz: vec![],
            not_livez: vec![],
            post_start_hooks: vec![Check::new("poststarthook/x", true)],
            shutdown: None,
        };
        let a = h
            .answer(
                "livez",
                None,
                "verbose&exclude=etcd&exclude=nope&exclude=also",
            )
            .unwrap();
        assert_eq!(a.code, 200);
        assert_eq!(
            a.body,
            "[+]ping ok\n[+]etcd excluded: ok\n[+]etcd-override-0 excluded with etcd: ok\n\
             [+]poststarthook/x ok\n\
             warn: some health checks cannot be excluded: no matches for \"also\",\"nope\"\n\
             livez check passed\n"
        );
        // Excluding one member leaves the group's other checks in.
        let a = h.answer("livez", None, "exclude=etcd-override-0").unwrap();
        assert_eq!(a.code, 500);
        assert_eq!(
            a.body,
            "[+]ping ok\n[-]etcd failed: reason withheld\n[+]etcd-override-0 excluded: ok\n\
             [+]poststarthook/x ok\nlivez check failed\n"
        );
    }

    #[tokio::test]
    async fn waiting_for_a_hook_ends_when_it_passes() {
        let hook = Check::new("poststarthook/rbac/bootstrap-roles", false);
        let waiter = tokio::spawn({
            let hook = hook.clone();
            async move { hook.passed().await }
        });
        tokio::task::yield_now().await;
        assert!(!waiter.is_finished(), "a failing hook was waited past");
        hook.set(true);
        tokio::time::timeout(std::time::Duration::from_secs(5), waiter)
            .await
            .expect("the wait ended")
            .expect("the waiter");
        // A hook that passed already is not waited for.
        hook.passed().await;
    }

    #[tokio::test(start_paused = true)]
    async fn a_check_waiting_for_conditions_passes_when_all_hold_or_at_its_deadline() {
        use std::sync::atomic::AtomicBool;
        let flag = |v| Arc::new(AtomicBool::new(v));
        let condition = |name: &str, f: &Arc<AtomicBool>| -> Condition {
            let f = f.clone();
            (
                name.to_string(),
                Box::new(move || f.load(Ordering::Acquire)),
            )
        };
        // Without a deadline: not before the last condition holds.
        let (a, b) = (flag(true), flag(false));
        let check = Check::new("informer-sync", false);
        let waiter = tokio::spawn({
            let (check, conditions) = (check.clone(), vec![condition("a", &a), condition("b", &b)]);
            async move { check.pass_when_all(conditions, None).await }
        });
        tokio::time::sleep(std::time::Duration::from_secs(3600)).await;
        assert!(!check.is_ok(), "passed while b does not hold");
        b.store(true, Ordering::Release);
        assert_eq!(waiter.await.unwrap(), Vec::<String>::new());
        assert!(check.is_ok());
        // With one: it passes then, naming what still does not hold.
        let (c, d) = (flag(false), flag(true));
        let check = Check::new("poststarthook/storage-readiness", false);
        let started = tokio::time::Instant::now();
        let waiting = check
            .pass_when_all(
                vec![condition("c", &c), condition("d", &d)],
                Some(std::time::Duration::from_secs(60)),
            )
            .await;
        assert_eq!(waiting, ["c"]);
        assert!(check.is_ok());
        assert!(started.elapsed() >= std::time::Duration::from_secs(60));
        assert!(started.elapsed() < std::time::Duration::from_secs(61));
    }
}
