//! Which addresses fetch_url may reach: the server-side request forgery policy.
//!
//! A model can be talked (by a page it read) into fetching `http://169.254.169.254/` (cloud
//! credentials) or an admin panel on the private network. Every address a request would
//! connect to is classified here, after DNS resolution and again on every redirect; only
//! public unicast addresses pass, unless the host opts one in through `network.allow_hosts`.
//! However an address is spelt (`127.1`, `2130706433`, `0x7f000001`, `[::ffff:127.0.0.1]`),
//! the URL parser normalizes it to one `IpAddr` before it gets here.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use crate::config::HostPattern;

/// Why an address is refused, or `None` when it is public.
pub fn refusal_reason(ip: IpAddr) -> Option<&'static str> {
    match ip {
        IpAddr::V4(v4) => v4_reason(v4),
        IpAddr::V6(v6) => v6_reason(v6),
    }
}

fn v4_reason(ip: Ipv4Addr) -> Option<&'static str> {
    let [a, b, c, _] = ip.octets();
    match (a, b, c) {
        (0, _, _) => Some("unspecified (0.0.0.0/8)"),
        (10, _, _) => Some("private (10.0.0.0/8)"),
        (100, 64..=127, _) => Some("shared address space (100.64.0.0/10)"),
        (127, _, _) => Some("loopback (127.0.0.0/8)"),
        (169, 254, _) => Some("link-local (169.254.0.0/16, includes the cloud metadata address)"),
        (172, 16..=31, _) => Some("private (172.16.0.0/12)"),
        (192, 0, 0) => Some("IETF protocol assignments (192.0.0.0/24)"),
        (192, 0, 2) | (198, 51, 100) | (203, 0, 113) => Some("documentation range"),
        (192, 168, _) => Some("private (192.168.0.0/16)"),
        (198, 18..=19, _) => Some("benchmarking (198.18.0.0/15)"),
        (224..=239, _, _) => Some("multicast (224.0.0.0/4)"),
        (240..=255, _, _) => Some("reserved or broadcast (240.0.0.0/4)"),
        _ => None,
    }
}

fn v6_reason(ip: Ipv6Addr) -> Option<&'static str> {
    let s = ip.segments();
    if ip.is_unspecified() {
        return Some("unspecified (::)");
    }
    if ip.is_loopback() {
        return Some("loopback (::1)");
    }
    // Forms that embed an IPv4 address are judged by that address.
    if let Some(v4) = ip.to_ipv4_mapped() {
        return v4_reason(v4);
    }
    if s[0] == 0x64 && s[1] == 0xff9b && s[2..6] == [0, 0, 0, 0] {
        let v4 = Ipv4Addr::new((s[6] >> 8) as u8, s[6] as u8, (s[7] >> 8) as u8, s[7] as u8);
        return v4_reason(v4);
    }
    if s[0..6] == [0, 0, 0, 0, 0, 0] {
        // The deprecated IPv4-compatible form ::a.b.c.d.
        let v4 = Ipv4Addr::new((s[6] >> 8) as u8, s[6] as u8, (s[7] >> 8) as u8, s[7] as u8);
        return v4_reason(v4).or(Some("IPv4-compatible (::a.b.c.d, deprecated)"));
    }
    if s[0] == 0x2002 {
        // 6to4 embeds an IPv4 address in the next 32 bits.
        let v4 = Ipv4Addr::new((s[1] >> 8) as u8, s[1] as u8, (s[2] >> 8) as u8, s[2] as u8);
        if let Some(r) = v4_reason(v4) {
            return Some(r);
        }
    }
    match s[0] {
        0xfe80..=0xfebf => Some("link-local (fe80::/10)"),
        0xfec0..=0xfeff => Some("site-local (fec0::/10, deprecated)"),
        0xfc00..=0xfdff => Some("unique local (fc00::/7)"),
        0xff00..=0xffff => Some("multicast (ff00::/8)"),
        0x2001 if s[1] == 0x0db8 => Some("documentation range (2001:db8::/32)"),
        _ => None,
    }
}

