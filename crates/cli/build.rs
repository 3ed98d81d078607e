//! Builds stage B of `ickpt restart` (`restorer/`): a freestanding, position-independent blob
//! that stage A copies anywhere and calls at its first byte. It is compiled with the system C
//! compiler, linked as a static PIE with `restorer/blob.ld`, checked, and flattened with
//! `objcopy` to `$OUT_DIR/stage_b.bin`, which `src/restart/plan.rs` includes.
//!
//! The blob works only if it needs nothing done to it after the copy: the link is refused if it
//! has a relocation left (an absolute address: stage A applies none) or an allocated section
//! besides code, read-only data and the tables every PIE link makes (writable data: the blob
//! is mapped read and execute only). On targets other than x86-64 Linux the file is empty and
//! `ickpt restart` says it is not supported there.

use std::path::{Path, PathBuf};
use std::process::Command;

const SOURCES: &[&str] = &["plan.h", "stage_b.c", "x86_64.S", "blob.ld"];

/// What every step compiles with: freestanding (no libc, no builtins that become libc calls),
/// no stack protector (it reads the canary through %fs, which is stage A's and then the
/// program's), no unwind tables, no CET notes, no vector registers (the program's are in its
/// signal frames; stage B leaves them alone), hidden symbols (calls between them need no GOT).
const CFLAGS: &[&str] = &[
    "-fPIE",
    "-ffreestanding",
    "-nostdlib",
    "-fno-stack-protector",
    "-fno-builtin",
    "-fno-asynchronous-unwind-tables",
    "-O2",
    "-fcf-protection=none",
    "-mgeneral-regs-only",
    "-fvisibility=hidden",
    "-Wall",
    "-Wextra",
];

/// Allocated sections a static PIE link makes whatever the code; they are not copied.
const PIE_TABLES: &[&str] = &[".dynsym", ".dynstr", ".gnu.hash", ".hash", ".dynamic"];

fn main() {
    for f in SOURCES {
        println!("cargo:rerun-if-changed=restorer/{f}");
    }
    println!("cargo:rerun-if-changed=build.rs");
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("OUT_DIR"));
    let bin = out.join("stage_b.bin");
    let arch = std::env::var("CARGO_CFG_TARGET_ARCH").unwrap_or_default();
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    if arch != "x86_64" || os != "linux" {
        std::fs::write(&bin, []).expect("write stage_b.bin");
        return;
    }
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("restorer");
    let mut objects = Vec::new();
    for src in ["stage_b.c", "x86_64.S"] {
        let obj = out.join(format!("{src}.o"));
        run(Command::new("cc")
            .args(CFLAGS)
            .arg("-c")
            .arg(dir.join(src))
            .arg("-o")
            .arg(&obj));
        objects.push(obj);
    }
    let elf = out.join("stage_b.elf");
    run(Command::new("cc")
        .args(["-nostdlib", "-static-pie", "-Wl,--no-dynamic-linker"])
        .arg("-Wl,--build-id=none")
        .arg(format!("-Wl,-T,{}", dir.join("blob.ld").display()))
        .args(&objects)
        .arg("-o")
        .arg(&elf));
    let image = std::fs::read(&elf).expect("read stage_b.elf");
    if let Err(e) = check(&image) {
        panic!("stage B ({}): {e}", elf.display());
    }
    run(Command::new("objcopy")
        .args(["-O", "binary", "-j", ".text", "-j", ".rodata"])
        .arg(&elf)
        .arg(&bin));
}

/// Runs a build step; its warnings reach the cargo output, a failure ends the build.
fn run(cmd: &mut Command) {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e} (stage B needs cc and objcopy)"));
    let stderr = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() {
        panic!("{cmd:?} failed ({}):\n{stderr}", out.status);
    }
    for line in stderr.lines() {
        println!("cargo:warning={line}");
    }
}

/// The linked blob's sections, checked as the module comment says.
fn check(elf: &[u8]) -> Result<(), String> {
    const SHT_RELA: u32 = 4;
    const SHT_REL: u32 = 9;
    const SHT_RELR: u32 = 19;
    const SHF_ALLOC: u64 = 2;
    let u16_at = |o: usize| elf.get(o..o + 2).map(|b| u16::from_le_bytes([b[0], b[1]]));
    let u32_at = |o: usize| {
        elf.get(o..o + 4)
            .map(|b| u32::from_le_bytes(b.try_into().unwrap()))
    };
    let u64_at = |o: usize| {
        elf.get(o..o + 8)
            .map(|b| u64::from_le_bytes(b.try_into().unwrap()))
    };
    let bad = || "not a well-formed ELF64 file".to_string();
    if elf.get(..5) != Some(b"\x7fELF\x02") {
        return Err(bad());
    }
    if u64_at(0x18).ok_or_else(bad)? != 0 {
        return Err("the entry point is not at offset 0".into());
    }
    let shoff = u64_at(0x28).ok_or_else(bad)? as usize;
    let shentsize = u16_at(0x3a).ok_or_else(bad)? as usize;
    let shnum = u16_at(0x3c).ok_or_else(bad)? as usize;
    let shstrndx = u16_at(0x3e).ok_or_else(bad)? as usize;
    let header = |i: usize| shoff + i * shentsize;
    let names = u64_at(header(shstrndx) + 24).ok_or_else(bad)? as usize;
    let mut code = false;
    for i in 0..shnum {
        let h = header(i);
        let name_at = names + u32_at(h).ok_or_else(bad)? as usize;
        let name_len = elf
            .get(name_at..)
            .and_then(|s| s.iter().position(|&b| b == 0))
            .ok_or_else(bad)?;
        let name = String::from_utf8_lossy(&elf[name_at..name_at + name_len]);
        let kind = u32_at(h + 4).ok_or_else(bad)?;
        let flags = u64_at(h + 8).ok_or_else(bad)?;
        let size = u64_at(h + 32).ok_or_else(bad)?;
        if size == 0 {
            continue;
        }
        if matches!(kind, SHT_RELA | SHT_REL | SHT_RELR) {
            return Err(format!(
                "{name}: {size} bytes of dynamic relocations (an absolute address in the code \
                 or data; stage A applies no relocation)"
            ));
        }
        code |= name == ".text";
        let kept = [".text", ".rodata"].contains(&name.as_ref());
        if flags & SHF_ALLOC != 0 && !kept && !PIE_TABLES.contains(&name.as_ref()) {
            return Err(format!(
                "{name}: {size} bytes of a section the blob cannot have (writable data or a \
                 table it would need filled in)"
            ));
        }
    }
    if !code {
        return Err("no .text".into());
    }
    Ok(())
}
