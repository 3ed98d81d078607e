/* Stage B of `ickpt restart`: turns the ickpt process into the checkpointed program.
 *
 * Stage A has staged every mapping of the old process at a temporary address, blocked all
 * signals, written the plan (plan.h) into the hole, copied this blob there and called it on a
 * stack in the hole. From here on nothing of stage A may be used: its libc, heap, stack and TLS
 * go away in step 2. So this is freestanding code: raw system calls, no writable data (the
 * blob is mapped read and execute only), nothing that needs a relocation (build.rs refuses the
 * link if anything does), everything it knows in the plan.
 *
 * A failing step writes "ickpt restart: stage B step N (what) failed: errno E" to fd 2, stores
 * N in the plan and ends the whole process with status 70: half a program must never run. */
#include <stddef.h>
#include <stdint.h>

#include <asm/prctl.h>
#include <linux/capability.h>
#include <linux/signal.h>
#include <asm/unistd.h>
#include <linux/errno.h>
#include <linux/futex.h>
#include <linux/mman.h>
#include <linux/prctl.h>
#include <linux/rseq.h>
#include <linux/sched.h>
#include <linux/time_types.h>

#include "plan.h"

#ifndef PR_TIMER_CREATE_RESTORE_IDS
#define PR_TIMER_CREATE_RESTORE_IDS 77
#define PR_TIMER_CREATE_RESTORE_IDS_OFF 0
#define PR_TIMER_CREATE_RESTORE_IDS_ON 1
#endif
#define SIGEV_THREAD_ID 4

long ickpt_syscall(long nr, long a1, long a2, long a3, long a4, long a5);
long ickpt_clone3(struct clone_args *args, unsigned long size);
__attribute__((noreturn)) void ickpt_sigreturn(uint64_t frame);
__attribute__((noreturn)) void stage_b_thread(struct ickpt_plan *p, struct ickpt_thread *t);
__attribute__((noreturn)) void stage_b(struct ickpt_plan *p);

#define SYS(nr, a, b, c, d, e)                                                                  \
	ickpt_syscall((nr), (long)(a), (long)(b), (long)(c), (long)(d), (long)(e))

static int failed(long r)
{
	return (unsigned long)r > -4096UL;
}

static char *put_str(char *at, char *end, const char *s)
{
	while (*s && at < end)
		*at++ = *s++;
	return at;
}