/// Whether `host` (as written in the URL) or the address it resolved to is opted in by
/// `allow_hosts` on `port`: an entry `host` allows every port, `host:port` only that one, so
/// a redirect from the allowed service to another port of the same machine is refused.
pub fn allowed_by_host(allow: &[String], host: &str, ip: IpAddr, port: u16) -> bool {
    allow
        .iter()
        .filter_map(|a| HostPattern::parse(a).ok())
        .any(|a| a.matches(host, port) || a.matches_ip(ip, port))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host_ip(url: &str) -> IpAddr {
        match url::Url::parse(url).unwrap().host().unwrap() {
            url::Host::Ipv4(v4) => IpAddr::V4(v4),
            url::Host::Ipv6(v6) => IpAddr::V6(v6),
            url::Host::Domain(d) => panic!("{url} parsed as domain {d}"),
        }
    }

    #[test]
    fn every_refused_range() {
        for ip in [
            "0.0.0.0",
            "0.1.2.3",
            "10.0.0.1",
            "10.255.255.255",
            "100.64.0.1",
            "100.127.255.254",
            "127.0.0.1",
            "127.255.0.1",
            "169.254.169.254",
            "169.254.0.1",
            "172.16.0.1",
            "172.31.255.255",
            "192.0.0.8",
            "192.0.2.1",
            "192.168.1.1",
            "198.18.0.1",
            "198.51.100.7",
            "203.0.113.9",
            "224.0.0.1",
            "239.255.255.250",
            "240.0.0.1",
            "255.255.255.255",
            "::",
            "::1",
            "fe80::1",
            "febf::1",
            "fc00::1",
            "fd12:3456::1",
            "ff02::1",
            "::ffff:127.0.0.1",
            "::ffff:169.254.169.254",
            "::ffff:10.0.0.1",
            "64:ff9b::7f00:1",
            "::127.0.0.1",
            "2002:7f00:1::",
            "2002:a9fe:a9fe::1",
            "2001:db8::1",
            "fec0::1",
        ] {
            let parsed: IpAddr = ip.parse().unwrap();
            assert!(refusal_reason(parsed).is_some(), "{ip} must be refused");
        }
    }

    #[test]
    fn public_addresses_pass() {
        for ip in [
            "1.1.1.1",
            "8.8.8.8",
            "93.184.216.34",
            "100.63.255.255",
            "100.128.0.1",
            "172.15.255.255",
            "172.32.0.1",
            "192.169.0.1",
            "2606:4700::1111",
            "2a00:1450::1",
            "::ffff:8.8.8.8",
            "2002:808:808::1",
        ] {
            let parsed: IpAddr = ip.parse().unwrap();
            assert_eq!(refusal_reason(parsed), None, "{ip} is public");
        }
    }

    #[test]
    fn every_spelling_of_loopback_is_loopback() {
        for url in [
            "http://127.0.0.1/",
            "http://127.1/",
            "http://2130706433/",
            "http://0x7f000001/",
            "http://0x7f.0.0.1/",
            "http://0177.0.0.1/",
            "http://017700000001/",
            "http://[::ffff:127.0.0.1]/",
            "http://[::ffff:7f00:1]/",
            "http://[::1]/",
            "http://0/",
            "http://127.000.000.001/",
        ] {
            let ip = host_ip(url);
            assert!(refusal_reason(ip).is_some(), "{url} → {ip} must be refused");
        }
        assert_eq!(host_ip("http://0xa9fea9fe/"), "169.254.169.254".parse::<IpAddr>().unwrap());
    }

    #[test]
    fn allow_list_matches_host_or_address() {
        let allow = vec!["127.0.0.1".to_string(), "Intranet.Example".to_string()];
        assert!(allowed_by_host(&allow, "127.0.0.1", "127.0.0.1".parse().unwrap(), 80));
        assert!(allowed_by_host(&allow, "127.1", "127.0.0.1".parse().unwrap(), 8080));
        assert!(allowed_by_host(&allow, "intranet.example", "10.0.0.5".parse().unwrap(), 443));
        assert!(!allowed_by_host(&allow, "localhost", "::1".parse().unwrap(), 80));
    }

    #[test]
    fn a_port_entry_allows_only_its_port() {
        let allow = vec![
            "127.0.0.1:8080".to_string(),
            "db.internal:5984".to_string(),
            "[::1]:9000".to_string(),
        ];
        let lo: IpAddr = "127.0.0.1".parse().unwrap();
        assert!(allowed_by_host(&allow, "127.0.0.1", lo, 8080));
        assert!(allowed_by_host(&allow, "localhost", lo, 8080), "by the address it resolved to");
        assert!(!allowed_by_host(&allow, "127.0.0.1", lo, 8081));
        assert!(!allowed_by_host(&allow, "127.0.0.1", lo, 80));
        assert!(allowed_by_host(&allow, "db.internal", "10.1.2.3".parse().unwrap(), 5984));
        assert!(!allowed_by_host(&allow, "db.internal", "10.1.2.3".parse().unwrap(), 22));
        assert!(allowed_by_host(&allow, "[::1]", "::1".parse().unwrap(), 9000));
        assert!(!allowed_by_host(&allow, "[::1]", "::1".parse().unwrap(), 9001));
    }
}
