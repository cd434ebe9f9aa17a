//! `backlog daemon` and the library's `Backlog::run`: fires every tier on its cadence,
//! for hosts without cron.
//!
//! One loop, one step after another: stop if asked; reload the schedule file if it
//! changed or SIGHUP came; forget ticks that finished; start the tiers whose time has
//! come; tell a person of tiers overdue (`[alert]`, once a minute); sleep a little.
//! Each tick runs on a thread of its own with its own database
//! connection; a tier whose previous tick still runs is skipped for that slot, and the
//! skip is logged, never queued. Interval slots are anchored to the Unix epoch, so a
//! restart does not shift them, and a slot missed while the daemon was down (judged by
//! the run log) is made up once, at start.
//!
//! Time is the database server's where runners share one (PostgreSQL, MySQL): the
//! daemon measures how far the server's clock is from its host's at start and at each
//! reload, and fires slots, computes bands and writes the run log by the server's, as
//! `backlog run` does, so daemons on hosts whose clocks disagree fire the same slots.
//!
//! A database that cannot be reached is waited for, not given up on: at start the
//! daemon tries again with a doubling pause (1 s up to a minute), and a tick that
//! failed on the database is tried again after 5 s, 10 s, 20 s… (at most 5 minutes,
//! and never later than the tier's own next slot).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::{self, JoinHandle, Scope, ScopedJoinHandle};
use std::time::{Duration, SystemTime};

mod clocks;
mod fire;
mod overdue;

use clocks::{Clock, Shared, clocks_at_start, next_fire};
use fire::{Ended, fire, retry_pause, unreachable};

use crate::ticks::run_tick;
use backlog_core::tick::{TickOptions, TickSummary, tier_span};

use backlog_core::Error;
use backlog_core::config::Config;
use backlog_core::duration;
use backlog_core::handler::{Handler, HandlerError};
use backlog_core::tick::open_store;

/// The flags signal handlers set for the daemon.
#[derive(Debug, Clone, Default)]
pub struct Signals<'a> {
    /// SIGTERM, SIGINT: take no new records, let running handlers finish, exit.
    pub stop: Arc<AtomicBool>,
    /// SIGHUP: read the schedule file again.
    pub reload: Arc<AtomicBool>,
    /// The program's own stop (the library's `run`), passed on to `stop`.
    pub program_stop: Option<&'a AtomicBool>,
}

impl Signals<'_> {
    /// Whether the daemon is to stop; a program's stop is passed on to the ticks.
    fn stopping(&self) -> bool {
        if self.program_stop.is_some_and(|s| s.load(Ordering::Relaxed)) {
            self.stop.store(true, Ordering::Relaxed);
        }
        self.stop.load(Ordering::Relaxed)
    }
}

/// Where each tick of the daemon gets its handler.
#[derive(Clone, Copy)]
pub enum Handlers<'h> {
    /// The schedule file's `[handler]`, made anew for each tick (the command).
    File,
    /// The program's own (the library's `run`): each tick takes a worker of it.
    Program(&'h (dyn Handler + Sync)),
}

impl Handlers<'_> {
    /// Runs one tick with the handler this says.
    fn tick(self, config: &Config, opts: &TickOptions) -> Result<TickSummary, Error> {
        match self {
            Handlers::File => run_tick(config, opts, None, &mut |_| {}),
            Handlers::Program(handler) => {
                let mut worker = handler.worker().ok_or_else(|| Error::Handler {
                    file: None,
                    source: HandlerError::Setup(
                        "the program's handler gives no worker (Handler::worker), and each tier's tick needs one of its own; return one, as FnHandler does".into(),
                    ),
                })?;
                run_tick(config, opts, Some(worker.as_mut()), &mut |_| {})
            }
        }
    }
}

/// How often the daemon looks for overdue tiers, when `[alert]` sends alerts.
const OVERDUE_EVERY: Duration = Duration::from_secs(60);

/// How often the daemon looks for tiers another runner left unfinished (its tick
/// stopped early, on this host or another): one indexed read of the run log.
const UNFINISHED_EVERY: Duration = Duration::from_secs(15);

/// The longest the loop sleeps, so that signals and file changes are seen promptly.
const NAP: Duration = Duration::from_millis(200);

