//! A descriptor closed while the descriptors are listed, as the test harness's threads close
//! theirs. A binary of its own: the listing's own directories, open while it runs, would
//! show in another test's listing.

use ickpt_process::list_fds;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Another thread opening and closing descriptors while they are listed: each listing
/// succeeds, whatever it catches mid-close.
#[test]
fn descriptors_closed_while_listed_are_left_out() {
    let stop = Arc::new(AtomicBool::new(false));
    let churn = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                drop(std::fs::File::open("/dev/null").unwrap());
            }
        })
    };
    let listed = (0..10_000).map(|_| list_fds()).collect::<Vec<_>>();
    stop.store(true, Ordering::Relaxed);
    churn.join().unwrap();
    for r in listed {
        r.unwrap();
    }
}
