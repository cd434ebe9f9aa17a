//! TLS as the URL asks for it, on a login the server admits over TLS only (`tls_only`,
//! made by .ci/postgres.sh and .ci/mariadb.sh). Each test body runs on both servers.

use crate::harness::Backend;
use crate::servers::server::{Tls, classic, fits, one_line_error, runs_and_selects, write_url};

/// Without TLS the server refuses `tls_only`, in one line that says why; asked for,
/// and by default, TLS connects it; the verifying modes check the certificate against
/// the test root (for the host's name: 127.0.0.1 and localhost are in it, or for its
/// chain only) and a root that did not sign it is refused in one line.
fn tls_modes_connect_as_the_url_asks(backend: Backend) {
    let ca = backend.test_ca();
    let server_cert = std::path::Path::new(&ca)
        .with_file_name("server.crt")
        .display()
        .to_string();
    let (env, real) = classic(
        backend,
        |url| {
            let user = url::Url::parse(url).unwrap().username().to_string();
            url.replacen(&format!("{user}@"), "tls_only@", 1)
        },
        None,
    );
    let pwd = [(backend.password_env(), real.as_str())];
    let line = one_line_error(&env, &pwd);
    let refused = match backend {
        Backend::Postgres => "*no encryption*pg_hba.conf*",
        _ => {
            "backlog: *: cannot connect: Access denied for user 'tls_only'@'*leave ssl-mode=DISABLED out)\n"
        }
    };
    assert!(
        fits(refused, &line),
        "without TLS the server refuses tls_only: {line}"
    );

    let base = env.url();
    let disable = backend.tls(Tls::Disable);
    let asking = |tls| base.replace(&disable, &backend.tls(tls));
    for (url, ok) in [
        (asking(Tls::Require), true),
        (asking(Tls::VerifyFull(&ca)), true),
        (
            asking(Tls::VerifyFull(&ca)).replace("127.0.0.1", "localhost"),
            true,
        ),
        (asking(Tls::VerifyCa(&ca)), true),
        (base.replace(&format!("?{disable}"), ""), true),
        (asking(Tls::VerifyFull(&server_cert)), false),
    ] {
        write_url(&env, &url);
        if ok {
            runs_and_selects(&env, &pwd, 2);
        } else {
            let line = one_line_error(&env, &pwd);
            let refused = match backend {
                Backend::Postgres => {
                    "*sslmode=verify-full: cannot connect: error performing TLS handshake: invalid peer certificate*"
                }
                _ => "*?ssl-mode=VERIFY_IDENTITY: cannot connect: TLS failed:*",
            };
            assert!(fits(refused, &line), "{url}: {line}");
        }
    }
}

crate::on_servers!(tls_modes_connect_as_the_url_asks);