/// Loads a schedule file and checks it can run: the database, table and columns, and
/// the file's handler (when the ticks use it). The daemon refuses to start, or to
/// switch to a new file, otherwise.
fn load_checked(path: &Path, handlers: Handlers<'_>) -> Result<Config, Error> {
    let config = match handlers {
        Handlers::File => Config::load(path)?,
        Handlers::Program(_) => Config::load_for_program(path)?,
    };
    let mut store = open_store(&config)?;
    store.inspect().map_err(Error::store(store.describe()))?;
    if let Handlers::File = handlers {
        backlog_core::handler::from_config(&config.handler, &config.dir, &config.table.name)
            .map_err(|source| Error::Handler {
                file: Some(config.path.display().to_string()),
                source,
            })?;
    }
    Ok(config)
}

fn modified(path: &Path) -> Option<SystemTime> {
    std::fs::metadata(path).and_then(|m| m.modified()).ok()
}

/// Loads the file and reads the run log, waiting for a database that cannot be
/// reached yet (it may be starting beside the daemon, or failing over).
fn start_up(
    path: &Path,
    signals: &Signals,
    handlers: Handlers<'_>,
    rng: &mut fastrand::Rng,
) -> Result<Option<(Config, Vec<Clock>, Shared)>, Error> {
    let mut pause = Duration::from_secs(1);
    loop {
        let attempt = load_checked(path, handlers).and_then(|c| {
            let (clocks, shared) = clocks_at_start(&c, rng)?;
            Ok((c, clocks, shared))
        });
        match attempt {
            Ok(ready) => return Ok(Some(ready)),
            Err(e) if unreachable(&e) => {
                tracing::warn!("{e}; trying again in {}", duration::compact(pause));
                let until = std::time::Instant::now() + pause;
                while std::time::Instant::now() < until {
                    if signals.stopping() {
                        return Ok(None);
                    }
                    thread::sleep(NAP);
                }
                pause = (pause * 2).min(Duration::from_secs(60));
            }
            Err(e) => return Err(e),
        }
    }
}

/// Runs the daemon on the schedule file at `path` until `signals` say stop, each
/// tick with the handler `handlers` says. `seed` drives the jitter, so a run can be
/// reproduced.
pub fn run_daemon(
    path: &Path,
    signals: &Signals,
    handlers: Handlers<'_>,
    seed: u64,
) -> Result<(), Error> {
    // Read before the schedule is: an edit while the database is waited for is
    // reloaded on the loop's first turn.
    let stamp = modified(path);
    let mut rng = fastrand::Rng::with_seed(seed);
    let Some((config, clocks, shared)) = start_up(path, signals, handlers, &mut rng)? else {
        tracing::info!("stopped before the database could be reached");
        return Ok(());
    };
    tracing::info!(
        "daemon started: {} of {}",
        config.schedule.tier_count(),
        path.display()
    );
    // The ticks run on threads of this scope: they may borrow the program's handler.
    thread::scope(|scope| {
        let mut daemon = Daemon {
            scope,
            handlers,
            path: path.to_path_buf(),
            stamp,
            rng,
            config,
            clocks,
            shared,
            running: HashMap::new(),
            failures: HashMap::new(),
            overdue: (None, None),
            unfinished: (Some(std::time::Instant::now()), None),
        };
        while !signals.stopping() {
            daemon.reload_if_changed(signals);
            daemon.forget_finished();
            daemon.take_over_unfinished();
            daemon.start_due(signals);
            daemon.look_for_overdue();
            daemon.nap();
        }
        tracing::info!(
            "stopping: waiting for {}",
            backlog_core::plural::count(daemon.running.len(), "running tick", "running ticks")
        );
        for (_, tick) in daemon.running {
            let _ = tick.join();
        }
        // An alert on its way is delivered (each has a timeout).
        if let (_, Some(overdue)) = daemon.overdue {
            let _ = overdue.join();
        }
        tracing::info!("stopped");
        Ok(())
    })
}

/// The daemon's state from one turn of its loop to the next.
struct Daemon<'scope, 'env, 'h> {
    /// Where the ticks' threads run.
    scope: &'scope Scope<'scope, 'env>,
    handlers: Handlers<'h>,
    path: PathBuf,
    /// The file's modification time when it was last read.
    stamp: Option<SystemTime>,
    rng: fastrand::Rng,
    config: Config,
    clocks: Vec<Clock>,
    shared: Shared,
    running: HashMap<Duration, ScopedJoinHandle<'scope, Ended>>,
    /// Ticks in a row that failed on the database, per tier.
    failures: HashMap<Duration, u32>,
    /// The last look for overdue tiers; its thread, while it still sends.
    overdue: (Option<std::time::Instant>, Option<JoinHandle<()>>),
    /// The last look for tiers left unfinished; its thread, while it reads: the
    /// windows it found.
    unfinished: (
        Option<std::time::Instant>,
        Option<JoinHandle<Vec<Duration>>>,
    ),
}

