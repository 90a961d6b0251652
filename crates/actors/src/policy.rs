//! Recovery policy as pure values: the connect backoff (200 ms → 5 min, jittered, backon's iterator), the
//! crash-loop breaker (5 failures within 5 min opens it; 5 stable minutes reset it), sleep/wake detection, and the
//! [`Tuning`] knobs with their documented defaults.

use std::collections::VecDeque;
use std::time::{Duration, Instant, SystemTime};

use backon::{BackoffBuilder, ExponentialBackoff, ExponentialBuilder};

/// Timing knobs of the runtime. Defaults are the documented ones (docs/runtime-semantics.md); tests shorten them.
#[derive(Debug, Clone)]
pub struct Tuning {
    /// First connect retry delay (default 200 ms).
    pub connect_backoff_min: Duration,
    /// Connect retry delay cap (default 5 min).
    pub connect_backoff_max: Duration,
    /// Failures within `breaker_window` that open the crash-loop breaker (default 5).
    pub breaker_failures: usize,
    /// Default 5 min.
    pub breaker_window: Duration,
    /// Connected this long without failure resets the breaker (default 5 min).
    pub breaker_stable_after: Duration,
    /// Cap on one health check (default 5 s).
    pub health_timeout: Duration,
    /// Consecutive failed checks that mark a server wedged (default 3).
    pub health_failures: u32,
    /// `list_changed` debounce (default 50 ms, never less).
    pub list_changed_debounce: Duration,
    /// Delays between `tools/call` retries (default 200 ms, 400 ms).
    pub call_retry_delays: Vec<Duration>,
    /// Grace for closing one connection (stdin close → grace → SIGTERM → SIGKILL) (default 2 s).
    pub close_grace: Duration,
    /// Supervisor restarts of a crashed ServerActor within `breaker_window` before it gives up (default 5).
    pub actor_restart_budget: usize,
    /// How long the background discovery of a connection that became ready on fresh cached metadata waits for the
    /// calls that were queued for that connection to be answered before it sends its lists (default 1 s). The
    /// upstream then handles those calls first instead of several cold lists (see `ServerActor::spawn_discovery`).
    pub discovery_after_calls_max: Duration,
    /// How long a call waits for the approval handler's answer before it is refused (category `approval`; default
    /// [`Tuning::DEFAULT_APPROVAL_WAIT`]).
    pub approval_wait: Duration,
}

impl Tuning {
    /// First delay after a failed connect.
    pub const DEFAULT_CONNECT_BACKOFF_MIN: Duration = Duration::from_millis(200);
    /// Longest delay between connect attempts.
    pub const DEFAULT_CONNECT_BACKOFF_MAX: Duration = Duration::from_secs(5 * 60);
    /// Failures within [`Tuning::DEFAULT_BREAKER_WINDOW`] that open the crash-loop breaker.
    pub const DEFAULT_BREAKER_FAILURES: usize = 5;
    /// The window the breaker counts failures in.
    pub const DEFAULT_BREAKER_WINDOW: Duration = Duration::from_secs(5 * 60);
    /// How long a health-check ping may take.
    pub const DEFAULT_HEALTH_TIMEOUT: Duration = Duration::from_secs(5);
    /// Failed health checks in a row that tear a connection down.
    pub const DEFAULT_HEALTH_FAILURES: u32 = 3;
    /// The shortest debounce of `list_changed` refreshes.
    pub const MIN_LIST_CHANGED_DEBOUNCE: Duration = Duration::from_millis(50);
    /// How long a closing stdio server gets after its stdin closes, and again after SIGTERM.
    pub const DEFAULT_CLOSE_GRACE: Duration = Duration::from_secs(2);
    /// The longest a discovery waits behind calls that were queued first.
    pub const DEFAULT_DISCOVERY_AFTER_CALLS_MAX: Duration = Duration::from_secs(1);
    /// A person may take minutes to answer an approval, but a handler that never answers must not hold the call
    /// forever: 10 minutes, as the proxy's elicitation of an approval.
    pub const DEFAULT_APPROVAL_WAIT: Duration = Duration::from_secs(600);
}

