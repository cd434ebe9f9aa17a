//! The keys of what runs for a record and who hears of its failures: `[handler]` and
//! `[alert]`, and the thresholds a check judges by: `[check]`.

use super::{COLUMN, DURATION, NONE, Section, Shape, count, key, part, span};
use crate::config::{self, AlertConfig, HandlerConfig, ranges};
use crate::duration::compact;

pub(super) fn handler() -> Section {
    let d = HandlerConfig::new(Vec::new());
    Section {
        header: "[handler]",
        about: "Required. What runs for each record, how many at once and how fast, and when a tick stops calling it.",
        keys: vec![
            key(
                "command",
                "a list of strings (the program and its arguments)",
                "required, or url",
                "",
                "Run with no shell (write [\"sh\", \"-c\", \"...\"] for one), in the schedule file's folder; a program with a / is relative to that folder, any other is looked up in PATH. Once per record: the record as JSON on stdin, its id in BACKLOG_RECORD_ID; exit 0 marks it success, anything else error. It is killed, with its process group, after timeout.",
            )
            .like("command = [\"./handler.sh\"]"),
            key(
                "mode",
                "\"per_record\" or \"batch\"",
                "\"per_record\"",
                "",
                "batch keeps one long-lived process and streams records to it as JSON lines, reading one answer line per record back.",
            )
            .like("mode = \"batch\""),
            key(
                "batch_size",
                "a number",
                &d.batch_size.to_string(),
                &format!("{} records", count(config::MAX_BATCH_SIZE)),
                "Records a batch handler gets at once.",
            ),
            key(
                "timeout",
                DURATION,
                &compact(d.timeout),
                &span(ranges::HANDLER_TIMEOUT),
                "How long one record's handler may run before it is killed and the record gets the error status.",
            ),
            key(
                "stop_grace",
                DURATION,
                &compact(d.stop_grace),
                &span(ranges::STOP_GRACE),
                "How long a tick asked to stop (SIGTERM, SIGINT, a lapse) lets its handlers finish before it ends them, and a batch handler whose input ended gets to exit. Keep systemd's TimeoutStopSec above twice it.",
            ),
            key(
                "concurrency",
                "a number",
                &d.concurrency.to_string(),
                &count(config::MAX_CONCURRENCY),
                "Records in their handlers at once within a tick (batch mode: processes).",
            )
            .like("concurrency = 8"),
            key(
                "concurrency_per_key",
                "a number",
                NONE,
                "1 to concurrency",
                "The most records of one counterpart in their handlers at once: a rate_key value, or the host of a URL a record gives (url = \"{endpoint}\").",
            )
            .like("concurrency_per_key = 2"),
            key(
                "rate",
                "starts per second, minute or hour in quotes: \"20/s\", \"100/m\", \"3/h\"; or \"auto\"",
                "none: as fast as they go",
                "one start a day to 1000000/s",
                "Handler starts, spaced evenly, for every runner of the table and tier together. \"auto\": the fleet finds the pace from the counterpart's answers (slow start, then AIMD; halved on a retry_after answer, exit 75, a timeout, or what overload and target_latency add), kept in backlog_paces. While the pace can fall, an overload is not counted by the breaker.",
            )
            .like("rate = \"20/s\""),
            key(
                "rate_min",
                "a rate in quotes",
                "\"1/m\"",
                "as handler.rate; below rate_max; needs rate = \"auto\"",
                "The slowest an adapted pace falls to: a counterpart that refuses everything is still asked now and then.",
            ),
            key(
                "rate_max",
                "a rate in quotes",
                "\"500/s\"",
                "as handler.rate; above rate_min; needs rate = \"auto\"",
                "The fastest an adapted pace rises to.",
            ),
            key(
                "overload",
                "a list of exit codes and statuses: [69, \"THROTTLED\"]",
                "none: a retry_after answer, exit 75 and a timeout only",
                "codes 1 to 255 (mode = \"batch\": any answer code but 0); statuses that exit_codes gives; needs rate = \"auto\"",
                "More answers that say the counterpart is overloaded: each cuts the adapted pace.",
            ),
            key(
                "target_latency",
                DURATION,
                "none",
                "below timeout; needs rate = \"auto\"",
                "A handler that took longer says the counterpart is overloaded, whatever it answered: the adapted pace is cut.",
            ),
            key(
                "rate_group",
                "a name in quotes",
                NONE,
                "1 to 100 characters; needs rate",
                "One rate shared by the tiers and tables that call the same counterpart.",
            )
            .like("rate_group = \"payments-api\""),
            key(
                "rate_key",
                COLUMN,
                NONE,
                "a column of the table; needs rate",
                "Each value of that column (the counterpart a record is for) gets a rate of its own.",
            )
            .like("rate_key = \"merchant_id\""),
            key(
                "stop_after_failures",
                "a number",
                "none: a tick never stops for failures",
                &count(u32::MAX),
                "The breaker: after this many failures in a row among the tier's runners, a tick stops handing out records and exits 7.",
            )
            .like("stop_after_failures = 5"),
            key(
                "breaker_cooldown",
                DURATION,
                &compact(d.breaker_cooldown),
                &format!(
                    "{}; needs stop_after_failures",
                    span(ranges::BREAKER_COOLDOWN)
                ),
                "How long every runner of the tier stops once its breaker tripped, before one of them tries a record again.",
            ),
            key(
                "env",
                "a table of variable names and values",
                NONE,
                "",
                "Variables added to the handler's environment: env = { API_URL = \"https://erp.example\" }. A PATH here is where the program is looked up too.",
            )
            .like("env = { API_URL = \"https://erp.example\" }")
            .part(part("*", Shape::Text, "a string", "API_URL = \"https://erp.example\"")),
            key(
                "exit_codes",
                "a table of exit codes and statuses",
                NONE,
                "codes 1 to 255",
                "Exit codes that set a status of their own instead of table.error: exit_codes = { 75 = \"RETRY\" }.",
            )
            .like("exit_codes = { 75 = \"RETRY\" }")
            .part(part("*", Shape::Text, "a status in quotes", "75 = \"RETRY\"")),
            key(
                "url",
                "an http:// or https:// URL in quotes",
                "required, or command",
                "{column} placeholders",
                "The handler is an HTTP call per record instead of a program (docs/http.md): url = \"https://hooks.example.com/orders/{id}\". A placeholder in the path or query is percent-encoded; one before the path (url = \"{endpoint}\") gives the scheme or host, and the address it reaches is checked (allow_private). 2xx marks the record success, statuses maps other codes, any other answer or no answer is error; 408, 429 and 503 slow an adapted rate, and with Retry-After the record waits until then.",
            )
            .like("url = \"https://hooks.example.com/orders/{id}\""),
            key(
                "method",
                "POST, PUT, PATCH, GET or DELETE in quotes",
                "\"POST\"",
                "",
                "The URL handler's method.",
            )
            .like("method = \"PUT\""),
            key(
                "headers",
                "a table of header names and values",
                NONE,
                "",
                "Headers of each call: headers = { Authorization = \"Bearer ${API_TOKEN}\" }. Their values are never shown.",
            )
            .like("headers = { Authorization = \"Bearer ${API_TOKEN}\" }")
            .part(part("*", Shape::Text, "a string", "X-Api-Key = \"${API_KEY}\"")),
            key(
                "body",
                "\"record\", \"none\" or a template in quotes",
                "\"record\" (\"none\" for GET and DELETE)",
                "{column} placeholders, written as JSON",
                "What a call sends: the record's columns as a JSON object (as a command reads on stdin), nothing, or a text such as '{\"order\": {id}}'.",
            )
            .like("body = \"none\""),
            key(
                "connect_timeout",
                DURATION,
                "10s",
                &span(ranges::HANDLER_TIMEOUT),
                "How long a call may take to resolve, connect and finish TLS; timeout bounds the whole call.",
            ),
            key(
                "statuses",
                "a table of HTTP status codes and statuses",
                NONE,
                "codes 100 to 599",
                "Answer codes that set a status of their own: statuses = { 410 = \"GONE\", 422 = \"REJECTED\" }.",
            )
            .like("statuses = { 410 = \"GONE\" }")
            .part(part("*", Shape::Text, "a status in quotes", "410 = \"GONE\"")),
            key(
                "ca_file",
                "a path in quotes",
                NONE,
                "",
                "PEM certificates trusted beside the system's, relative to the schedule file's folder.",
            )
            .like("ca_file = \"/etc/ssl/partner-ca.pem\""),
            key(
                "allow_private",
                "true or false",
                "false",
                "",
                "Lets a URL whose host comes from a record reach loopback, private, link-local and cloud-metadata addresses.",
            )
            .like("allow_private = true"),
            key(
                "follow_redirects",
                "a number",
                "0",
                &format!("0 to {}", config::MAX_REDIRECTS),
                "How many redirects a call follows; with 0 a 3xx is an answer like any other (an error unless statuses maps it).",
            )
            .like("follow_redirects = 3"),
            key(
                "sign",
                "\"standard-webhooks\"",
                NONE,
                "",
                "Signs each call as the Standard Webhooks specification says: webhook-id (the same at every try of a record, also sent as Idempotency-Key), webhook-timestamp and webhook-signature.",
            )
            .like("sign = \"standard-webhooks\""),
            key(
                "secret",
                "whsec_ and a key in base64, in quotes",
                NONE,
                "",
                "The signing key of sign; give it through a variable, secret = \"${WEBHOOK_SECRET}\". Never shown.",
            )
            .like("secret = \"${WEBHOOK_SECRET}\""),
            key(
                "done_when",
                "a table: pointer (a JSON pointer) and in (the values that mean done)",
                NONE,
                "",
                "Polling: done_when = { pointer = \"/state\", in = [\"shipped\", \"delivered\"] } marks a record success when a 2xx answer's JSON body holds one of those values there; any other 2xx is not yet: the record keeps its status until the next try, counted neither as a success nor as a failure (nor by the breaker).",
            )
            .like("done_when = { pointer = \"/state\", in = [\"shipped\"] }")
            .part(part("pointer", Shape::Text, "a JSON pointer in quotes", "pointer = \"/state\""))
            .part(part("in", Shape::List, "a list of values", "in = [\"shipped\", \"delivered\"]")),
        ],
    }
}

