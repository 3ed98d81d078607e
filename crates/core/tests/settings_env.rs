//! Every `ICKPT_*` variable set to a value it does not accept stops `Engine::open` with an
//! error naming the variable, the value and what it accepts, before the store directory is
//! touched; none is ignored (`ICKPT_NO_UFFD=yes` and a non-UTF-8 value used to pass
//! silently). Own binary, one test: the environment is the process's.

mod common;
use common::scratch_dir;
use ickpt::{Config, Engine, InitError, SettingError};

fn refused(var: &str, value: impl AsRef<std::ffi::OsStr>) -> SettingError {
    let value = value.as_ref();
    let dir = scratch_dir("settings-env");
    std::env::set_var(var, value);
    let r = Engine::open(Config::new(&dir));
    std::env::remove_var(var);
    let err = match r {
        Err(e) => e,
        Ok(_) => panic!("{var}={value:?} was accepted"),
    };
    let s = match &err {
        InitError::Setting(s) => s.clone(),
        other => panic!("{var}={value:?}: not a setting error: {other:?}"),
    };
    assert_eq!(s.name, var, "{err}");
    // The value exactly as found (quoted), not just some text that happens to contain it.
    assert_eq!(s.value, format!("{:?}", value.to_string_lossy()), "{err}");
    let msg = err.to_string();
    assert!(msg.contains(var) && msg.contains(&s.value), "{msg}");
    assert!(msg.contains("expected"), "{msg}");
    assert_eq!(
        ickpt::capi::code_of(&err.into()),
        ickpt::capi::ickpt_result::ICKPT_ERR_INVALID_ARGUMENT
    );
    assert!(!dir.exists(), "{var}: the directory was touched");
    s
}

#[test]
fn a_malformed_variable_is_an_error_naming_it() {
    for (var, value) in [
        ("ICKPT_MODE", "fast"),
        ("ICKPT_COW_BYTES", "lots"),
        ("ICKPT_FAULT_AROUND", "0"),
        ("ICKPT_GRANULARITY", "word"),
        ("ICKPT_ACCK_PIECES", "17"),
        ("ICKPT_HUGE_PAGES", "yes"),
        ("ICKPT_FLUSH_ORDER", "random"),
        ("ICKPT_BANDWIDTH", "fast"),
        ("ICKPT_BACKEND", "soft-dirty"),
        ("ICKPT_FAULT", "eio"),
        ("ICKPT_RENAME", "copy"),
        ("ICKPT_COW_BYTES", "2000G"),
        ("ICKPT_UFFD_SPIN", "sometimes"),
        ("ICKPT_KEEP_VERSIONS", "many"),
        ("ICKPT_KEEP_VERSIONS", "-1"),
        ("ICKPT_KEEP_WITHIN", "soon"),
        ("ICKPT_KEEP_WITHIN", "7"),
        ("ICKPT_POLICY", "cheap"),
        ("ICKPT_RESTART_BOUND", "0.5"),
        ("ICKPT_RESTART_BOUND", "inf"),
    ] {
        // Every variable is read at every open, whatever backend it concerns.
        refused(var, value);
    }
    refused("ICKPT_NO_UFFD", "yes");
    refused("ICKPT_NO_PAGEMAP_SCAN", "on");
    // Not UTF-8: an error too, never read as unset.
    use std::os::unix::ffi::OsStrExt;
    let s = refused("ICKPT_MODE", std::ffi::OsStr::from_bytes(b"sy\xffnc"));
    assert!(s.expected.contains("UTF-8"), "{s:?}");
    keep_variables_set_the_limits_a_program_leaves_unset();
}

/// `ICKPT_KEEP_VERSIONS` and `ICKPT_KEEP_WITHIN` in effect: one version kept, with its chain.
fn keep_variables_set_the_limits_a_program_leaves_unset() {
    for (var, value) in [("ICKPT_KEEP_VERSIONS", "1"), ("ICKPT_KEEP_WITHIN", "1ns")] {
        let dir = scratch_dir("settings-env-keep");
        let mut c = Config::new(&dir);
        c.full_every = 3;
        c.keep_chains = 100;
        std::env::set_var(var, value);
        let e = Engine::open(c);
        std::env::remove_var(var);
        let e = e.unwrap();
        let p = e.alloc(1, 4096).unwrap();
        for v in 1..=5u8 {
            // SAFETY: alloc returned a page, live while `e` lives.
            unsafe { p.write(v) };
            e.checkpoint().unwrap();
        }
        let mut held: Vec<u64> = std::fs::read_dir(&*dir)
            .unwrap()
            .filter_map(|f| ickpt::store::parse_version_name(f.unwrap().file_name().to_str()?))
            .collect();
        held.sort_unstable();
        // 5 increments 4, a full version.
        assert_eq!(held, vec![4, 5], "{var}={value}");
    }
}
