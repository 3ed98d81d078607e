//! A byte progress bar on stderr, shown only when stderr is a terminal.

use indicatif::{ProgressBar, ProgressStyle};

pub fn bytes_bar(what: &str) -> ProgressBar {
    let pb = ProgressBar::new(0);
    pb.set_style(
        ProgressStyle::with_template(
            "{msg} [{bar:30}] {bytes}/{total_bytes} {bytes_per_sec} eta {eta}",
        )
        .expect("valid template")
        .progress_chars("=> "),
    );
    pb.set_message(what.to_string());
    pb
}
