//! The process record: what a restart of a whole process needs besides its memory, which the
//! engine stores as regions. One record per version, stored as the bytes of one region
//! (`docs/FORMAT.md`, "The process record"); the store checks its CRC, but a restart still
//! treats it as untrusted input, so [`crate::decode`] checks every field it reads.

/// Everything about one process at one checkpoint that is not the content of a region.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcessRecord {
    /// `uname` release, a space, then version: a restart needs the very kernel build, since
    /// it moves the new vDSO onto the old one's address and the code there must be the same.
    pub kernel: String,
    /// `std::env::consts::ARCH` of the process (`x86_64`, `aarch64`).
    pub arch: String,
    pub page_size: u32,
    /// The pid at the checkpoint: a restart in a PID namespace asks for it again.
    pub pid: u32,
    pub exe: FileId,
    pub cwd: String,
    pub umask: u32,
    /// The mm fields `prctl(PR_SET_MM_MAP)` sets, in this order: start_code, end_code,
    /// start_data, end_data, start_brk, brk, start_stack, arg_start, arg_end, env_start,
    /// env_end. [`crate::capture::mm_fields`] explains where each comes from.
    pub mm: [u64; MM_FIELDS],
    /// The auxiliary vector as `/proc/self/auxv` holds it: (type, value) pairs, AT_NULL
    /// last. `PR_SET_MM_MAP` puts it back, so `getauxval` answers as before.
    pub auxv: Vec<u64>,
    /// Ascending by address, none overlapping.
    pub mappings: Vec<MappingRecord>,
    pub threads: Vec<ThreadRecord>,
    /// Exactly [`SIGNALS`] entries: index `i` is signal `i + 1`.
    pub sigactions: Vec<SigAction>,
    /// Ascending by descriptor number.
    pub fds: Vec<FdRecord>,
    /// The restore hole, (address, length): reserved at `ickpt run` so the restorer has a
    /// place that no mapping of the program takes.
    pub hole: (u64, u64),
    /// Where the word lives that tells resumed code it is running after a restart.
    pub restart_word: u64,
    /// The interval timers `ITIMER_REAL`, `ITIMER_VIRTUAL`, `ITIMER_PROF` (`setitimer`,
    /// `alarm`): each (interval, value) in microseconds, value 0 when disarmed. A restart
    /// arms them again with the time each had left.
    pub itimers: [(u64, u64); ITIMERS],
    /// What the snapshot region holds, and where each piece goes.
    pub snapshots: Vec<Snapshot>,
    /// The POSIX timers (`timer_create`), ascending by id. A restart creates each again with
    /// its id, which the program holds as its `timer_t`, once the threads they signal exist.
    pub timers: Vec<PosixTimer>,
}

/// The number of interval timers in [`ProcessRecord::itimers`].
pub const ITIMERS: usize = 3;
/// The number of mm fields in [`ProcessRecord::mm`].
pub const MM_FIELDS: usize = 11;
/// The signals 1 to 64 of Linux's `rt_sigaction`.
pub const SIGNALS: usize = 64;

/// PROT_READ, PROT_WRITE and PROT_EXEC as `/proc/self/maps` and `mmap` spell them.
pub mod prot {
    pub const READ: u8 = 1;
    pub const WRITE: u8 = 2;
    pub const EXEC: u8 = 4;
}

/// One line of `/proc/self/maps`, with what the restart does with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MappingRecord {
    pub start: u64,
    pub end: u64,
    /// Bits of [`prot`].
    pub prot: u8,
    pub shared: bool,
    /// The mapping grows down (`MAP_GROWSDOWN`): the restart must map it so again, or the
    /// stack would stop growing.
    pub growsdown: bool,
    /// The file's path, or `[heap]`, `[stack]`, `[vdso]`, … as maps shows it; empty for
    /// anonymous memory.
    pub name: String,
    /// Offset in the file of `start`.
    pub offset: u64,
    /// The file mapped, where the restart maps it again.
    pub file: Option<FileId>,
    pub kind: MappingKind,
}

/// How a restart brings a mapping back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MappingKind {
    /// Its content is stored by the engine as the region with this id.
    Region(u64),
    /// Never written: mapped again from the file (private, or shared and read-only, as
    /// `shared` says), whose identity `file` holds and a restart checks.
    File,
    /// Copied by value into the snapshot region at each checkpoint: see
    /// [`ProcessRecord::snapshots`].
    Snapshot,
    /// Anonymous memory the restart maps as zeros (ickpt's own per-page state, where zero
    /// is "clean").
    Zero,
    /// A `PROT_NONE` reservation: recreated with no access and no content.
    Reserve,
    /// `[vdso]`, `[vvar]`, `[vvar_vclock]`, `[vsyscall]`: the kernel's, moved into place.
    Special,
}

/// Which file, as the checkpoint saw it: a restart refuses a file that is not this one.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FileId {
    pub path: String,
    pub dev: u64,
    pub ino: u64,
    pub size: u64,
    /// Modification time, nanoseconds since the Unix epoch.
    pub mtime_ns: i128,
}

