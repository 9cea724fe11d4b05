//! The connection string (parsed without any I/O, shown only redacted), and TLS.
//!
//! `sslmode` follows libpq: `disable`; `prefer` (the default: TLS when the server offers
//! it); `require` (TLS, the certificate not checked); `verify-ca` (the chain is checked
//! against the roots); `verify-full` (the chain and the host name). The roots are the PEM
//! file named by `sslrootcert`, else the system's. tokio-postgres knows only the first
//! three modes, so the URL's `sslmode` and `sslrootcert` are read here and taken out.

use std::str::FromStr;
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::crypto::{verify_tls12_signature, verify_tls13_signature, CryptoProvider};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{
    CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme,
};
use tokio_postgres::config::{Host, SslMode};
use tokio_postgres::Config;
use tokio_postgres_rustls::MakeRustlsConnect;

use crate::failure::{StoreFailure, StoreResult};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tls {
    Disable,
    Prefer,
    Require,
    VerifyCa,
    VerifyFull,
}

/// A validated connection string: what to connect to, and how to name it in messages.
#[derive(Clone)]
pub struct Target {
    pub config: Config,
    pub tls: Tls,
    root_cert: Option<String>,
    /// The URL with the password replaced by `***`.
    pub label: String,
    password: Option<String>,
}

impl std::fmt::Debug for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Target")
            .field("label", &self.label)
            .finish_non_exhaustive()
    }
}

fn label(config: &Config, tls: Tls) -> String {
    let user = config.get_user().unwrap_or("");
    let credentials = match (user, config.get_password().is_some()) {
        ("", false) => String::new(),
        ("", true) => ":***@".into(),
        (u, true) => format!("{u}:***@"),
        (u, false) => format!("{u}@"),
    };
    let ports = config.get_ports();
    let hosts: Vec<String> = config
        .get_hosts()
        .iter()
        .enumerate()
        .map(|(i, h)| {
            let port = ports.get(i).or(ports.first()).copied().unwrap_or(5432);
            match h {
                Host::Tcp(name) if name.contains(':') => format!("[{name}]:{port}"),
                Host::Tcp(name) => format!("{name}:{port}"),
                #[cfg(unix)]
                Host::Unix(path) => format!("{}:{port}", path.display()),
            }
        })
        .collect();
    let db = config.get_dbname().unwrap_or("");
    let mode = match tls {
        Tls::Prefer => "",
        Tls::Disable => "?sslmode=disable",
        Tls::Require => "?sslmode=require",
        Tls::VerifyCa => "?sslmode=verify-ca",
        Tls::VerifyFull => "?sslmode=verify-full",
    };
    format!("postgres://{credentials}{}/{db}{mode}", hosts.join(","))
}

impl Target {
    pub fn parse(url: &str) -> StoreResult<Self> {
        let url = url.trim();
        let raw_label = redact_raw(url);
        let bad =
            |why: &str| StoreFailure::new(format!("invalid PostgreSQL URL ({raw_label}): {why}"));
        let lower = url.to_ascii_lowercase();
        if !(lower.starts_with("postgres://") || lower.starts_with("postgresql://")) {
            return Err(bad(
                "expected postgres://[user[:password]@]host[:port]/database[?sslmode=…]",
            ));
        }
        let (base, query) = url.split_once('?').unwrap_or((url, ""));
        let mut tls = Tls::Prefer;
        let mut root_cert = None;
        let mut kept = Vec::new();
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            match k {
                "sslmode" => {
                    tls = match v {
                        "disable" => Tls::Disable,
                        "allow" | "prefer" => Tls::Prefer,
                        "require" => Tls::Require,
                        "verify-ca" => Tls::VerifyCa,
                        "verify-full" => Tls::VerifyFull,
                        other => {
                            return Err(bad(&format!(
                                "unknown sslmode {other:?}: use disable, prefer, require, verify-ca or verify-full"
                            )))
                        }
                    }
                }
                "sslrootcert" => root_cert = Some(percent_decode(v)),
                _ => kept.push(pair),
            }
        }
        let rest = if kept.is_empty() {
            base.to_string()
        } else {
            format!("{base}?{}", kept.join("&"))
        };
        // tokio-postgres's messages never repeat the URL or its password.
        let mut config = Config::from_str(&rest).map_err(|e| bad(&e.to_string()))?;
        config.ssl_mode(match tls {
            Tls::Disable => SslMode::Disable,
            Tls::Prefer => SslMode::Prefer,
            _ => SslMode::Require,
        });
        if config.get_application_name().is_none() {
            config.application_name("idempotent-tools");
        }
        let password = config
            .get_password()
            .map(|p| String::from_utf8_lossy(p).into_owned());
        let label = label(&config, tls);
        Ok(Target {
            config,
            tls,
            root_cert,
            label,
            password,
        })
    }

    /// A failure message naming the redacted URL; as a last guard, scrubs the password
    /// should a server or library message ever echo it.
    pub fn failure(&self, what: &str, cause: impl std::fmt::Display) -> StoreFailure {
        let mut message = format!("{what} ({}): {cause}", self.label);
        if let Some(pw) = self.password.as_deref().filter(|p| p.len() >= 4) {
            message = message.replace(pw, "***");
        }
        StoreFailure::new(message)
    }

    /// The TLS connector for this URL (also used, unused, for `sslmode=disable`).
    pub fn connector(&self) -> StoreResult<MakeRustlsConnect> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|e| self.failure("cannot set up TLS", e))?;
        let config = match self.tls {
            Tls::Disable | Tls::Prefer | Tls::Require => builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(Unverified(provider)))
                .with_no_client_auth(),
            Tls::VerifyCa | Tls::VerifyFull => {
                let roots = Arc::new(self.roots()?);
                let inner = WebPkiServerVerifier::builder_with_provider(roots, provider)
                    .build()
                    .map_err(|e| self.failure("cannot set up TLS", e))?;
                let verifier = Verified {
                    inner,
                    check_name: self.tls == Tls::VerifyFull,
                };
                builder
                    .dangerous()
                    .with_custom_certificate_verifier(Arc::new(verifier))
                    .with_no_client_auth()
            }
        };
        Ok(MakeRustlsConnect::new(config))
    }

    fn roots(&self) -> StoreResult<RootCertStore> {
        let mut roots = RootCertStore::empty();
        match self.root_cert.as_deref() {
            Some(path) if path != "system" => {
                let certs = CertificateDer::pem_file_iter(path)
                    .and_then(|it| it.collect::<Result<Vec<_>, _>>())
                    .map_err(|e| self.failure("cannot read sslrootcert", format!("{path}: {e}")))?;
                roots.add_parsable_certificates(certs);
            }
            _ => {
                let found = rustls_native_certs::load_native_certs();
                roots.add_parsable_certificates(found.certs);
            }
        }
        if roots.is_empty() {
            return Err(self.failure(
                "no root certificates for sslmode=verify-ca/verify-full",
                "name a PEM file with sslrootcert=/path/to/root.crt",
            ));
        }
        Ok(roots)
    }
}

