//! Rebuild the kernel programs when bpf-linker changes (it is not a cargo dependency).
fn main() {
    match which::which("bpf-linker") {
        Ok(path) => println!("cargo:rerun-if-changed={}", path.display()),
        Err(err) => println!("cargo:warning=bpf-linker not found: {err}"),
    }
}