/// What a thread's signal frame does not hold; the frame itself stays on the thread's
/// stack, which is stored with the memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ThreadRecord {
    pub tid: u32,
    /// One of [`role`].
    pub role: u32,
    /// The address of the thread's signal frame (`rt_sigreturn` resumes it).
    pub frame: u64,
    pub fs_base: u64,
    /// `set_tid_address`: cleared and woken at the thread's exit (what `pthread_join`
    /// waits on).
    pub tid_address: u64,
    pub robust_head: u64,
    pub robust_len: u64,
    pub rseq: u64,
    pub rseq_len: u32,
    pub rseq_sig: u32,
    /// The thread's name (`comm`, `pthread_setname_np`) as the kernel keeps it: at most
    /// [`THREAD_NAME_MAX`] bytes, then zeros. All zeros: none recorded (a record of format 1),
    /// and a restart leaves the name the thread gets.
    pub name: [u8; THREAD_NAME_LEN],
}

/// The bytes of [`ThreadRecord::name`]: the kernel's `TASK_COMM_LEN`, its terminator included.
pub const THREAD_NAME_LEN: usize = 16;
/// The longest name a thread can have.
pub const THREAD_NAME_MAX: usize = THREAD_NAME_LEN - 1;

/// [`ThreadRecord::role`]'s values.
pub mod role {
    pub const OTHER: u32 = 0;
    /// The thread group leader, whose tid is the pid.
    pub const LEADER: u32 = 1;
    /// ickpt's checkpointing thread.
    pub const CHECKPOINTER: u32 = 2;
}

/// The kernel's `struct sigaction` as `rt_sigaction` reads and writes it (x86-64 and
/// aarch64 lay it out alike): not libc's, whose mask is 128 bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SigAction {
    pub handler: u64,
    pub flags: u64,
    pub restorer: u64,
    pub mask: u64,
}

/// One open descriptor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FdRecord {
    pub fd: i32,
    pub kind: FdKind,
    /// What `readlink /proc/self/fd/N` says: a path for files, directories and devices,
    /// `socket:[1234]`, `pipe:[5678]`, `anon_inode:[eventfd]`, … otherwise.
    pub path: String,
    /// The open flags of `/proc/self/fdinfo/N` (`O_CLOEXEC` among them when set).
    pub flags: i32,
    pub offset: u64,
    /// A `flock` or `fcntl` lock is held through it: the restart takes it again.
    pub locked: bool,
    /// For a userfaultfd, the features its `UFFDIO_API` enabled; 0 otherwise.
    pub uffd_features: u64,
}

/// What kind of descriptor, as far as a restart is concerned. Descriptors 0 to 2 are
/// recorded, but a restart inherits the restarting command's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FdKind {
    /// A regular file, reopened by path.
    File,
    Directory,
    /// A character device such as `/dev/null`, reopened by path.
    Device,
    /// Recreated by the restart (ickpt's own tracking uses one).
    Userfaultfd,
    /// `/proc/<pid>/pagemap` of the process itself, reopened for the new process.
    Pagemap,
    /// Anything else (sockets, pipes, eventfds, …): a restart refuses it, naming `path`.
    Other,
}

/// `len` bytes at `offset` of the snapshot region go to address `target` at a restart.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Snapshot {
    pub target: u64,
    pub len: u64,
    pub offset: u64,
}

/// One POSIX timer, as the kernel shows it in `/proc/<pid>/timers` and `timer_gettime`
/// reads it. Its overrun count is not kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PosixTimer {
    /// The kernel's timer id, 0 to 2^31 − 1: what glibc returns as the `timer_t`, or keeps
    /// inside it for a `SIGEV_THREAD` timer.
    pub id: u32,
    /// The clock: `CLOCK_REALTIME`, `CLOCK_MONOTONIC`, …, or glibc's encoding of the process's
    /// own CPU clock (−6 for `CLOCK_PROCESS_CPUTIME_ID`).
    pub clock: i32,
    pub notify: TimerNotify,
    /// `sigev_signo`: 1 to 64 for a timer that signals, 0 to 64 for [`TimerNotify::None`].
    pub signal: u32,
    /// `sigev_value`, which the signal's `si_value` carries.
    pub value: u64,
    /// The period, nanoseconds; 0: a single shot.
    pub interval_ns: u64,
    /// The time left until it fires, nanoseconds; 0: disarmed.
    pub left_ns: u64,
}

/// How a [`PosixTimer`] tells the program it fired (`sigev_notify`, as the kernel has it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TimerNotify {
    /// `SIGEV_SIGNAL`: a signal to the process.
    #[default]
    Signal,
    /// `SIGEV_NONE`: nothing; the program asks `timer_gettime`.
    None,
    /// `SIGEV_THREAD` as passed to the kernel itself, which signals the process as for
    /// [`TimerNotify::Signal`] (glibc never passes it: its `SIGEV_THREAD` is a
    /// [`TimerNotify::ThreadId`] to a helper thread of its own).
    Thread,
    /// `SIGEV_THREAD_ID`: a signal to this thread of the process.
    ThreadId(u32),
}
