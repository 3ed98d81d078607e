//! `ickpt run` / `ickpt restart` on programs that spend their time waiting: in usleep and
//! nanosleep, in poll() with a timeout, and for the ticks of an interval timer. A checkpoint
//! cuts a sleep or a poll short (EINTR, as docs/transparent.md says); the programs count
//! steps, not time, so each must still end with exactly the uninterrupted run's output.

mod common;
use common::run::{build_c, generations, Program};
use common::scratch;

fn waits(how: &str) {
    let tmp = scratch(&format!("waits-{how}"));
    std::fs::create_dir_all(tmp.as_path()).unwrap();
    let exe = build_c("waits.c", &tmp);
    generations(&Program::new(exe, &["2000", how]), &tmp, 3);
}

#[test]
fn a_program_in_usleep_and_nanosleep_survives_three_kills() {
    waits("sleep");
}

#[test]
fn a_program_in_poll_with_a_timeout_survives_three_kills() {
    waits("poll");
}

/// Fails twice over today. The library's checkpoint handler runs with no signal blocked, so
/// the program's SIGALRM handler runs on a thread parked inside it, writing the program's
/// memory and stack mid-checkpoint; the first checkpoint then dies of SIGSEGV in the
/// checkpointing thread. And interval timers are not recorded (docs/transparent.md): after a
/// restart the program reports "the interval timer is gone" and exits 3.
#[test]
#[ignore = "library: SIGSEGV at the first checkpoint (the program's SIGALRM handler runs \
            inside the parked checkpoint handler), and interval timers are not restored"]
fn a_program_counting_setitimer_ticks_survives_three_kills() {
    waits("timer");
}
