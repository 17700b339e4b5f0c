//! Link options for the `ironplane` binary only.

use std::io::Read;

fn main() {
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    let env = std::env::var("CARGO_CFG_TARGET_ENV").unwrap_or_default();
    // Relative relocations packed as DT_RELR (glibc 2.36+, binutils 2.38+, lld, mold): the
    // position-independent binary's 1.4 MB relocation table shrinks to ~20 KB, which the dynamic
    // linker otherwise reads, and keeps resident, at every start.
    if os == "linux" && env == "gnu" {
        println!("cargo:rustc-link-arg-bins=-Wl,-z,pack-relative-relocs");
    }
    startup_symbol_order();
    println!("cargo:rerun-if-changed=build.rs");
}

/// Lays out the functions that start-up and an idle server run first and side by side
/// (`link/startup-symbols.txt.gz`, made by `scripts/startup-symbols.sh`): the kernel maps the
/// pages around every code page a fault touches, so with those functions spread over the whole
/// `.text` an idle server kept ~15 MiB of code resident, and ~7 MiB with them together.
///
/// Only where rustc links with its own lld by default (x86_64 Linux with glibc) and nobody chose
/// another linker: GNU ld has no `--symbol-ordering-file`. A name the list has and the binary
/// lacks is skipped, so a stale list costs memory, never a build.
fn startup_symbol_order() {
    let list = "link/startup-symbols.txt.gz";
    println!("cargo:rerun-if-changed={list}");
    println!("cargo:rerun-if-env-changed=RUSTC_LINKER");
    let var = |name: &str| std::env::var(name).unwrap_or_default();
    let rust_lld_default = var("CARGO_CFG_TARGET_ARCH") == "x86_64"
        && var("CARGO_CFG_TARGET_OS") == "linux"
        && var("CARGO_CFG_TARGET_ENV") == "gnu";
    // A linker configured for the target (cargo then sets RUSTC_LINKER), or chosen in RUSTFLAGS
    // (`-C linker=`, `-C linker-flavor=`, `-C link-arg=-fuse-ld=...`, `-Z linker-features`).
    let flags = var("CARGO_ENCODED_RUSTFLAGS");
    let other_linker = std::env::var_os("RUSTC_LINKER").is_some()
        || flags.contains("linker")
        || flags.contains("fuse-ld");
    if !rust_lld_default || other_linker {
        return;
    }
    let mut symbols = Vec::new();
    let read = std::fs::File::open(list)
        .and_then(|f| flate2::read::GzDecoder::new(f).read_to_end(&mut symbols));
    if let Err(e) = read {
        println!("cargo:warning=startup symbol order not used ({list}: {e})");
        return;
    }
    let dest = std::path::Path::new(&var("OUT_DIR")).join("startup-symbols.txt");
    std::fs::write(&dest, symbols).expect("write into OUT_DIR");
    // -Xlinker passes each argument whole, whatever the path holds (-Wl splits at commas).
    for arg in [
        "--symbol-ordering-file",
        &dest.display().to_string(),
        "--no-warn-symbol-ordering",
    ] {
        println!("cargo:rustc-link-arg-bins=-Xlinker");
        println!("cargo:rustc-link-arg-bins={arg}");
    }
}