impl<'scope, 'env: 'scope, 'h: 'env> Daemon<'scope, 'env, 'h> {
    /// Reads the schedule again on SIGHUP or a change of the file; a file that does
    /// not validate leaves the running schedule in force.
    fn reload_if_changed(&mut self, signals: &Signals) {
        let now_stamp = modified(&self.path);
        if !signals.reload.swap(false, Ordering::Relaxed) && now_stamp == self.stamp {
            return;
        }
        self.stamp = now_stamp;
        let checked = load_checked(&self.path, self.handlers).and_then(|new| {
            let mut store = open_store(&new)?;
            let measured = Shared::measure(&new, store.as_mut())?;
            Ok((new, measured))
        });
        match checked {
            Ok((new, measured)) => {
                self.config = new;
                self.shared = measured;
                let now = self.shared.now();
                self.clocks = self
                    .config
                    .schedule
                    .tiers
                    .iter()
                    .map(|t| Clock {
                        window: t.window,
                        next: next_fire(t, now, &mut self.rng),
                    })
                    .collect();
                tracing::info!(
                    "reloaded {}: {}",
                    self.path.display(),
                    self.config.schedule.tier_count()
                );
            }
            Err(e) => tracing::error!("not reloaded, the schedule in force keeps running: {e}"),
        }
    }

    /// Forgets ticks that finished; tries a tier again soon if the database failed it.
    fn forget_finished(&mut self) {
        let finished: Vec<Duration> = self
            .running
            .iter()
            .filter(|(_, tick)| tick.is_finished())
            .map(|(w, _)| *w)
            .collect();
        for window in finished {
            let ended = self
                .running
                .remove(&window)
                .map_or(Ended::Ran, |tick| tick.join().unwrap_or(Ended::Ran));
            if ended == Ended::Ran {
                self.failures.remove(&window);
                continue;
            }
            // A database that failed is given a doubling pause; a tick that lost its
            // hold goes again at the first pause, and doubles only if it keeps ending
            // early.
            let n = self.failures.entry(window).or_default();
            *n += 1;
            let pause = retry_pause(*n);
            if let Some(clock) = self.clocks.iter_mut().find(|c| c.window == window) {
                let retry =
                    self.shared.now() + chrono::Duration::from_std(pause).unwrap_or_default();
                if retry < clock.next {
                    clock.next = retry;
                    let pause = duration::compact(pause);
                    let _in_span = tier_span(&self.config.schedule, window).entered();
                    match ended {
                        Ended::Unfinished => tracing::warn!(
                            window = %duration::compact(window),
                            "taking the rest of the tier's band in {pause} (ended early {n} in a row)"
                        ),
                        _ => tracing::warn!(
                            window = %duration::compact(window),
                            "trying the tier again in {pause} (failure {n} in a row)"
                        ),
                    }
                }
            }
        }
    }

    /// Starts the tiers whose time has come; a tier whose previous tick still runs is
    /// skipped for that slot.
    fn start_due(&mut self, signals: &Signals) {
        let now = self.shared.now();
        for clock in &mut self.clocks {
            if now < clock.next {
                continue;
            }
            let tier = self
                .config
                .schedule
                .tier(clock.window)
                .map(|(_, t)| t)
                .expect("clocks follow the schedule in force");
            match self.running.entry(clock.window) {
                std::collections::hash_map::Entry::Occupied(_) => {
                    let _in_span = tier_span(&self.config.schedule, clock.window).entered();
                    tracing::warn!(
                        window = %duration::compact(clock.window),
                        "the previous tick still runs; this slot is skipped"
                    )
                }
                std::collections::hash_map::Entry::Vacant(slot) => {
                    slot.insert(fire(
                        self.scope,
                        self.handlers,
                        &self.config,
                        clock.window,
                        self.shared,
                        &signals.stop,
                    ));
                }
            }
            clock.next = next_fire(tier, now, &mut self.rng);
        }
    }

