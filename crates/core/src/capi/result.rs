//! Results: `ickpt_result`, the one mapping of every error to its code (`code_of`),
//! `ickpt_result_name` and `ickpt_last_error`.

use super::*;

/// Result of every ickpt call. 0 is success; `ickpt_last_error()` explains a failure.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ickpt_result {
    ICKPT_OK = 0,
    /// A NULL pointer, zero length, bad configuration or unknown pointer.
    ICKPT_ERR_INVALID_ARGUMENT = 1,
    ICKPT_ERR_NOT_INITIALIZED = 2,
    ICKPT_ERR_ALREADY_INITIALIZED = 3,
    /// No protected region has that id.
    ICKPT_ERR_UNKNOWN_REGION = 4,
    /// A region with that id is already protected, or the memory overlaps one.
    ICKPT_ERR_REGION_EXISTS = 5,
    /// Protected regions and the version's regions differ (missing id or size mismatch).
    ICKPT_ERR_REGION_MISMATCH = 6,
    /// No such version, or no version at all.
    ICKPT_ERR_NOT_FOUND = 7,
    /// A checkpoint file failed its checks, or a chain is broken.
    ICKPT_ERR_CORRUPT = 8,
    ICKPT_ERR_IO = 9,
    /// The store's device is full. Earlier versions are intact.
    ICKPT_ERR_NO_SPACE = 10,
    /// The directory holds something other than an ickpt store.
    ICKPT_ERR_NOT_A_STORE = 11,
    /// Another process holds the store.
    ICKPT_ERR_STORE_LOCKED = 12,
    /// Write tracking failed (protection change, signal handler replaced).
    ICKPT_ERR_TRACKING = 13,
    /// A bug in ickpt; the message says where.
    ICKPT_ERR_INTERNAL = 14,
    /// ickpt_mpi: the ranks are not all in the same collective call, or an MPI call failed.
    /// The serial library never returns it.
    ICKPT_ERR_COLLECTIVE = 15,
    /// A section call out of order: a start inside a section, a save or stop outside one, a
    /// save in a section replayed while recovering, a reset after the first start; or a
    /// restore while a section is open.
    ICKPT_ERR_SECTION = 16,
}

/// The result code for an error: the one place errors meet the C API's codes. An
/// operation's error is mapped by its own function below, the shared parts (a file, a
/// region, the tracker) by theirs.
pub fn code_of(e: &Error) -> ickpt_result {
    use ickpt_result::*;
    match e {
        Error::Init(e) => init_code(e),
        Error::Protect(e) => protect_code(e),
        Error::Checkpoint(e) => checkpoint_code(e),
        Error::Restore(e) => restore_code(e),
        Error::Read(e) => read_code(e),
        Error::Global(e) => global_code(e),
        Error::Drain(e) => drain_code(e),
        Error::Inject(e) => inject_code(e),
        Error::Section(e) => section_code(e),
        Error::Merge(e) => match e {
            MergeFilesError::Read(e) => inject_code(e),
            MergeFilesError::Layout { .. } => ickpt_result::ICKPT_ERR_REGION_MISMATCH,
            MergeFilesError::TooLarge { .. } => ickpt_result::ICKPT_ERR_INVALID_ARGUMENT,
            MergeFilesError::Write(e) => file_code(e),
        },
        Error::Job(e) => match e {
            JobError::File(e) => file_code(e),
            JobError::Unreadable(_)
            | JobError::NotADirectory { .. }
            | JobError::NotAJobFile { .. } => ICKPT_ERR_NOT_A_STORE,
            JobError::OtherRanks { .. } | JobError::Ranks { .. } => ICKPT_ERR_INVALID_ARGUMENT,
        },
        Error::Setting(_) | Error::Null { .. } => ICKPT_ERR_INVALID_ARGUMENT,
        Error::NotInitialized | Error::Forked(_) => ICKPT_ERR_NOT_INITIALIZED,
        Error::WholeProcess { .. } => ICKPT_ERR_INVALID_ARGUMENT,
        Error::WholeProcessCheckpoint => ICKPT_ERR_IO,
        Error::AlreadyInitialized => ICKPT_ERR_ALREADY_INITIALIZED,
    }
}

fn init_code(e: &InitError) -> ickpt_result {
    use ickpt_result::*;
    match e {
        InitError::Setting(_) => ICKPT_ERR_INVALID_ARGUMENT,
        InitError::Store(e) => open_code(e),
        InitError::File(e) => file_code(e),
        InitError::Read(e) => read_code(e),
        InitError::Tracking(e) => track_code(e),
        InitError::Tier(e) => drain_code(e),
    }
}

