//! How page data is stored (format 6): zero pages are always left out; the others are
//! compressed with zstd at a level, or stored raw.

/// zstd's level for a version's pages, or none.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    /// The default: `fast` for async commits, where the committer compresses off the
    /// application's path, and `off` for sync ones, which the application waits for: on this
    /// project's machine even zstd's fastest level made a sync checkpoint of the demo's grid
    /// slower than writing it raw (docs/benchmarks.md, "Compression").
    Auto,
    /// Pages stored raw (zero pages still left out).
    Off,
    /// zstd at this level: negative levels trade ratio for speed, 1 to 19 the other way.
    Zstd(i32),
}

impl Compression {
    /// `fast`: zstd's level -1: 0.7-1.0 GB/s and a ratio of 5 on the demo's grid here.
    pub const FAST: Compression = Compression::Zstd(-1);
    /// `high`: for slow storage or expensive capacity.
    pub const HIGH: Compression = Compression::Zstd(9);
    /// Levels accepted: zstd's fast levels down to -7 and its normal ones up to 19 (above,
    /// "ultra" levels want windows larger than a frame).
    pub const LEVELS: std::ops::RangeInclusive<i32> = -7..=19;

    /// The zstd level for commits in `mode`, or None for raw pages.
    pub fn level(self, mode: ickpt_format::CommitMode) -> Option<i32> {
        match self {
            Compression::Auto if mode == ickpt_format::CommitMode::Async => {
                Compression::FAST.level(mode)
            }
            Compression::Auto | Compression::Off => None,
            Compression::Zstd(l) => Some(l),
        }
    }

    /// `auto`, `off`, `fast`, `high`, or a zstd level from -7 to 19 (0 is zstd's own default,
    /// 3).
    pub fn parse(s: &str) -> Option<Compression> {
        match s {
            "auto" => Some(Compression::Auto),
            "off" => Some(Compression::Off),
            "fast" => Some(Compression::FAST),
            "high" => Some(Compression::HIGH),
            _ => s
                .parse::<i32>()
                .ok()
                .filter(|l| Self::LEVELS.contains(l))
                .map(Compression::Zstd),
        }
    }

    pub const EXPECTED: &'static str = "auto, off, fast, high, or a zstd level from -7 to 19";
}

impl std::fmt::Display for Compression {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {
            Compression::Auto => f.write_str("auto"),
            Compression::Off => f.write_str("off"),
            c if c == Compression::FAST => f.write_str("fast"),
            c if c == Compression::HIGH => f.write_str("high"),
            Compression::Zstd(l) => write!(f, "zstd level {l}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Compression;

    #[test]
    fn names_and_levels_parse() {
        assert_eq!(Compression::parse("auto"), Some(Compression::Auto));
        assert_eq!(Compression::parse("off"), Some(Compression::Off));
        assert_eq!(Compression::parse("fast"), Some(Compression::FAST));
        assert_eq!(Compression::parse("high"), Some(Compression::HIGH));
        assert_eq!(Compression::parse("-7"), Some(Compression::Zstd(-7)));
        assert_eq!(Compression::parse("19"), Some(Compression::Zstd(19)));
        for bad in ["", "20", "-8", "zstd", "1.5"] {
            assert_eq!(Compression::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn auto_compresses_async_commits_only() {
        use ickpt_format::CommitMode::{Async, Sync};
        assert_eq!(Compression::Auto.level(Sync), None);
        assert_eq!(
            Compression::Auto.level(Async),
            Compression::FAST.level(Async)
        );
        assert_eq!(Compression::HIGH.level(Sync), Some(9));
        assert_eq!(Compression::Off.level(Async), None);
    }
}
