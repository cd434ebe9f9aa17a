//! The PostgreSQL backend: one backlog, many runners on many machines.
//!
//! Claims live in the tool's own claims table, with leases, as on SQLite. Row locks
//! held for as long as a handler runs (`SELECT … FOR UPDATE SKIP LOCKED` in a
//! transaction left open) would need no table, but:
//! - a handler may run for minutes, and a transaction open that long holds back vacuum
//!   on the whole database and blocks the application's own updates of those rows;
//! - a row lock lives as long as its connection, and the server keeps the connection
//!   of a host that vanished (power cut, network split) open until TCP gives up, which
//!   can take hours; a lease runs out `database.claim_lease` after the last heartbeat,
//!   whatever became of the host;
//! - the engine, its guarantees and its tests stay the same on both backends.
//!
//! Row locks are still taken, for a moment: the statement that claims a page locks the
//! records it claims (`FOR NO KEY UPDATE SKIP LOCKED`) and keeps only those still
//! pending, so it cannot race a tick that is marking the same record: it either skips
//! the row or sees its new status. Leases are measured on the database's clock
//! (`now()`), never a runner's, so runners with skewed clocks agree on when a claim
//! ran out.
//!
//! Ids and statuses are bound as text and cast to the column's own type in the SQL
//! (`$1::text[]::uuid[]`): a cast on the parameter keeps the comparison with the bare
//! column, so primary-key and index lookups stay lookups, for any id type.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, SecondsFormat, Utc};
use postgres::types::{IsNull, ToSql, Type, to_sql_checked};
use postgres::{Client, NoTls, Statement};
use serde_json::Value;

use super::{
    BandQuery, Cursor, Heartbeat, Mark, Page, QueryPlan, Range, RunEnd, RunRow, RunStart, Store,
    StoreError, check_version, group_marks, index_name, not_ours, quote,
};
use crate::config::{PostgresUrl, TableConfig};
use crate::record::{Record, Scalar, Statuses};
use crate::timestamp::{self, FormatSetting, Sample, TimestampFormat};

/// The tool's own tables, in the schema `{s}` (already quoted).
const OWN_TABLES: &str = "
CREATE SCHEMA IF NOT EXISTS {s};
CREATE TABLE IF NOT EXISTS {s}.backlog_meta (key text PRIMARY KEY, value text NOT NULL);
INSERT INTO {s}.backlog_meta (key, value) VALUES ('schema_version', '3') ON CONFLICT DO NOTHING;
CREATE TABLE IF NOT EXISTS {s}.backlog_runs (
    id bigserial PRIMARY KEY,
    table_name text NOT NULL,
    window_secs bigint NOT NULL,
    tier integer,
    band_from_secs bigint NOT NULL,
    band_to_secs bigint NOT NULL,
    bands text NOT NULL,
    clock timestamptz NOT NULL,
    started_at timestamptz NOT NULL,
    heartbeat_at timestamptz,
    finished_at timestamptz,
    selected bigint NOT NULL DEFAULT 0,
    succeeded bigint NOT NULL DEFAULT 0,
    failed bigint NOT NULL DEFAULT 0,
    skipped bigint NOT NULL DEFAULT 0,
    lost bigint NOT NULL DEFAULT 0,
    outcome text NOT NULL,
    error text,
    owner text NOT NULL
);
CREATE INDEX IF NOT EXISTS backlog_runs_by_window ON {s}.backlog_runs (table_name, window_secs, id);
CREATE TABLE IF NOT EXISTS {s}.backlog_claims (
    table_name text NOT NULL,
    record_id text NOT NULL,
    owner text NOT NULL,
    claimed_at timestamptz NOT NULL,
    expires_at timestamptz NOT NULL,
    PRIMARY KEY (table_name, record_id)
);
CREATE INDEX IF NOT EXISTS backlog_claims_by_owner ON {s}.backlog_claims (owner);
";

/// The version of the tables above; a release that changes them adds a migration to
/// `ensure_own_tables`. Version 1 had no `lost` count in the run log; version 2 no
/// `backlog_attempts` and no `backlog_pauses`.
const SCHEMA_VERSION: i64 = 3;

/// The shared tables (attempts, pauses), as PostgreSQL writes them in schema `s`
/// (quoted).
fn shared_tables(s: &str) -> String {
    format!("{}{}", super::attempts::DDL, super::pauses::DDL)
        .replace("{s}", &format!("{s}."))
        .replace("{id}", "bigserial PRIMARY KEY")
}

/// The owner of a claim kept on a record that failed, until the schedule's next try of
/// it: no runner takes it before then (see `Mark::keep_until`), and no tick's
/// `release` or heartbeat touches it. Such a claim's `claimed_at` is that next try by
/// the clock of the tick that failed it, and its `expires_at` the same wait on the
/// database's clock: a tick takes the record once its own clock reaches the first, or
/// the database's the second (so a tick run with a pinned clock, `--now`, keeps
/// nothing from the real ticks for long).
const TRIED: &str = "backlog: failed in this slot";

/// The key of the advisory lock that serialises the creation of the tool's tables, so
/// that eight runners starting at once on a new database do not race their DDL.
const OWN_TABLES_LOCK: i64 = 0x0062_6163_6b6c_6f67; // "backlog" in ASCII

/// A PostgreSQL error as one line: the server's message (and hint), or what happened
/// to the connection. Never the URL, which may hold a password.
pub(super) fn describe_error(e: &postgres::Error) -> String {
    if let Some(db) = e.as_db_error() {
        let mut s = db.message().to_string();
        if let Some(detail) = db.detail() {
            s.push_str(&format!(" ({detail})"));
        }
        if let Some(hint) = db.hint() {
            s.push_str(&format!("; {hint}"));
        }
        return s;
    }
    if e.is_closed() {
        return "the connection to the server was lost".into();
    }
    crate::causes::chain(e)
}

fn pg(context: impl Into<String>) -> impl FnOnce(postgres::Error) -> StoreError {
    let context = context.into();
    move |e| StoreError::Database {
        context,
        source: describe_error(&e).into(),
    }
}

/// Why a connection could not be made, with what to check.
fn connect_error(e: &postgres::Error) -> StoreError {
    use postgres::error::SqlState;
    let io = {
        let mut source = std::error::Error::source(e);
        let mut found = None;
        while let Some(cause) = source {
            if let Some(io) = cause.downcast_ref::<std::io::Error>() {
                found = Some(io.kind());
            }
            source = cause.source();
        }
        found
    };
    let reason = match (e.code(), io) {
        (Some(c), _) if *c == SqlState::INVALID_PASSWORD => format!(
            "{} (check the password: in the URL, database.password_file or PGPASSWORD)",
            describe_error(e)
        ),
        (Some(c), _) if *c == SqlState::INVALID_AUTHORIZATION_SPECIFICATION => format!(
            "{} (the server's pg_hba.conf does not let this user in from this host)",
            describe_error(e)
        ),
        (_, Some(std::io::ErrorKind::ConnectionRefused)) => {
            "connection refused (is the server running, and listening on that host and port?)"
                .to_string()
        }
        (_, Some(std::io::ErrorKind::TimedOut)) => {
            "the server did not answer in time (check the host, the port and the firewall)"
                .to_string()
        }
        _ if e.to_string() == "timeout waiting for server" => {
            "the server did not answer in time (check the host, the port and the firewall)"
                .to_string()
        }
        _ if describe_error(e).ends_with("password missing") => {
            "the server asks for a password and none was given (put it in database.password_file, PGPASSWORD or the URL)".to_string()
        }
        _ => describe_error(e),
    };
    StoreError::Connect { reason }
}

