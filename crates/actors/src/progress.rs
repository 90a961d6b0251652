//! Progress of running calls: [`CallProgress`], one report a server sent, and [`ProgressRoutes`], which hands each
//! report to the call that asked for it.

use std::sync::Arc;

use rmcp::model::ProgressToken;

/// One `notifications/progress` a server sent about a call.
#[derive(Debug, Clone, PartialEq)]
pub struct CallProgress {
    /// How far along the call is (grows with each report).
    pub progress: f64,
    /// The total, when the server knows it.
    pub total: Option<f64>,
    /// What the server says it is doing.
    pub message: Option<String>,
}

/// Where a server's `notifications/progress` go: the call that asked for progress, by (connection generation,
/// the progress token rmcp put on that call's request). Tokens restart per connection, hence the generation.
///
/// rmcp picks a request's progress token inside the send, so a call can add its route only once the request is on
/// its way, and a fast server's first report (often sent the moment the call starts) can be handled before that.
/// Such a report is kept for [`EARLY_REPORT_TTL`] (at most [`EARLY_REPORT_CAP`] of them) and handed to the route when
/// it is added. Reports for calls that never ask for progress age out the same way.
#[derive(Clone, Default)]
pub(crate) struct ProgressRoutes {
    inner: Arc<std::sync::Mutex<RoutesInner>>,
}

impl std::fmt::Debug for ProgressRoutes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let inner = self.lock();
        f.debug_struct("ProgressRoutes")
            .field("routes", &inner.routes.len())
            .field("early", &inner.early.len())
            .finish()
    }
}

type RouteKey = (u64, ProgressToken);

#[derive(Default)]
struct RoutesInner {
    routes: std::collections::HashMap<RouteKey, tokio::sync::mpsc::UnboundedSender<CallProgress>>,
    early: std::collections::VecDeque<(RouteKey, CallProgress, std::time::Instant)>,
}

/// How long a report that arrived before its call's route is kept.
pub(crate) const EARLY_REPORT_TTL: std::time::Duration = std::time::Duration::from_secs(2);
/// How many such reports are kept per connection (the oldest go first).
pub(crate) const EARLY_REPORT_CAP: usize = 64;

impl ProgressRoutes {
    fn lock(&self) -> std::sync::MutexGuard<'_, RoutesInner> {
        self.inner.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Adds a call's route; reports that came before it are delivered first, in order.
    pub(crate) fn insert(&self, key: RouteKey, tx: tokio::sync::mpsc::UnboundedSender<CallProgress>) {
        let mut inner = self.lock();
        inner.early.retain(|(k, report, _)| {
            let early = *k == key;
            if early {
                let _ = tx.send(report.clone());
            }
            !early
        });
        inner.routes.insert(key, tx);
    }

    pub(crate) fn remove(&self, key: &RouteKey) {
        self.lock().routes.remove(key);
    }

    /// Relays a report to its call's route, or keeps it briefly for a route not added yet.
    pub(crate) fn deliver(&self, key: RouteKey, report: CallProgress) {
        let mut inner = self.lock();
        if let Some(tx) = inner.routes.get(&key) {
            let _ = tx.send(report);
            return;
        }
        let now = std::time::Instant::now();
        while inner
            .early
            .front()
            .is_some_and(|(_, _, at)| now.duration_since(*at) > EARLY_REPORT_TTL)
        {
            inner.early.pop_front();
        }
        if inner.early.len() >= EARLY_REPORT_CAP {
            inner.early.pop_front();
        }
        inner.early.push_back((key, report, now));
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use rmcp::model::NumberOrString;

    fn report(progress: f64) -> CallProgress {
        CallProgress {
            progress,
            total: Some(3.0),
            message: None,
        }
    }

    fn key(generation: u64, token: i64) -> RouteKey {
        (generation, ProgressToken(NumberOrString::Number(token)))
    }

    /// A report handled before its call added the route (rmcp names the token only once the request is queued) still
    /// reaches the call, before the reports after it.
    #[test]
    fn a_report_that_beats_its_route_is_delivered_when_the_route_is_added() {
        let routes = ProgressRoutes::default();
        routes.deliver(key(1, 7), report(0.0));
        routes.deliver(key(1, 8), report(9.0)); // another call's, kept for it
        routes.deliver(key(2, 7), report(9.0)); // same token, another connection
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        routes.insert(key(1, 7), tx);
        routes.deliver(key(1, 7), report(1.0));
        assert_eq!(rx.try_recv().unwrap().progress, 0.0);
        assert_eq!(rx.try_recv().unwrap().progress, 1.0);
        assert!(rx.try_recv().is_err());

        let (tx8, mut rx8) = tokio::sync::mpsc::unbounded_channel();
        routes.insert(key(1, 8), tx8);
        assert_eq!(rx8.try_recv().unwrap().progress, 9.0);

        routes.remove(&key(1, 7));
        routes.deliver(key(1, 7), report(2.0));
        assert!(rx.try_recv().is_err(), "a removed route gets nothing");
    }

    #[test]
    fn early_reports_are_bounded() {
        let routes = ProgressRoutes::default();
        for i in 0..(EARLY_REPORT_CAP as i64 + 10) {
            routes.deliver(key(1, i), report(i as f64));
        }
        assert_eq!(routes.lock().early.len(), EARLY_REPORT_CAP);
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        routes.insert(key(1, 0), tx);
        assert!(rx.try_recv().is_err(), "the oldest report was dropped");
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        routes.insert(key(1, EARLY_REPORT_CAP as i64 + 9), tx);
        assert_eq!(rx.try_recv().unwrap().progress, (EARLY_REPORT_CAP + 9) as f64);
    }
}
