/* Stage B's x86-64 pieces: the system call, the clone3 whose child starts on a stack of its own,
 * and rt_sigreturn, none of which C can say. Every symbol is hidden, so calls between them are
 * PC-relative and the blob needs no relocation. */
#include <asm/unistd.h>

	.text

/* long ickpt_syscall(long nr, long a1, long a2, long a3, long a4, long a5) */
	.globl ickpt_syscall
	.hidden ickpt_syscall
	.type ickpt_syscall, @function
ickpt_syscall:
	mov %rdi, %rax
	mov %rsi, %rdi
	mov %rdx, %rsi
	mov %rcx, %rdx
	mov %r8, %r10
	mov %r9, %r8
	syscall
	ret
	.size ickpt_syscall, . - ickpt_syscall

/* long ickpt_clone3(struct clone_args *args, size_t size)
 * The child starts on args->stack + args->stack_size, where the parent put {plan, thread}: it
 * shares no registers the compiler knows of, so it pops them as stage_b_thread's arguments.
 * That address is 16-byte aligned, so stage_b_thread starts as after any call. */
	.globl ickpt_clone3
	.hidden ickpt_clone3
	.type ickpt_clone3, @function
ickpt_clone3:
	mov $__NR_clone3, %eax
	syscall
	test %rax, %rax
	jnz 1f
	pop %rdi
	pop %rsi
	xor %ebp, %ebp
	call stage_b_thread
	ud2
1:	ret
	.size ickpt_clone3, . - ickpt_clone3

/* void ickpt_sigreturn(uint64_t frame): the kernel reads the ucontext at rsp. */
	.globl ickpt_sigreturn
	.hidden ickpt_sigreturn
	.type ickpt_sigreturn, @function
ickpt_sigreturn:
	mov %rdi, %rsp
	mov $__NR_rt_sigreturn, %eax
	syscall
	ud2
	.size ickpt_sigreturn, . - ickpt_sigreturn

	.section .note.GNU-stack, "", @progbits