/// Server certificates are not checked: `sslmode=require` means an encrypted
/// connection, as libpq reads it, not a verified server (libpq's `verify-full`).
#[derive(Debug)]
struct EncryptOnly(Arc<rustls::crypto::CryptoProvider>);

impl rustls::client::danger::ServerCertVerifier for EncryptOnly {
    fn verify_server_cert(
        &self,
        _end_entity: &rustls::pki_types::CertificateDer<'_>,
        _intermediates: &[rustls::pki_types::CertificateDer<'_>],
        _server_name: &rustls::pki_types::ServerName<'_>,
        _ocsp_response: &[u8],
        _now: rustls::pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        Ok(rustls::client::danger::ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &rustls::pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &rustls::pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// `verify-ca`: the certificate must chain to the roots; the name in it is not checked.
#[derive(Debug)]
struct AnyName(Arc<rustls::client::WebPkiServerVerifier>);

impl rustls::client::danger::ServerCertVerifier for AnyName {
    fn verify_server_cert(
        &self,
        end_entity: &rustls::pki_types::CertificateDer<'_>,
        intermediates: &[rustls::pki_types::CertificateDer<'_>],
        server_name: &rustls::pki_types::ServerName<'_>,
        ocsp_response: &[u8],
        now: rustls::pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        use rustls::{CertificateError, Error};
        match self
            .0
            .verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
        {
            Err(Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(rustls::client::danger::ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &rustls::pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &rustls::pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

/// The TLS settings of a connection: libpq's `require` (encrypted, certificate not
/// checked), or `verify-ca` / `verify-full` against the roots of `sslrootcert`.
fn tls_config(url: &PostgresUrl) -> Result<rustls::ClientConfig, String> {
    use rustls::pki_types::{CertificateDer, pem::PemObject};
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(Arc::clone(&provider))
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("cannot set up TLS: {e}"))?
        .dangerous();
    let Some(verify) = &url.verify else {
        return Ok(builder
            .with_custom_certificate_verifier(Arc::new(EncryptOnly(provider)))
            .with_no_client_auth());
    };
    let file = verify.root_cert.display();
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_file_iter(&verify.root_cert)
        .map_err(|e| format!("cannot read sslrootcert {file}: {e}"))?
    {
        let cert = cert.map_err(|e| format!("sslrootcert {file} is not PEM certificates: {e}"))?;
        roots
            .add(cert)
            .map_err(|e| format!("sslrootcert {file}: {e}"))?;
    }
    if roots.is_empty() {
        return Err(format!("sslrootcert {file} holds no certificate"));
    }
    let full =
        rustls::client::WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider)
            .build()
            .map_err(|e| format!("sslrootcert {file}: {e}"))?;
    Ok(if verify.check_name {
        builder.with_custom_certificate_verifier(full)
    } else {
        builder.with_custom_certificate_verifier(Arc::new(AnyName(full)))
    }
    .with_no_client_auth())
}

/// Opens a connection, with TLS unless the URL says `sslmode=disable` (the default,
/// `prefer`, uses TLS when the server offers it, as libpq does).
fn connect(url: &PostgresUrl) -> Result<Client, StoreError> {
    let result = if url.config.get_ssl_mode() == postgres::config::SslMode::Disable {
        url.config.connect(NoTls)
    } else {
        let tls = tls_config(url).map_err(|reason| StoreError::Connect { reason })?;
        url.config
            .connect(tokio_postgres_rustls::MakeRustlsConnect::new(tls))
    };
    let mut client = result.map_err(|e| connect_error(&e))?;
    // Handlers read timestamptz columns in UTC, whatever zone the server is set to.
    client
        .batch_execute("SET TimeZone = 'UTC'")
        .map_err(pg("setting the session's time zone"))?;
    Ok(client)
}

/// A bound for the inserted-at column, converted to the column's own type.
#[derive(Debug)]
struct Bound<'a>(&'a Scalar);

impl ToSql for Bound<'_> {
    fn to_sql(
        &self,
        ty: &Type,
        out: &mut bytes::BytesMut,
    ) -> Result<IsNull, Box<dyn std::error::Error + Sync + Send>> {
        match (self.0, ty) {
            (Scalar::Int(i), &Type::INT8) => i.to_sql(ty, out),
            (Scalar::Int(i), &Type::INT4) => i32::try_from(*i)?.to_sql(ty, out),
            (Scalar::Int(i), &Type::INT2) => i16::try_from(*i)?.to_sql(ty, out),
            (Scalar::Time(t), &Type::TIMESTAMPTZ) => t.to_sql(ty, out),
            (Scalar::Naive(t), &Type::TIMESTAMP) => t.to_sql(ty, out),
            (Scalar::Text(s), _) => s.as_str().to_sql(ty, out),
            (other, ty) => Err(format!("cannot bind {other} as {ty}").into()),
        }
    }

    fn accepts(_: &Type) -> bool {
        true
    }

    to_sql_checked!();
}

/// What the tick needs to know about one of the table's key columns.
#[derive(Debug, Clone)]
struct Column {
    /// Quoted, as it goes into SQL.
    quoted: String,
    /// `format_type()` of the column: `bigint`, `uuid`, `character varying(20)`…
    sql_type: String,
}

/// The names, types and prepared statements of a table, settled by `inspect`.
struct Prepared {
    table: String,
    id: Column,
    status: Column,
    inserted_at: String,
    /// The column holds an integer type: ids are read back as numbers.
    int_id: bool,
    /// `bytea` columns, whose JSON (`\\x00ff`) is rewritten as base64, as on SQLite.
    bytea: Vec<String>,
    first_page: [Statement; 2],
    next_page: Statement,
    /// Locks a group's rows before its marks read the claims (see `mark`).
    lock_rows: Statement,
    /// The statements that use the tool's own tables (claim, unclaim, and the status
    /// update, which writes only where this tick claims), prepared once
    /// `ensure_own_tables` made sure they exist (a dry run or `doctor` never creates them).
    claim_sql: String,
    unclaim_sql: String,
    set_status_sql: String,
    claim: Option<(Statement, Statement, Statement)>,
    /// The SQL of the first page (exclusive end), for `band_plan`.
    first_page_sql: String,
}

/// A backlog table on a PostgreSQL server, with the tool's tables in a schema of their
/// own. A tick claims each record it holds (`backlog_claims`), so runners on many hosts
/// can share one band.
pub struct PostgresStore {
    client: Client,
    url: PostgresUrl,
    /// The tool's own schema, quoted.
    schema: String,
    table: TableConfig,
    format: Option<TimestampFormat>,
    since_format: Option<TimestampFormat>,
    prepared: Option<Prepared>,
    /// How many attempts a record keeps (`history.max_per_record`, from `begin_run`).
    max_per_record: u32,
}

impl PostgresStore {
    /// Connects to the server; `schema` names where the tool's own tables go.
    pub fn open(url: &PostgresUrl, schema: &str, table: TableConfig) -> Result<Self, StoreError> {
        let client = connect(url)?;
        Ok(PostgresStore {
            client,
            url: url.clone(),
            schema: quote(schema),
            table,
            format: None,
            since_format: None,
            prepared: None,
            max_per_record: crate::config::HistoryConfig::default().max_per_record,
        })
    }

    fn prepared(&self) -> &Prepared {
        self.prepared
            .as_ref()
            .expect("inspect() runs before any query")
    }

    /// The claim, unclaim and status statements (after `ensure_own_tables`).
    fn claims(&self) -> (Statement, Statement, Statement) {
        self.prepared()
            .claim
            .clone()
            .expect("ensure_own_tables() runs before any claim")
    }

    fn format(&self) -> TimestampFormat {
        self.format.expect("inspect() runs before any query")
    }

    /// Claims each record for `owner` until `lease_until` if it is still pending and no
    /// live claim holds it; returns the ids (as text) now this owner's.
    fn claim(
        &mut self,
        owner: &str,
        ids: &[Scalar],
        lease_until: DateTime<Utc>,
        band: &BandQuery,
    ) -> Result<std::collections::HashSet<String>, StoreError> {
        let (claim, _, _) = self.claims();
        let rows = self
            .client
            .query(
                &claim,
                &[
                    &ids_text(ids),
                    &self.table.pending,
                    &self.table.name,
                    &owner,
                    &lease_secs(lease_until),
                    &band.take_tried,
                    &TRIED,
                    &band.clock,
                ],
            )
            .map_err(pg("claiming records"))?;
        Ok(rows.iter().map(|r| r.get(0)).collect())
    }

    fn own_table(&self, table: &str) -> String {
        format!("{}.{table}", self.schema)
    }

    /// Finds the table (`name` or `schema.name`) on the search path, exactly or else
    /// case-insensitively, and returns its oid and quoted qualified name.
    fn resolve_table(&mut self) -> Result<(u32, String), StoreError> {
        let (schema, name) = match self.table.name.split_once('.') {
            Some((s, n)) => (Some(s.to_string()), n.to_string()),
            None => (None, self.table.name.clone()),
        };
        let row = self
            .client
            .query_opt(
                "SELECT c.oid, n.nspname::text, c.relname::text, c.relkind::text
                 FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
                 WHERE c.relkind IN ('r', 'p', 'v', 'm', 'f') AND lower(c.relname) = lower($1)
                   AND CASE WHEN $2::text IS NULL THEN n.nspname = ANY (current_schemas(false))
                            ELSE lower(n.nspname) = lower($2) END
                 ORDER BY c.relname = $1 DESC, n.nspname = $2 DESC,
                          array_position(current_schemas(false), n.nspname::text)
                 LIMIT 1",
                &[&name, &schema],
            )
            .map_err(pg("reading the schema"))?;
        if let Some(row) = row {
            let oid: u32 = row.get(0);
            let (nsp, rel): (String, String) = (row.get(1), row.get(2));
            // A foreign table takes UPDATEs where its wrapper does (postgres_fdw).
            let kind = match row.get::<_, String>(3).as_str() {
                "v" => Some("view"),
                "m" => Some("materialized view"),
                _ => None,
            };
            if let Some(kind) = kind {
                return Err(StoreError::NotATable { table: rel, kind });
            }
            return Ok((oid, format!("{}.{}", quote(&nsp), quote(&rel))));
        }
        let available = self
            .client
            .query(
                "SELECT CASE WHEN n.nspname = 'public' THEN c.relname::text ELSE n.nspname || '.' || c.relname END
                 FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
                 WHERE c.relkind IN ('r', 'p', 'v', 'm', 'f')
                   AND n.nspname = ANY (current_schemas(false)) ORDER BY 1",
                &[],
            )
            .map_err(pg("reading the schema"))?
            .iter()
            .map(|r| r.get(0))
            .collect();
        Err(StoreError::NoTable {
            table: self.table.name.clone(),
            available,
        })
    }

    /// The table's columns: name, `format_type()` and type category.
    fn columns(&mut self, oid: u32) -> Result<Vec<(String, String, String)>, StoreError> {
        Ok(self
            .client
            .query(
                "SELECT a.attname::text, format_type(a.atttypid, a.atttypmod), t.typcategory::text
                 FROM pg_attribute a JOIN pg_type t ON t.oid = a.atttypid
                 WHERE a.attrelid = $1 AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum",
                &[&oid],
            )
            .map_err(pg("reading the schema"))?
            .iter()
            .map(|r| (r.get(0), r.get(1), r.get(2)))
            .collect())
    }

    /// Reads the newest and oldest values of a text or integer column, for detection.
    fn samples(
        &mut self,
        table: &str,
        column: &str,
        integer: bool,
    ) -> Result<Vec<Sample>, StoreError> {
        let c = quote(column);
        let value = if integer {
            format!("{c}::int8")
        } else {
            format!("{c}::text")
        };
        let mut samples = Vec::new();
        for order in ["DESC", "ASC"] {
            let sql = format!(
                "SELECT {value} FROM {table} WHERE {c} IS NOT NULL ORDER BY {c} {order} LIMIT 1"
            );
            let row = self
                .client
                .query_opt(&sql, &[])
                .map_err(pg(format!("reading {column} of {}", self.table.name)))?;
            samples.extend(row.map(|r| {
                if integer {
                    Sample::Int(r.get(0))
                } else {
                    Sample::Text(r.get(0))
                }
            }));
        }
        Ok(samples)
    }

    /// Decides the format of a timestamp column from its type and, for text and
    /// integer columns, its values; a column with no value yet takes `empty` if given.
    fn column_format(
        &mut self,
        table: &str,
        (name, sql_type, category): &(String, String, String),
        setting: FormatSetting,
        empty: Option<TimestampFormat>,
    ) -> Result<TimestampFormat, StoreError> {
        let table_name = self.table.name.clone();
        let problem = |problem: String| StoreError::Timestamps {
            table: table_name.clone(),
            column: name.clone(),
            problem,
        };
        let native = match sql_type.as_str() {
            "timestamp with time zone" => Some(TimestampFormat::Timestamptz),
            "timestamp without time zone" => Some(TimestampFormat::Timestamp(
                self.table.inserted_at_timezone.unwrap_or(chrono_tz::UTC),
            )),
            _ => None,
        };
        match (native, setting) {
            (Some(f), FormatSetting::Auto | FormatSetting::Native) => return Ok(f),
            (Some(_), other) => {
                return Err(problem(format!(
                    "is of type {sql_type}, not {other:?} values; set table.inserted_at_format = \"native\" (or \"auto\")"
                )));
            }
            (None, _) => {}
        }
        let integer = matches!(sql_type.as_str(), "bigint" | "integer" | "smallint");
        if !integer && category != "S" {
            return Err(problem(format!(
                "is of type {sql_type}; backlog reads timestamptz, timestamp, integer unix seconds or milliseconds, or text timestamps"
            )));
        }
        let samples = self.samples(table, name, integer)?;
        match empty {
            Some(f) if samples.is_empty() => Ok(f),
            _ => timestamp::detect(setting, &samples).map_err(problem),
        }
    }

    fn prepare(
        &mut self,
        table: String,
        id: Column,
        status: Column,
        inserted_at: String,
        int_id: bool,
        bytea: Vec<String>,
    ) -> Result<Prepared, StoreError> {
        let ins = &inserted_at;
        let (idq, idt) = (&id.quoted, &id.sql_type);
        let (st, stt) = (&status.quoted, &status.sql_type);
        // $1 from, $2 to, $3 pending statuses, $4 limit, $5 the cursor's id.
        let select = select_records(&table, idq, st, ins, self.format());
        let pending = format!("t.{st} = ANY ($3::text[]::{stt}[])");
        let order = format!("ORDER BY t.{ins} DESC, t.{idq} DESC LIMIT $4");
        let first = |op: &str| {
            format!("{select} WHERE t.{ins} >= $1 AND t.{ins} {op} $2 AND {pending} {order}")
        };
        let first_page_sql = first("<");
        let next_page_sql = format!(
            "{select} WHERE t.{ins} >= $1 AND t.{ins} <= $2 AND (t.{ins}, t.{idq}) < ($2, $5::text::{idt}) AND {pending} {order}"
        );
        let claims = self.own_table("backlog_claims");
        // $1 ids, $2 pending statuses, $3 table name, $4 owner, $5 lease in seconds, $6
        // whether to take records kept after a failure in this slot, $7 their owner, $8
        // the tick's clock (a kept failure's expiry is the end of its slot by that clock).
        let claim_sql = format!(
            "WITH pending AS (
                SELECT t.{idq}::text AS id FROM {table} t
                WHERE t.{idq} = ANY ($1::text[]::{idt}[]) AND t.{st} = ANY ($2::text[]::{stt}[])
                FOR NO KEY UPDATE OF t SKIP LOCKED
             )
             INSERT INTO {claims} AS c (table_name, record_id, owner, claimed_at, expires_at)
             SELECT $3, id, $4, now(), now() + make_interval(secs => $5) FROM pending
             ON CONFLICT (table_name, record_id) DO UPDATE SET owner = excluded.owner,
                 claimed_at = excluded.claimed_at, expires_at = excluded.expires_at
             WHERE (c.owner <> $7 AND c.expires_at < excluded.claimed_at)
                OR (c.owner = $7 AND ($6 OR c.claimed_at <= $8 OR c.expires_at < excluded.claimed_at))
             RETURNING record_id"
        );
        // $1 status, $2 ids, $3 table name, $4 owner, then $5 the `[retry]` time: only
        // the records this owner still claims are written (see `Store::mark`).
        let held = format!(
            "FROM {claims} c WHERE t.{idq} = ANY ($2::text[]::{idt}[]) AND c.table_name = $3 AND c.owner = $4 AND c.record_id = t.{idq}::text RETURNING c.record_id"
        );
        let set_status_sql = match &self.table.retry {
            // The attempt count and time go with the status, in the same statement.
            Some(r) => format!(
                "UPDATE {table} t SET {st} = $1::text::{stt}, {count} = coalesce(t.{count}, 0) + 1, {since} = $5 {held}",
                count = quote(&r.count),
                since = quote(&r.since)
            ),
            None => format!("UPDATE {table} t SET {st} = $1::text::{stt} {held}"),
        };
        let unclaim_sql = format!(
            "DELETE FROM {claims} WHERE table_name = $1 AND owner = $2 AND record_id = ANY ($3)"
        );
        let lock_rows_sql = format!(
            "SELECT 1 FROM {table} t WHERE t.{idq} = ANY ($1::text[]::{idt}[]) FOR NO KEY UPDATE OF t"
        );
        let context = format!("preparing the queries on {}", self.table.name);
        let mut prepare = |sql: &str| self.client.prepare(sql).map_err(pg(context.clone()));
        Ok(Prepared {
            first_page: [prepare(&first_page_sql)?, prepare(&first("<="))?],
            next_page: prepare(&next_page_sql)?,
            lock_rows: prepare(&lock_rows_sql)?,
            claim_sql,
            unclaim_sql,
            set_status_sql,
            claim: None,
            first_page_sql,
            table,
            id,
            status,
            inserted_at,
            int_id,
            bytea,
        })
    }

    /// Reads rows of `SELECT row_to_json(t)::text, id::text, status::text, inserted_at`.
    fn records(&self, rows: &[postgres::Row]) -> Result<Vec<Record>, StoreError> {
        let format = self.format();
        let int_id = self.prepared().int_id;
        let bytea = &self.prepared().bytea;
        let mut statuses = Statuses::default();
        rows.iter()
            .map(|row| {
                let json: String = row.get(0);
                let mut columns = match serde_json::from_str(&json) {
                    Ok(Value::Object(map)) => map,
                    _ => {
                        return Err(StoreError::Schema(format!(
                            "row_to_json of {} gave no JSON object",
                            self.table.name
                        )));
                    }
                };
                for name in bytea {
                    if let Some(Value::String(hex)) = columns.get_mut(name)
                        && let Some(b64) = base64_of_hex(hex)
                    {
                        *hex = b64;
                    }
                }
                let id: String = row.get(1);
                let inserted_at = match format {
                    TimestampFormat::UnixSeconds | TimestampFormat::UnixMillis => {
                        Scalar::Int(row.get(3))
                    }
                    TimestampFormat::Text(_) => Scalar::Text(row.get(3)),
                    TimestampFormat::Timestamptz => Scalar::Time(row.get(3)),
                    TimestampFormat::Timestamp(_) => Scalar::Naive(row.get(3)),
                };
                let inserted_time = format.decode(&inserted_at);
                Ok(Record::new(
                    match id.parse() {
                        Ok(n) if int_id => Scalar::Int(n),
                        _ => Scalar::Text(id),
                    },
                    statuses.get(row.get::<_, &str>(2).as_bytes()),
                    inserted_at,
                    inserted_time,
                    columns.into(),
                ))
            })
            .collect()
    }

    /// Runs a query of the `records` shape built from the table's select list.
    fn query_records(
        &mut self,
        where_order: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Vec<Record>, StoreError> {
        let p = self.prepared();
        let sql = format!(
            "{} {where_order}",
            select_records(
                &p.table,
                &p.id.quoted,
                &p.status.quoted,
                &p.inserted_at,
                self.format()
            )
        );
        let rows = self
            .client
            .query(&sql, params)
            .map_err(pg(format!("selecting from {}", self.table.name)))?;
        self.records(&rows)
    }

    fn has_run_log(&mut self) -> Result<bool, StoreError> {
        let runs = format!("{}.backlog_runs", self.schema);
        let row = self
            .client
            .query_one("SELECT to_regclass($1) IS NOT NULL", &[&runs])
            .map_err(pg("reading the run log"))?;
        Ok(row.get(0))
    }

    fn run_row(row: &postgres::Row) -> RunRow {
        let stamp =
            |t: Option<DateTime<Utc>>| t.map(|t| t.to_rfc3339_opts(SecondsFormat::Millis, true));
        RunRow {
            run_id: row.get(0),
            window_secs: row.get::<_, i64>(1) as u64,
            clock: row.get(2),
            started_at: stamp(row.get(3)).unwrap_or_default(),
            finished_at: stamp(row.get(4)),
            selected: row.get::<_, i64>(5) as u64,
            succeeded: row.get::<_, i64>(6) as u64,
            failed: row.get::<_, i64>(7) as u64,
            skipped: row.get::<_, i64>(8) as u64,
            outcome: row.get(9),
            error: row.get(10),
        }
    }
}

/// The select list `records` reads, on the table aliased `t`: the row as JSON, the id
/// and status as text, and the inserted-at value in the type `format` decodes.
fn select_records(
    table: &str,
    id: &str,
    status: &str,
    ins: &str,
    format: TimestampFormat,
) -> String {
    let read_ins = match format {
        TimestampFormat::UnixSeconds | TimestampFormat::UnixMillis => format!("t.{ins}::int8"),
        TimestampFormat::Text(_) => format!("t.{ins}::text"),
        TimestampFormat::Timestamptz | TimestampFormat::Timestamp(_) => format!("t.{ins}"),
    };
    format!(
        "SELECT row_to_json(t)::text, t.{id}::text, t.{status}::text, {read_ins} FROM {table} t"
    )
}

/// PostgreSQL's hex form of bytes (`\x00ff10`) as base64 (`AP8Q`); none for text
/// that is not whole hex pairs, which is then left as it is rather than losing bytes.
fn base64_of_hex(hex: &str) -> Option<String> {
    use base64::Engine as _;
    let digits = hex.strip_prefix("\\x")?.as_bytes();
    if digits.len() % 2 != 0 {
        return None;
    }
    let bytes = digits
        .chunks(2)
        .map(|pair| u8::from_str_radix(std::str::from_utf8(pair).ok()?, 16).ok())
        .collect::<Option<Vec<u8>>>()?;
    Some(base64::engine::general_purpose::STANDARD.encode(bytes))
}

/// Seconds from now to `until`, for a lease measured on the database's clock.
fn lease_secs(until: DateTime<Utc>) -> f64 {
    (until - Utc::now()).as_seconds_f64().max(1.0)
}

/// Ids as the text the SQL casts to the id column's type.
fn ids_text<'a>(ids: impl IntoIterator<Item = &'a Scalar>) -> Vec<String> {
    ids.into_iter().map(ToString::to_string).collect()
}

impl Store for PostgresStore {
    fn describe(&self) -> String {
        self.url.shown.clone()
    }

    fn inspect(&mut self) -> Result<TimestampFormat, StoreError> {
        let (oid, table) = self.resolve_table()?;
        let columns = self.columns(oid)?;
        let names: Vec<String> = columns.iter().map(|c| c.0.clone()).collect();
        let find = |key: &'static str, wanted: &str| {
            columns
                .iter()
                .find(|c| c.0 == wanted)
                .or_else(|| columns.iter().find(|c| c.0.eq_ignore_ascii_case(wanted)))
                .cloned()
                .ok_or_else(|| StoreError::NoColumn {
                    table: self.table.name.clone(),
                    column: wanted.to_string(),
                    key,
                    available: names.clone(),
                })
        };
        let id = find("table.id", &self.table.id)?;
        let status = find("table.status", &self.table.status)?;
        let inserted_at = find("table.inserted_at", &self.table.inserted_at)?;
        let retry = match &self.table.retry {
            Some(r) => Some((
                find("retry.count", &r.count)?,
                find("retry.since", &r.since)?,
            )),
            None => None,
        };
        if self.table.inserted_at_timezone.is_some()
            && inserted_at.1 != "timestamp without time zone"
        {
            return Err(StoreError::Timestamps {
                table: self.table.name.clone(),
                column: inserted_at.0.clone(),
                problem: format!(
                    "is of type {}; table.inserted_at_timezone applies to a timestamp without time zone column only",
                    inserted_at.1
                ),
            });
        }
        let format =
            self.column_format(&table, &inserted_at, self.table.inserted_at_format, None)?;
        if let Some((_, since)) = &retry {
            // An empty text or integer column takes the inserted-at column's format.
            self.since_format =
                Some(self.column_format(&table, since, FormatSetting::Auto, Some(format))?);
        }
        self.format = Some(format);
        let int_id = matches!(id.1.as_str(), "bigint" | "integer" | "smallint");
        let prepared = self.prepare(
            table,
            Column {
                quoted: quote(&id.0),
                sql_type: id.1,
            },
            Column {
                quoted: quote(&status.0),
                sql_type: status.1,
            },
            quote(&inserted_at.0),
            int_id,
            columns
                .iter()
                .filter(|c| c.1 == "bytea")
                .map(|c| c.0.clone())
                .collect(),
        )?;
        self.prepared = Some(prepared);
        Ok(format)
    }

    fn ensure_own_tables(&mut self) -> Result<(), StoreError> {
        let context = "creating the tool's own tables";
        let [meta, runs, claims] =
            ["backlog_meta", "backlog_runs", "backlog_claims"].map(|t| self.own_table(t));
        // The version, or none while any of the three tables is missing.
        let version = |tx: &mut postgres::Transaction<'_>| -> Result<Option<String>, StoreError> {
            let exists: bool = tx
                .query_one(
                    "SELECT to_regclass($1) IS NOT NULL AND to_regclass($2) IS NOT NULL AND to_regclass($3) IS NOT NULL",
                    &[&meta, &runs, &claims],
                )
                .map_err(pg(context))?
                .get(0);
            if !exists {
                return Ok(None);
            }
            Ok(tx
                .query_opt(
                    &format!("SELECT value FROM {meta} WHERE key = 'schema_version'"),
                    &[],
                )
                .map_err(pg(context))?
                .map(|r| r.get(0)))
        };
        let mut tx = self.client.transaction().map_err(pg(context))?;
        let schema = self.schema.trim_matches('"').replace("\"\"", "\"");
        not_ours(
            &[
                "backlog_meta",
                "backlog_runs",
                "backlog_claims",
                "backlog_attempts",
                "backlog_pauses",
            ],
            &mut |table| {
                let rows = tx
                    .query(
                        "SELECT column_name::text FROM information_schema.columns WHERE table_schema = $1 AND table_name = $2",
                        &[&schema, &table],
                    )
                    .map_err(pg(context))?;
                Ok((!rows.is_empty()).then(|| rows.iter().map(|r| r.get(0)).collect()))
            },
            &format!(
                "rename that table, or give the tool a schema of its own with database.schema (now {schema:?})"
            ),
        )?;
        // Tables made by an administrator (or an earlier run) need no DDL, so a runner
        // may work without the right to create anything.
        let mut found = version(&mut tx)?;
        if found.is_none() {
            tx.execute("SELECT pg_advisory_xact_lock($1)", &[&OWN_TABLES_LOCK])
                .map_err(pg(context))?;
            tx.batch_execute(&OWN_TABLES.replace("{s}", &self.schema))
                .map_err(pg(context))?;
            tx.batch_execute(&shared_tables(&self.schema))
                .map_err(pg(context))?;
            found = version(&mut tx)?;
        }
        if found.as_deref() == Some("1") {
            // DDL once, by the first runner of this release; the others wait for it.
            tx.execute("SELECT pg_advisory_xact_lock($1)", &[&OWN_TABLES_LOCK])
                .map_err(pg(context))?;
            if version(&mut tx)?.as_deref() == Some("1") {
                tx.batch_execute(&format!(
                    "ALTER TABLE {runs} ADD COLUMN IF NOT EXISTS lost bigint NOT NULL DEFAULT 0;
                     UPDATE {meta} SET value = '2' WHERE key = 'schema_version';"
                ))
                .map_err(pg("moving the tool's tables to version 2 (this needs the right to alter them: run one tick as their owner)"))?;
            }
            found = version(&mut tx)?;
        }
        if found.as_deref() == Some("2") {
            tx.execute("SELECT pg_advisory_xact_lock($1)", &[&OWN_TABLES_LOCK])
                .map_err(pg(context))?;
            if version(&mut tx)?.as_deref() == Some("2") {
                tx.batch_execute(&format!(
                    "{} UPDATE {meta} SET value = '3' WHERE key = 'schema_version';",
                    shared_tables(&self.schema)
                ))
                .map_err(pg("moving the tool's tables to version 3 (this needs the right to create tables in the tool's schema: run one tick as their owner)"))?;
            }
            found = version(&mut tx)?;
        }
        check_version(
            &found.unwrap_or_default(),
            SCHEMA_VERSION,
            &format!("schema {}", self.schema),
        )?;
        tx.commit().map_err(pg(context))?;
        let p = self
            .prepared
            .as_mut()
            .expect("inspect() runs before any query");
        if p.claim.is_none() {
            let context = "preparing the claim queries";
            p.claim = Some((
                self.client.prepare(&p.claim_sql).map_err(pg(context))?,
                self.client.prepare(&p.unclaim_sql).map_err(pg(context))?,
                self.client
                    .prepare(&p.set_status_sql)
                    .map_err(pg(context))?,
            ));
        }
        Ok(())
    }

    fn select(
        &mut self,
        band: &BandQuery,
        after: Option<&Cursor>,
        limit: usize,
    ) -> Result<Vec<Record>, StoreError> {
        let p = self
            .prepared
            .as_ref()
            .expect("inspect() runs before any query");
        let limit = limit as i64;
        let pending = &self.table.pending;
        let rows = match after {
            None => {
                let stmt = &p.first_page[usize::from(band.to_inclusive)];
                self.client.query(
                    stmt,
                    &[&Bound(&band.from), &Bound(&band.to), pending, &limit],
                )
            }
            Some(c) => self.client.query(
                &p.next_page,
                &[
                    &Bound(&band.from),
                    &Bound(&c.inserted_at),
                    pending,
                    &limit,
                    &c.id.to_string(),
                ],
            ),
        }
        .map_err(pg(format!("selecting from {}", self.table.name)))?;
        self.records(&rows)
    }

    fn take(
        &mut self,
        owner: &str,
        band: &BandQuery,
        after: Option<&Cursor>,
        limit: usize,
        lease_until: DateTime<Utc>,
        wanted: &dyn Fn(&Record) -> bool,
    ) -> Result<Page, StoreError> {
        // Runners on several hosts share a band, so each record is claimed on its own:
        // one statement for the wanted records of the page (see `claim_sql`).
        let read = self.select(band, after, limit)?;
        let ids: Vec<Scalar> = read
            .iter()
            .filter(|r| wanted(r))
            .map(|r| r.id.clone())
            .collect();
        let ours = if ids.is_empty() {
            std::collections::HashSet::new()
        } else {
            self.claim(owner, &ids, lease_until, band)?
        };
        Ok(Page::sorted(
            read,
            |_, r| ours.contains(&r.id.to_string()),
            wanted,
        ))
    }

    fn mark(&mut self, owner: &str, marks: &[Mark]) -> Result<Vec<usize>, StoreError> {
        // One UPDATE per distinct status (usually two: success and error), each writing
        // only the records this owner still claims, and one DELETE for the group's
        // claims, in one transaction.
        let groups = group_marks(marks, self.since_format);
        let context = format!("writing statuses to {}", self.table.name);
        let (_, unclaim, set_status) = self.claims();
        let claims = self.own_table("backlog_claims");
        let lock_rows = self.prepared().lock_rows.clone();
        let all = ids_text(marks.iter().map(|m| &m.id));
        let mut tx = self.client.transaction().map_err(pg(context.clone()))?;
        // The rows first, then the claims: a runner that claims a record locks its row
        // before it writes the claim, so once the rows are ours the claims read below
        // (a new snapshot) show any takeover, and none can happen until we commit.
        tx.query(&lock_rows, &[&all]).map_err(pg(context.clone()))?;
        let mut written = std::collections::HashSet::with_capacity(marks.len());
        for ((status, since), ids) in &groups {
            let ids = ids_text(ids.iter().copied());
            let name = &self.table.name;
            let rows = match since {
                Some(since) => tx.query(&set_status, &[status, &ids, name, &owner, &Bound(since)]),
                None => tx.query(&set_status, &[status, &ids, name, &owner]),
            }
            .map_err(pg(context.clone()))?;
            written.extend(rows.iter().map(|r| r.get::<_, String>(0)));
        }
        // Failures keep their claim, under another owner, until the end of their slot.
        let kept: Vec<(&Mark, String)> = marks
            .iter()
            .filter_map(|m| m.keep_until.map(|_| (m, m.id.to_string())))
            .filter(|(_, id)| written.contains(id))
            .collect();
        if !kept.is_empty() {
            let ids: Vec<&String> = kept.iter().map(|(_, id)| id).collect();
            let until: Vec<DateTime<Utc>> = kept
                .iter()
                .map(|(m, _)| m.keep_until.expect("kept marks have a time"))
                .collect();
            let wait: Vec<f64> = kept
                .iter()
                .zip(&until)
                .map(|((m, _), u)| (*u - m.at).num_milliseconds() as f64 / 1000.0)
                .collect();
            tx.execute(
                &format!(
                    "UPDATE {claims} c SET owner = $4, claimed_at = k.until,
                         expires_at = now() + make_interval(secs => k.wait)
                     FROM unnest($3::text[], $5::timestamptz[], $6::float8[]) AS k(id, until, wait)
                     WHERE c.table_name = $1 AND c.owner = $2 AND c.record_id = k.id"
                ),
                &[&self.table.name, &owner, &ids, &TRIED, &until, &wait],
            )
            .map_err(pg(context.clone()))?;
        }
        tx.execute(&unclaim, &[&self.table.name, &owner, &all])
            .map_err(pg(context.clone()))?;
        let prefix = format!("{}.", self.schema);
        super::write_attempts(
            &mut tx,
            &prefix,
            &self.table.name,
            marks,
            &|i| !written.contains(&all[i]),
            self.max_per_record,
        )?;
        tx.commit().map_err(pg(context))?;
        Ok(all
            .iter()
            .enumerate()
            .filter(|(_, id)| !written.contains(*id))
            .map(|(i, _)| i)
            .collect())
    }

    fn release(&mut self, owner: &str) -> Result<(), StoreError> {
        let sql = format!(
            "DELETE FROM {} WHERE table_name = $1 AND owner = $2",
            self.own_table("backlog_claims")
        );
        self.client
            .execute(&sql, &[&self.table.name, &owner])
            .map_err(pg("releasing claims"))?;
        Ok(())
    }

    fn last_tick(&mut self, window: Duration) -> Result<Option<DateTime<Utc>>, StoreError> {
        if !self.has_run_log()? {
            return Ok(None);
        }
        let sql = format!(
            "SELECT clock FROM {} WHERE table_name = $1 AND window_secs = $2 AND outcome NOT IN ('failed', 'lapsed') ORDER BY id DESC LIMIT 1",
            self.own_table("backlog_runs")
        );
        Ok(self
            .client
            .query_opt(&sql, &[&self.table.name, &(window.as_secs() as i64)])
            .map_err(pg("reading the run log"))?
            .map(|r| r.get(0)))
    }

    fn count_by_status(&mut self, range: &Range) -> Result<Vec<(String, u64)>, StoreError> {
        let p = self.prepared();
        let mut clauses = vec!["true".to_string()];
        let mut bounds = Vec::new();
        if let Some(from) = &range.from {
            let op = if range.from_exclusive { ">" } else { ">=" };
            bounds.push(Bound(from));
            clauses.push(format!("{} {op} ${}", p.inserted_at, bounds.len()));
        }
        if let Some(to) = &range.to {
            let op = if range.to_inclusive { "<=" } else { "<" };
            bounds.push(Bound(to));
            clauses.push(format!("{} {op} ${}", p.inserted_at, bounds.len()));
        }
        let sql = match range.sample {
            None => format!(
                "SELECT {st}::text, count(*) FROM {t} WHERE {} GROUP BY 1 ORDER BY 1",
                clauses.join(" AND "),
                st = p.status.quoted,
                t = p.table
            ),
            Some(n) => format!(
                "SELECT s::text, count(*) FROM (SELECT {st} AS s FROM {t} WHERE {} LIMIT {n}) x GROUP BY 1 ORDER BY 1",
                clauses.join(" AND "),
                st = p.status.quoted,
                t = p.table
            ),
        };
        let params: Vec<&(dyn ToSql + Sync)> =
            bounds.iter().map(|b| b as &(dyn ToSql + Sync)).collect();
        Ok(self
            .client
            .query(&sql, &params)
            .map_err(pg(format!("counting the records of {}", self.table.name)))?
            .iter()
            .map(|r| {
                (
                    r.get::<_, Option<String>>(0).unwrap_or_default(),
                    r.get::<_, i64>(1) as u64,
                )
            })
            .collect())
    }

    fn oldest_of(
        &mut self,
        statuses: &[String],
        before: Option<DateTime<Utc>>,
        limit: usize,
    ) -> Result<Vec<Record>, StoreError> {
        let p = self.prepared();
        let before = before.map(|t| self.format().encode(t));
        let clause = format!(
            "WHERE t.{st} = ANY ($1::text[]::{stt}[]) AND t.{ins} IS NOT NULL {before} ORDER BY t.{ins} ASC LIMIT $2",
            st = p.status.quoted,
            stt = p.status.sql_type,
            ins = p.inserted_at,
            before = if before.is_some() {
                format!("AND t.{} < $3", p.inserted_at)
            } else {
                String::new()
            }
        );
        let statuses = statuses.to_vec();
        let limit = limit as i64;
        match &before {
            Some(b) => self.query_records(&clause, &[&statuses, &limit, &Bound(b)]),
            None => self.query_records(&clause, &[&statuses, &limit]),
        }
    }

    fn find(&mut self, id: &str) -> Result<Option<Record>, StoreError> {
        let p = self.prepared();
        // Text that is no id of the column's type (`abc` for a bigint) is no record;
        // the server would refuse the cast.
        let fits = match p.id.sql_type.as_str() {
            "bigint" => id.parse::<i64>().is_ok(),
            "integer" => id.parse::<i32>().is_ok(),
            "smallint" => id.parse::<i16>().is_ok(),
            "uuid" => uuid::Uuid::parse_str(id).is_ok(),
            _ => true,
        };
        if !fits {
            return Ok(None);
        }
        let clause = format!("WHERE t.{} = $1::text::{}", p.id.quoted, p.id.sql_type);
        Ok(self.query_records(&clause, &[&id])?.pop())
    }

    fn band_plan(&mut self) -> Result<QueryPlan, StoreError> {
        let p = self
            .prepared
            .as_ref()
            .expect("inspect() runs before any query");
        let sql = format!("EXPLAIN {}", p.first_page_sql);
        let now = Utc::now();
        let format = self.format();
        let (from, to) = (
            format.encode(now - chrono::Duration::days(7)),
            format.encode(now - chrono::Duration::days(1)),
        );
        let pending = self.table.pending.clone();
        let limit: i64 = 200;
        let detail: Vec<String> = self
            .client
            .query(&sql, &[&Bound(&from), &Bound(&to), &pending, &limit])
            .map_err(pg("explaining the band query"))?
            .iter()
            .map(|r| r.get::<_, String>(0).trim().to_string())
            .collect();
        let bare = p.inserted_at.trim_matches('"').to_string();
        let uses_index = detail
            .iter()
            .any(|line| line.starts_with("Index Cond:") && line.contains(&bare));
        let create_index = (!uses_index).then(|| {
            format!(
                "CREATE INDEX CONCURRENTLY {} ON {} ({});",
                quote(&index_name(&self.table.name, &bare)),
                p.table,
                p.inserted_at
            )
        });
        Ok(QueryPlan {
            uses_index,
            detail: detail.join("; "),
            create_index,
        })
    }

    fn inserted_at_page(
        &mut self,
        after: Option<&Scalar>,
        limit: usize,
    ) -> Result<Vec<Scalar>, StoreError> {
        // Whole records, one per distinct value: the store reads a value only through
        // a record (its format's decoding of the column's type).
        let ins = self.prepared().inserted_at.clone();
        let limit = limit as i64;
        match after {
            None => self.query_records(
                &format!(
                    "WHERE t.{ins} IS NOT NULL AND t.ctid IN (SELECT DISTINCT ON (t2.{ins}) t2.ctid FROM {table} t2 WHERE t2.{ins} IS NOT NULL ORDER BY t2.{ins} LIMIT $1) ORDER BY t.{ins}",
                    table = self.prepared().table
                ),
                &[&limit],
            ),
            Some(after) => self.query_records(
                &format!(
                    "WHERE t.{ins} > $2 AND t.ctid IN (SELECT DISTINCT ON (t2.{ins}) t2.ctid FROM {table} t2 WHERE t2.{ins} > $2 ORDER BY t2.{ins} LIMIT $1) ORDER BY t.{ins}",
                    table = self.prepared().table
                ),
                &[&limit, &Bound(after)],
            ),
        }
        .map(|records| records.iter().map(Record::inserted_at).collect())
    }

    fn last_runs(&mut self) -> Result<Vec<RunRow>, StoreError> {
        if !self.has_run_log()? {
            return Ok(Vec::new());
        }
        let runs = self.own_table("backlog_runs");
        let sql = format!(
            "SELECT id, window_secs, clock, started_at, finished_at, selected, succeeded, failed, skipped, outcome, error
             FROM {runs}
             WHERE id IN (SELECT max(id) FROM {runs} WHERE table_name = $1 AND window_secs > 0 GROUP BY window_secs)
             ORDER BY window_secs"
        );
        Ok(self
            .client
            .query(&sql, &[&self.table.name])
            .map_err(pg("reading the run log"))?
            .iter()
            .map(Self::run_row)
            .collect())
    }

    fn begin_run(&mut self, run: &RunStart) -> Result<i64, StoreError> {
        let close = format!(
            "UPDATE {} SET outcome = 'abandoned', error = 'no heartbeat since ' || heartbeat_at || ': the tick was killed or lost its database'
             WHERE table_name = $1 AND outcome = 'running' AND heartbeat_at < now() - make_interval(secs => $2)",
            self.own_table("backlog_runs")
        );
        self.client
            .execute(&close, &[&self.table.name, &run.lease.as_secs_f64()])
            .map_err(pg("writing the run log"))?;
        // Failures kept past the end of their slot are collected.
        let collect = format!(
            "DELETE FROM {} WHERE table_name = $1 AND owner = $2 AND expires_at < now()",
            self.own_table("backlog_claims")
        );
        self.client
            .execute(&collect, &[&self.table.name, &TRIED])
            .map_err(pg("dropping failures kept past their slot"))?;
        self.max_per_record = run.history.max_per_record;
        let prefix = format!("{}.", self.schema);
        super::prune_attempts(&mut self.client, &prefix, &self.table.name, &run.history)?;
        let sql = format!(
            "INSERT INTO {} (table_name, window_secs, tier, band_from_secs, band_to_secs, bands, clock, started_at, heartbeat_at, outcome, owner)
             VALUES ($1, $2, $3, $4, $5, $6, $7, now(), now(), 'running', $8) RETURNING id",
            self.own_table("backlog_runs")
        );
        let row = self
            .client
            .query_one(
                &sql,
                &[
                    &self.table.name,
                    &(run.window.as_secs() as i64),
                    &run.tier.map(|t| t as i32),
                    &(run.younger.as_secs() as i64),
                    &(run.older.as_secs() as i64),
                    &run.bands,
                    &run.now,
                    &run.owner,
                ],
            )
            .map_err(pg("writing the run log"))?;
        Ok(row.get(0))
    }

    fn finish_run(&mut self, run_id: i64, end: &RunEnd) -> Result<(), StoreError> {
        let sql = format!(
            "UPDATE {} SET finished_at = now(), selected = $2, succeeded = $3, failed = $4, skipped = $5, outcome = $6, error = $7, lost = $8 WHERE id = $1",
            self.own_table("backlog_runs")
        );
        self.client
            .execute(
                &sql,
                &[
                    &run_id,
                    &(end.selected as i64),
                    &(end.succeeded as i64),
                    &(end.failed as i64),
                    &(end.skipped as i64),
                    &end.outcome,
                    &end.error,
                    &(end.lost as i64),
                ],
            )
            .map_err(pg("writing the run log"))?;
        Ok(())
    }

    fn take_records(
        &mut self,
        owner: &str,
        records: Vec<Record>,
        lease_until: DateTime<Utc>,
    ) -> Result<Vec<Record>, StoreError> {
        let ids: Vec<Scalar> = records.iter().map(|r| r.id.clone()).collect();
        // A failure kept until its slot ends is taken (`take_tried`); the band's
        // bounds play no part in a claim.
        let band = BandQuery {
            from: Scalar::Int(0),
            to: Scalar::Int(0),
            to_inclusive: false,
            take_tried: true,
            clock: Utc::now(),
        };
        let claimed = self.claim(owner, &ids, lease_until, &band)?;
        Ok(records
            .into_iter()
            .filter(|r| claimed.contains(&r.id.to_string()))
            .collect())
    }

    fn holder(&mut self, record: &Record) -> Result<Option<super::Held>, StoreError> {
        if !self.has_run_log()? {
            return Ok(None);
        }
        let sql = format!(
            "SELECT owner, claimed_at, expires_at FROM {} WHERE table_name = $1 AND record_id = $2 AND expires_at > now()",
            self.own_table("backlog_claims")
        );
        let row = self
            .client
            .query_opt(&sql, &[&self.table.name, &record.id.to_string()])
            .map_err(pg("reading the tool's claims"))?;
        Ok(row.map(|r| {
            let owner: String = r.get(0);
            if owner == TRIED {
                super::Held {
                    owner: None,
                    until: r.get(1),
                }
            } else {
                super::Held {
                    owner: Some(owner),
                    until: r.get(2),
                }
            }
        }))
    }

    fn held_counts(&mut self) -> Result<(u64, u64), StoreError> {
        if !self.has_run_log()? {
            return Ok((0, 0));
        }
        // Kept failures count while their record is still pending (one retried since
        // is not).
        let p = self.prepared();
        let sql = format!(
            "SELECT count(*) FILTER (WHERE c.owner <> $2),
                    count(*) FILTER (WHERE c.owner = $2 AND EXISTS (
                        SELECT 1 FROM {table} t WHERE t.{idq} = c.record_id::{idt}
                        AND t.{st} = ANY ($3::text[]::{stt}[])))
             FROM {claims} c WHERE c.table_name = $1 AND c.expires_at > now()",
            claims = self.own_table("backlog_claims"),
            table = p.table,
            idq = p.id.quoted,
            idt = p.id.sql_type,
            st = p.status.quoted,
            stt = p.status.sql_type,
        );
        let pending = self.table.pending.clone();
        let row = self
            .client
            .query_one(&sql, &[&self.table.name, &TRIED, &pending])
            .map_err(pg("counting the records held"))?;
        Ok((row.get::<_, i64>(0) as u64, row.get::<_, i64>(1) as u64))
    }

    fn table(&self) -> &TableConfig {
        &self.table
    }

    fn own(&mut self) -> Result<super::Own<'_>, StoreError> {
        // Made together, by version 3: a schema of an earlier one has neither.
        let pauses = self.own_table("backlog_pauses");
        let exists: bool = self
            .client
            .query_one("SELECT to_regclass($1) IS NOT NULL", &[&pauses])
            .map_err(pg("reading the tool's tables"))?
            .get(0);
        Ok(super::Own {
            sql: &mut self.client,
            prefix: format!("{}.", self.schema),
            table: &self.table.name,
            exists,
        })
    }

    fn heartbeat(&self, owner: &str, run_id: i64) -> Result<Box<dyn Heartbeat>, StoreError> {
        // Named apart in pg_stat_activity, for whoever looks at the server.
        let mut url = self.url.clone();
        if url.config.get_application_name() == Some("backlog") {
            url.config.application_name("backlog heartbeat");
        }
        Ok(Box::new(PostgresHeartbeat {
            client: connect(&url)?,
            url,
            claims: self.own_table("backlog_claims"),
            runs: self.own_table("backlog_runs"),
            owner: owner.to_string(),
            run_id,
        }))
    }
}

struct PostgresHeartbeat {
    client: Client,
    url: PostgresUrl,
    claims: String,
    runs: String,
    owner: String,
    run_id: i64,
}

impl Heartbeat for PostgresHeartbeat {
    /// Renews the claims; a connection the server dropped (a restart, a failover) is
    /// opened again, since the claims outlive it in their table.
    fn beat(&mut self, lease_until: DateTime<Utc>) -> Result<(), StoreError> {
        if self.client.is_closed() {
            self.client = connect(&self.url)?;
        }
        let context = "renewing claims";
        let mut tx = self.client.transaction().map_err(pg(context))?;
        tx.execute(
            &format!(
                "UPDATE {} SET expires_at = now() + make_interval(secs => $1) WHERE owner = $2",
                self.claims
            ),
            &[&lease_secs(lease_until), &self.owner],
        )
        .map_err(pg(context))?;
        tx.execute(
            &format!(
                "UPDATE {} SET heartbeat_at = now() WHERE id = $1",
                self.runs
            ),
            &[&self.run_id],
        )
        .map_err(pg(context))?;
        tx.commit().map_err(pg(context))
    }
}

#[cfg(test)]
mod tests {
    use super::base64_of_hex;

    #[test]
    fn bytea_hex_becomes_base64_and_anything_else_stays_as_it_is() {
        assert_eq!(base64_of_hex("\\x00ff10").as_deref(), Some("AP8Q"));
        assert_eq!(base64_of_hex("\\x").as_deref(), Some(""));
        for bad in ["\\x0g", "\\x0", "00ff", "\\xzz10"] {
            assert_eq!(base64_of_hex(bad), None, "{bad}");
        }
    }
}