static char *put_dec(char *at, char *end, unsigned long v)
{
	char digits[20];
	int n = 0;
	do {
		digits[n++] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	while (n && at < end)
		*at++ = digits[--n];
	return at;
}

/* r is the failing call's result (-errno). */
__attribute__((noreturn, cold)) static void fail(struct ickpt_plan *p, int step, const char *what,
						 long r)
{
	char buf[200];
	char *end = buf + sizeof buf - 1;
	char *at = put_str(buf, end, "ickpt restart: stage B step ");
	at = put_dec(at, end, (unsigned long)step);
	at = put_str(at, end, " (");
	at = put_str(at, end, what);
	at = put_str(at, end, ") failed: errno ");
	at = put_dec(at, end, (unsigned long)-r);
	*at++ = '\n';
	__atomic_store_n(&p->failed_step, step, __ATOMIC_SEQ_CST);
	SYS(__NR_write, 2, buf, at - buf, 0, 0);
	for (;;)
		SYS(__NR_exit_group, 70, 0, 0, 0, 0);
}

static long check(struct ickpt_plan *p, int step, const char *what, long r)
{
	if (failed(r))
		fail(p, step, what, r);
	return r;
}

static void move(struct ickpt_plan *p, int step, const char *what, uint64_t from, uint64_t to,
		 uint64_t len)
{
	check(p, step, what, SYS(__NR_mremap, from, len, len, MREMAP_MAYMOVE | MREMAP_FIXED, to));
}

static void release(uint32_t *word)
{
	__atomic_store_n(word, 1, __ATOMIC_RELEASE);
	SYS(__NR_futex, word, FUTEX_WAKE_PRIVATE, 0x7fffffff, 0, 0);
}

static void wait_for(struct ickpt_plan *p, int step, uint32_t *word)
{
	for (;;) {
		uint32_t seen = __atomic_load_n(word, __ATOMIC_ACQUIRE);
		if (seen == 1)
			return;
		long r = SYS(__NR_futex, word, FUTEX_WAIT_PRIVATE, seen, 0, 0);
		if (failed(r) && r != -EAGAIN && r != -EINTR)
			fail(p, step, "futex wait", r);
	}
}

/* A thread's kernel state that its signal frame does not hold. The robust list and the rseq
 * area are per task and were lost with the old task; stage A's own would otherwise still be
 * registered on the leader, pointing into what is now the program's memory, where the kernel
 * writes at exit (robust list) and at every preemption (rseq). */
static void own_lists(struct ickpt_plan *p, int step, const struct ickpt_thread *t)
{
	long len = t->robust_head ? (long)t->robust_len : (long)sizeof(struct robust_list_head);
	check(p, step, "set_robust_list", SYS(__NR_set_robust_list, t->robust_head, len, 0, 0, 0));
	if (t->rseq)
		check(p, step, "rseq register",
		      SYS(__NR_rseq, t->rseq, t->rseq_len, 0, t->rseq_sig, 0));
}

/* Capabilities are per thread, so each thread drops its own, after the leader has used them to
 * choose the threads' ids. */
static void drop_caps(struct ickpt_plan *p, int step)
{
	if (!(p->flags & ICKPT_FLAG_DROP_CAPS))
		return;
	struct __user_cap_header_struct header = { .version = _LINUX_CAPABILITY_VERSION_3, .pid = 0 };
	struct __user_cap_data_struct none[2];
	for (int i = 0; i < 2; i++) {
		none[i].effective = 0;
		none[i].permitted = 0;
		none[i].inheritable = 0;
	}
	check(p, step, "capset", SYS(__NR_capset, &header, none, 0, 0, 0));
}

/* The name is per thread, and only the thread itself can set it without reaching through
 * /proc. */
static void own_name(struct ickpt_plan *p, int step, const struct ickpt_thread *t)
{
	if (t->name[0])
		check(p, step, "PR_SET_NAME", SYS(__NR_prctl, PR_SET_NAME, t->name, 0, 0, 0));
}

/* The kernel's struct sigevent: sigev_value, sigev_signo, sigev_notify, then a union whose
 * first int is the target thread of SIGEV_THREAD_ID; 64 bytes in all. */
struct kernel_sigevent {
	uint64_t value;
	int32_t signo;
	int32_t notify;
	int32_t tid;
	int32_t rest[11];
};

/* After every thread exists, since a SIGEV_THREAD_ID timer needs its thread; before any runs,
 * since a program thread's own timer_create would otherwise be given an id the program holds.
 * While PR_TIMER_CREATE_RESTORE_IDS is on, timer_create takes the id from its third argument. */
static void timers(struct ickpt_plan *p, const struct ickpt_thread *threads)
{
	if (!p->n_timer)
		return;
	check(p, 8, "PR_TIMER_CREATE_RESTORE_IDS on",
	      SYS(__NR_prctl, PR_TIMER_CREATE_RESTORE_IDS, PR_TIMER_CREATE_RESTORE_IDS_ON, 0, 0, 0));
	const struct ickpt_timer *t = (const void *)(uintptr_t)p->timer_at;
	for (uint64_t i = 0; i < p->n_timer; i++) {
		struct kernel_sigevent ev;
		for (int j = 0; j < 11; j++)
			ev.rest[j] = 0;
		ev.value = t[i].value;
		ev.signo = t[i].signo;
		ev.notify = t[i].notify;
		ev.tid = 0;
		if (t[i].notify == SIGEV_THREAD_ID) {
			if (t[i].thread >= p->n_thread)
				fail(p, 8, "timer's thread not in the plan", -EINVAL);
			ev.tid = (int32_t)threads[t[i].thread].tid;
		}
		int32_t id = t[i].id;
		check(p, 8, "timer_create", SYS(__NR_timer_create, t[i].clock, &ev, &id, 0, 0));
		if (!t[i].left_ns)
			continue;
		struct __kernel_itimerspec when;
		when.it_interval.tv_sec = (long long)(t[i].interval_ns / 1000000000u);
		when.it_interval.tv_nsec = (long long)(t[i].interval_ns % 1000000000u);
		when.it_value.tv_sec = (long long)(t[i].left_ns / 1000000000u);
		when.it_value.tv_nsec = (long long)(t[i].left_ns % 1000000000u);
		check(p, 8, "timer_settime", SYS(__NR_timer_settime, id, 0, &when, 0, 0));
	}
	check(p, 8, "PR_TIMER_CREATE_RESTORE_IDS off",
	      SYS(__NR_prctl, PR_TIMER_CREATE_RESTORE_IDS, PR_TIMER_CREATE_RESTORE_IDS_OFF, 0, 0, 0));
}

/* A recreated thread's first code, on its stack in the hole (ickpt_clone3 calls it). */
void stage_b_thread(struct ickpt_plan *p, struct ickpt_thread *t)
{
	own_lists(p, 6, t);
	own_name(p, 6, t);
	drop_caps(p, 6);
	wait_for(p, 6, t->role == ICKPT_ROLE_CHECKPOINTER ? &p->go_ckpt : &p->go_all);
	ickpt_sigreturn(t->frame);
}

static void spawn(struct ickpt_plan *p, struct ickpt_thread *t)
{
	/* SETTLS gives the thread its old thread pointer from its first instruction. With
	 * PARENT_SETTID the kernel writes the new tid into glibc's pd->tid before clone returns, so
	 * the program's cached tid is right; CHILD_CLEARTID clears it at exit, which is what
	 * pthread_join waits for. */
	unsigned long flags = CLONE_VM | CLONE_FS | CLONE_FILES | CLONE_SIGHAND | CLONE_THREAD |
			      CLONE_SYSVSEM | CLONE_SETTLS;
	if (t->tid_address)
		flags |= CLONE_PARENT_SETTID | CLONE_CHILD_CLEARTID;
	if (t->stack_top & 15)
		fail(p, 6, "thread stack not 16-byte aligned", -EINVAL);
	uint64_t *sp = (uint64_t *)(uintptr_t)(t->stack_top - 16);
	sp[0] = (uint64_t)(uintptr_t)p;
	sp[1] = (uint64_t)(uintptr_t)t;
	/* With set_tid the thread gets its old id back (the program may hold it: a mutex's owner);
	 * the kernel allows that to whoever holds CAP_SYS_ADMIN over the PID namespace. */
	int32_t tid = (int32_t)t->tid;
	struct clone_args args;
	args.flags = flags;
	args.pidfd = 0;
	args.child_tid = t->tid_address;
	args.parent_tid = t->tid_address;
	args.exit_signal = 0;
	args.stack = (uint64_t)(uintptr_t)sp - 256;
	args.stack_size = 256;
	args.tls = t->fs_base;
	args.set_tid = tid ? (uint64_t)(uintptr_t)&tid : 0;
	args.set_tid_size = tid ? 1 : 0;
	args.cgroup = 0;
	t->tid = (uint32_t)check(p, 6, "clone3", ickpt_clone3(&args, sizeof args));
	p->created++;
}

__attribute__((section(".text.stage_b_entry"), noreturn)) void stage_b(struct ickpt_plan *p)
{
	if (p->magic != ICKPT_PLAN_MAGIC)
		fail(p, 0, "plan magic", -EINVAL);

	/* 1. An rseq area that stays registered while its memory is unmapped or reused makes the
	 * kernel kill the process (or write into the program) at the next preemption. */
	if (p->rseq_now)
		check(p, 1, "rseq unregister",
		      SYS(__NR_rseq, p->rseq_now, p->rseq_now_len, RSEQ_FLAG_UNREGISTER,
			  p->rseq_now_sig, 0));

	/* 2. */
	const struct ickpt_range *unmap = (const void *)(uintptr_t)p->unmap_at;
	for (uint64_t i = 0; i < p->n_unmap; i++)
		check(p, 2, "munmap", SYS(__NR_munmap, unmap[i].start, unmap[i].len, 0, 0, 0));

	/* 3. Through temp: the current and the old places of [vvar], [vvar_vclock] and [vdso] may
	 * overlap, and MREMAP_FIXED would unmap one special mapping to put another there. */
	const struct ickpt_move *special = (const void *)(uintptr_t)p->special_at;
	uint64_t off = 0;
	for (uint64_t i = 0; i < p->n_special; i++) {
		if (special[i].from != special[i].to)
			move(p, 3, "mremap special to temp", special[i].from, p->temp + off,
			     special[i].len);
		off += special[i].len;
	}
	off = 0;
	for (uint64_t i = 0; i < p->n_special; i++) {
		if (special[i].from != special[i].to)
			move(p, 3, "mremap special into place", p->temp + off, special[i].to,
			     special[i].len);
		off += special[i].len;
	}

	/* 4. */
	const struct ickpt_move *moves = (const void *)(uintptr_t)p->move_at;
	for (uint64_t i = 0; i < p->n_move; i++)
		move(p, 4, "mremap into place", moves[i].from, moves[i].to, moves[i].len);

	/* 5. exe_fd -1 leaves /proc/self/exe alone; changing it needs CAP_CHECKPOINT_RESTORE. The
	 * rest needs no privilege, unlike the single-field PR_SET_MM_* calls. */
	struct prctl_mm_map map = {
		.start_code = p->mm[0],
		.end_code = p->mm[1],
		.start_data = p->mm[2],
		.end_data = p->mm[3],
		.start_brk = p->mm[4],
		.brk = p->mm[5],
		.start_stack = p->mm[6],
		.arg_start = p->mm[7],
		.arg_end = p->mm[8],
		.env_start = p->mm[9],
		.env_end = p->mm[10],
		.auxv = (__u64 *)(uintptr_t)p->auxv_at,
		.auxv_size = p->auxv_size,
		.exe_fd = (__u32)-1,
	};
	check(p, 5, "PR_SET_MM_MAP", SYS(__NR_prctl, PR_SET_MM, PR_SET_MM_MAP, &map, sizeof map, 0));

	/* 6. */
	struct ickpt_thread *threads = (void *)(uintptr_t)p->thread_at;
	struct ickpt_thread *leader = 0;
	int checkpointer = 0;
	for (uint64_t i = 0; i < p->n_thread; i++) {
		if (threads[i].role != ICKPT_ROLE_LEADER)
			continue;
		if (leader)
			fail(p, 6, "two leaders in the plan", -EINVAL);
		leader = &threads[i];
	}
	if (!leader)
		fail(p, 6, "no leader in the plan", -EINVAL);
	for (uint64_t i = 0; i < p->n_thread; i++) {
		if (threads[i].role == ICKPT_ROLE_LEADER)
			continue;
		checkpointer |= threads[i].role == ICKPT_ROLE_CHECKPOINTER;
		spawn(p, &threads[i]);
	}

	/* 7. */
	drop_caps(p, 7);
	check(p, 7, "arch_prctl(ARCH_SET_FS)", SYS(__NR_arch_prctl, ARCH_SET_FS, leader->fs_base, 0, 0, 0));
	/* Always set, so that stage A's clear_child_tid, now an address in the program, is not
	 * cleared when the process exits. glibc caches the tid in pd->tid; PARENT_SETTID did that
	 * for the others, the leader writes its own (set_tid_address returns it). */
	long tid = SYS(__NR_set_tid_address, leader->tid_address, 0, 0, 0, 0);
	if (leader->tid_address)
		*(volatile int32_t *)(uintptr_t)leader->tid_address = (int32_t)tid;
	leader->tid = (uint32_t)tid;
	own_lists(p, 7, leader);
	own_name(p, 7, leader);
	/* rt_sigreturn restores the program's sigaltstack from the frame, but the kernel silently
	 * keeps the current one if the frame's stack pointer lies inside it, and stage A's
	 * alternate stack (Rust's runtime installs one) was unmapped, so its range may now hold the
	 * program's stack. With none set, the restore always applies. */
	stack_t no_stack = { .ss_sp = 0, .ss_flags = SS_DISABLE, .ss_size = 0 };
	check(p, 7, "sigaltstack", SYS(__NR_sigaltstack, &no_stack, 0, 0, 0, 0));

	/* 8. */
	timers(p, threads);
	if (p->restart_word)
		*(volatile uint64_t *)(uintptr_t)p->restart_word = p->restart_value;
	release(&p->go_ckpt);
	/* The checkpointer releases the others once it is back in the program; without one,
	 * nobody else would. */
	if (!checkpointer)
		release(&p->go_all);
	wait_for(p, 7, &p->go_all);
	ickpt_sigreturn(leader->frame);
}
