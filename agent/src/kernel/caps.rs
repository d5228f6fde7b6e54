//! The capabilities the kernel programs need, read from a process's effective set: what
//! agentshd says it lacks when they cannot load, and what `agentshctl doctor` checks.

// Capability bits, include/uapi/linux/capability.h.
pub const CAP_NET_ADMIN: u32 = 12;
pub const CAP_SYS_ADMIN: u32 = 21;
pub const CAP_PERFMON: u32 = 38;
pub const CAP_BPF: u32 = 39;

/// CapEff from a /proc/PID/status text: the effective capabilities, a hex bit mask.
pub fn parse_cap_eff(status: &str) -> Option<u64> {
    let hex = status.lines().find_map(|l| l.strip_prefix("CapEff:"))?;
    u64::from_str_radix(hex.trim(), 16).ok()
}

/// This process's effective capabilities (`None`: /proc says nothing readable).
pub fn effective() -> Option<u64> {
    parse_cap_eff(&std::fs::read_to_string("/proc/self/status").ok()?)
}

pub fn has_cap(caps: u64, bit: u32) -> bool {
    caps & (1 << bit) != 0
}

/// What the kernel programs need that `caps` lacks: loading (CAP_BPF, CAP_PERFMON for the
/// verifier's pointer rules) and attaching to cgroups (CAP_NET_ADMIN). CAP_SYS_ADMIN covers
/// the first two, as on kernels before 5.8, which have only it.
pub fn missing(caps: u64) -> Vec<&'static str> {
    let admin = has_cap(caps, CAP_SYS_ADMIN);
    let mut missing = Vec::new();
    if !admin && !has_cap(caps, CAP_BPF) {
        missing.push("CAP_BPF");
    }
    if !admin && !has_cap(caps, CAP_PERFMON) {
        missing.push("CAP_PERFMON");
    }
    if !has_cap(caps, CAP_NET_ADMIN) {
        missing.push("CAP_NET_ADMIN");
    }
    missing
}

/// Which of the capabilities that matter here `caps` has.
pub fn present(caps: u64) -> Vec<&'static str> {
    [
        ("CAP_BPF", CAP_BPF),
        ("CAP_PERFMON", CAP_PERFMON),
        ("CAP_SYS_ADMIN", CAP_SYS_ADMIN),
        ("CAP_NET_ADMIN", CAP_NET_ADMIN),
    ]
    .into_iter()
    .filter(|(_, bit)| has_cap(caps, *bit))
    .map(|(name, _)| name)
    .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const ROOT_STATUS: &str = "Name:\tcat\nUmask:\t0022\nCapInh:\t0000000000000000\n\
        CapPrm:\t000001ffffffffff\nCapEff:\t000001ffffffffff\nCapBnd:\t000001ffffffffff\n";

    #[test]
    fn cap_eff_is_read_as_a_hex_mask() {
        assert_eq!(parse_cap_eff(ROOT_STATUS), Some(0x1ff_ffff_ffff));
        assert_eq!(parse_cap_eff("CapEff:\t0000000000000000\n"), Some(0));
        assert_eq!(parse_cap_eff("CapPrm:\t00000000000000ff\n"), None);
        assert_eq!(parse_cap_eff("CapEff:\tnot hex\n"), None);
        assert_eq!(parse_cap_eff(""), None);
    }

    #[test]
    fn root_lacks_nothing_and_an_empty_set_lacks_everything() {
        assert!(missing(0x1ff_ffff_ffff).is_empty());
        assert_eq!(missing(0), ["CAP_BPF", "CAP_PERFMON", "CAP_NET_ADMIN"]);
    }

    #[test]
    fn cap_sys_admin_stands_in_for_bpf_and_perfmon_not_net_admin() {
        let admin = 1 << CAP_SYS_ADMIN;
        assert_eq!(missing(admin), ["CAP_NET_ADMIN"]);
        assert!(missing(admin | 1 << CAP_NET_ADMIN).is_empty());
        let granted = 1 << CAP_BPF | 1 << CAP_PERFMON | 1 << CAP_NET_ADMIN;
        assert!(missing(granted).is_empty());
        assert_eq!(
            present(granted),
            ["CAP_BPF", "CAP_PERFMON", "CAP_NET_ADMIN"]
        );
        assert_eq!(missing(1 << CAP_BPF | 1 << CAP_NET_ADMIN), ["CAP_PERFMON"]);
    }
}
