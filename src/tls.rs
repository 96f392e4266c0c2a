//! The TLS every HTTPS client of toolslot speaks (fetch_url, streamable-HTTP MCP servers):
//! rustls over ring, trusting the bundled Mozilla roots plus any a caller adds.
//!
//! One place, so both clients agree on the crypto they link (ring, not reqwest's default
//! aws-lc-rs, a C library built from source) and on what they trust.

use std::sync::{Arc, OnceLock};

use rustls::RootCertStore;
use rustls::pki_types::CertificateDer;

/// A client configuration trusting Mozilla's roots and `extra` (an internal CA, a
/// self-signed development server).
///
/// # Errors
/// A certificate of `extra` that rustls refuses, or a protocol setup it refuses.
pub fn client_config(extra: Vec<CertificateDer<'static>>) -> Result<rustls::ClientConfig, rustls::Error> {
    let mut roots = RootCertStore::empty();
    roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    for cert in extra {
        roots.add(cert)?;
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    Ok(rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots)
        .with_no_client_auth())
}

/// The configuration with Mozilla's roots only, made once: fetch_url builds a client per
/// hop (each pinned to the address it checked), and the roots need not be parsed each time.
///
/// # Errors
/// The protocol setup rustls refuses (never with ring's defaults, but not ours to assume).
pub fn public_roots() -> Result<rustls::ClientConfig, rustls::Error> {
    static CONFIG: OnceLock<Result<rustls::ClientConfig, rustls::Error>> = OnceLock::new();
    CONFIG.get_or_init(|| client_config(Vec::new())).clone()
}