fn drain_code(e: &DrainError) -> ickpt_result {
    use ickpt_result::*;
    match e {
        DrainError::File { source, .. } => file_code(source),
        DrainError::Collect { source, .. } => match &**source {
            GcError::Read(e) => read_code(e),
            GcError::File(e) => file_code(e),
            GcError::Forked(_) => ICKPT_ERR_NOT_INITIALIZED,
        },
        // A directory holding another store's versions, as with the store's own.
        DrainError::Foreign { .. } => ICKPT_ERR_NOT_A_STORE,
        DrainError::Source(e) => file_code(e),
        DrainError::Stopped => ICKPT_ERR_IO,
        DrainError::Panicked(_) => ICKPT_ERR_INTERNAL,
    }
}

fn open_code(e: &OpenError) -> ickpt_result {
    use ickpt_result::*;
    match e {
        OpenError::NotAStore { .. }
        | OpenError::Missing { .. }
        | OpenError::NoSuchDir { .. }
        | OpenError::NotADirectory { .. }
        | OpenError::Symlink { .. }
        | OpenError::Unsafe { .. }
        | OpenError::BadMarker { .. } => ICKPT_ERR_NOT_A_STORE,
        OpenError::Locked { .. } | OpenError::InUse { .. } => ICKPT_ERR_STORE_LOCKED,
        OpenError::Io { .. } | OpenError::NotWritable { .. } => ICKPT_ERR_IO,
    }
}

fn protect_code(e: &ProtectError) -> ickpt_result {
    use ickpt_result::*;
    match e {
        ProtectError::BadRange { problem, .. } => range_code(problem),
        ProtectError::RegionExists(_) => ICKPT_ERR_REGION_EXISTS,
        ProtectError::AllocSize { .. } | ProtectError::NotAllocated { .. } => {
            ICKPT_ERR_INVALID_ARGUMENT
        }
        ProtectError::Map { .. } | ProtectError::Unmap { .. } => ICKPT_ERR_IO,
        ProtectError::UnknownRegion(_) => ICKPT_ERR_UNKNOWN_REGION,
        ProtectError::Region(e) => region_code(e),
        ProtectError::Forked(_) => ICKPT_ERR_NOT_INITIALIZED,
    }
}

/// Memory `protect` refuses: overlapping a region is a region that exists.
fn range_code(p: &RangeProblem) -> ickpt_result {
    match p {
        RangeProblem::Overlaps(_) => ickpt_result::ICKPT_ERR_REGION_EXISTS,
        _ => ickpt_result::ICKPT_ERR_INVALID_ARGUMENT,
    }
}

fn checkpoint_code(e: &CheckpointError) -> ickpt_result {
    use ickpt_result::*;
    match e {
        CheckpointError::File(e) => file_code(e),
        CheckpointError::Region(e) => region_code(e),
        CheckpointError::Tracking(e) => track_code(e),
        // A stray name in the store the user must move out (the message says which).
        CheckpointError::VersionsExhausted { .. } => ICKPT_ERR_INVALID_ARGUMENT,
        CheckpointError::HandlerReplaced | CheckpointError::CommitAborted { .. } => {
            ICKPT_ERR_TRACKING
        }
        CheckpointError::CommitPanicked { .. } => ICKPT_ERR_INTERNAL,
        CheckpointError::Forked(_) => ICKPT_ERR_NOT_INITIALIZED,
    }
}

fn inject_code(e: &InjectError) -> ickpt_result {
    use ickpt_result::*;
    match e {
        InjectError::File(FileError::Io { source, .. })
            if source.kind() == std::io::ErrorKind::NotFound =>
        {
            ICKPT_ERR_NOT_FOUND
        }
        InjectError::File(e) => file_code(e),
        InjectError::Corrupt { .. } => ICKPT_ERR_CORRUPT,
        InjectError::RegionMismatch { .. } => ICKPT_ERR_REGION_MISMATCH,
        InjectError::Forked(_) => ICKPT_ERR_NOT_INITIALIZED,
    }
}

fn section_code(e: &SectionError) -> ickpt_result {
    use ickpt_result::*;
    match e {
        SectionError::Order(_) => ICKPT_ERR_SECTION,
        SectionError::Name { .. } | SectionError::TooLarge { .. } => ICKPT_ERR_INVALID_ARGUMENT,
        SectionError::Regions(_) => ICKPT_ERR_REGION_MISMATCH,
        SectionError::File(e) => file_code(e),
        SectionError::Corrupt { .. } => ICKPT_ERR_CORRUPT,
        SectionError::Inject(e) => inject_code(e),
        SectionError::Region(e) => region_code(e),
        SectionError::Forked(_) => ICKPT_ERR_NOT_INITIALIZED,
    }
}