pub(super) fn alert() -> Section {
    let d = AlertConfig::default();
    Section {
        header: "[alert]",
        about: "Optional; without it nothing is pushed. Where a tick's failures go to a person: when a tick fails, lapses, cannot start or trips its breaker. A channel that is down is said on stderr and in status --check, and never keeps a record from its handler. A value that names an unset ${NAME} leaves its key out, loudly.",
        keys: vec![
            key(
                "command",
                "a list of a program and its arguments",
                NONE,
                "",
                "Run once per alert with the event as JSON on its stdin, in a process group of its own.",
            )
            .like("command = [\"./notify.sh\", \"ops\"]"),
            key(
                "command_timeout",
                DURATION,
                &compact(d.command_timeout),
                &span(ranges::ALERT_COMMAND_TIMEOUT),
                "How long the command may run before its process group is ended.",
            ),
            key(
                "webhook",
                "an http:// or https:// address in quotes",
                NONE,
                "",
                "Each alert is POSTed there as JSON.",
            )
            .like("webhook = \"https://hooks.example/backlog\""),
            key(
                "ping",
                "an http:// or https:// address in quotes",
                NONE,
                "{window} and {tier} the only placeholders",
                "A healthchecks.io check: URL/start as a tick starts, then URL, or URL/N with the exit code it ends with. {window} (like 1d) and {tier} (its number) in it give each tier a check of its own; a [[tier]]'s own ping replaces it for that tier.",
            )
            .like("ping = \"https://hc-ping.com/UUID\" or \"https://hc-ping.com/KEY/backlog-{window}\""),
            key(
                "alert_every",
                DURATION,
                &compact(d.every),
                &span(ranges::ALERT_EVERY),
                "At most one alert of a tier and kind in this time, across every runner.",
            ),
        ],
    }
}

