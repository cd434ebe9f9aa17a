//! What differs between the two servers where a conformance body needs it: the words
//! of a URL (scheme, TLS parameters), the variable a password may come from, the test
//! CA, a login of a test's own, and the classic backlog with a URL a test makes. A
//! body asks these and never names its server; what each server says in its own words
//! stays beside the assertion that reads it.

use crate::harness::{
    Backend, Env, NOW, Schedule, my_admin_url, my_connect, pg_admin_url, pg_connect,
    recording_handler,
};

/// The TLS a URL asks for.
pub enum Tls<'a> {
    /// None at all.
    Disable,
    /// Encrypted, the certificate unchecked.
    Require,
    /// The certificate chains to the root in the file and names the host.
    VerifyFull(&'a str),
    /// The certificate chains to the root in the file.
    VerifyCa(&'a str),
}

impl Backend {
    /// The variable a password may come from.
    pub fn password_env(self) -> &'static str {
        match self {
            Backend::Postgres => "PGPASSWORD",
            Backend::Mysql => "MYSQL_PWD",
            Backend::Sqlite => unreachable!("SQLite has no password"),
        }
    }

    /// The URL's scheme, as messages show it.
    pub fn scheme(self) -> &'static str {
        match self {
            Backend::Postgres => "postgres",
            Backend::Mysql => "mysql",
            Backend::Sqlite => unreachable!("SQLite has no URL"),
        }
    }

    /// The query parameter(s) of a URL that asks for `tls`, in the server's own words
    /// (libpq's `sslmode`, MySQL's `ssl-mode`).
    pub fn tls(self, tls: Tls) -> String {
        match (self, tls) {
            (Backend::Postgres, Tls::Disable) => "sslmode=disable".into(),
            (Backend::Postgres, Tls::Require) => "sslmode=require".into(),
            (Backend::Postgres, Tls::VerifyFull(ca)) => {
                format!("sslmode=verify-full&sslrootcert={ca}")
            }
            (Backend::Postgres, Tls::VerifyCa(ca)) => format!("sslmode=verify-ca&sslrootcert={ca}"),
            (Backend::Mysql, Tls::Disable) => "ssl-mode=DISABLED".into(),
            (Backend::Mysql, Tls::Require) => "ssl-mode=REQUIRED".into(),
            (Backend::Mysql, Tls::VerifyFull(ca)) => {
                format!("ssl-mode=VERIFY_IDENTITY&ssl-ca={ca}")
            }
            (Backend::Mysql, Tls::VerifyCa(ca)) => format!("ssl-mode=VERIFY_CA&ssl-ca={ca}"),
            (Backend::Sqlite, _) => unreachable!("SQLite has no TLS"),
        }
    }

    /// The root that signed the test server's certificate (.ci/postgres.sh and
    /// .ci/mariadb.sh make it); `server.crt` beside it is a root that did not.
    pub fn test_ca(self) -> String {
        let var = match self {
            Backend::Postgres => "BACKLOG_TEST_PG_CA",
            Backend::Mysql => "BACKLOG_TEST_MYSQL_CA",
            Backend::Sqlite => unreachable!("SQLite has no TLS"),
        };
        std::env::var(var).unwrap_or_else(|_| panic!("{var} names the test CA; run `bash .ci/run`"))
    }
}

/// The classic backlog on `backend`, its schedule pointing at the URL `url_of` makes
/// of the test database's, with `pgpass` holding `password` (none: no password file);
/// and the real password.
pub fn classic(
    backend: Backend,
    url_of: impl Fn(&str) -> String,
    password: Option<&str>,
) -> (Env, String) {
    let env = Env::on(backend);
    env.classic();
    env.write_handler("handler.sh", &recording_handler(&[]));
    let real = match backend {
        Backend::Postgres => env.pg.as_ref().unwrap().password(),
        _ => env.my.as_ref().unwrap().password(),
    };
    let mut text = Schedule::default().render_for(&url_of(&env.url()));
    match password {
        Some(p) => std::fs::write(env.path("pgpass"), p).unwrap(),
        None => text = text.replace("password_file = \"pgpass\"\n", ""),
    }
    std::fs::write(env.path("backlog.toml"), text).unwrap();
    (env, real)
}

/// Points the schedule at `url`, with no password file.
pub fn write_url(env: &Env, url: &str) {
    let text = Schedule::default()
        .render_for(url)
        .replace("password_file = \"pgpass\"\n", "");
    std::fs::write(env.path("backlog.toml"), text).unwrap();
}

/// `backlog run` that fails to connect, with `envs` set and no other password in its
/// environment: its one line on stderr (exit 4).
pub fn one_line_error(env: &Env, envs: &[(&str, &str)]) -> String {
    let mut cmd = env.backlog(&["run", "--window", "1d", "--now", NOW]);
    cmd.env_remove(env.backend.password_env());
    for (k, v) in envs {
        cmd.env(k, v);
    }
    let out = cmd.assert().code(4);
    let stderr = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    stderr
}

