/*
 * Restart in a genuinely new process. Three generations share one store:
 *   gen 0  writes rounds 1-6 with a checkpoint after each, then execs itself while still
 *          initialised (the store lock must not survive exec);
 *   gen 1  restores the latest version into memory at new addresses, compares it with the
 *          content recomputed from the same deterministic writes, writes round 7,
 *          checkpoints (an increment of gen 0's last version), finalizes, and runs gen 2 as a
 *          fork+exec child;
 *   gen 2  restores and compares with rounds 1-7.
 */
#include "check.h"

#include <sys/mman.h>
#include <sys/wait.h>

#define LEN1 (32 * 4096u) /* mmap'd, page-aligned */
#define LEN2 5000u        /* unaligned, in a malloc'd buffer */
#define LEN3 (10 * 4096u + 17) /* ickpt_malloc */
#define ROUNDS0 6

struct bufs {
    unsigned char *b1, *b2, *b3;
    void *raw2; /* the allocation b2 lies in (protect_fresh) */
};

/* The writes of round `r`: the same bytes in every process. */
static void apply_round(const struct bufs *b, int r) {
    uint64_t s = 0xC0FFEE00ULL + (uint64_t)r * 7919;
    unsigned char *mem[3] = {b->b1, b->b2, b->b3};
    const size_t len[3] = {LEN1, LEN2, LEN3};
    for (int i = 0; i < 200; i++) {
        int which = (int)(rng_next(&s) % 3);
        size_t off = rng_next(&s) % len[which];
        size_t n = 1 + rng_next(&s) % 300;
        if (off + n > len[which])
            n = len[which] - off;
        for (size_t k = 0; k < n; k++)
            mem[which][off + k] = (unsigned char)(r * 31 + (int)(rng_next(&s) & 0xff));
    }
}

static void expected_after(struct bufs *e, int rounds) {
    e->b1 = calloc(1, LEN1);
    e->b2 = calloc(1, LEN2);
    e->b3 = calloc(1, LEN3);
    CHECK(e->b1 && e->b2 && e->b3);
    for (int r = 1; r <= rounds; r++)
        apply_round(e, r);
}