fn restore_code(e: &RestoreError) -> ickpt_result {
    use ickpt_result::*;
    match e {
        RestoreError::Read(e) => read_code(e),
        RestoreError::RegionMismatch { .. } => ICKPT_ERR_REGION_MISMATCH,
        RestoreError::Region(e) => region_code(e),
        RestoreError::SectionOpen(_) => ICKPT_ERR_SECTION,
        RestoreError::Forked(_) => ICKPT_ERR_NOT_INITIALIZED,
    }
}

fn global_code(e: &GlobalError) -> ickpt_result {
    use ickpt_result::*;
    match e {
        GlobalError::Read(e) => read_code(e),
        GlobalError::File(e) => file_code(e),
        GlobalError::OutOfOrder { .. } | GlobalError::BadNumber { .. } => {
            ICKPT_ERR_INVALID_ARGUMENT
        }
        GlobalError::Forked(_) => ICKPT_ERR_NOT_INITIALIZED,
    }
}

fn read_code(e: &ReadError) -> ickpt_result {
    use ickpt_result::*;
    match e {
        ReadError::NotFound { .. }
        | ReadError::NoCheckpoint { .. }
        | ReadError::NoGlobal { .. } => ICKPT_ERR_NOT_FOUND,
        ReadError::Corrupt { .. }
        | ReadError::ChainBroken { .. }
        | ReadError::Foreign { .. }
        | ReadError::NoRestorable { .. } => ICKPT_ERR_CORRUPT,
        ReadError::OutOfFiles { .. } => ICKPT_ERR_IO,
        ReadError::File(e) => file_code(e),
    }
}

fn file_code(e: &FileError) -> ickpt_result {
    match e {
        FileError::NoSpace { .. } => ickpt_result::ICKPT_ERR_NO_SPACE,
        FileError::Io { .. } | FileError::Refused { .. } => ickpt_result::ICKPT_ERR_IO,
    }
}

fn region_code(e: &RegionError) -> ickpt_result {
    match e {
        RegionError::Unmapped { .. } => ickpt_result::ICKPT_ERR_TRACKING,
        RegionError::Tracking { source, .. } => track_code(source),
    }
}

fn track_code(e: &TrackError) -> ickpt_result {
    use ickpt_result::*;
    match e {
        TrackError::Refused(problem) => range_code(problem),
        _ => ICKPT_ERR_TRACKING,
    }
}

pub fn result_name(code: i32) -> &'static CStr {
    use ickpt_result::*;
    const NAMES: [(ickpt_result, &CStr); 17] = [
        (ICKPT_OK, c"ICKPT_OK"),
        (ICKPT_ERR_INVALID_ARGUMENT, c"ICKPT_ERR_INVALID_ARGUMENT"),
        (ICKPT_ERR_NOT_INITIALIZED, c"ICKPT_ERR_NOT_INITIALIZED"),
        (
            ICKPT_ERR_ALREADY_INITIALIZED,
            c"ICKPT_ERR_ALREADY_INITIALIZED",
        ),
        (ICKPT_ERR_UNKNOWN_REGION, c"ICKPT_ERR_UNKNOWN_REGION"),
        (ICKPT_ERR_REGION_EXISTS, c"ICKPT_ERR_REGION_EXISTS"),
        (ICKPT_ERR_REGION_MISMATCH, c"ICKPT_ERR_REGION_MISMATCH"),
        (ICKPT_ERR_NOT_FOUND, c"ICKPT_ERR_NOT_FOUND"),
        (ICKPT_ERR_CORRUPT, c"ICKPT_ERR_CORRUPT"),
        (ICKPT_ERR_IO, c"ICKPT_ERR_IO"),
        (ICKPT_ERR_NO_SPACE, c"ICKPT_ERR_NO_SPACE"),
        (ICKPT_ERR_NOT_A_STORE, c"ICKPT_ERR_NOT_A_STORE"),
        (ICKPT_ERR_STORE_LOCKED, c"ICKPT_ERR_STORE_LOCKED"),
        (ICKPT_ERR_TRACKING, c"ICKPT_ERR_TRACKING"),
        (ICKPT_ERR_INTERNAL, c"ICKPT_ERR_INTERNAL"),
        (ICKPT_ERR_COLLECTIVE, c"ICKPT_ERR_COLLECTIVE"),
        (ICKPT_ERR_SECTION, c"ICKPT_ERR_SECTION"),
    ];
    NAMES
        .iter()
        .find(|(r, _)| *r as i32 == code)
        .map_or(c"unknown", |(_, name)| name)
}

/// A constant name for a result code ("ICKPT_ERR_IO"); "unknown" for other values.
#[no_mangle]
pub extern "C" fn ickpt_result_name(r: i32) -> *const c_char {
    result_name(r).as_ptr()
}

/// The message of the last failed call on this thread ("" if none). Valid until the next
/// ickpt call on this thread.
#[no_mangle]
pub extern "C" fn ickpt_last_error() -> *const c_char {
    boundary::last_error_ptr()
}