    /// Fires at once the tiers whose tick stopped early on any runner (a deploy
    /// stopped another host's daemon mid-band) and that no tick has finished since, so
    /// a fleet finishes one runner's stop; the look runs on a thread every
    /// `UNFINISHED_EVERY`, and a tier whose tick runs here is left to it.
    fn take_over_unfinished(&mut self) {
        let (at, thread) = &mut self.unfinished;
        if thread.as_ref().is_some_and(|t| t.is_finished()) {
            let found = thread.take().map(|t| t.join().unwrap_or_default());
            let now = self.shared.now();
            for window in found.unwrap_or_default() {
                if self.running.contains_key(&window) {
                    continue;
                }
                if let Some(clock) = self.clocks.iter_mut().find(|c| c.window == window)
                    && clock.next > now
                {
                    let _in_span = tier_span(&self.config.schedule, window).entered();
                    tracing::info!(
                        window = %duration::compact(window),
                        "a tick of this tier ended early and nothing has taken the rest of its band: taking it now"
                    );
                    clock.next = now;
                }
            }
        }
        if thread.is_some() || at.is_some_and(|at| at.elapsed() < UNFINISHED_EVERY) {
            return;
        }
        *at = Some(std::time::Instant::now());
        let config = self.config.clone();
        *thread = Some(thread::spawn(move || {
            let read = open_store(&config).and_then(|mut store| {
                store
                    .unfinished_runs(config.database.claim_lease)
                    .map_err(Error::store(store.describe()))
            });
            match read {
                // A failed tick is its runner's to try again (after a pause): taken
                // over every look, a tick that keeps failing would never rest.
                Ok(runs) => runs
                    .iter()
                    .filter(|r| r.outcome != "failed")
                    .map(|r| Duration::from_secs(r.window_secs))
                    .collect(),
                Err(e) => {
                    tracing::warn!("cannot look for tiers left unfinished: {e}");
                    Vec::new()
                }
            }
        }));
    }

    /// Tells a person of tiers overdue, on a thread: an alert may take seconds.
    fn look_for_overdue(&mut self) {
        let (at, thread) = &self.overdue;
        if !self.config.alert.sends()
            || at.is_some_and(|at| at.elapsed() < OVERDUE_EVERY)
            || thread.as_ref().is_some_and(|t| !t.is_finished())
        {
            return;
        }
        let (config, now) = (self.config.clone(), self.shared.now());
        let running: Vec<Duration> = self.running.keys().copied().collect();
        self.overdue = (
            Some(std::time::Instant::now()),
            Some(thread::spawn(move || match open_store(&config) {
                Ok(mut store) => overdue::check_overdue(&config, store.as_mut(), now, &running),
                Err(e) => tracing::warn!("cannot check whether a tier is overdue: {e}"),
            })),
        );
    }

    /// Sleeps until the next tick, or a nap.
    fn nap(&self) {
        let now = self.shared.now();
        let next = self.clocks.iter().map(|c| c.next).min().unwrap_or(now);
        thread::sleep((next - now).to_std().unwrap_or(Duration::ZERO).min(NAP));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use backlog_core::schedule::{Cadence, Tier};
    use chrono::{DateTime, Utc};

    #[test]
    fn a_failing_tier_is_tried_again_after_a_doubling_pause_of_at_most_five_minutes() {
        let pauses: Vec<u64> = (1..=9).map(|n| retry_pause(n).as_secs()).collect();
        assert_eq!(pauses, [5, 10, 20, 40, 80, 160, 300, 300, 300]);
    }

    #[test]
    fn jitter_delays_a_tick_within_its_bound_and_a_seed_reproduces_it() {
        let mut tier = Tier::new(
            Duration::from_secs(86_400),
            Cadence::Every(Duration::from_secs(300)),
        );
        tier.jitter = Duration::from_secs(30);
        let now = DateTime::parse_from_rfc3339("2026-11-21T10:02:00Z")
            .unwrap()
            .with_timezone(&Utc);
        let slot = DateTime::parse_from_rfc3339("2026-11-21T10:05:00Z")
            .unwrap()
            .with_timezone(&Utc);
        let fires = |seed| {
            let mut rng = fastrand::Rng::with_seed(seed);
            (0..50)
                .map(|_| next_fire(&tier, now, &mut rng))
                .collect::<Vec<_>>()
        };
        let a = fires(7);
        assert!(
            a.iter()
                .all(|t| *t >= slot && *t <= slot + chrono::Duration::seconds(30))
        );
        assert!(a.iter().any(|t| *t != a[0]), "the delays vary");
        assert_eq!(a, fires(7), "the same seed gives the same delays");
    }
}
