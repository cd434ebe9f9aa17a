//! `status --check`'s word on the alert channels, beside the tiers': what the ticks
//! found wrong with them (a key of `[alert]` a variable not set leaves out, deliveries
//! that failed) is a WARNING. A broken channel never stops the work, so it is not
//! CRITICAL; but a person is told before the night it is needed.

use chrono::{DateTime, Utc};

use super::check::{Check, CheckLevel};
use backlog_core::store::{Store, StoreError};

impl Check {
    /// The verdict with a WARNING for each trouble of the alert channels the ticks
    /// found: worse findings still come first, and decide the level.
    pub fn with_alert_channels(
        self,
        store: &mut dyn Store,
        now: DateTime<Utc>,
    ) -> Result<Check, StoreError> {
        let found = crate::alert::check_findings(store, now)?;
        Ok(self.with(
            found
                .into_iter()
                .map(|f| (CheckLevel::Warning, f))
                .collect(),
        ))
    }
}
