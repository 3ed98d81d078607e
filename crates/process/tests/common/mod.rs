//! Records for the format's tests: one written by hand, and a proptest strategy for any
//! record the format allows.
#![allow(dead_code)]

use ickpt_process::*;
use proptest::collection::{btree_set, vec};
use proptest::prelude::*;

pub fn file(path: &str) -> FileId {
    FileId {
        path: path.into(),
        dev: 0xfe00,
        ino: 4711,
        size: 123_456,
        mtime_ns: 1_700_000_000_123_456_789,
    }
}

/// A record like one of a small program: every table holds something.
pub fn sample() -> ProcessRecord {
    let mapping = |start: u64, end: u64, name: &str, kind| MappingRecord {
        start,
        end,
        prot: prot::READ | prot::WRITE,
        shared: false,
        growsdown: name == "[stack]",
        name: name.into(),
        offset: 0,
        file: None,
        kind,
    };
    let mut text = mapping(0x1000, 0x3000, "/usr/bin/app", MappingKind::File);
    text.prot = prot::READ | prot::EXEC;
    text.file = Some(file("/usr/bin/app"));
    ProcessRecord {
        kernel: "6.1.0-18-amd64 #1 SMP PREEMPT_DYNAMIC Debian 6.1.76-1".into(),
        arch: "x86_64".into(),
        page_size: 4096,
        pid: 4242,
        exe: file("/usr/bin/app"),
        cwd: "/home/user/run".into(),
        umask: 0o022,
        mm: std::array::from_fn(|i| 0x1000 * (i as u64 + 1)),
        auxv: vec![6, 4096, 0, 0],
        mappings: vec![
            text,
            mapping(0x3000, 0x5000, "[heap]", MappingKind::Region(0x3000)),
            mapping(0x7000, 0x8000, "", MappingKind::Reserve),
            mapping(0x9000, 0xa000, "[stack]", MappingKind::Region(0x9000)),
        ],
        threads: vec![ThreadRecord {
            tid: 4242,
            role: role::LEADER,
            frame: 0x9f00,
            fs_base: 0x4000,
            name: *b"app\0\0\0\0\0\0\0\0\0\0\0\0\0",
            ..Default::default()
        }],
        sigactions: (0..SIGNALS as u64)
            .map(|i| SigAction {
                handler: i,
                flags: 0x0400_0000,
                restorer: 0x1234,
                mask: 1 << i,
            })
            .collect(),
        fds: vec![
            FdRecord {
                fd: 1,
                kind: FdKind::Device,
                path: "/dev/pts/0".into(),
                flags: 0o2,
                offset: 0,
                locked: false,
                uffd_features: 0,
            },
            FdRecord {
                fd: 7,
                kind: FdKind::File,
                path: "/tmp/out".into(),
                flags: 0o2100001,
                offset: 99,
                locked: true,
                uffd_features: 0,
            },
        ],
        hole: (0x100000, 0x4000000),
        restart_word: 0x4008,
        itimers: [(0, 0), (1000, 250), (0, 0)],
        snapshots: vec![Snapshot {
            target: 0x3000,
            len: 100,
            offset: 0,
        }],
        timers: vec![
            PosixTimer {
                id: 0,
                clock: 1,
                notify: TimerNotify::Signal,
                signal: 35,
                value: 0x1234,
                interval_ns: 1_000_000,
                left_ns: 250_000,
            },
            PosixTimer {
                id: 3,
                clock: 0,
                notify: TimerNotify::ThreadId(4243),
                signal: 36,
                value: 7,
                interval_ns: 0,
                left_ns: 0,
            },
            PosixTimer {
                id: 9,
                clock: -6,
                notify: TimerNotify::None,
                signal: 0,
                value: 0,
                interval_ns: 0,
                left_ns: 5,
            },
        ],
    }
}

/// [`sample`] as a format-1 record holds it: no thread names, no timers.
pub fn sample_format_1() -> ProcessRecord {
    let mut r = sample();
    r.timers.clear();
    for t in &mut r.threads {
        t.name = [0; THREAD_NAME_LEN];
    }
    r
}

fn string() -> impl Strategy<Value = String> {
    "\\PC{0,24}"
}

fn file_id() -> impl Strategy<Value = FileId> {
    (
        string(),
        any::<u64>(),
        any::<u64>(),
        any::<u64>(),
        any::<i128>(),
    )
        .prop_map(|(path, dev, ino, size, mtime_ns)| FileId {
            path,
            dev,
            ino,
            size,
            mtime_ns,
        })
}

fn kind() -> impl Strategy<Value = MappingKind> {
    prop_oneof![
        any::<u64>().prop_map(MappingKind::Region),
        Just(MappingKind::File),
        Just(MappingKind::Snapshot),
        Just(MappingKind::Zero),
        Just(MappingKind::Reserve),
        Just(MappingKind::Special),
    ]
}

/// Mappings ascending and apart, as the format requires: each a gap and a length in pages.
fn mappings(page: u64) -> impl Strategy<Value = Vec<MappingRecord>> {
    let one = (
        0u64..4,
        1u64..64,
        0u8..8,
        any::<(bool, bool)>(),
        string(),
        0u64..1 << 20,
        proptest::option::of(file_id()),
        kind(),
    );
    vec(one, 0..12).prop_map(move |ms| {
        let mut at = 0x10000u64;
        ms.into_iter()
            .map(
                |(gap, len, prot, (shared, growsdown), name, off, file, kind)| {
                    let start = at + gap * page;
                    at = start + len * page;
                    let file = match kind {
                        MappingKind::File => file.or_else(|| Some(FileId::default())),
                        _ => file,
                    };
                    MappingRecord {
                        start,
                        end: at,
                        prot,
                        shared,
                        growsdown,
                        name,
                        offset: off * page,
                        file,
                        kind,
                    }
                },
            )
            .collect()
    })
}

