/* The plan: what stage A (Rust, `ickpt restart`) hands to stage B (stage_b.c), the blob that
 * turns the ickpt process into the checkpointed program. Stage A writes it at the start of the
 * hole (an area the program reserved, so it is free in both layouts); the arrays the *_at
 * fields point to live in the hole too. Every address is absolute. The Rust mirror is
 * src/restart/plan.rs; both assert the same sizes and offsets, so a change to one that the
 * other lacks fails the build.
 *
 * The futex words go_all and go_ckpt are waited on and woken with FUTEX_*_PRIVATE: a private
 * wake does not find a shared waiter, so whoever releases them must use the private ops. */
#ifndef ICKPT_PLAN_H
#define ICKPT_PLAN_H

#include <stddef.h>
#include <stdint.h>

#define ICKPT_PLAN_MAGIC 0x314e414c50534b49ull /* "IKSPLAN1" little endian */

#define ICKPT_ROLE_OTHER 0u
#define ICKPT_ROLE_LEADER 1u       /* the thread running stage B: the process's main thread */
#define ICKPT_ROLE_CHECKPOINTER 2u /* released first, through go_ckpt */

/* Every thread drops its capabilities before it returns to the program: they came with a user
 * namespace `ickpt restart` made, which the program, started by an exec, never had. */
#define ICKPT_FLAG_DROP_CAPS 1u

struct ickpt_range {
	uint64_t start, len;
};

/* mremap(from, len, len, MREMAP_MAYMOVE | MREMAP_FIXED, to) */
struct ickpt_move {
	uint64_t from, to, len;
};

struct ickpt_thread {
	uint64_t frame;       /* the thread's ucontext_t in its signal frame: rsp for rt_sigreturn */
	uint64_t fs_base;     /* ARCH_SET_FS / CLONE_SETTLS */
	uint64_t tid_address; /* clear_child_tid (glibc's &pd->tid); 0: none */
	uint64_t robust_head; /* 0: none */
	uint64_t robust_len;
	uint64_t rseq; /* 0: none */
	uint32_t rseq_len;
	uint32_t rseq_sig;
	uint64_t stack_top; /* a 16-byte aligned stack in the hole for stage B's code on this thread */
	uint32_t role;      /* ICKPT_ROLE_* */
	uint32_t tid;       /* the id to create it with (clone3's set_tid); 0: any. Stage B
			     * writes the id the thread got, which a timer signalling it names. */
	char name[16];      /* PR_SET_NAME, NUL-terminated; empty: left as it is */
};

/* A POSIX timer, created again with its id (PR_TIMER_CREATE_RESTORE_IDS) once every thread
 * exists, and armed with the time it had left. */
struct ickpt_timer {
	int32_t id;
	int32_t clock;
	int32_t notify; /* sigev_notify */
	int32_t signo;
	uint32_t thread; /* SIGEV_THREAD_ID: the index of its thread in the plan's threads */
	uint32_t pad;
	uint64_t value; /* sigev_value */
	uint64_t interval_ns;
	uint64_t left_ns; /* 0: disarmed */
};

