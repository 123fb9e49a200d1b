//! Who may drive the service from a browser: every request's `Host` is
//! checked against an allow-list (against DNS rebinding), and a browser's
//! cross-site request (a foreign `Origin`, or `Sec-Fetch-Site: cross-site`)
//! is refused (docs/SERVICE.md, "Who may call it"; ADR 0020). Clients that
//! are not browsers send neither header and are not touched.

use std::net::{IpAddr, SocketAddr};

use axum::http::{HeaderMap, HeaderName, header};

/// The names every service accepts as `Host`: the loopback ones.
pub(crate) const LOOPBACK_HOSTS: [&str; 3] = ["localhost", "127.0.0.1", "::1"];

/// Which `Host` and `Origin` values the service accepts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostPolicy {
    /// Host names and IP literals allowed, lower case, without port.
    names: Vec<String>,
    /// Any IP literal is allowed (the service listens on every address:
    /// a rebinding attack needs a name, never an IP literal).
    any_ip: bool,
    /// `"*"` was listed: any `Host`.
    any_host: bool,
    /// Origins allowed to make cross-site requests (`scheme://host[:port]`).
    origins: Vec<String>,
}

impl Default for HostPolicy {
    fn default() -> Self {
        Self::loopback()
    }
}

impl HostPolicy {
    /// The loopback names only.
    pub fn loopback() -> Self {
        Self {
            names: LOOPBACK_HOSTS.iter().map(|&s| s.to_owned()).collect(),
            any_ip: false,
            any_host: false,
            origins: Vec::new(),
        }
    }

    /// The loopback names, the address the service listens on (any IP
    /// literal when it listens on every address), and `extra` (host names
    /// or IP literals; `"*"` allows every `Host`). `origins` may make
    /// cross-site requests.
    pub fn new(listen: SocketAddr, extra: &[String], origins: &[String]) -> Self {
        let mut policy = Self::loopback();
        let ip = listen.ip();
        if ip.is_unspecified() {
            policy.any_ip = true;
        } else {
            policy.add(&ip.to_string());
        }
        for name in extra {
            if name == "*" {
                policy.any_host = true;
            } else {
                policy.add(name);
            }
        }
        policy.origins = origins
            .iter()
            .map(|o| o.trim_end_matches('/').to_ascii_lowercase())
            .collect();
        policy
    }

    fn add(&mut self, name: &str) {
        let name = normal_host(name).to_ascii_lowercase();
        if !self.names.contains(&name) {
            self.names.push(name);
        }
    }

    /// What is allowed, for messages: `localhost, 127.0.0.1, ::1`.
    pub fn describe(&self) -> String {
        if self.any_host {
            return "any host".into();
        }
        let mut s = self.names.join(", ");
        if self.any_ip {
            s.push_str(", any IP address");
        }
        s
    }

    /// Whether `host` (a `Host` header: a name or IP literal, with or
    /// without a port) is allowed.
    pub fn allows_host(&self, host: &str) -> bool {
        if self.any_host {
            return true;
        }
        let name = normal_host(split_port(host).0);
        if self.names.iter().any(|n| n.eq_ignore_ascii_case(name)) {
            return true;
        }
        self.any_ip && name.parse::<IpAddr>().is_ok()
    }

    /// Why the request is refused, or `None` when it may go on: a `Host`
    /// not allowed, an `Origin` that is neither this service's nor listed,
    /// or `Sec-Fetch-Site: cross-site` from an origin not listed.
    pub fn refusal(&self, headers: &HeaderMap) -> Option<String> {
        let host = headers
            .get(header::HOST)
            .map(|v| v.to_str().unwrap_or("\u{fffd}"));
        if let Some(host) = host
            && !self.allows_host(host)
        {
            return Some(format!(
                "the Host {host:?} is not one this service answers (allowed: {}; set server.allowed_hosts)",
                self.describe()
            ));
        }
        let origin = headers
            .get(header::ORIGIN)
            .map(|v| v.to_str().unwrap_or("\u{fffd}"));
        if let Some(origin) = origin {
            let normal = origin.trim_end_matches('/').to_ascii_lowercase();
            if self.origins.contains(&normal) {
                return None;
            }
            if !host.is_some_and(|h| same_origin(&normal, h)) {
                return Some(format!(
                    "a cross-site request from the origin {origin:?} is refused (allowed: this service's own origin, or one listed in server.allowed_origins)"
                ));
            }
        }
        let site = headers.get(SEC_FETCH_SITE).and_then(|v| v.to_str().ok());
        if site.is_some_and(|s| s.eq_ignore_ascii_case("cross-site")) {
            return Some(
                "a cross-site request from a browser is refused (Sec-Fetch-Site: cross-site; allowed: origins listed in server.allowed_origins)"
                    .into(),
            );
        }
        None
    }
}

/// The header a browser sends to say whose page asks.
const SEC_FETCH_SITE: HeaderName = HeaderName::from_static("sec-fetch-site");

/// `host` without a trailing dot and without the brackets of an IPv6
/// literal.
fn normal_host(host: &str) -> &str {
    let host = host.trim().trim_end_matches('.');
    host.strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host)
}

