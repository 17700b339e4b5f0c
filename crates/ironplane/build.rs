//! Link options for the `ironplane` binary only.

fn main() {
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    let env = std::env::var("CARGO_CFG_TARGET_ENV").unwrap_or_default();
    // Relative relocations packed as DT_RELR (glibc 2.36+, binutils 2.38+, lld, mold): the
    // position-independent binary's 1.4 MB relocation table shrinks to ~20 KB, which the dynamic
    // linker otherwise reads, and keeps resident, at every start.
    if os == "linux" && env == "gnu" {
        println!("cargo:rustc-link-arg-bins=-Wl,-z,pack-relative-relocs");
    }
    println!("cargo:rerun-if-changed=build.rs");
}
