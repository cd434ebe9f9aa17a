//! Who may read and act. On loopback, anyone who can reach the port (the machine's own
//! users). Beyond it, only requests that carry the token: an `Authorization: Bearer`
//! header (a script, a reverse proxy), or the cookie `GET /login?token=…` sets for a
//! browser. Tokens are compared in constant time. Actions are POSTs that carry the
//! page's CSRF token, so another site cannot make a browser post to this one. Who acts
//! is the name a reverse proxy sets in `--user-header`, trusted only where the proxy is
//! the way in (a token, or loopback), else the server's user.

use std::path::Path;

use subtle::ConstantTimeEq as _;

use crate::error::Error;

/// The cookie a browser keeps the token in.
pub(crate) const COOKIE: &str = "backlog_token";

/// The token from `--token-file` (its first line), else `BACKLOG_TOKEN`, if either.
pub fn load_token(file: Option<&Path>) -> Result<Option<String>, Error> {
    let token = match file {
        Some(path) => {
            let text = std::fs::read_to_string(path).map_err(|source| Error::Io {
                context: format!("--token-file {}: cannot read it", path.display()),
                source,
            })?;
            Some(text.lines().next().unwrap_or_default().trim().to_string())
        }
        None => std::env::var("BACKLOG_TOKEN").ok(),
    };
    match token {
        Some(t) if t.len() < 16 => Err(Error::Usage(
            "the token is shorter than 16 characters; use a long random one, like the output of `openssl rand -hex 32`".into(),
        )),
        other => Ok(other),
    }
}

/// Whether `given` is the token, in time that does not depend on where they differ.
pub(crate) fn same(given: &str, token: &str) -> bool {
    given.as_bytes().ct_eq(token.as_bytes()).into()
}

/// A fresh random secret, 32 hex digits from the operating system's generator (a
/// CSRF token guessed is a form forged).
pub(crate) fn new_secret() -> String {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).expect("the operating system's random generator answers");
    hex::encode(bytes)
}

/// Whether a request without a token comes to this server by a name of the machine
/// itself: a page of another site that rebinds its own name to 127.0.0.1 (DNS
/// rebinding) sends its own name as `Host`, and is refused.
pub(crate) fn local_host(headers: &axum::http::HeaderMap) -> bool {
    let Some(host) = headers
        .get(axum::http::header::HOST)
        .and_then(|v| v.to_str().ok())
    else {
        // HTTP/1.0 without a Host: a local client, not a browser.
        return true;
    };
    loopback_name(host)
}

/// Whether a `Host` value (a name or an address, and maybe a port) is this machine by
/// its loopback: `localhost`, or an address parsed as one that is loopback (127.0.0.0/8,
/// ::1, and ::ffff:127.x.y.z). A name that only looks like one (`127.evil.example`,
/// `127.0.0.1.nip.io`, `localhost.evil`) is another site's.
fn loopback_name(host: &str) -> bool {
    use std::net::{IpAddr, Ipv6Addr};
    let name = match host.strip_prefix('[') {
        // [v6]:port or [v6]
        Some(rest) => match rest.split_once(']') {
            Some((v6, port)) if port.is_empty() || is_port(port.strip_prefix(':')) => {
                return v6.parse::<Ipv6Addr>().is_ok_and(|a| {
                    a.is_loopback() || a.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback())
                });
            }
            _ => return false,
        },
        None => match host.rsplit_once(':') {
            Some((name, port)) if is_port(Some(port)) => name,
            _ => host,
        },
    };
    name.eq_ignore_ascii_case("localhost") || name.parse::<IpAddr>().is_ok_and(|a| a.is_loopback())
}

fn is_port(port: Option<&str>) -> bool {
    port.is_some_and(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_digit()))
}

/// Whether a form was posted from a page of this server: a browser says where a POST
/// comes from in `Origin`; one from elsewhere is refused even with a stolen token.
pub(crate) fn same_origin(headers: &axum::http::HeaderMap) -> bool {
    use axum::http::header;
    let Some(origin) = headers.get(header::ORIGIN).and_then(|v| v.to_str().ok()) else {
        return true;
    };
    let host = headers.get(header::HOST).and_then(|v| v.to_str().ok());
    let origin_host = origin
        .strip_prefix("http://")
        .or_else(|| origin.strip_prefix("https://"));
    origin_host.is_some() && origin_host == host
}

/// The token a request carries, from its header or its cookie.
pub(crate) fn carried(headers: &axum::http::HeaderMap) -> Option<String> {
    use axum::http::header;
    if let Some(bearer) = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
    {
        return Some(bearer.trim().to_string());
    }
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, _)| *name == COOKIE)
        .map(|(_, value)| value.to_string())
}

/// Who takes an action: the name the reverse proxy put in the user header
/// (`--user-header`), where the server trusts one (`Shared` keeps the header only
/// then), else the server's own user, as `backlog` run by hand would name it. A header
/// that is empty, over 200 bytes, not UTF-8 or holds a control character names nobody:
/// the server's user is named. The callers add "dashboard" where they record it.
pub(crate) fn person(shared: &super::Shared, headers: &axum::http::HeaderMap) -> String {
    let named = shared
        .user_header
        .as_ref()
        .and_then(|h| headers.get(h))
        .and_then(|v| std::str::from_utf8(v.as_bytes()).ok())
        .map(str::trim)
        .filter(|n| !n.is_empty() && n.len() <= 200 && !n.chars().any(char::is_control));
    named.map_or_else(crate::operate::whoami, str::to_string)
}

/// The header a reverse proxy names the person in (`--user-header`), checked as a
/// header name.
pub fn user_header(name: Option<&str>) -> Result<Option<axum::http::HeaderName>, Error> {
    name.map(|n| {
        axum::http::HeaderName::from_bytes(n.trim().as_bytes()).map_err(|_| {
            Error::Usage(format!(
                "--user-header {n:?} is not a header name; write one like X-Forwarded-User"
            ))
        })
    })
    .transpose()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_loopback_names_and_addresses_are_this_machine() {
        for host in [
            "localhost",
            "LOCALHOST:8080",
            "127.0.0.1",
            "127.0.0.1:80",
            "127.1.2.3:9",
            "[::1]",
            "[::1]:8080",
            "[::ffff:127.0.0.1]:80",
        ] {
            assert!(loopback_name(host), "{host}");
        }
        for host in [
            "127.evil.example",
            "127.0.0.1.nip.io",
            "127.0.0.1.nip.io:8080",
            "localhost.evil",
            "evil.localhost",
            "[::2]",
            "[::1",
            "[::1]junk",
            "10.0.0.1",
            "::1",
            "",
        ] {
            assert!(!loopback_name(host), "{host}");
        }
    }

    #[test]
    fn tokens_compare_whole() {
        assert!(same("0123456789abcdef", "0123456789abcdef"));
        assert!(!same("0123456789abcdeF", "0123456789abcdef"));
        assert!(!same("0123456789abcde", "0123456789abcdef"));
        assert_eq!(new_secret().len(), 32);
    }

    #[test]
    fn a_short_token_is_refused() {
        let dir = std::env::temp_dir().join(format!("backlog-token-{}", std::process::id()));
        std::fs::write(&dir, "short\n").unwrap();
        assert!(load_token(Some(&dir)).is_err());
        std::fs::write(&dir, "0123456789abcdef0123\n").unwrap();
        assert_eq!(
            load_token(Some(&dir)).unwrap().as_deref(),
            Some("0123456789abcdef0123")
        );
        std::fs::remove_file(&dir).ok();
    }
}