impl Default for Tuning {
    fn default() -> Self {
        Tuning {
            connect_backoff_min: Tuning::DEFAULT_CONNECT_BACKOFF_MIN,
            connect_backoff_max: Tuning::DEFAULT_CONNECT_BACKOFF_MAX,
            breaker_failures: Tuning::DEFAULT_BREAKER_FAILURES,
            breaker_window: Tuning::DEFAULT_BREAKER_WINDOW,
            breaker_stable_after: Tuning::DEFAULT_BREAKER_WINDOW,
            health_timeout: Tuning::DEFAULT_HEALTH_TIMEOUT,
            health_failures: Tuning::DEFAULT_HEALTH_FAILURES,
            list_changed_debounce: Tuning::MIN_LIST_CHANGED_DEBOUNCE,
            call_retry_delays: vec![Duration::from_millis(200), Duration::from_millis(400)],
            close_grace: Tuning::DEFAULT_CLOSE_GRACE,
            actor_restart_budget: 5,
            discovery_after_calls_max: Tuning::DEFAULT_DISCOVERY_AFTER_CALLS_MAX,
            approval_wait: Tuning::DEFAULT_APPROVAL_WAIT,
        }
    }
}

/// Connect retry delays: exponential ×2 with jitter from `min` to `max`, never exhausted.
#[derive(Debug)]
pub struct ConnectBackoff {
    builder: ExponentialBuilder,
    iter: ExponentialBackoff,
    attempt: u32,
    max: Duration,
}

impl ConnectBackoff {
    /// A backoff from `min` doubling (with jitter) up to `max`.
    pub fn new(min: Duration, max: Duration) -> ConnectBackoff {
        let builder = ExponentialBuilder::default()
            .with_min_delay(min)
            .with_max_delay(max)
            .with_factor(2.0)
            .with_jitter()
            .without_max_times();
        ConnectBackoff {
            iter: builder.build(),
            builder,
            attempt: 0,
            max,
        }
    }

    /// The next delay and its attempt number (1-based).
    pub fn next_delay(&mut self) -> (Duration, u32) {
        self.attempt += 1;
        // backon's jitter adds up to 100 % of the delay; clamp so the cap really is the cap.
        let d = self.iter.next().unwrap_or(self.max).min(self.max);
        (d, self.attempt)
    }

    /// Failed attempts since the last reset.
    pub fn attempt(&self) -> u32 {
        self.attempt
    }

    /// Starts over at `min` (after a successful connect).
    pub fn reset(&mut self) {
        self.iter = self.builder.build();
        self.attempt = 0;
    }
}

/// Opens after `threshold` failures inside `window`; a connection that stays up `stable_after` resets it.
#[derive(Debug)]
pub struct CrashLoopBreaker {
    threshold: usize,
    window: Duration,
    stable_after: Duration,
    failures: VecDeque<Instant>,
    up_since: Option<Instant>,
}

impl CrashLoopBreaker {
    /// A breaker that opens after `threshold` failures within `window`, and forgets them once a connection has stayed up for `stable_after`.
    pub fn new(threshold: usize, window: Duration, stable_after: Duration) -> CrashLoopBreaker {
        CrashLoopBreaker {
            threshold: threshold.max(1),
            window,
            stable_after,
            failures: VecDeque::new(),
            up_since: None,
        }
    }

    /// Records a failure at `now`; returns true when the breaker is now open.
    pub fn record_failure(&mut self, now: Instant) -> bool {
        if let Some(up) = self.up_since.take()
            && now.duration_since(up) >= self.stable_after
        {
            self.failures.clear();
        }
        self.failures.push_back(now);
        while let Some(first) = self.failures.front() {
            if now.duration_since(*first) > self.window {
                self.failures.pop_front();
            } else {
                break;
            }
        }
        self.failures.len() >= self.threshold
    }

    /// The connection came up at `now`.
    pub fn record_up(&mut self, now: Instant) {
        self.up_since = Some(now);
    }