pub(super) fn check() -> Section {
    let waiting = span(config::CHECK_WAITING);
    let count = format!("0 to {}", config::CHECK_MAX_COUNT);
    Section {
        header: "[check]",
        about: "Optional; every threshold is off unless set. What status --check and the daemon's /readyz judge the backlog by, beside the tiers' ticks; a flag of status --check of the same name overrides its key. Of a warn_ and critical_ pair, the warning must be below the critical threshold.",
        keys: vec![
            key(
                "warn_waiting",
                DURATION,
                NONE,
                &waiting,
                "WARNING once the oldest record never tried yet (in a pending status no try writes, like NEW) has waited longer than this: how long new work waits.",
            )
            .like("warn_waiting = \"30m\""),
            key(
                "critical_waiting",
                DURATION,
                NONE,
                &waiting,
                "CRITICAL once it has waited longer than this.",
            )
            .like("critical_waiting = \"2h\""),
            key(
                "warn_pending",
                "a number",
                NONE,
                &count,
                "WARNING above this many pending records in the tiers' bands.",
            )
            .like("warn_pending = 10000"),
            key(
                "critical_pending",
                "a number",
                NONE,
                &count,
                "CRITICAL above this many.",
            )
            .like("critical_pending = 100000"),
            key(
                "warn_failures",
                "a number",
                NONE,
                &count,
                "WARNING above this many failed attempts in the last 24 hours.",
            )
            .like("warn_failures = 10"),
            key(
                "critical_failures",
                "a number",
                NONE,
                &count,
                "CRITICAL above this many.",
            )
            .like("critical_failures = 100"),
        ],
    }
}
