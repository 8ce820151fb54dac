//! TLS for kernel servers: rustls (ring) with the platform's trust store plus any private CA
//! the user names, and certificate failures turned into errors that say which option fixes
//! them. Host names are always verified; there is no switch that turns verification off.

use std::path::Path;
use std::sync::{Arc, OnceLock};

use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject as _;
use rustls::{CertificateError, ClientConfig, RootCertStore};

use super::profile::TlsTrust;
use crate::error::{Error, Result};

/// The platform's trust store (or `SSL_CERT_FILE` / `SSL_CERT_DIR` when set), read once.
fn platform_roots() -> &'static [CertificateDer<'static>] {
    static ROOTS: OnceLock<Vec<CertificateDer<'static>>> = OnceLock::new();
    ROOTS.get_or_init(|| {
        let found = rustls_native_certs::load_native_certs();
        for error in &found.errors {
            tracing::debug!(%error, "a platform certificate could not be read");
        }
        if found.certs.is_empty() {
            tracing::warn!(
                "no trusted certificate authorities found on this machine; https:// kernel servers need --kernel-server-ca"
            );
        }
        found.certs
    })
}

/// The client configuration for `trust`.
pub(crate) fn client_config(trust: &TlsTrust) -> Result<Arc<ClientConfig>> {
    let mut roots = RootCertStore::empty();
    let (_added, _ignored) = roots.add_parsable_certificates(platform_roots().iter().cloned());
    for file in &trust.extra_roots {
        add_ca_file(&mut roots, file)?;
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|_| Error::Tls {
            reason: "the TLS library has no usable protocol version".to_owned(),
        })?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(Arc::new(config))
}

fn add_ca_file(roots: &mut RootCertStore, file: &Path) -> Result<()> {
    let unusable = |why: &str| Error::Tls {
        reason: format!(
            "the certificate authority file {} {why}; --kernel-server-ca takes a PEM file with the authority's certificate",
            file.display()
        ),
    };
    let certificates: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(file)
        .map_err(|_| unusable("cannot be read"))?
        .collect::<Result<_, _>>()
        .map_err(|_| unusable("is not valid PEM"))?;
    if certificates.is_empty() {
        return Err(unusable("holds no certificate"));
    }
    for certificate in certificates {
        roots
            .add(certificate)
            .map_err(|_| unusable("holds a certificate that cannot be used as an authority"))?;
    }
    Ok(())
}

/// What was wrong with a server's certificate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CertificateProblem {
    /// Signed by an authority this machine does not trust (a private CA, self-signed).
    UnknownAuthority,
    /// Made for another host name.
    WrongHost,
    /// Expired or not valid yet.
    OutsideValidity,
    /// Anything else rustls refused.
    Invalid,
}

impl CertificateProblem {
    /// What the certificate is, and what to do about it.
    pub(crate) fn explain(self) -> &'static str {
        match self {
            CertificateProblem::UnknownAuthority => {
                "is signed by a certificate authority this machine does not trust; if the server uses a private CA, pass its certificate with --kernel-server-ca FILE (or set SSL_CERT_FILE)"
            }
            CertificateProblem::WrongHost => {
                "was made for another host name; use the host name the certificate names (host names are always verified)"
            }
            CertificateProblem::OutsideValidity => {
                "has expired or is not valid yet; check the server's certificate and this machine's clock"
            }
            CertificateProblem::Invalid => {
                "was refused; check the server's certificate, or pass its CA with --kernel-server-ca FILE"
            }
        }
    }
}

/// The certificate problem somewhere in `error`'s chain of causes, if that is what failed.
pub(crate) fn certificate_problem(
    error: &(dyn std::error::Error + 'static),
) -> Option<CertificateProblem> {
    let mut current = Some(error);
    while let Some(error) = current {
        if let Some(problem) = classify(error) {
            return Some(problem);
        }
        // `io::Error::source` skips the error it wraps: look at that one too.
        if let Some(io) = error.downcast_ref::<std::io::Error>()
            && let Some(inner) = io.get_ref()
            && let Some(problem) = certificate_problem(inner)
        {
            return Some(problem);
        }
        current = error.source();
    }
    None
}

fn classify(error: &(dyn std::error::Error + 'static)) -> Option<CertificateProblem> {
    let rustls::Error::InvalidCertificate(problem) = error.downcast_ref::<rustls::Error>()? else {
        return None;
    };
    Some(match problem {
        CertificateError::UnknownIssuer
        | CertificateError::BadSignature
        | CertificateError::InvalidPurpose
        | CertificateError::UnknownRevocationStatus => CertificateProblem::UnknownAuthority,
        CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. } => {
            CertificateProblem::WrongHost
        }
        CertificateError::Expired
        | CertificateError::ExpiredContext { .. }
        | CertificateError::NotValidYet
        | CertificateError::NotValidYetContext { .. } => CertificateProblem::OutsideValidity,
        _ => CertificateProblem::Invalid,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn certificate_failures_are_found_through_io_errors() {
        let wrapped = std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            rustls::Error::InvalidCertificate(CertificateError::UnknownIssuer),
        );
        assert_eq!(
            certificate_problem(&wrapped),
            Some(CertificateProblem::UnknownAuthority)
        );
        assert!(
            CertificateProblem::UnknownAuthority
                .explain()
                .contains("--kernel-server-ca")
        );
        let name = rustls::Error::InvalidCertificate(CertificateError::NotValidForName);
        assert_eq!(
            certificate_problem(&name),
            Some(CertificateProblem::WrongHost)
        );
        let other = std::io::Error::other("connection refused");
        assert_eq!(certificate_problem(&other), None);
    }

    #[test]
    fn a_ca_file_without_certificates_is_refused_with_the_option_named() {
        let folder = tempfile::tempdir().unwrap();
        let file = folder.path().join("ca.pem");
        std::fs::write(&file, "not a certificate\n").unwrap();
        let trust = TlsTrust {
            extra_roots: vec![file],
        };
        let error = client_config(&trust).unwrap_err().to_string();
        assert!(error.contains("--kernel-server-ca"), "{error}");
        assert!(client_config(&TlsTrust::default()).is_ok());
    }
}