/// The URL with anything that may be a credential hidden, for a URL that did not parse:
/// everything between `://` and the last `@` counts as credentials; the query is dropped.
fn redact_raw(url: &str) -> String {
    let Some(scheme_end) = url.find("://") else {
        return if url.contains(['@', ':']) {
            "<a URL that is not shown>".into()
        } else {
            url.into()
        };
    };
    let (scheme, rest) = (&url[..scheme_end], &url[scheme_end + 3..]);
    let cut = |s: &str| s.split(['?', '#']).next().unwrap_or("").to_string();
    match rest.rfind('@') {
        Some(at) => {
            let user = rest[..at].split([':', '/', '?', '#']).next().unwrap_or("");
            format!("{scheme}://{user}:***@{}", cut(&rest[at + 1..]))
        }
        None => format!("{scheme}://{}", cut(rest)),
    }
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            if let Some(b) = s
                .get(i + 1..i + 3)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
            {
                out.push(b);
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// `prefer` and `require`: encrypted, the certificate not checked (libpq's meaning; use
/// verify-full to check it). Signatures are still verified, so the handshake is sound.
#[derive(Debug)]
struct Unverified(Arc<CryptoProvider>);

impl ServerCertVerifier for Unverified {
    fn verify_server_cert(
        &self,
        _: &CertificateDer<'_>,
        _: &[CertificateDer<'_>],
        _: &ServerName<'_>,
        _: &[u8],
        _: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }
    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }
    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }
    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// `verify-ca` and `verify-full`: the chain checked against the roots; the host name too
/// for `verify-full`.
#[derive(Debug)]
struct Verified {
    inner: Arc<WebPkiServerVerifier>,
    check_name: bool,
}

impl ServerCertVerifier for Verified {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match self
            .inner
            .verify_server_cert(end_entity, intermediates, server_name, ocsp, now)
        {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) if !self.check_name => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }
    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls12_signature(message, cert, dss)
    }
    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls13_signature(message, cert, dss)
    }
    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.inner.supported_verify_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_password_never_shows() {
        let t =
            Target::parse("postgres://app:s3cret-pw@db.example:6543/orders?sslmode=verify-full")
                .unwrap();
        assert_eq!(
            t.label,
            "postgres://app:***@db.example:6543/orders?sslmode=verify-full"
        );
        assert_eq!(t.tls, Tls::VerifyFull);
        assert!(!t
            .failure("x", "echo s3cret-pw")
            .message
            .contains("s3cret-pw"));
        assert!(!format!("{t:?}").contains("s3cret-pw"));
        let err = Target::parse("postgres://app:s3cret-pw@db:5432/x?sslmode=bogus").unwrap_err();
        assert!(
            err.message.contains("sslmode") && !err.message.contains("s3cret-pw"),
            "{err}"
        );
        let err = Target::parse("mysql://app:s3cret-pw@db/x").unwrap_err();
        assert!(!err.message.contains("s3cret-pw"), "{err}");
        let err = Target::parse("postgres://app:s3cret-pw@db:notaport/x").unwrap_err();
        assert!(!err.message.contains("s3cret-pw"), "{err}");
    }

    #[test]
    fn sslmodes_map_to_the_driver() {
        assert_eq!(Target::parse("postgres://h/d").unwrap().tls, Tls::Prefer);
        assert_eq!(
            Target::parse("postgres://h/d?sslmode=require")
                .unwrap()
                .config
                .get_ssl_mode(),
            SslMode::Require
        );
        assert_eq!(
            Target::parse("postgresql://h/d?sslmode=disable")
                .unwrap()
                .config
                .get_ssl_mode(),
            SslMode::Disable
        );
        let t = Target::parse(
            "postgres://h/d?sslmode=verify-ca&sslrootcert=%2Ftmp%2Fca.pem&connect_timeout=3",
        )
        .unwrap();
        assert_eq!(t.root_cert.as_deref(), Some("/tmp/ca.pem"));
        assert_eq!(t.config.get_ssl_mode(), SslMode::Require);
    }
}
