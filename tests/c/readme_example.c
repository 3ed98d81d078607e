/*
 * The README's first example ("Using it from C"), compiled as printed, so the README cannot
 * drift from a program that works. run.sh copies the section's fenced C block into
 * readme_example.inc (in the build directory); this file supplies only what the excerpt
 * leaves to the reader: the includes, `struct state`, `step`, `n` and `iters`. Its store is
 * the relative directory it names, so the program runs in the test's own directory.
 *
 * run.sh runs it twice on one store:
 *   readme_example crash K     step() kills the process (SIGKILL) at iteration K, after
 *                              the checkpoints before it;
 *   readme_example resume K    a new process: the excerpt must restore the checkpoint taken
 *                              after K steps (step() is next called with iter == K) and
 *                              finish with exactly what an uninterrupted run computes.
 * The state lives on main's stack (the README's `struct state st = {0};`), which is what
 * crashed ickpt_restore with SIGSEGV before ickpt gave such threads an alternate signal stack.
 */
#include "check.h"

#include <errno.h>

struct state {
    long iter;
    double sum;
};

static long crash_at = -1;
static long first_iter = -1;

/* Not idempotent: a step done twice, or skipped, shows in the result. */
static void step(double *grid, struct state *st) {
    if (first_iter < 0)
        first_iter = st->iter;
    if (st->iter == crash_at) {
        fault_marker();
        raise(SIGKILL);
    }
    for (size_t i = 0; i < 5000; i++)
        grid[i] = grid[i] * 0.5 + (double)((st->iter * 31 + (long)i) % 97);
    st->sum += grid[st->iter % 5000];
}

/* The README's store directory is relative: it lands in the test's directory. */
static int readme_init(ickpt_config *cfg) {
    CHECK_MSG(chdir(test_dir()) == 0, "chdir %s: %s", test_dir(), strerror(errno));
    CHECK_MSG(cfg->dir != NULL && cfg->dir[0] != '/', "the README's store is not relative: %s",
              cfg->dir ? cfg->dir : "(NULL)");
    return ickpt_init(cfg);
}
#define ickpt_init(cfg) readme_init(cfg)

int main(int argc, char **argv) {
    CHECK(argc == 3);
    const int resume = strcmp(argv[1], "resume") == 0;
    const long k = atol(argv[2]);
    if (!resume)
        crash_at = k;
    const size_t n = 5000;
    const long iters = 45;

    /* ---- README.md, "Using it from C", as printed ---- */
#include "readme_example.inc"
    /* ---- end of the README's excerpt ---- */

    CHECK_MSG(resume, "the first run must have been killed at iteration %ld", crash_at);
    CHECK_MSG(first_iter == k, "the restarted run began at iteration %ld, expected %ld",
              first_iter, k);
    double *want = calloc(n, sizeof *want);
    CHECK(want != NULL);
    struct state ref = {0};
    for (; ref.iter < iters; ref.iter++)
        step(want, &ref);
    CHECK_MSG(st.iter == iters, "st.iter = %ld, expected %ld", st.iter, iters);
    CHECK_MSG(st.sum == ref.sum, "st.sum = %.17g, expected %.17g", st.sum, ref.sum);
    CHECK_MEM_EQ(grid, want, n * sizeof *grid);
    printf("readme_example: restarted at %ld, finished at %ld\n", first_iter, st.iter);
    free(want);
    free(grid); /* the README's excerpt leaves it to the program's exit */
    return 0;
}
