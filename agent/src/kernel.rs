//! The kernel programs: load the embedded eBPF object, attach it to a cgroup, fill its maps.
//!
//! So far one program, `connect4`: a process in a registered session cgroup cannot connect to a
//! denied IPv4 destination (its connect() fails with EPERM). Redirection into the proxy, IPv6,
//! sock_ops and pinning come with the kernel enforcement work.

use std::fs::File;
use std::net::Ipv4Addr;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use agent_common::{Dest4, SessionInfo};
use aya::Ebpf;
use aya::maps::HashMap;
use aya::programs::{CgroupAttachMode, CgroupSockAddr};

/// The object agent/build.rs compiled from agent-ebpf (empty when built with AYA_BUILD_SKIP=1).
static EBPF_OBJECT: &[u8] = aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/agent-ebpf"));

#[derive(Debug, thiserror::Error)]
pub enum KernelError {
    #[error("this build has no kernel programs (it was built with AYA_BUILD_SKIP=1)")]
    NotBuilt,
    #[error("loading the kernel programs failed: {0} (needs root or CAP_BPF + CAP_NET_ADMIN)")]
    Load(#[from] aya::EbpfError),
    #[error("kernel program {name}: {source}")]
    Program {
        name: &'static str,
        source: aya::programs::ProgramError,
    },
    #[error("map {name}: {source}")]
    Map {
        name: &'static str,
        source: aya::maps::MapError,
    },
    #[error("map {0} is missing from the object")]
    MissingMap(&'static str),
    #[error("program {0} is missing from the object")]
    MissingProgram(&'static str),
    #[error("no cgroup2 file system in /proc/self/mountinfo")]
    NoCgroup2,
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// The loaded programs and their maps. Dropping it detaches everything.
pub struct KernelPrograms {
    ebpf: Ebpf,
}

impl KernelPrograms {
    /// Loads the object and passes `connect4` through the verifier.
    pub fn load() -> Result<Self, KernelError> {
        if EBPF_OBJECT.is_empty() {
            return Err(KernelError::NotBuilt);
        }
        let mut ebpf = Ebpf::load(EBPF_OBJECT)?;
        connect4(&mut ebpf)?
            .load()
            .map_err(|source| KernelError::Program {
                name: "connect4",
                source,
            })?;
        Ok(Self { ebpf })
    }

    /// Attaches `connect4` to the cgroup directory `cgroup` (it then sees every connect()
    /// below it).
    pub fn attach(&mut self, cgroup: &Path) -> Result<(), KernelError> {
        let dir = File::open(cgroup).map_err(|source| KernelError::Io {
            path: cgroup.to_owned(),
            source,
        })?;
        // Single: new kernels refuse AllowMultiple through links with EINVAL.
        connect4(&mut self.ebpf)?
            .attach(&dir, CgroupAttachMode::Single)
            .map_err(|source| KernelError::Program {
                name: "connect4",
                source,
            })?;
        Ok(())
    }

    /// Registers the cgroup with id `cgroup_id` as session `session_id`.
    pub fn add_session(&mut self, cgroup_id: u64, session_id: u32) -> Result<(), KernelError> {
        let info = SessionInfo {
            session_id,
            flags: 0,
        };
        self.map::<u64, SessionInfo>("SESSIONS")?
            .insert(cgroup_id, info, 0)
            .map_err(|source| KernelError::Map {
                name: "SESSIONS",
                source,
            })
    }

    /// Session processes may not connect to `addr:port` (`port` 0: any port).
    pub fn deny4(&mut self, addr: Ipv4Addr, port: u16) -> Result<(), KernelError> {
        let key = Dest4::new(u32::from(addr).to_be(), port);
        self.map::<Dest4, u8>("DENY4")?
            .insert(key, 1, 0)
            .map_err(|source| KernelError::Map {
                name: "DENY4",
                source,
            })
    }

    fn map<K: aya::Pod, V: aya::Pod>(
        &mut self,
        name: &'static str,
    ) -> Result<HashMap<&mut aya::maps::MapData, K, V>, KernelError> {
        let map = self
            .ebpf
            .map_mut(name)
            .ok_or(KernelError::MissingMap(name))?;
        HashMap::try_from(map).map_err(|source| KernelError::Map { name, source })
    }
}

fn connect4(ebpf: &mut Ebpf) -> Result<&mut CgroupSockAddr, KernelError> {
    ebpf.program_mut("connect4")
        .ok_or(KernelError::MissingProgram("connect4"))?
        .try_into()
        .map_err(|source| KernelError::Program {
            name: "connect4",
            source,
        })
}

/// Where cgroup2 is mounted: `/sys/fs/cgroup` on unified hosts, `/sys/fs/cgroup/unified` on
/// hybrid ones; read from mountinfo, never assumed.
pub fn cgroup2_mount() -> Result<PathBuf, KernelError> {
    let path = Path::new("/proc/self/mountinfo");
    let text = std::fs::read_to_string(path).map_err(|source| KernelError::Io {
        path: path.to_owned(),
        source,
    })?;
    parse_cgroup2_mount(&text).ok_or(KernelError::NoCgroup2)
}

fn parse_cgroup2_mount(mountinfo: &str) -> Option<PathBuf> {
    mountinfo.lines().find_map(|line| {
        let (before, after) = line.split_once(" - ")?;
        let fstype = after.split_whitespace().next()?;
        let mount_point = before.split_whitespace().nth(4)?;
        (fstype == "cgroup2").then(|| PathBuf::from(unescape_mountinfo(mount_point)))
    })
}

/// mountinfo escapes space, tab, newline and backslash as `\ooo`.
fn unescape_mountinfo(field: &str) -> String {
    let mut out = String::with_capacity(field.len());
    let mut rest = field;
    while let Some(i) = rest.find('\\') {
        out.push_str(&rest[..i]);
        let code = rest.get(i + 1..i + 4);
        match code.and_then(|c| u8::from_str_radix(c, 8).ok()) {
            Some(byte) => {
                out.push(char::from(byte));
                rest = &rest[i + 4..];
            }
            None => {
                out.push('\\');
                rest = &rest[i + 1..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// A cgroup2 directory's id, as `bpf_get_current_cgroup_id` reports it: its inode number.
pub fn cgroup_id(dir: &Path) -> Result<u64, KernelError> {
    std::fs::metadata(dir)
        .map(|m| m.ino())
        .map_err(|source| KernelError::Io {
            path: dir.to_owned(),
            source,
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_cgroup2_on_unified_and_hybrid_hosts() {
        let hybrid = "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n\
                      32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n\
                      41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n";
        assert_eq!(
            parse_cgroup2_mount(hybrid),
            Some(PathBuf::from("/sys/fs/cgroup/unified"))
        );
        let unified =
            "25 1 0:22 / /sys/fs/cgroup rw,nosuid shared:4 - cgroup2 cgroup2 rw,nsdelegate\n";
        assert_eq!(
            parse_cgroup2_mount(unified),
            Some(PathBuf::from("/sys/fs/cgroup"))
        );
        let spaced = "25 1 0:22 / /mnt/my\\040cgroups rw - cgroup2 none rw\n";
        assert_eq!(
            parse_cgroup2_mount(spaced),
            Some(PathBuf::from("/mnt/my cgroups"))
        );
        assert_eq!(
            parse_cgroup2_mount("1 2 0:1 / / rw - ext4 /dev/vda rw\n"),
            None
        );
    }
}
