//! Builds agent-ebpf for the BPF target (aya-build) so the object can be embedded in agentshd.
//! `AYA_BUILD_SKIP=1` skips it (aya-build's switch) for engine-only builds; the embedded object
//! is then empty and `kernel::KernelPrograms::load` says so.
use anyhow::{Context as _, anyhow};

fn main() -> anyhow::Result<()> {
    let manifest_dir = std::env::var("CARGO_MANIFEST_DIR").context("CARGO_MANIFEST_DIR")?;
    let root = std::path::Path::new(&manifest_dir)
        .parent()
        .ok_or_else(|| anyhow!("agent crate has no parent directory"))?
        .join("agent-ebpf");
    let root = root
        .to_str()
        .ok_or_else(|| anyhow!("non-UTF-8 path {}", root.display()))?;
    aya_build::build_ebpf(
        [aya_build::Package {
            name: "agent-ebpf",
            root_dir: root,
            ..Default::default()
        }],
        aya_build::Toolchain::default(),
    )?;
    let object =
        std::path::Path::new(&std::env::var("OUT_DIR").context("OUT_DIR")?).join("agent-ebpf");
    if !object.exists() {
        std::fs::write(&object, b"").context("writing the empty eBPF placeholder")?;
    }
    Ok(())
}