/// `backlog run --window 1d -vv` succeeds and hands over `n` records (every record
/// made pending first), with `envs` set and no other password in its environment: its
/// stdout and stderr.
pub fn runs_and_selects(env: &Env, envs: &[(&str, &str)], n: usize) -> String {
    env.execute(r#"UPDATE "BACKLOG" SET "STATUS" = 'NEW'"#);
    let mut cmd = env.backlog(&["run", "--window", "1d", "--now", NOW, "-vv"]);
    cmd.env_remove(env.backend.password_env());
    for (k, v) in envs {
        cmd.env(k, v);
    }
    let out = cmd.assert().success();
    let o = out.get_output();
    let text =
        String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr);
    assert!(text.contains(&format!("selected {n},")), "{text}");
    text
}

/// Whether `line` is `pattern` with each `*` standing for any text (where a server's
/// message holds what the test cannot know, such as the host it saw).
pub fn fits(pattern: &str, line: &str) -> bool {
    let mut parts = pattern.split('*');
    let first = parts.next().unwrap_or_default();
    let Some(mut rest) = line.strip_prefix(first) else {
        return false;
    };
    let parts: Vec<&str> = parts.collect();
    let Some((last, middle)) = parts.split_last() else {
        return rest.is_empty();
    };
    for part in middle {
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    rest.ends_with(last)
}

/// A login of the test's own on the server (roles and users are the server's, not a
/// database's), with every right; dropped with the value, what it owns in the test's
/// database given to the test's superuser first.
pub struct Login {
    backend: Backend,
    /// The URL of the test's database, as its superuser.
    db_url: String,
    pub name: String,
}

impl Login {
    pub fn create(env: &Env, password: &str) -> Self {
        use mysql::prelude::Queryable;
        let (db, db_url) = match env.backend {
            Backend::Postgres => {
                let pg = env.pg.as_ref().unwrap();
                (&pg.name, pg.url.clone())
            }
            _ => {
                let my = env.my.as_ref().unwrap();
                (&my.name, my.url.clone())
            }
        };
        let name = format!("{db}_login");
        let quoted = password.replace('\'', "''");
        match env.backend {
            Backend::Postgres => pg_connect(&pg_admin_url())
                .batch_execute(&format!(
                    "DROP ROLE IF EXISTS {name}; CREATE ROLE {name} LOGIN SUPERUSER PASSWORD '{quoted}'"
                ))
                .unwrap(),
            _ => {
                // The server reads the password's letters in the session's character set
                // (latin1 by default), the tool sends UTF-8.
                let mut admin = my_connect(&my_admin_url());
                admin.query_drop("SET NAMES utf8mb4").unwrap();
                admin.query_drop(format!(
                    "DROP USER IF EXISTS '{name}'@'127.0.0.1'; CREATE USER '{name}'@'127.0.0.1' IDENTIFIED BY '{}';
                     GRANT ALL ON *.* TO '{name}'@'127.0.0.1'",
                    quoted.replace('\\', "\\\\")
                ))
                .unwrap()
            }
        }
        Login {
            backend: env.backend,
            db_url,
            name,
        }
    }
}

impl Drop for Login {
    fn drop(&mut self) {
        use mysql::prelude::Queryable;
        let name = &self.name;
        match self.backend {
            Backend::Postgres => {
                if let Ok(mut admin) = postgres::Client::connect(&self.db_url, postgres::NoTls) {
                    let _ = admin.batch_execute(&format!(
                        "REASSIGN OWNED BY {name} TO CURRENT_USER; DROP ROLE IF EXISTS {name}"
                    ));
                }
            }
            _ => {
                if let Ok(opts) = mysql::Opts::from_url(&self.db_url)
                    && let Ok(mut admin) = mysql::Conn::new(opts)
                {
                    let _ = admin.query_drop(format!("DROP USER IF EXISTS '{name}'@'127.0.0.1'"));
                }
            }
        }
    }
}

/// A schema for the tool's own tables apart from the test's table: on PostgreSQL a
/// schema in the test's database (which goes with it), on MySQL a database of its own
/// on the server, dropped with the value.
pub struct OwnSchema {
    backend: Backend,
    pub name: String,
}

impl OwnSchema {
    pub fn new(env: &Env) -> Self {
        let db = match env.backend {
            Backend::Postgres => &env.pg.as_ref().unwrap().name,
            _ => &env.my.as_ref().unwrap().name,
        };
        OwnSchema {
            backend: env.backend,
            name: format!("{db}_meta"),
        }
    }
}

impl Drop for OwnSchema {
    fn drop(&mut self) {
        use mysql::prelude::Queryable;
        if self.backend == Backend::Mysql
            && let Ok(opts) = mysql::Opts::from_url(&my_admin_url())
            && let Ok(mut admin) = mysql::Conn::new(opts)
        {
            let _ = admin.query_drop(format!("DROP DATABASE IF EXISTS {}", self.name));
        }
    }
}