struct ickpt_plan {
	uint32_t go_all;  /* every thread but the checkpointer waits here for 1 */
	uint32_t go_ckpt; /* the checkpointer waits here for 1 */
	uint64_t magic;
	/* stage A's own registered rseq area, unregistered first; 0: none */
	uint64_t rseq_now;
	uint32_t rseq_now_len;
	uint32_t rseq_now_sig;
	/* struct ickpt_range[]: everything of stage A to unmap */
	uint64_t n_unmap;
	uint64_t unmap_at;
	/* struct ickpt_move[]: [vvar], [vvar_vclock], [vdso] from where they are now to their old
	 * addresses; entry i goes through temp + (the lengths of the entries before it) */
	uint64_t n_special;
	uint64_t special_at;
	uint64_t temp; /* free in the hole, at least the sum of the special lengths */
	/* struct ickpt_move[]: each staged mapping onto its old address, in order */
	uint64_t n_move;
	uint64_t move_at;
	/* prctl_mm_map's first fields: start_code end_code start_data end_data start_brk brk
	 * start_stack arg_start arg_end env_start env_end */
	uint64_t mm[11];
	uint64_t auxv_at;
	uint32_t auxv_size; /* bytes */
	uint32_t flags;     /* ICKPT_FLAG_* */
	/* struct ickpt_thread[]: exactly one has the leader's role */
	uint64_t n_thread;
	uint64_t thread_at;
	/* *(uint64_t *)restart_word = restart_value before any thread resumes; 0: none */
	uint64_t restart_word;
	uint64_t restart_value;
	int32_t created;     /* threads cloned so far */
	int32_t failed_step; /* the step that failed, written before exit_group(70) */
	/* struct ickpt_timer[] */
	uint64_t n_timer;
	uint64_t timer_at;
};

_Static_assert(sizeof(struct ickpt_range) == 16, "ickpt_range");
_Static_assert(sizeof(struct ickpt_move) == 24, "ickpt_move");
_Static_assert(sizeof(struct ickpt_thread) == 88, "ickpt_thread");
_Static_assert(offsetof(struct ickpt_thread, name) == 72, "ickpt_thread.name");
_Static_assert(sizeof(struct ickpt_timer) == 48, "ickpt_timer");
_Static_assert(offsetof(struct ickpt_timer, value) == 24, "ickpt_timer.value");
_Static_assert(offsetof(struct ickpt_thread, rseq_len) == 48, "ickpt_thread.rseq_len");
_Static_assert(offsetof(struct ickpt_thread, stack_top) == 56, "ickpt_thread.stack_top");
_Static_assert(offsetof(struct ickpt_thread, role) == 64, "ickpt_thread.role");
_Static_assert(offsetof(struct ickpt_thread, tid) == 68, "ickpt_thread.tid");
_Static_assert(sizeof(struct ickpt_plan) == 248, "ickpt_plan");
_Static_assert(offsetof(struct ickpt_plan, n_timer) == 232, "ickpt_plan.n_timer");
_Static_assert(offsetof(struct ickpt_plan, go_all) == 0, "ickpt_plan.go_all");
_Static_assert(offsetof(struct ickpt_plan, go_ckpt) == 4, "ickpt_plan.go_ckpt");
_Static_assert(offsetof(struct ickpt_plan, magic) == 8, "ickpt_plan.magic");
_Static_assert(offsetof(struct ickpt_plan, rseq_now) == 16, "ickpt_plan.rseq_now");
_Static_assert(offsetof(struct ickpt_plan, n_unmap) == 32, "ickpt_plan.n_unmap");
_Static_assert(offsetof(struct ickpt_plan, n_special) == 48, "ickpt_plan.n_special");
_Static_assert(offsetof(struct ickpt_plan, temp) == 64, "ickpt_plan.temp");
_Static_assert(offsetof(struct ickpt_plan, n_move) == 72, "ickpt_plan.n_move");
_Static_assert(offsetof(struct ickpt_plan, mm) == 88, "ickpt_plan.mm");
_Static_assert(offsetof(struct ickpt_plan, auxv_at) == 176, "ickpt_plan.auxv_at");
_Static_assert(offsetof(struct ickpt_plan, flags) == 188, "ickpt_plan.flags");
_Static_assert(offsetof(struct ickpt_plan, n_thread) == 192, "ickpt_plan.n_thread");
_Static_assert(offsetof(struct ickpt_plan, restart_word) == 208, "ickpt_plan.restart_word");
_Static_assert(offsetof(struct ickpt_plan, created) == 224, "ickpt_plan.created");
_Static_assert(offsetof(struct ickpt_plan, failed_step) == 228, "ickpt_plan.failed_step");

#endif
