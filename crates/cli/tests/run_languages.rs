//! `ickpt run` / `ickpt restart` on unmodified programs of other languages and runtimes:
//! AVX2 code with live vector registers, OpenMP teams waiting actively and passively,
//! Fortran, C++ with std::thread, CPython with NumPy. Each must survive three kills and
//! restarts with exactly the output of an uninterrupted run (`common::run::generations`).

mod common;
use common::run::{compile, generations, have, Program};
use common::scratch;

fn dir(name: &str) -> common::Scratch {
    let tmp = scratch(&format!("lang-{name}"));
    std::fs::create_dir_all(tmp.as_path()).unwrap();
    tmp
}

#[test]
fn avx2_registers_live_across_the_stop_survive_three_kills() {
    if !(std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma"))
    {
        eprintln!("SKIPPED: this CPU has no AVX2 and FMA");
        return;
    }
    let tmp = dir("avx");
    let exe = compile("cc", "avx.c", &tmp, &["-O2", "-mavx2", "-mfma"]);
    generations(&Program::new(exe, &["1500"]), &tmp, 3);
}

/// OpenMP with four threads on two cores, its team waiting between regions as `policy` says.
fn openmp(policy: &str) {
    let tmp = dir(&format!("omp-{policy}"));
    let exe = compile("cc", "omp.c", &tmp, &["-O2", "-fopenmp"]);
    let mut p = Program::new(exe, &["1500", "65536"])
        .env("OMP_NUM_THREADS", "4")
        .env("OMP_WAIT_POLICY", policy);
    p.wrap = vec!["taskset".into(), "-c".into(), "0,1".into()];
    generations(&p, &tmp, 3);
}

#[test]
fn openmp_spinning_team_survives_three_kills() {
    openmp("active");
}

#[test]
fn openmp_sleeping_team_survives_three_kills() {
    openmp("passive");
}

/// gfortran's runtime installs a SIGSEGV handler of its own (for its backtraces) when the
/// program starts, after ickpt's library did; -fno-backtrace leaves the default.
fn fortran(flags: &[&str]) {
    if !have("gfortran", &["--version"]) {
        return;
    }
    let tmp = dir("fortran");
    let exe = compile("gfortran", "heat.f90", &tmp, flags);
    generations(&Program::new(exe, &["1500", "20000"]), &tmp, 3);
}

#[test]
fn fortran_allocatables_and_write_survive_three_kills() {
    fortran(&["-O1", "-fno-backtrace"]);
}

#[test]
fn fortran_with_its_backtrace_handler_survives_three_kills() {
    fortran(&["-O1"]);
}

#[test]
fn cpp_containers_threads_and_ofstream_survive_three_kills() {
    if !have("c++", &["--version"]) {
        return;
    }
    let tmp = dir("cpp");
    let exe = compile("c++", "containers.cpp", &tmp, &["-O1", "-pthread"]);
    generations(&Program::new(exe, &["1500"]), &tmp, 3);
}

/// CPython with NumPy; `ready`: checkpoints start only once the imports are done.
fn python(ready: Option<&'static str>) {
    let python = "/usr/bin/python3";
    if !have(python, &["-c", "import numpy"]) {
        return;
    }
    let tmp = dir("python");
    let mut p = Program::new(python.into(), &["1500"]);
    p.before = vec![common::run::source("numpy_heat.py").into()];
    p.ready = ready;
    generations(&p, &tmp, 3);
}

#[test]
fn python_with_numpy_survives_three_kills() {
    python(Some("ready"));
}

/// A checkpoint that stops CPython inside dlopen (importing NumPy's extension modules) holds
/// the dynamic loader's recursive lock, whose owner glibc records as a thread id: restarted
/// with another id, the thread would wait for itself when it takes that lock again. The
/// restart gives the ids back.
#[test]
fn python_checkpointed_while_importing_numpy_survives_three_kills() {
    python(None);
}
