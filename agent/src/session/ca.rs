//! The certificate authority of one session: the transparent proxy terminates a session's TLS
//! with leaves this CA signs, and only that session's agent trusts it.
//!
//! The key lives in the daemon's memory only and dies with the session; what leaves the
//! daemon is the CA's certificate, in a bundle of the system roots plus it that the agent's
//! TLS stacks are pointed at ([`TRUST_VARIABLES`]). A bundle is readable by the agent's user
//! alone. Leaves are made on first use for a host name (the ClientHello's SNI) or, without
//! one, for the address the agent dialled, and kept (a bounded number) for the next
//! handshake.

use std::collections::{HashMap, VecDeque};
use std::fs::{self, OpenOptions};
use std::io::Write;
use std::net::IpAddr;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use base64::Engine as _;
use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose, SanType,
};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName};
use rustls::sign::CertifiedKey;
use time::OffsetDateTime;

/// The variables that point the agent's TLS stacks (OpenSSL and Python's ssl, Node, requests,
/// curl, git) at the bundle. `SSL_CERT_FILE` and the like replace the system store, which is
/// why the bundle carries the system roots too.
pub const TRUST_VARIABLES: [&str; 6] = [
    "SSL_CERT_FILE",
    "NODE_EXTRA_CA_CERTS",
    "REQUESTS_CA_BUNDLE",
    "CURL_CA_BUNDLE",
    "GIT_SSL_CAINFO",
    // Codex CLI trusts this one alone when it is set.
    "CODEX_CA_CERTIFICATE",
];

/// Leaves kept per session: more names than an agent talks to; past it the oldest goes.
const MAX_LEAVES: usize = 512;
/// Clocks differ: a certificate is valid from a day before it was made.
const BACKDATE: Duration = Duration::from_secs(24 * 3600);
/// Longer than any session; the CA dies with its session anyway.
const CA_LIFETIME: Duration = Duration::from_secs(400 * 24 * 3600);
/// Within what clients that check leaf lifetimes accept (398 days).
const LEAF_LIFETIME: Duration = Duration::from_secs(90 * 24 * 3600);

#[derive(Debug, thiserror::Error)]
pub enum CaError {
    #[error("cannot make the session's certificate authority: {0}")]
    Generate(rcgen::Error),
    #[error("cannot issue a certificate for {name}: {source}")]
    Issue { name: String, source: rcgen::Error },
    #[error("the key made for {name} is not one rustls can sign with: {source}")]
    Key { name: String, source: rustls::Error },
    #[error("{name:?} is not a host name a certificate can be issued for")]
    BadName { name: String },
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// What a leaf is for: the host name the client asked for, or the address it dialled.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum LeafName {
    Dns(String),
    Ip(IpAddr),
}

impl LeafName {
    /// The ClientHello's server name if it has one (a host name, lowercased), else the
    /// original destination's address.
    pub fn of(sni: Option<&str>, original: IpAddr) -> Result<Self, CaError> {
        let Some(sni) = sni else {
            return Ok(Self::Ip(original));
        };
        let bad = || CaError::BadName {
            name: sni.to_owned(),
        };
        match ServerName::try_from(sni).map_err(|_| bad())? {
            ServerName::DnsName(name) => Ok(Self::Dns(name.as_ref().to_ascii_lowercase())),
            // SNI never carries an address (RFC 6066); a client that sends one gets that.
            ServerName::IpAddress(ip) => Ok(Self::Ip(IpAddr::from(ip))),
            _ => Err(bad()),
        }
    }
}

impl std::fmt::Display for LeafName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Dns(name) => f.write_str(name),
            Self::Ip(ip) => write!(f, "{ip}"),
        }
    }
}

/// One session's CA and the leaves it made.
pub struct SessionCa {
    issuer: CertifiedIssuer<'static, KeyPair>,
    leaves: Mutex<Leaves>,
}

impl std::fmt::Debug for SessionCa {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the key.
        f.debug_struct("SessionCa")
            .field("leaves", &self.lock().order.len())
            .finish_non_exhaustive()
    }
}

#[derive(Default)]
struct Leaves {
    by_name: HashMap<LeafName, Arc<CertifiedKey>>,
    /// Names in the order they were made, for eviction.
    order: VecDeque<LeafName>,
}

impl SessionCa {
    /// A new CA for `session` (its id goes in the certificate's name, so a user can tell
    /// which session a certificate came from).
    pub fn generate(session: &str) -> Result<Self, CaError> {
        let now = OffsetDateTime::now_utc();
        let mut params = CertificateParams::default();
        params
            .distinguished_name
            .push(DnType::CommonName, format!("agentsh session {session}"));
        params
            .distinguished_name
            .push(DnType::OrganizationName, "agentsh");
        params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        params.not_before = now - BACKDATE;
        params.not_after = now + CA_LIFETIME;
        let key = KeyPair::generate().map_err(CaError::Generate)?;
        let issuer = CertifiedIssuer::self_signed(params, key).map_err(CaError::Generate)?;
        Ok(Self {
            issuer,
            leaves: Mutex::new(Leaves::default()),
        })
    }

