//! `status --check`'s word on the alert channels, beside the tiers': what the ticks
//! found wrong with them (a key of `[alert]` a variable not set leaves out, deliveries
//! that failed) is a WARNING. A broken channel never stops the work, so it is not
//! CRITICAL; but a person is told before the night it is needed.

use std::cmp::Reverse;

use chrono::{DateTime, Utc};

use super::check::{Check, CheckLevel};
use crate::store::{Store, StoreError};

impl Check {
    /// The verdict with a WARNING for each trouble of the alert channels the ticks
    /// found: worse findings still come first, and decide the level.
    pub fn with_alert_channels(
        mut self,
        store: &mut dyn Store,
        now: DateTime<Utc>,
    ) -> Result<Check, StoreError> {
        let found = crate::alert::check_findings(store, now)?;
        self.findings
            .extend(found.into_iter().map(|f| (CheckLevel::Warning, f)));
        self.findings.sort_by_key(|f| Reverse(f.0));
        self.level = self.findings.first().map_or(CheckLevel::Ok, |f| f.0);
        Ok(self)
    }
}