/// Splits `authority` into its host and its port, if any: `[::1]:7878`,
/// `localhost:7878`, `localhost`, `::1` (an IPv6 literal without brackets
/// has no port).
fn split_port(authority: &str) -> (&str, Option<u16>) {
    let authority = authority.trim();
    let (host, port) = if let Some(rest) = authority.strip_prefix('[') {
        match rest.split_once(']') {
            Some((host, tail)) => (host, tail.strip_prefix(':')),
            None => (authority, None),
        }
    } else {
        match authority.rsplit_once(':') {
            Some((host, port)) if !host.contains(':') => (host, Some(port)),
            _ => (authority, None),
        }
    };
    (host, port.and_then(|p| p.parse().ok()))
}

/// Whether `origin` (`scheme://host[:port]`, lower case) is the origin of
/// a page served by this service under the `Host` header `host`.
fn same_origin(origin: &str, host: &str) -> bool {
    let Some((scheme, authority)) = origin.split_once("://") else {
        return false;
    };
    let default = match scheme {
        "http" => 80,
        "https" => 443,
        _ => return false,
    };
    let (o_host, o_port) = split_port(authority);
    let (h_host, h_port) = split_port(host);
    normal_host(o_host).eq_ignore_ascii_case(normal_host(h_host))
        && o_port.unwrap_or(default) == h_port.unwrap_or(default)
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, HeaderValue::from_static(v));
        }
        h
    }

    fn local() -> HostPolicy {
        HostPolicy::new("127.0.0.1:7878".parse().unwrap(), &[], &[])
    }

    #[test]
    fn loopback_names_and_the_listen_address_are_allowed_with_any_port() {
        let p = HostPolicy::new("10.1.2.3:7878".parse().unwrap(), &[], &[]);
        for h in [
            "localhost",
            "localhost:7878",
            "LOCALHOST.",
            "127.0.0.1:80",
            "[::1]:7878",
            "::1",
            "10.1.2.3:7878",
        ] {
            assert!(p.allows_host(h), "{h}");
        }
        for h in [
            "evil.example",
            "evil.example:7878",
            "10.1.2.4",
            "localhost.evil.example",
        ] {
            assert!(!p.allows_host(h), "{h}");
        }
    }

    #[test]
    fn listening_on_every_address_allows_ip_literals_but_not_names() {
        let p = HostPolicy::new(
            "0.0.0.0:7878".parse().unwrap(),
            &["kennel.internal".into()],
            &[],
        );
        assert!(p.allows_host("192.168.1.9:7878"));
        assert!(p.allows_host("[fe80::1]:7878"));
        assert!(p.allows_host("Kennel.Internal:7878"));
        assert!(!p.allows_host("rebind.evil.example:7878"));
        let any = HostPolicy::new("0.0.0.0:7878".parse().unwrap(), &["*".into()], &[]);
        assert!(any.allows_host("anything.example"));
    }

    #[test]
    fn a_request_without_browser_headers_passes() {
        assert_eq!(
            local().refusal(&headers(&[("host", "127.0.0.1:7878")])),
            None
        );
        assert_eq!(local().refusal(&HeaderMap::new()), None);
    }

    #[test]
    fn a_foreign_origin_or_a_cross_site_fetch_is_refused() {
        let p = local();
        let foreign = headers(&[
            ("host", "127.0.0.1:7878"),
            ("origin", "http://evil.example"),
        ]);
        assert!(p.refusal(&foreign).unwrap().contains("evil.example"));
        let other_port = headers(&[
            ("host", "localhost:7878"),
            ("origin", "http://localhost:3000"),
        ]);
        assert!(p.refusal(&other_port).is_some());
        let null = headers(&[("host", "localhost:7878"), ("origin", "null")]);
        assert!(p.refusal(&null).is_some());
        let cross = headers(&[("host", "localhost:7878"), ("sec-fetch-site", "cross-site")]);
        assert!(p.refusal(&cross).unwrap().contains("Sec-Fetch-Site"));
        let same = headers(&[
            ("host", "localhost:7878"),
            ("origin", "http://localhost:7878"),
            ("sec-fetch-site", "same-origin"),
        ]);
        assert_eq!(p.refusal(&same), None);
        let default_port = headers(&[("host", "localhost"), ("origin", "http://localhost:80/")]);
        assert_eq!(p.refusal(&default_port), None);
    }

    #[test]
    fn a_listed_origin_may_make_cross_site_requests() {
        let p = HostPolicy::new(
            "127.0.0.1:7878".parse().unwrap(),
            &[],
            &["https://dash.example".into()],
        );
        let h = headers(&[
            ("host", "127.0.0.1:7878"),
            ("origin", "https://dash.example"),
            ("sec-fetch-site", "cross-site"),
        ]);
        assert_eq!(p.refusal(&h), None);
    }

    #[test]
    fn a_foreign_host_is_refused_naming_what_is_allowed() {
        let m = local()
            .refusal(&headers(&[("host", "rebind.evil.example:7878")]))
            .unwrap();
        assert!(
            m.contains("rebind.evil.example") && m.contains("localhost, 127.0.0.1, ::1"),
            "{m}"
        );
    }
}
