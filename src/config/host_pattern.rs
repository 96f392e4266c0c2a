//! Host entries of the configuration (`network.allow_hosts`, `server.allowed_hosts`): a host
//! alone matches it on every port, `host:port` only on that port.
//!
//! The same parser reads an HTTP `Host` header, so a configured entry and a request's header
//! are compared in one spelling: lowercase, IPv6 without brackets, the port as a number.
//!
//! # Example
//! ```
//! use toolslot::config::HostPattern;
//! let p = HostPattern::parse("Intranet.Example:8080").unwrap();
//! assert!(p.matches("intranet.example", 8080));
//! assert!(!p.matches("intranet.example", 8081));
//! assert!(HostPattern::parse("::1").unwrap().matches("::1", 22));
//! assert!(HostPattern::parse("[::1]:7878").unwrap().matches("::1", 7878));
//! ```

use std::net::IpAddr;

/// One host entry: a name or address, and the one port it is limited to, if any.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostPattern {
    /// Lowercase name, or an address without brackets.
    pub host: String,
    /// `None`: every port.
    pub port: Option<u16>,
}

impl HostPattern {
    /// Reads `host`, `host:port`, `[v6]`, `[v6]:port`, or a bare IPv6 address (which has no
    /// port: its colons are the address's own).
    ///
    /// # Errors
    /// A one-line reason: an empty host, an unclosed bracket, or a port that is not a number
    /// from 1 to 65535.
    pub fn parse(entry: &str) -> Result<Self, String> {
        let entry = entry.trim();
        let (host, port) = if let Some(rest) = entry.strip_prefix('[') {
            let (host, after) = rest.split_once(']').ok_or_else(|| format!("`{entry}`: `[` without its `]`"))?;
            match after {
                "" => (host, None),
                _ => match after.strip_prefix(':') {
                    Some(p) => (host, Some(p)),
                    None => return Err(format!("`{entry}`: only `:port` may follow `]`")),
                },
            }
        } else if entry.matches(':').count() == 1 {
            let (host, port) = entry.split_once(':').unwrap_or((entry, ""));
            (host, Some(port))
        } else {
            (entry, None)
        };
        if host.is_empty() {
            return Err(format!("`{entry}`: no host"));
        }
        let port = match port {
            None => None,
            Some(p) => match p.parse::<u16>() {
                Ok(n) if n > 0 => Some(n),
                _ => return Err(format!("`{entry}`: `{p}` is not a port (1 to 65535)")),
            },
        };
        Ok(Self {
            host: host.to_ascii_lowercase(),
            port,
        })
    }

    /// Whether `host` (any spelling [`HostPattern::parse`] reads, brackets optional) on
    /// `port` is this entry. Addresses are compared as addresses, so `::0:1` is `::1`.
    pub fn matches(&self, host: &str, port: u16) -> bool {
        if self.port.is_some_and(|p| p != port) {
            return false;
        }
        let host = host.trim_start_matches('[').trim_end_matches(']');
        if self.host.eq_ignore_ascii_case(host) {
            return true;
        }
        match (self.host.parse::<IpAddr>(), host.parse::<IpAddr>()) {
            (Ok(a), Ok(b)) => a == b,
            _ => false,
        }
    }

    /// Whether this entry names `ip` (as an address, not a name) on `port`.
    pub fn matches_ip(&self, ip: IpAddr, port: u16) -> bool {
        self.port.is_none_or(|p| p == port) && self.host.parse::<IpAddr>().is_ok_and(|a| a == ip)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_form_parses() {
        let p = |s: &str| HostPattern::parse(s).unwrap();
        assert_eq!(
            p("Example.com"),
            HostPattern {
                host: "example.com".into(),
                port: None
            }
        );
        assert_eq!(p("example.com:8443").port, Some(8443));
        assert_eq!(p("127.0.0.1:80").host, "127.0.0.1");
        assert_eq!(
            p("[::1]"),
            HostPattern {
                host: "::1".into(),
                port: None
            }
        );
        assert_eq!(p("[::1]:9000").port, Some(9000));
        assert_eq!(p("fe80::1").port, None);
        for bad in ["", ":80", "host:", "host:0", "host:65536", "host:http", "[::1", "[::1]x", "[]:80"] {
            assert!(HostPattern::parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn a_port_entry_matches_only_that_port() {
        let any = HostPattern::parse("127.0.0.1").unwrap();
        let one = HostPattern::parse("127.0.0.1:8080").unwrap();
        assert!(any.matches("127.0.0.1", 1) && any.matches("127.0.0.1", 8080));
        assert!(one.matches("127.0.0.1", 8080) && !one.matches("127.0.0.1", 8081));
        assert!(one.matches_ip("127.0.0.1".parse().unwrap(), 8080));
        assert!(!one.matches_ip("127.0.0.1".parse().unwrap(), 22));
        assert!(HostPattern::parse("[::1]:8080").unwrap().matches("[0:0::1]", 8080));
    }
}