    /// Failures counted in the current window.
    pub fn failures(&self) -> usize {
        self.failures.len()
    }

    /// Closes the breaker (explicit `connect`, config change).
    pub fn reset(&mut self) {
        self.failures.clear();
        self.up_since = None;
    }
}

/// Detects sleep/wake: the wall clock advanced more than the monotonic clock by over `threshold`.
#[derive(Debug, Clone, Copy)]
pub struct ClockWatch {
    wall: SystemTime,
    mono: Instant,
}

impl ClockWatch {
    /// Starts watching from this pair of readings.
    pub fn new(wall: SystemTime, mono: Instant) -> ClockWatch {
        ClockWatch { wall, mono }
    }

    /// Updates the reference point; returns true on a jump larger than `threshold` (either direction).
    pub fn jumped(&mut self, wall: SystemTime, mono: Instant, threshold: Duration) -> bool {
        let mono_d = mono.saturating_duration_since(self.mono);
        let jumped = match wall.duration_since(self.wall) {
            Ok(wall_d) => wall_d.saturating_sub(mono_d) > threshold,
            Err(back) => back.duration() > threshold,
        };
        self.wall = wall;
        self.mono = mono;
        jumped
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_grows_with_jitter_and_caps() {
        let mut b = ConnectBackoff::new(Duration::from_millis(200), Duration::from_secs(300));
        let delays: Vec<_> = (0..20).map(|_| b.next_delay().0).collect();
        assert!(delays[0] >= Duration::from_millis(200) && delays[0] <= Duration::from_millis(400));
        assert!(delays[3] >= Duration::from_millis(1600));
        assert!(delays.iter().all(|d| *d <= Duration::from_secs(300)));
        assert_eq!(delays[19], Duration::from_secs(300));
        assert_eq!(b.attempt(), 20);
        b.reset();
        assert_eq!(b.attempt(), 0);
        assert!(b.next_delay().0 <= Duration::from_millis(400));
    }

    #[test]
    fn breaker_opens_after_five_in_window() {
        let t0 = Instant::now();
        let mut br = CrashLoopBreaker::new(5, Duration::from_secs(300), Duration::from_secs(300));
        for i in 0..4 {
            assert!(!br.record_failure(t0 + Duration::from_secs(i)));
        }
        assert!(br.record_failure(t0 + Duration::from_secs(5)));
        br.reset();
        assert!(!br.record_failure(t0 + Duration::from_secs(6)));
    }

    #[test]
    fn breaker_forgets_old_failures_and_resets_when_stable() {
        let t0 = Instant::now();
        let mut br = CrashLoopBreaker::new(3, Duration::from_secs(60), Duration::from_secs(30));
        assert!(!br.record_failure(t0));
        assert!(!br.record_failure(t0 + Duration::from_secs(1)));
        // Outside the window: the first two no longer count.
        assert!(!br.record_failure(t0 + Duration::from_secs(100)));
        assert_eq!(br.failures(), 1);
        assert!(!br.record_failure(t0 + Duration::from_secs(101)));
        br.record_up(t0 + Duration::from_secs(102));
        // Stable for 30 s: counter reset, so this is failure #1 again.
        assert!(!br.record_failure(t0 + Duration::from_secs(140)));
        assert_eq!(br.failures(), 1);
    }

    #[test]
    fn clock_jump_detection() {
        let wall = SystemTime::now();
        let mono = Instant::now();
        let mut w = ClockWatch::new(wall, mono);
        assert!(!w.jumped(
            wall + Duration::from_secs(30),
            mono + Duration::from_secs(30),
            Duration::from_secs(30)
        ));
        // Slept 10 minutes: wall advanced, monotonic did not.
        assert!(w.jumped(
            wall + Duration::from_secs(630),
            mono + Duration::from_secs(31),
            Duration::from_secs(30)
        ));
        assert!(!w.jumped(
            wall + Duration::from_secs(631),
            mono + Duration::from_secs(32),
            Duration::from_secs(30)
        ));
    }
}
