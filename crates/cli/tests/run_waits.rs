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

/// Fails today: the restarted program reports "the interval timer is gone" and exits 3.
/// ITIMER_REAL is re-armed by the kernel only when its SIGALRM is taken; the checkpoint
/// stops the threads with that signal pending, so getitimer gives a value of 0 (interval
/// 1 ms), and `ickpt restart` arms the timer with that value, which disarms it (and the
/// pending SIGALRM is not recorded either).
#[test]
fn a_program_counting_setitimer_ticks_survives_three_kills() {
    waits("timer");
}