/* Fresh memory for the regions; region 2 starts `off2` bytes into a page. */
static void protect_fresh(struct bufs *b, size_t off2) {
    const size_t ps = page_size();
    b->b1 = mmap(NULL, LEN1, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(b->b1 != MAP_FAILED);
    unsigned char *raw = aligned_alloc(ps, 4 * ps);
    CHECK(raw != NULL);
    b->raw2 = raw;
    b->b2 = raw + off2;
    memset(b->b2, 0, LEN2);
    OK(ickpt_protect(1, b->b1, LEN1));
    OK(ickpt_protect(2, b->b2, LEN2));
    void *p = NULL;
    OK(ickpt_malloc(3, LEN3, &p));
    b->b3 = p;
}

/* Release what expected_after and protect_fresh allocated (after ickpt_finalize). */
static void free_bufs(struct bufs *b, struct bufs *e) {
    munmap(b->b1, LEN1);
    free(b->raw2);
    free(e->b1);
    free(e->b2);
    free(e->b3);
}

static void check_same(const struct bufs *got, const struct bufs *want) {
    CHECK_MEM_EQ(got->b1, want->b1, LEN1);
    CHECK_MEM_EQ(got->b2, want->b2, LEN2);
    CHECK_MEM_EQ(got->b3, want->b3, LEN3);
}

static int self_exe(char *buf, size_t n) {
    ssize_t k = readlink("/proc/self/exe", buf, n - 1);
    if (k <= 0)
        return -1;
    buf[k] = '\0';
    return 0;
}

static int gen0(void) {
    OK(test_init(test_dir(), 4));
    struct bufs b;
    protect_fresh(&b, 3);
    ickpt_checkpoint_info info;
    for (int r = 1; r <= ROUNDS0; r++) {
        apply_round(&b, r);
        OK(ickpt_checkpoint(&info));
        printf("gen 0: round %d -> version %llu (%s, %llu pages)\n", r,
               (unsigned long long)info.version,
               info.kind == ICKPT_KIND_FULL ? "full" : "incremental",
               (unsigned long long)info.pages);
    }
    /* Writes after the last checkpoint are not part of any version. */
    memset(b.b1, 0xFF, LEN1);
    memset(b.b3, 0xFF, LEN3);

    char self[4096], ver[32];
    CHECK(self_exe(self, sizeof self) == 0);
    snprintf(ver, sizeof ver, "%llu", (unsigned long long)info.version);
    fflush(NULL);
    execl(self, "restart_exec", "gen1", ver, (char *)NULL);
    perror("execl");
    return 1;
}

static int gen1(uint64_t want_version) {
    int r = test_init(test_dir(), 4);
    CHECK_MSG(r != ICKPT_ERR_STORE_LOCKED,
              "the store is still locked after exec: the lock descriptor leaked into the new "
              "program (no O_CLOEXEC?)");
    OK(r);
    uint64_t v = 0;
    OK(ickpt_latest(&v));
    CHECK_MSG(v == want_version, "latest %llu, gen 0 committed %llu", (unsigned long long)v,
              (unsigned long long)want_version);
    struct bufs b, e;
    protect_fresh(&b, 1234);
    memset(b.b1, 0xAB, LEN1);
    memset(b.b2, 0xAB, LEN2);
    memset(b.b3, 0xAB, LEN3);
    OK(ickpt_restore(v));
    expected_after(&e, ROUNDS0);
    check_same(&b, &e);
    printf("gen 1: version %llu restored and verified\n", (unsigned long long)v);

    /* Continue the chain from the restored version. */
    apply_round(&b, ROUNDS0 + 1);
    ickpt_checkpoint_info info;
    OK(ickpt_checkpoint(&info));
    CHECK_MSG(info.kind == ICKPT_KIND_INCREMENTAL && info.parent == v,
              "first checkpoint after restoring %llu: kind %u parent %llu",
              (unsigned long long)v, info.kind, (unsigned long long)info.parent);
    OK(ickpt_finalize());
    free_bufs(&b, &e);

    char self[4096], ver[32];
    CHECK(self_exe(self, sizeof self) == 0);
    snprintf(ver, sizeof ver, "%llu", (unsigned long long)info.version);
    fflush(NULL);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        execl(self, "restart_exec", "gen2", ver, (char *)NULL);
        _exit(99);
    }
    int st;
    CHECK(waitpid(pid, &st, 0) == pid);
    CHECK_MSG(WIFEXITED(st) && WEXITSTATUS(st) == 0, "gen 2 failed (status %#x)", st);
    printf("restart_exec: ok\n");
    return 0;
}

static int gen2(uint64_t want_version) {
    OK(test_init(test_dir(), 4));
    uint64_t v = 0;
    OK(ickpt_latest(&v));
    CHECK(v == want_version);
    struct bufs b, e;
    protect_fresh(&b, 4000); /* region 2 now straddles a page boundary differently */
    OK(ickpt_restore(v));
    expected_after(&e, ROUNDS0 + 1);
    check_same(&b, &e);
    OK(ickpt_finalize());
    free_bufs(&b, &e);
    printf("gen 2: version %llu restored and verified\n", (unsigned long long)v);
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 1)
        return gen0();
    if (argc == 3 && strcmp(argv[1], "gen1") == 0)
        return gen1(strtoull(argv[2], NULL, 10));
    if (argc == 3 && strcmp(argv[1], "gen2") == 0)
        return gen2(strtoull(argv[2], NULL, 10));
    fprintf(stderr, "usage: %s [gen1 VERSION | gen2 VERSION]\n", argv[0]);
    return 2;
}