/// A thread name as the kernel keeps one: any bytes but NUL, then zeros.
fn thread_name() -> impl Strategy<Value = [u8; THREAD_NAME_LEN]> {
    vec(1u8.., 0..=THREAD_NAME_MAX).prop_map(|bytes| {
        let mut name = [0; THREAD_NAME_LEN];
        name[..bytes.len()].copy_from_slice(&bytes);
        name
    })
}

fn thread() -> impl Strategy<Value = ThreadRecord> {
    (
        1u32..,
        0u32..3,
        any::<[u64; 6]>(),
        any::<(u32, u32)>(),
        thread_name(),
    )
        .prop_map(
            |(
                tid,
                role,
                [frame, fs_base, tid_address, robust_head, robust_len, rseq],
                (rl, rs),
                name,
            )| {
                ThreadRecord {
                    tid,
                    role,
                    frame,
                    fs_base,
                    tid_address,
                    robust_head,
                    robust_len,
                    rseq,
                    rseq_len: rl,
                    rseq_sig: rs,
                    name,
                }
            },
        )
}

fn fd_kind() -> impl Strategy<Value = FdKind> {
    prop_oneof![
        Just(FdKind::File),
        Just(FdKind::Directory),
        Just(FdKind::Device),
        Just(FdKind::Userfaultfd),
        Just(FdKind::Pagemap),
        Just(FdKind::Other),
    ]
}

fn fds() -> impl Strategy<Value = Vec<FdRecord>> {
    let rest = (
        fd_kind(),
        string(),
        any::<i32>(),
        any::<u64>(),
        any::<bool>(),
        any::<u64>(),
    );
    (btree_set(0i32..i32::MAX, 0..8), vec(rest, 8)).prop_map(|(numbers, rest)| {
        numbers
            .into_iter()
            .zip(rest)
            .map(
                |(fd, (kind, path, flags, offset, locked, uffd_features))| FdRecord {
                    fd,
                    kind,
                    path,
                    flags,
                    offset,
                    locked,
                    uffd_features,
                },
            )
            .collect()
    })
}

fn snapshot() -> impl Strategy<Value = Snapshot> {
    (0u64..1 << 62, 1u64..1 << 30, 0u64..1 << 40).prop_map(|(target, len, offset)| Snapshot {
        target,
        len,
        offset,
    })
}

fn timer_notify() -> impl Strategy<Value = TimerNotify> {
    prop_oneof![
        Just(TimerNotify::Signal),
        Just(TimerNotify::None),
        Just(TimerNotify::Thread),
        (1u32..).prop_map(TimerNotify::ThreadId),
    ]
}

/// Timers with ids ascending, as the format requires.
fn timers() -> impl Strategy<Value = Vec<PosixTimer>> {
    let rest = (any::<i32>(), timer_notify(), 1u32..=64, any::<[u64; 3]>());
    (btree_set(0u32..=i32::MAX as u32, 0..6), vec(rest, 6)).prop_map(|(ids, rest)| {
        ids.into_iter()
            .zip(rest)
            .map(
                |(id, (clock, notify, signal, [value, interval_ns, left_ns]))| PosixTimer {
                    id,
                    clock,
                    notify,
                    signal,
                    value,
                    interval_ns,
                    left_ns,
                },
            )
            .collect()
    })
}

/// Any record the format allows.
pub fn record() -> impl Strategy<Value = ProcessRecord> {
    let head = (
        (
            string(),
            string(),
            12u32..17,
            1u32..,
            file_id(),
            string(),
            0u32..0o1000,
        ),
        any::<[u64; MM_FIELDS]>(),
        vec(any::<u64>(), 0..32).prop_map(|mut v| {
            v.truncate(v.len() & !1);
            v
        }),
        (0u64..1 << 63, 0u64..1 << 62, any::<u64>()),
    );
    let sig = any::<[u64; 4]>().prop_map(|[handler, flags, restorer, mask]| SigAction {
        handler,
        flags,
        restorer,
        mask,
    });
    (
        head,
        vec(thread(), 0..6),
        vec(sig, SIGNALS),
        fds(),
        vec(snapshot(), 0..6),
        timers(),
    )
        .prop_flat_map(move |(head, threads, sigactions, fds, snapshots, timers)| {
            let page_shift = head.0 .2;
            mappings(1 << page_shift).prop_map(move |mappings| {
                let ((kernel, arch, shift, pid, exe, cwd, umask), mm, auxv, (h0, h1, rw)) =
                    head.clone();
                ProcessRecord {
                    kernel,
                    arch,
                    page_size: 1 << shift,
                    pid,
                    exe,
                    cwd,
                    umask,
                    mm,
                    auxv,
                    mappings,
                    threads: threads.clone(),
                    sigactions: sigactions.clone(),
                    fds: fds.clone(),
                    hole: (h0, h1),
                    restart_word: rw,
                    itimers: [(rw & 0xfff, rw >> 20), (h0 & 0xff, 0), (0, h1 & 0xffff)],
                    snapshots: snapshots.clone(),
                    timers: timers.clone(),
                }
            })
        })
}
