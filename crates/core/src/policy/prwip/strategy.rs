//! The pre-copy settings: which strategy decides what to copy, and what a page's history is
//! kept per.

/// How pages are pre-copied.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Strategy {
    /// Not at all: everything at the checkpoint (traditional incremental checkpointing).
    #[default]
    Off,
    /// Every dirty page as soon as it is seen (Kannan et al., the paper's "pre-copy").
    Blind,
    /// A page whose predicted next write falls after the next checkpoint (PRWIP).
    Prwip,
    /// PRWIP, and an interval raised after two conflict-free rounds (PRWIP-opt, its §3.3).
    PrwipOpt,
}

impl Strategy {
    pub fn as_str(self) -> &'static str {
        match self {
            Strategy::Off => "off",
            Strategy::Blind => "blind",
            Strategy::Prwip => "prwip",
            Strategy::PrwipOpt => "prwip-opt",
        }
    }

    pub fn parse(s: &str) -> Option<Strategy> {
        match s {
            "off" => Some(Strategy::Off),
            "blind" => Some(Strategy::Blind),
            "prwip" => Some(Strategy::Prwip),
            "prwip-opt" => Some(Strategy::PrwipOpt),
            _ => None,
        }
    }

    /// The C API's number for it (`enum ickpt_precopy`).
    pub fn code(self) -> u32 {
        self as u32
    }

    pub fn from_code(c: u32) -> Option<Strategy> {
        [
            Strategy::Off,
            Strategy::Blind,
            Strategy::Prwip,
            Strategy::PrwipOpt,
        ]
        .get(c as usize)
        .copied()
    }
}

/// What a page's rewrite intervals are kept per: the paper's execution context.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Context {
    /// The function whose instruction wrote the page first in the epoch, where the tracking
    /// backend reports that instruction (mprotect: the fault's signal context); the region
    /// where it does not (userfaultfd's messages carry no instruction; uffd-async reports no
    /// write at all, only written pages).
    #[default]
    Function,
    /// The region the page belongs to, on every backend.
    Region,
}

impl Context {
    pub fn as_str(self) -> &'static str {
        match self {
            Context::Function => "function",
            Context::Region => "region",
        }
    }

    pub fn parse(s: &str) -> Option<Context> {
        match s {
            "function" => Some(Context::Function),
            "region" => Some(Context::Region),
            _ => None,
        }
    }
}