    /// The CA's certificate.
    pub fn certificate(&self) -> &CertificateDer<'static> {
        self.issuer.der()
    }

    /// The CA's certificate, PEM.
    pub fn pem(&self) -> String {
        pem_certificate(self.certificate())
    }

    /// The certificate and key to present for `name`, made on first use.
    pub fn leaf(&self, name: &LeafName) -> Result<Arc<CertifiedKey>, CaError> {
        if let Some(leaf) = self.lock().by_name.get(name) {
            return Ok(Arc::clone(leaf));
        }
        // Made outside the lock: two first handshakes for one name may both make one, and
        // the last kept; both are valid.
        let leaf = Arc::new(self.issue(name)?);
        let mut leaves = self.lock();
        if leaves
            .by_name
            .insert(name.clone(), Arc::clone(&leaf))
            .is_none()
        {
            leaves.order.push_back(name.clone());
        }
        while leaves.order.len() > MAX_LEAVES {
            if let Some(oldest) = leaves.order.pop_front() {
                leaves.by_name.remove(&oldest);
            }
        }
        Ok(leaf)
    }

    fn issue(&self, name: &LeafName) -> Result<CertifiedKey, CaError> {
        let issue_error = |source| CaError::Issue {
            name: name.to_string(),
            source,
        };
        let san = match name {
            LeafName::Dns(dns) => SanType::DnsName(
                dns.as_str()
                    .try_into()
                    .map_err(|_| CaError::BadName { name: dns.clone() })?,
            ),
            LeafName::Ip(ip) => SanType::IpAddress(*ip),
        };
        let now = OffsetDateTime::now_utc();
        let mut params = CertificateParams::default();
        params.subject_alt_names = vec![san];
        params
            .distinguished_name
            .push(DnType::CommonName, name.to_string());
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.not_before = now - BACKDATE;
        params.not_after = now + LEAF_LIFETIME;
        let key = KeyPair::generate().map_err(issue_error)?;
        let cert = params.signed_by(&key, &self.issuer).map_err(issue_error)?;
        let der = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
        let signing = rustls::crypto::ring::sign::any_supported_type(&der).map_err(|source| {
            CaError::Key {
                name: name.to_string(),
                source,
            }
        })?;
        Ok(CertifiedKey::new(vec![cert.der().clone()], signing))
    }

    /// Writes the bundle the agent trusts: `system_roots`, then this CA. The file is the
    /// agent user's (`owner`), readable by it alone, and replaced whole (never seen half
    /// written).
    pub fn write_bundle(
        &self,
        path: &Path,
        owner: u32,
        system_roots: &[CertificateDer<'_>],
    ) -> Result<(), CaError> {
        let io = |path: &Path| {
            let path = path.to_owned();
            move |source| CaError::Io { path, source }
        };
        let mut text = String::with_capacity((system_roots.len() + 1) * 2048);
        for root in system_roots {
            text.push_str(&pem_certificate(root));
        }
        text.push_str(&self.pem());
        let partial = path.with_extension("partial");
        let _ = fs::remove_file(&partial);
        let mut file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&partial)
            .map_err(io(&partial))?;
        file.write_all(text.as_bytes()).map_err(io(&partial))?;
        std::os::unix::fs::fchown(&file, Some(owner), None).map_err(io(&partial))?;
        file.set_permissions(fs::Permissions::from_mode(0o400))
            .map_err(io(&partial))?;
        drop(file);
        fs::rename(&partial, path).map_err(io(path))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Leaves> {
        self.leaves.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The system's root certificates (those rustls-native-certs finds), for the bundle.
pub fn system_roots() -> Vec<CertificateDer<'static>> {
    let found = rustls_native_certs::load_native_certs();
    for error in &found.errors {
        eprintln!("agentshd: a system root certificate cannot be read: {error}");
    }
    found.certs
}

fn pem_certificate(der: &CertificateDer<'_>) -> String {
    let encoded = base64::engine::general_purpose::STANDARD.encode(der.as_ref());
    let mut pem = String::with_capacity(encoded.len() + encoded.len() / 64 + 64);
    pem.push_str("-----BEGIN CERTIFICATE-----\n");
    for line in encoded.as_bytes().chunks(64) {
        // Base64 is ASCII.
        pem.push_str(std::str::from_utf8(line).unwrap_or_default());
        pem.push('\n');
    }
    pem.push_str("-----END CERTIFICATE-----\n");
    pem
}

#[cfg(test)]
mod tests {
    use std::net::Ipv4Addr;

    use rustls::pki_types::pem::PemObject;
    use rustls::server::{ClientHello, ResolvesServerCert};
    use rustls::{ClientConfig, ClientConnection, RootCertStore, ServerConfig, ServerConnection};

    use super::*;

    /// Presents the session's leaf for whatever name the client asks, as the proxy will.
    #[derive(Debug)]
    struct BySni(Arc<SessionCa>, IpAddr);

    impl ResolvesServerCert for BySni {
        fn resolve(&self, hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
            let name = LeafName::of(hello.server_name(), self.1).ok()?;
            self.0.leaf(&name).ok()
        }
    }

    /// A TLS handshake in memory: a client trusting `trusted` connects to a server that
    /// presents `ca`'s leaves, asking for `name`.
    fn handshake(
        ca: &Arc<SessionCa>,
        trusted: &SessionCa,
        name: &str,
    ) -> Result<(), rustls::Error> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut roots = RootCertStore::empty();
        roots.add(trusted.certificate().clone()).unwrap();
        let client_config = ClientConfig::builder_with_provider(Arc::clone(&provider))
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
        let server_config = ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_cert_resolver(Arc::new(BySni(
                Arc::clone(ca),
                IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2)),
            )));
        let server_name = ServerName::try_from(name.to_owned()).unwrap();
        let mut client = ClientConnection::new(Arc::new(client_config), server_name).unwrap();
        let mut server = ServerConnection::new(Arc::new(server_config)).unwrap();
        for _ in 0..10 {
            let mut wire = Vec::new();
            while client.wants_write() {
                client.write_tls(&mut wire).unwrap();
            }
            let mut read = &wire[..];
            while !read.is_empty() {
                server.read_tls(&mut read).unwrap();
            }
            server.process_new_packets()?;
            let mut wire = Vec::new();
            while server.wants_write() {
                server.write_tls(&mut wire).unwrap();
            }
            let mut read = &wire[..];
            while !read.is_empty() {
                client.read_tls(&mut read).unwrap();
            }
            client.process_new_packets()?;
            if !client.is_handshaking() && !server.is_handshaking() {
                return Ok(());
            }
        }
        panic!("the handshake did not finish");
    }

    #[test]
    fn its_leaves_verify_for_names_and_addresses_and_only_under_its_own_ca() {
        let ca = Arc::new(SessionCa::generate("s1").unwrap());
        handshake(&ca, &ca, "api.anthropic.com").unwrap();
        handshake(&ca, &ca, "API.OpenAI.com").unwrap();
        // No SNI for an address: the leaf is for the address dialled.
        handshake(&ca, &ca, "127.0.0.2").unwrap();
        // Another session's CA is no use here.
        let other = SessionCa::generate("s2").unwrap();
        let refused = handshake(&ca, &other, "api.anthropic.com").unwrap_err();
        assert!(refused.to_string().contains("UnknownIssuer"), "{refused}");
    }

    #[test]
    fn leaves_are_kept_per_name_and_bounded() {
        let ca = SessionCa::generate("s1").unwrap();
        let name = LeafName::Dns("api.anthropic.com".into());
        let first = ca.leaf(&name).unwrap();
        assert!(Arc::ptr_eq(&first, &ca.leaf(&name).unwrap()));
        let ip = LeafName::Ip(IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)));
        assert!(!Arc::ptr_eq(&first, &ca.leaf(&ip).unwrap()));
        for i in 0..MAX_LEAVES {
            ca.leaf(&LeafName::Dns(format!("h{i}.example"))).unwrap();
        }
        let leaves = ca.lock();
        assert_eq!(leaves.by_name.len(), MAX_LEAVES);
        assert_eq!(leaves.order.len(), MAX_LEAVES);
        assert!(!leaves.by_name.contains_key(&name), "the oldest went first");
    }

    #[test]
    fn names_come_from_sni_else_from_the_address() {
        let ip = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2));
        assert_eq!(
            LeafName::of(Some("API.Anthropic.com"), ip).unwrap(),
            LeafName::Dns("api.anthropic.com".into())
        );
        assert_eq!(LeafName::of(None, ip).unwrap(), LeafName::Ip(ip));
        for bad in ["", "bad name", "a..b", "exa mple.com"] {
            let err = LeafName::of(Some(bad), ip).unwrap_err();
            assert!(matches!(err, CaError::BadName { .. }), "{bad:?}: {err}");
        }
    }

    #[test]
    fn the_bundle_is_the_system_roots_then_the_ca_for_its_owner_only() {
        use std::os::unix::fs::MetadataExt;

        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ca-bundle.pem");
        let ca = SessionCa::generate("s1").unwrap();
        let other = SessionCa::generate("root-stand-in").unwrap();
        let roots = vec![other.certificate().clone()];
        let me = nix::unistd::geteuid().as_raw();
        ca.write_bundle(&path, me, &roots).unwrap();
        let meta = fs::metadata(&path).unwrap();
        assert_eq!(meta.mode() & 0o777, 0o400);
        assert_eq!(meta.uid(), me);
        let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(&path)
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(
            certs,
            [other.certificate().clone(), ca.certificate().clone()]
        );
        // Written again (a resumed session): replaced whole, even over a read-only file.
        ca.write_bundle(&path, me, &[]).unwrap();
        let again: Vec<_> = CertificateDer::pem_file_iter(&path).unwrap().collect();
        assert_eq!(again.len(), 1);
        assert!(!path.with_extension("partial").exists());
    }

    #[test]
    fn the_system_roots_are_found() {
        // Debian's ca-certificates is installed by setup.sh; the bundle would be useless
        // without them.
        assert!(!system_roots().is_empty());
    }
}
