//! Connecting to PostgreSQL: TLS as the URL asks (rustls), and errors as one line
//! that names the cause and never the password.

use crate::url::PostgresUrl;
use backlog_core::store::StoreError;
use backlog_core::store::fault::{DbError, Fault};
use postgres::Client;
use postgres::NoTls;
use std::sync::Arc;

/// A PostgreSQL error as one line: the server's message (and hint), or what happened
/// to the connection. Never the URL, which may hold a password.
pub(crate) fn describe_error(e: &postgres::Error) -> String {
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
    backlog_core::causes::chain(e)
}

/// A PostgreSQL error as the protocol reads it: its kind (a deadlock is 40P01, a
/// serialization conflict 40001, a lock not had in time 55P03, no room 53100) and its
/// line.
pub(crate) fn db_error(e: &postgres::Error) -> DbError {
    use postgres::error::SqlState;
    let fault = match e.code() {
        Some(c) if *c == SqlState::T_R_DEADLOCK_DETECTED => Fault::Deadlock,
        Some(c) if *c == SqlState::T_R_SERIALIZATION_FAILURE => Fault::Deadlock,
        Some(c) if *c == SqlState::LOCK_NOT_AVAILABLE => Fault::LockTimeout,
        Some(c) if *c == SqlState::DISK_FULL => Fault::DiskFull,
        Some(c) if *c == SqlState::ADMIN_SHUTDOWN => Fault::Lost,
        _ if e.is_closed() => Fault::Lost,
        _ => Fault::Other,
    };
    DbError {
        fault,
        message: describe_error(e),
    }
}

/// A failed statement, named by what it was doing.
pub(super) fn pg(context: impl Into<String>) -> impl FnOnce(postgres::Error) -> StoreError {
    let context = context.into();
    move |e| StoreError::Database {
        context,
        source: Box::new(db_error(&e)),
    }
}

/// Why a connection could not be made, with what to check.
pub(super) fn connect_error(e: &postgres::Error) -> StoreError {
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
        // With several hosts the client reports the last one's error only.
        _ if describe_error(e).ends_with("database does not allow writes") => {
            "the last host tried is read-only, and target_session_attrs=read-write asks for one that takes writes (is the primary up, and among the URL's hosts?)".to_string()
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
fn tls_config(url: &PostgresUrl) -> Result<rustls::ClientConfig, StoreError> {
    use rustls::pki_types::{CertificateDer, pem::PemObject};
    let refused = |reason: String| StoreError::Connect { reason };
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(Arc::clone(&provider))
        .with_safe_default_protocol_versions()
        .map_err(|e| refused(format!("cannot set up TLS: {e}")))?
        .dangerous();
    let Some(verify) = &url.verify else {
        return Ok(builder
            .with_custom_certificate_verifier(Arc::new(EncryptOnly(provider)))
            .with_no_client_auth());
    };
    let file = verify.root_cert.display();
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_file_iter(&verify.root_cert)
        .map_err(|e| refused(format!("cannot read sslrootcert {file}: {e}")))?
    {
        let cert =
            cert.map_err(|e| refused(format!("sslrootcert {file} is not PEM certificates: {e}")))?;
        roots
            .add(cert)
            .map_err(|e| refused(format!("sslrootcert {file}: {e}")))?;
    }
    if roots.is_empty() {
        return Err(refused(format!("sslrootcert {file} holds no certificate")));
    }
    let full =
        rustls::client::WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider)
            .build()
            .map_err(|e| refused(format!("sslrootcert {file}: {e}")))?;
    Ok(if verify.check_name {
        builder.with_custom_certificate_verifier(full)
    } else {
        builder.with_custom_certificate_verifier(Arc::new(AnyName(full)))
    }
    .with_no_client_auth())
}

/// Opens a connection, with TLS unless the URL says `sslmode=disable` (the default,
/// `prefer`, uses TLS when the server offers it, as libpq does). Of several hosts the
/// client takes the first that connects, in the URL's order (`load_balance_hosts=random`:
/// shuffled), and with `target_session_attrs=read-write` the first that takes writes.
pub(super) fn connect(url: &PostgresUrl) -> Result<Client, StoreError> {
    let result = if url.config.get_ssl_mode() == postgres::config::SslMode::Disable {
        url.config.connect(NoTls)
    } else {
        let tls = tls_config(url)?;
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
