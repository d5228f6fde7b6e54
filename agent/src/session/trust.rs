//! The sessions' certificate authorities, and the bundles their agents trust.
//!
//! Each session gets its [`SessionCa`] when it starts (and a new one when a restarted daemon
//! takes it back: the old key died with the old daemon). Its bundle, the system roots plus
//! the certificates the agent already trusted plus the CA, is `<dir>/<session>.pem`, owned by
//! and readable by the agent's user alone; the directory lets others pass but not list.

use std::collections::HashMap;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;

use super::ca::{CaError, SessionCa, system_roots};

/// The live sessions' authorities.
pub struct Trust {
    dir: PathBuf,
    system_roots: Vec<CertificateDer<'static>>,
    authorities: Mutex<HashMap<String, Arc<SessionCa>>>,
}

impl Trust {
    /// Bundles go into `dir` (made if missing: mode 0711, so an agent can open its own file
    /// by name but not see which sessions exist).
    pub fn new(dir: &Path) -> Result<Self, CaError> {
        let io = |source| CaError::Io {
            path: dir.to_owned(),
            source,
        };
        fs::create_dir_all(dir).map_err(io)?;
        fs::set_permissions(dir, fs::Permissions::from_mode(0o711)).map_err(io)?;
        Ok(Self {
            dir: dir.to_owned(),
            system_roots: system_roots(),
            authorities: Mutex::default(),
        })
    }

    /// Makes session `id`'s CA and writes its bundle for the agent's user `owner`. `trusted`
    /// is PEM the agent trusted before (the files its CA variables named): its certificates
    /// stay trusted, anything else in it is ignored. Returns the bundle's path.
    pub fn open(&self, id: &str, owner: u32, trusted: &str) -> Result<PathBuf, CaError> {
        let ca = Arc::new(SessionCa::generate(id)?);
        let mut roots = self.system_roots.clone();
        roots.extend(
            CertificateDer::pem_slice_iter(trusted.as_bytes())
                .filter_map(Result::ok)
                .filter(|cert| !self.system_roots.contains(cert)),
        );
        let path = self.bundle_path(id);
        ca.write_bundle(&path, owner, &roots)?;
        self.lock().insert(id.to_owned(), ca);
        Ok(path)
    }

    /// Session `id`'s CA, while it is live.
    pub fn authority(&self, id: &str) -> Option<Arc<SessionCa>> {
        self.lock().get(id).cloned()
    }

    /// Forgets session `id`'s CA and removes its bundle.
    pub fn close(&self, id: &str) {
        self.lock().remove(id);
        let _ = fs::remove_file(self.bundle_path(id));
    }

    fn bundle_path(&self, id: &str) -> PathBuf {
        self.dir.join(format!("{id}.pem"))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<SessionCa>>> {
        crate::sync::lock(&self.authorities)
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::MetadataExt;

    use super::*;

    #[test]
    fn a_bundle_holds_the_roots_the_agent_trusted_and_the_session_ca() {
        let dir = tempfile::tempdir().unwrap();
        let trust = Trust::new(&dir.path().join("trust")).unwrap();
        let corporate = SessionCa::generate("corporate").unwrap();
        let trusted = format!("junk before\n{}not a certificate\n", corporate.pem());
        let uid = nix::unistd::getuid().as_raw();
        let path = trust.open("s1", uid, &trusted).unwrap();
        let meta = fs::metadata(&path).unwrap();
        assert_eq!(meta.mode() & 0o777, 0o400);
        assert_eq!(meta.uid(), uid);
        let dir_mode = fs::metadata(dir.path().join("trust")).unwrap().mode() & 0o777;
        assert_eq!(dir_mode, 0o711);
        let text = fs::read_to_string(&path).unwrap();
        let ca = trust.authority("s1").unwrap();
        assert!(text.ends_with(&ca.pem()), "the session CA comes last");
        assert!(
            text.contains(&corporate.pem()),
            "the agent's own CA stays trusted"
        );
        assert!(!text.contains("junk"));
        trust.close("s1");
        assert!(trust.authority("s1").is_none());
        assert!(!path.exists());
    }
}
