/*
 * prwip_workloads: the workloads of the PRWIP paper ("Fast Incremental Checkpoint Based on
 * Page-Level Rewrite Interval Prediction"), section 4's NPB kernels and section 2.2's matrix
 * addition, each a serial C kernel whose memory comes from ickpt_malloc, so ickpt tracks its
 * writes page by page, checkpointed every --interval seconds.
 *
 *   prwip_workloads WORKLOAD [options]      (prwip_workloads --help lists them)
 *
 *   bt     BT: ADI on an n^3 grid, 5 coupled doubles per point; each step computes the
 *          right-hand side, then x-, y- and z-line sweeps solve block-tridiagonal systems of
 *          5x5 blocks in place (forward elimination, back substitution), then u += rhs.
 *   sp     SP: the same grid and arrays, each of the 5 variables solved on its own along the
 *          lines (scalar pentadiagonal systems), with NPB SP's point-wise transforms of the
 *          right-hand side before, between and after the three sweeps.
 *   lu     LU: SSOR; each step a right-hand side, a lower-triangular sweep (k-planes
 *          ascending, 5x5 blocks of the plane recomputed into a work array before each) and
 *          an upper one (planes descending), then u += rsd.
 *   cg     CG: conjugate gradient on a fixed sparse symmetric matrix (CSR, built at start,
 *          then only read); a step is one CG iteration (q = A p and the x, z, r, p vector
 *          updates); every 25 steps NPB CG's outer iteration (r = A z, x = z / |z|).
 *   mg     MG: NPB MG's V-cycle (27-point stencils, periodic) over grids of sides n, n/2,
 *          ..., 2: restrict down, smooth the coarsest, prolong and smooth up; a step is one
 *          V-cycle and a residual.
 *   is     IS: NPB IS's ranking: random keys counted into 1024 buckets, scattered into a
 *          second array bucket by bucket, counted per key and ranked; a step changes two keys
 *          and ranks all.
 *   matrow Fig. 2: C = 0.5 C + A + c_t g(B) over R x 512 doubles (one 4 KiB page per row;
 *          g: --work Horner steps), C written row by row: each page of C written in one
 *          burst per pass, then not again in that pass.
 *   matcol The same computed column by column: a pass writes C's pages 1..R, 1..R, ... 512
 *          times (the paper's fixed rewrite interval). Same arithmetic per element as
 *          matrow, so the two print the same checksum for the same size and steps.
 *
 * Every kernel phase is a function of its own (never inlined), so an execution context taken
 * from the faulting code or the call stack tells them apart, as PRWIP's history does.
 *
 * Region 1 is the run's state (step done, the workloads' scalars), then each array in a fixed
 * order, ids 2, 3, ...: a restart (--restart) protects the same regions with the same ids
 * and sizes, restores the newest version (ickpt_restore_latest_tagged; its tag is the step)
 * and carries on from that step, so it ends with the checksum of an uninterrupted run. A run
 * without --restart starts at step 0 and empties the store of versions first. The settings
 * of the library (backend, mode, pre-copy...) come from its ICKPT_* variables; --interval is
 * passed on as ICKPT_CHECKPOINT_INTERVAL unless that is set.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <ftw.h>
#include <getopt.h>
#include <ickpt.h>
#include <ickpt_coord.h> /* ickpt_discard_newer: a fresh run empties the store */
#include <inttypes.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline))
#define INLINE static inline __attribute__((always_inline))

/* ------------------------------------------------------------------ common helpers */

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void die(const char *what, ickpt_result r) {
    fprintf(stderr, "prwip_workloads: %s: %s: %s\n", what, ickpt_result_name((int32_t)r),
            ickpt_last_error());
    exit(1);
}

static void fail(const char *fmt, const char *arg) {
    fprintf(stderr, "prwip_workloads: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\n");
    exit(2);
}

/* xorshift64*: the only source of randomness, seeded from constants. */
static uint64_t rng_next(uint64_t *s) {
    uint64_t x = *s;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *s = x;
    return x * UINT64_C(0x2545F4914F6CDD1D);
}

static double rng_unit(uint64_t *s) { return (double)(rng_next(s) >> 11) * 0x1.0p-53; }

/* FNV-1a over 64-bit words. */
#define FNV_OFFSET UINT64_C(0xcbf29ce484222325)
#define FNV_PRIME UINT64_C(0x100000001b3)
static uint64_t fnv_words(uint64_t h, const uint64_t *w, size_t n) {
    for (size_t i = 0; i < n; i++) {
        h ^= w[i];
        h *= FNV_PRIME;
    }
    return h;
}

/* ------------------------------------------------------------------ memory and state */

#define MAX_REGIONS 16
#define STATE_MAGIC UINT64_C(0x3430307077697270) /* "prwip004" */
#define PAGE 4096

/* Region 1. Everything a restart needs besides the arrays; body is in the checksum. */
struct state {
    uint64_t magic, workload, size, param, layout; /* param: --work (matrow, matcol) */
    struct {
        uint64_t step; /* steps done */
        uint64_t acc;  /* a workload's running hash of its results (is) */
        uint64_t iu[6];
        double d[8];
    } body;
};

static struct {
    int plain; /* no ickpt at all: mmap'd memory */
    int n;
    void *p[MAX_REGIONS];
    size_t len[MAX_REGIONS];
    uint64_t bytes;
} mem;

/* Zeroed, page-aligned memory of at least `bytes` (a multiple of 8), region id mem.n + 1. */
static void *region(size_t bytes) {
    bytes = (bytes + 7) & ~(size_t)7;
    if (mem.n == MAX_REGIONS)
        fail("%s", "too many regions");
    void *p;
    if (mem.plain) {
        p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) {
            fprintf(stderr, "prwip_workloads: mmap of %zu bytes: %s\n", bytes, strerror(errno));
            exit(1);
        }
    } else {
        ickpt_result r = ickpt_malloc((uint64_t)mem.n + 1, bytes, &p);
        if (r != ICKPT_OK)
            die("ickpt_malloc", r);
    }
    mem.p[mem.n] = p;
    mem.len[mem.n] = bytes;
    mem.n++;
    mem.bytes += bytes;
    return p;
}

static uint64_t checksum(const struct state *st) {
    uint64_t h = FNV_OFFSET;
    for (int i = 1; i < mem.n; i++) /* region 0 (id 1) is the state: only its body counts */
        h = fnv_words(h, mem.p[i], mem.len[i] / 8);
    return fnv_words(h, (const uint64_t *)&st->body, sizeof st->body / 8);
}

/* ------------------------------------------------------------------ 3-D grids: BT, SP, LU */

/* n^3 points, 5 doubles each (NPB's u(5,i,j,k)); boundary points are never written after
 * the initialisation. */
static size_t gn;
static double *gu, *grhs, *gforce;
#define P(i, j, k) ((((size_t)(k)) * gn + (size_t)(j)) * gn + (size_t)(i))

#define DT 0.3     /* pseudo time step */
#define DIFF 1.0   /* diffusion */
#define AIMP (DT * DIFF)
#define CDAMP 0.1  /* relaxation towards 1 */
#define NL 0.01    /* nonlinear coupling of neighbouring variables */
#define EPSJ 0.05  /* scale of the 5x5 couplings in the blocks */

/* The 5x5 couplings: off-diagonal blocks use W, diagonal blocks W2 (entries in [-1, 1]). */
static const double W[25] = {
    0.3, -0.2, 0.1, 0.0, 0.4,  -0.1, 0.5, 0.2, -0.3, 0.1, 0.2,  0.1, -0.4,
    0.3, -0.2, 0.0, -0.3, 0.2, 0.6,  0.1, -0.4, 0.2, 0.0, -0.1, 0.3,
};
static const double W2[25] = {
    0.5,  0.1, -0.2, 0.3,  0.0, 0.2, 0.4, 0.1,  -0.1, 0.2, -0.3, 0.0, 0.6,
    0.2,  0.1, 0.1,  -0.2, 0.3, 0.5, -0.1, 0.0, 0.1, 0.2, -0.3, 0.4,
};

static size_t grid_alloc(uint64_t n) {
    if (n < 6 || n > 2048)
        fail("%s", "the grid side (--size) must be 6 to 2048");
    gn = (size_t)n;
    size_t pts = gn * gn * gn;
    gu = region(pts * 5 * sizeof(double));
    grhs = region(pts * 5 * sizeof(double));
    gforce = region(pts * 5 * sizeof(double));
    return pts;
}

static NOINLINE void grid_init(void) {
    uint64_t s = UINT64_C(0x9e3779b97f4a7c15);
    const double h = 1.0 / (double)(gn - 1);
    for (size_t k = 0; k < gn; k++)
        for (size_t j = 0; j < gn; j++)
            for (size_t i = 0; i < gn; i++) {
                double x = (double)i * h, y = (double)j * h, z = (double)k * h;
                double shape = x * (1 - x) + y * (1 - y) + z * (1 - z);
                double *u = gu + 5 * P(i, j, k), *f = gforce + 5 * P(i, j, k);
                for (int m = 0; m < 5; m++) {
                    u[m] = 1.0 + 0.1 * m * shape + 0.05 * rng_unit(&s);
                    f[m] = 0.02 * (m + 1) * x * y * z + 0.05 * (rng_unit(&s) - 0.5);
                }
            }
}

/* rhs = DT * (forcing - CDAMP (u - 1) + DIFF lap u - NL u_m (u_m+1 - 1)) at interior points. */
INLINE void rhs_body(double *restrict out) {
    const size_t n = gn, sj = 5 * n, sk = 5 * n * n;
    for (size_t k = 1; k < n - 1; k++)
        for (size_t j = 1; j < n - 1; j++)
            for (size_t i = 1; i < n - 1; i++) {
                size_t p = 5 * P(i, j, k);
                const double *u = gu + p;
                for (int m = 0; m < 5; m++) {
                    double lap = u[m - 5] + u[m + 5] + u[m - sj] + u[m + sj] + u[m - sk] +
                                 u[m + sk] - 6.0 * u[m];
                    out[p + m] = DT * (gforce[p + m] - CDAMP * (u[m] - 1.0) + DIFF * lap -
                                       NL * u[m] * (u[(m + 1) % 5] - 1.0));
                }
            }
}

INLINE void add_body(double *restrict u, const double *restrict d, double scale) {
    const size_t n = gn;
    for (size_t k = 1; k < n - 1; k++)
        for (size_t j = 1; j < n - 1; j++) {
            size_t p0 = 5 * P(1, j, k), p1 = 5 * P(n - 1, j, k);
            for (size_t p = p0; p < p1; p++)
                u[p] += scale * d[p];
        }
}

/* Blocks: coupling J(u)[m][l] = sign EPSJ W[m][l] u[l], plus diag on the diagonal. */
INLINE void block(double *restrict b, const double *restrict w, const double *restrict u,
                  double sign, double diag) {
    for (int m = 0; m < 5; m++)
        for (int l = 0; l < 5; l++)
            b[m * 5 + l] = sign * EPSJ * w[m * 5 + l] * u[l] + (m == l ? diag : 0.0);
}

/* b -= a c (5x5). */
INLINE void mm_sub(double *restrict b, const double *restrict a, const double *restrict c) {
    for (int m = 0; m < 5; m++)
        for (int l = 0; l < 5; l++) {
            double s = 0;
            for (int q = 0; q < 5; q++)
                s += a[m * 5 + q] * c[q * 5 + l];
            b[m * 5 + l] -= s;
        }
}

/* r -= s a v (5x5 times 5). */
INLINE void mv_sub(double *restrict r, const double *restrict a, const double *restrict v,
                   double s) {
    for (int m = 0; m < 5; m++) {
        double t = 0;
        for (int q = 0; q < 5; q++)
            t += a[m * 5 + q] * v[q];
        r[m] -= s * t;
    }
}

/* Solve M X = [C | r] in place (Gauss without pivoting: M is diagonally dominant); C (5x5,
 * may be NULL) and r receive M^-1 C and M^-1 r; M is destroyed. */
INLINE void solve5(double *restrict M, double *restrict C, double *restrict r) {
    for (int p = 0; p < 5; p++) {
        double inv = 1.0 / M[p * 5 + p];
        for (int q = p + 1; q < 5; q++)
            M[p * 5 + q] *= inv;
        if (C)
            for (int q = 0; q < 5; q++)
                C[p * 5 + q] *= inv;
        r[p] *= inv;
        for (int rr = p + 1; rr < 5; rr++) {
            double f = M[rr * 5 + p];
            for (int q = p + 1; q < 5; q++)
                M[rr * 5 + q] -= f * M[p * 5 + q];
            if (C)
                for (int q = 0; q < 5; q++)
                    C[rr * 5 + q] -= f * C[p * 5 + q];
            r[rr] -= f * r[p];
        }
    }
    for (int p = 4; p > 0; p--)
        for (int rr = 0; rr < p; rr++) {
            double f = M[rr * 5 + p];
            if (C)
                for (int q = 0; q < 5; q++)
                    C[rr * 5 + q] -= f * C[p * 5 + q];
            r[rr] -= f * r[p];
        }
}

/* ---- BT */

static double *bt_cp; /* the line's C' blocks: n x 25 (NPB BT's lhs work array) */

static void bt_alloc(uint64_t n) {
    grid_alloc(n);
    bt_cp = region((size_t)n * 25 * sizeof(double));
}

static void bt_init(struct state *st) {
    (void)st;
    grid_init();
}

static NOINLINE void bt_rhs(void) { rhs_body(grhs); }

/* Block-tridiagonal line solve over the interior points base + t*stride, t = 1..n-2:
 * A_t x_{t-1} + B_t x_t + C_t x_{t+1} = rhs_t, the solution written over rhs. */
INLINE void bt_line(size_t base, size_t stride) {
    const int L = (int)gn - 2;
    for (int t = 0; t < L; t++) {
        size_t p = base + (size_t)(t + 1) * stride;
        double B[25], A[25];
        double *r = grhs + 5 * p, *cp = bt_cp + 25 * (size_t)t;
        block(B, W2, gu + 5 * p, 1.0, 1.0 + 2.0 * AIMP);
        if (t < L - 1)
            block(cp, W, gu + 5 * (p + stride), -1.0, -AIMP);
        else
            memset(cp, 0, 25 * sizeof *cp);
        if (t > 0) {
            block(A, W, gu + 5 * (p - stride), 1.0, -AIMP);
            mm_sub(B, A, cp - 25);
            mv_sub(r, A, grhs + 5 * (p - stride), 1.0);
        }
        solve5(B, cp, r);
    }
    for (int t = L - 2; t >= 0; t--) {
        size_t p = base + (size_t)(t + 1) * stride;
        mv_sub(grhs + 5 * p, bt_cp + 25 * (size_t)t, grhs + 5 * (p + stride), 1.0);
    }
}

static NOINLINE void bt_x_solve(void) {
    for (size_t k = 1; k < gn - 1; k++)
        for (size_t j = 1; j < gn - 1; j++)
            bt_line(P(0, j, k), 1);
}

static NOINLINE void bt_y_solve(void) {
    for (size_t k = 1; k < gn - 1; k++)
        for (size_t i = 1; i < gn - 1; i++)
            bt_line(P(i, 0, k), gn);
}

static NOINLINE void bt_z_solve(void) {
    for (size_t j = 1; j < gn - 1; j++)
        for (size_t i = 1; i < gn - 1; i++)
            bt_line(P(i, j, 0), gn * gn);
}

static NOINLINE void bt_add(void) { add_body(gu, grhs, 1.0); }

static void bt_step(struct state *st) {
    (void)st;
    bt_rhs();
    bt_x_solve();
    bt_y_solve();
    bt_z_solve();
    bt_add();
}

/* ---- SP */

static double *sp_lhs; /* one line's pentadiagonal coefficients: 5 x n */

static void sp_alloc(uint64_t n) {
    grid_alloc(n);
    sp_lhs = region((size_t)n * 5 * sizeof(double));
}

static void sp_init(struct state *st) {
    (void)st;
    grid_init();
}

static NOINLINE void sp_rhs(void) { rhs_body(grhs); }

/* rhs = Q rhs at every interior point, Q = I - 2 v v^T / |v|^2 with v = (1, 2, 3, 4, 5):
 * orthogonal, standing for NPB SP's changes of basis around the sweeps. */
INLINE void sp_transform(void) {
    const size_t n = gn;
    for (size_t k = 1; k < n - 1; k++)
        for (size_t j = 1; j < n - 1; j++)
            for (size_t i = 1; i < n - 1; i++) {
                double *r = grhs + 5 * P(i, j, k);
                double dot = r[0] + 2 * r[1] + 3 * r[2] + 4 * r[3] + 5 * r[4];
                double f = 2.0 * dot / 55.0;
                for (int m = 0; m < 5; m++)
                    r[m] -= f * (double)(m + 1);
            }
}

static NOINLINE void sp_txinvr(void) { sp_transform(); }
static NOINLINE void sp_ninvr(void) { sp_transform(); }
static NOINLINE void sp_pinvr(void) { sp_transform(); }
static NOINLINE void sp_tzetar(void) { sp_transform(); }

/* For each variable m, the pentadiagonal system along the line (interior points, 4th-order
 * dissipation: -d2 -d1 (1 + 2 d1 + 2 d2) -d1 -d2, d depending on u), solved over rhs. */
INLINE void sp_line(size_t base, size_t stride) {
    const int L = (int)gn - 2;
    double *la = sp_lhs, *lb = la + gn, *lc = lb + gn, *ld = lc + gn, *le = ld + gn;
#define R(t) grhs[5 * (base + (size_t)((t) + 1) * stride) + (size_t)m]
    for (int m = 0; m < 5; m++) {
        for (int t = 0; t < L; t++) {
            double uu = gu[5 * (base + (size_t)(t + 1) * stride) + (size_t)m];
            double s = 1.0 + 0.2 * m + 0.1 * uu * uu / (1.0 + uu * uu);
            double d1 = AIMP * s, d2 = 0.25 * AIMP * s;
            la[t] = -d2;
            lb[t] = -d1;
            lc[t] = 1.0 + 2.0 * d1 + 2.0 * d2;
            ld[t] = -d1;
            le[t] = -d2;
        }
        for (int t = 0; t < L; t++) {
            double inv = 1.0 / lc[t];
            if (t + 1 < L) {
                double f = lb[t + 1] * inv;
                lc[t + 1] -= f * ld[t];
                ld[t + 1] -= f * le[t];
                R(t + 1) -= f * R(t);
            }
            if (t + 2 < L) {
                double g = la[t + 2] * inv;
                lb[t + 2] -= g * ld[t];
                lc[t + 2] -= g * le[t];
                R(t + 2) -= g * R(t);
            }
        }
        R(L - 1) /= lc[L - 1];
        R(L - 2) = (R(L - 2) - ld[L - 2] * R(L - 1)) / lc[L - 2];
        for (int t = L - 3; t >= 0; t--)
            R(t) = (R(t) - ld[t] * R(t + 1) - le[t] * R(t + 2)) / lc[t];
    }
#undef R
}

static NOINLINE void sp_x_solve(void) {
    for (size_t k = 1; k < gn - 1; k++)
        for (size_t j = 1; j < gn - 1; j++)
            sp_line(P(0, j, k), 1);
}

static NOINLINE void sp_y_solve(void) {
    for (size_t k = 1; k < gn - 1; k++)
        for (size_t i = 1; i < gn - 1; i++)
            sp_line(P(i, 0, k), gn);
}

static NOINLINE void sp_z_solve(void) {
    for (size_t j = 1; j < gn - 1; j++)
        for (size_t i = 1; i < gn - 1; i++)
            sp_line(P(i, j, 0), gn * gn);
}

static NOINLINE void sp_add(void) { add_body(gu, grhs, 1.0); }

static void sp_step(struct state *st) {
    (void)st;
    sp_rhs();
    sp_txinvr();
    sp_x_solve();
    sp_ninvr();
    sp_y_solve();
    sp_pinvr();
    sp_z_solve();
    sp_tzetar();
    sp_add();
}

/* ---- LU */

#define OMEGA 1.2
static double *lu_jac; /* one k-plane's blocks: 4 x n^2 x 25 (NPB LU's a, b, c, d) */

static void lu_alloc(uint64_t n) {
    grid_alloc(n);
    lu_jac = region(4 * (size_t)n * (size_t)n * 25 * sizeof(double));
}

static void lu_init(struct state *st) {
    (void)st;
    grid_init();
}

static NOINLINE void lu_rhs(void) { rhs_body(grhs); }

#define JAC(b, i, j) (lu_jac + ((size_t)(b) * gn * gn + (size_t)(j) * gn + (size_t)(i)) * 25)

/* The blocks of plane k: d diagonal, a, b, c the couplings with the points at k-1, j-1,
 * i-1 (lower) or i+1, j+1, k+1 (upper). */
INLINE void lu_jac_body(size_t k, int upper) {
    const size_t n = gn, sj = n, sk = n * n;
    for (size_t j = 1; j < n - 1; j++)
        for (size_t i = 1; i < n - 1; i++) {
            size_t p = P(i, j, k);
            block(JAC(3, i, j), W2, gu + 5 * p, 1.0, 1.0 + 6.0 * AIMP);
            if (!upper) {
                block(JAC(0, i, j), W, gu + 5 * (p - sk), -1.0, -AIMP);
                block(JAC(1, i, j), W, gu + 5 * (p - sj), -1.0, -AIMP);
                block(JAC(2, i, j), W, gu + 5 * (p - 1), -1.0, -AIMP);
            } else {
                block(JAC(0, i, j), W, gu + 5 * (p + 1), 1.0, -AIMP);
                block(JAC(1, i, j), W, gu + 5 * (p + sj), 1.0, -AIMP);
                block(JAC(2, i, j), W, gu + 5 * (p + sk), 1.0, -AIMP);
            }
        }
}

static NOINLINE void lu_jacld(size_t k) { lu_jac_body(k, 0); }
static NOINLINE void lu_jacu(size_t k) { lu_jac_body(k, 1); }

/* (D + omega L) v = rsd on plane k, points in lexicographic order. */
static NOINLINE void lu_blts(size_t k) {
    const size_t n = gn, sj = n, sk = n * n;
    for (size_t j = 1; j < n - 1; j++)
        for (size_t i = 1; i < n - 1; i++) {
            size_t p = P(i, j, k);
            double *v = grhs + 5 * p, D[25];
            mv_sub(v, JAC(0, i, j), grhs + 5 * (p - sk), OMEGA);
            mv_sub(v, JAC(1, i, j), grhs + 5 * (p - sj), OMEGA);
            mv_sub(v, JAC(2, i, j), grhs + 5 * (p - 1), OMEGA);
            memcpy(D, JAC(3, i, j), sizeof D);
            solve5(D, NULL, v);
        }
}

/* v -= D^-1 omega U v on plane k, points in reverse order. */
static NOINLINE void lu_buts(size_t k) {
    const size_t n = gn, sj = n, sk = n * n;
    for (size_t j = n - 2; j >= 1; j--)
        for (size_t i = n - 2; i >= 1; i--) {
            size_t p = P(i, j, k);
            double tv[5] = {0, 0, 0, 0, 0}, D[25];
            mv_sub(tv, JAC(0, i, j), grhs + 5 * (p + 1), -OMEGA);
            mv_sub(tv, JAC(1, i, j), grhs + 5 * (p + sj), -OMEGA);
            mv_sub(tv, JAC(2, i, j), grhs + 5 * (p + sk), -OMEGA);
            memcpy(D, JAC(3, i, j), sizeof D);
            solve5(D, NULL, tv);
            double *v = grhs + 5 * p;
            for (int m = 0; m < 5; m++)
                v[m] -= tv[m];
        }
}

static NOINLINE void lu_add(void) { add_body(gu, grhs, 1.0 / (OMEGA * (2.0 - OMEGA))); }

static void lu_step(struct state *st) {
    (void)st;
    lu_rhs();
    for (size_t k = 1; k < gn - 1; k++) {
        lu_jacld(k);
        lu_blts(k);
    }
    for (size_t k = gn - 2; k >= 1; k--) {
        lu_jacu(k);
        lu_buts(k);
    }
    lu_add();
}

/* ------------------------------------------------------------------ CG */

#define CG_OFFSETS 64 /* a row has 2 x 64 off-diagonal entries and its diagonal */
#define CG_ITMAX 25   /* NPB CG's inner iterations per outer one */
#define CG_SHIFT 20.0
static size_t cg_n;
static int64_t *cg_rowstr;
static int32_t *cg_col;
static double *cg_a, *cg_x, *cg_z, *cg_p, *cg_q, *cg_r;
/* state: iu[0] inner iteration, iu[1] outer iterations done; d[0] rho, d[1] zeta,
 * d[2] the last outer iteration's residual norm */

static void cg_alloc(uint64_t n) {
    if (n < 4 * CG_OFFSETS + 4 || n > (UINT64_C(1) << 30))
        fail("%s", "cg: --size (matrix rows) must be 260 to 2^30");
    cg_n = (size_t)n;
    size_t nnz = cg_n * (2 * CG_OFFSETS + 1);
    cg_rowstr = region((cg_n + 1) * sizeof(int64_t));
    cg_col = region(nnz * sizeof(int32_t));
    cg_a = region(nnz * sizeof(double));
    cg_x = region(cg_n * sizeof(double));
    cg_z = region(cg_n * sizeof(double));
    cg_p = region(cg_n * sizeof(double));
    cg_q = region(cg_n * sizeof(double));
    cg_r = region(cg_n * sizeof(double));
}

/* A symmetric value in [-1, 1) for the entry (i, j). */
static double cg_value(uint64_t i, uint64_t j) {
    uint64_t lo = i < j ? i : j, hi = i < j ? j : i;
    uint64_t s = (lo * UINT64_C(0x9E3779B97F4A7C15)) ^ (hi + 12345);
    s = s ? s : 1;
    rng_next(&s);
    return 2.0 * rng_unit(&s) - 1.0;
}

/* A = P^T S P: S a circulant pattern with 64 random offsets +-o, P a random permutation, so
 * rows have scattered columns and A is symmetric; diagonally dominant, so positive
 * definite. Built once, then only read. */
static NOINLINE void cg_init(struct state *st) {
    const size_t n = cg_n, w = 2 * CG_OFFSETS + 1;
    uint64_t s = UINT64_C(0x0123456789abcdef);
    uint32_t *perm = malloc(n * sizeof *perm), *inv = malloc(n * sizeof *inv);
    if (perm == NULL || inv == NULL)
        fail("%s", "cg: out of memory");
    for (size_t i = 0; i < n; i++)
        perm[i] = (uint32_t)i;
    for (size_t i = n - 1; i > 0; i--) {
        size_t j = rng_next(&s) % (i + 1);
        uint32_t t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
    for (size_t i = 0; i < n; i++)
        inv[perm[i]] = (uint32_t)i;
    size_t off[CG_OFFSETS];
    for (int o = 0; o < CG_OFFSETS; o++) {
        int again;
        do {
            off[o] = 1 + rng_next(&s) % ((n - 1) / 2);
            again = 0;
            for (int q = 0; q < o; q++)
                again |= off[q] == off[o];
        } while (again);
    }
    for (size_t i = 0; i < n; i++) {
        int32_t *col = cg_col + i * w;
        double *a = cg_a + i * w, diag = CG_SHIFT;
        size_t c = 0;
        col[c++] = (int32_t)i;
        for (int o = 0; o < CG_OFFSETS; o++) {
            col[c++] = (int32_t)inv[(perm[i] + off[o]) % n];
            col[c++] = (int32_t)inv[(perm[i] + n - off[o]) % n];
        }
        for (size_t e = 1; e < c; e++) { /* insertion sort by column */
            int32_t v = col[e];
            size_t f = e;
            for (; f > 0 && col[f - 1] > v; f--)
                col[f] = col[f - 1];
            col[f] = v;
        }
        for (size_t e = 0; e < c; e++)
            if ((size_t)col[e] != i) {
                a[e] = cg_value(i, (uint64_t)col[e]);
                diag += fabs(a[e]);
            }
        for (size_t e = 0; e < c; e++)
            if ((size_t)col[e] == i)
                a[e] = diag;
        cg_rowstr[i] = (int64_t)(i * w);
    }
    cg_rowstr[n] = (int64_t)(n * w);
    free(perm);
    free(inv);
    for (size_t i = 0; i < n; i++)
        cg_x[i] = 1.0;
    st->body.iu[0] = 0;
}

static NOINLINE void cg_spmv(double *restrict out, const double *restrict in) {
    for (size_t i = 0; i < cg_n; i++) {
        double s = 0;
        for (int64_t e = cg_rowstr[i]; e < cg_rowstr[i + 1]; e++)
            s += cg_a[e] * in[cg_col[e]];
        out[i] = s;
    }
}

static NOINLINE double cg_dot(const double *a, const double *b) {
    double s = 0;
    for (size_t i = 0; i < cg_n; i++)
        s += a[i] * b[i];
    return s;
}

/* The start of an outer iteration: z = q = 0, r = p = x. */
static NOINLINE void cg_start(void) {
    for (size_t i = 0; i < cg_n; i++) {
        cg_q[i] = 0;
        cg_z[i] = 0;
        cg_r[i] = cg_x[i];
        cg_p[i] = cg_x[i];
    }
}

/* z += alpha p; r -= alpha q */
static NOINLINE void cg_update_zr(double alpha) {
    for (size_t i = 0; i < cg_n; i++) {
        cg_z[i] += alpha * cg_p[i];
        cg_r[i] -= alpha * cg_q[i];
    }
}

/* p = r + beta p */
static NOINLINE void cg_update_p(double beta) {
    for (size_t i = 0; i < cg_n; i++)
        cg_p[i] = cg_r[i] + beta * cg_p[i];
}

static NOINLINE double cg_residual(void) {
    double s = 0;
    for (size_t i = 0; i < cg_n; i++) {
        double d = cg_x[i] - cg_r[i];
        s += d * d;
    }
    return sqrt(s);
}

/* x = z / |z| */
static NOINLINE void cg_normalise(double norm) {
    for (size_t i = 0; i < cg_n; i++)
        cg_x[i] = norm * cg_z[i];
}

static void cg_step(struct state *st) {
    if (st->body.iu[0] == 0) {
        cg_start();
        st->body.d[0] = cg_dot(cg_r, cg_r);
    }
    cg_spmv(cg_q, cg_p);
    double rho = st->body.d[0];
    double alpha = rho / cg_dot(cg_p, cg_q);
    cg_update_zr(alpha);
    double rho1 = cg_dot(cg_r, cg_r);
    cg_update_p(rho1 / rho);
    st->body.d[0] = rho1;
    if (++st->body.iu[0] == CG_ITMAX) {
        cg_spmv(cg_r, cg_z);
        st->body.d[2] = cg_residual();
        double xz = cg_dot(cg_x, cg_z), zz = cg_dot(cg_z, cg_z);
        st->body.d[1] = CG_SHIFT + 1.0 / xz;
        cg_normalise(1.0 / sqrt(zz));
        st->body.iu[0] = 0;
        st->body.iu[1]++;
    }
}

/* ------------------------------------------------------------------ MG */

#define MG_MAXLEV 16
static int mg_lt;                    /* finest level: side 2^mg_lt */
static size_t mg_off[MG_MAXLEV + 1]; /* offset of level l in mg_u and mg_r */
static double *mg_v, *mg_u, *mg_r;
#define MGS(l) (((size_t)1 << (l)) + 2) /* a level's side with its halo */
#define MGI(s, i3, i2, i1) ((((size_t)(i3)) * (s) + (size_t)(i2)) * (s) + (size_t)(i1))

static void mg_alloc(uint64_t n) {
    int lt = 0;
    while (((uint64_t)1 << lt) < n)
        lt++;
    if (((uint64_t)1 << lt) != n || lt < 3 || lt > 11)
        fail("%s", "mg: --size (finest grid side) must be a power of 2 from 8 to 2048");
    mg_lt = lt;
    size_t tot = 0;
    for (int l = 1; l <= lt; l++) {
        mg_off[l] = tot;
        tot += MGS(l) * MGS(l) * MGS(l);
    }
    mg_v = region(MGS(lt) * MGS(lt) * MGS(lt) * sizeof(double));
    mg_u = region(tot * sizeof(double));
    mg_r = region(tot * sizeof(double));
}

/* Periodic halos (NPB's comm3). */
static NOINLINE void mg_comm3(double *x, int l) {
    const size_t m = (size_t)1 << l, s = m + 2;
    for (size_t i3 = 1; i3 <= m; i3++)
        for (size_t i2 = 1; i2 <= m; i2++) {
            x[MGI(s, i3, i2, 0)] = x[MGI(s, i3, i2, m)];
            x[MGI(s, i3, i2, m + 1)] = x[MGI(s, i3, i2, 1)];
        }
    for (size_t i3 = 1; i3 <= m; i3++)
        for (size_t i1 = 0; i1 <= m + 1; i1++) {
            x[MGI(s, i3, 0, i1)] = x[MGI(s, i3, m, i1)];
            x[MGI(s, i3, m + 1, i1)] = x[MGI(s, i3, 1, i1)];
        }
    for (size_t i2 = 0; i2 <= m + 1; i2++)
        for (size_t i1 = 0; i1 <= m + 1; i1++) {
            x[MGI(s, 0, i2, i1)] = x[MGI(s, m, i2, i1)];
            x[MGI(s, m + 1, i2, i1)] = x[MGI(s, 1, i2, i1)];
        }
}

/* Sums of the 6 face, 12 edge and 8 corner neighbours of (i3, i2, i1). */
INLINE void mg_sums(const double *x, size_t s, size_t i3, size_t i2, size_t i1, double *face,
                    double *edge, double *corner) {
    const double *c = x + MGI(s, i3, i2, i1);
    const size_t a = 1, b = s, d = s * s;
    *face = c[-a] + c[a] + c[-b] + c[b] + c[-d] + c[d];
    *edge = c[-b - a] + c[-b + a] + c[b - a] + c[b + a] + c[-d - a] + c[-d + a] + c[d - a] +
            c[d + a] + c[-d - b] + c[-d + b] + c[d - b] + c[d + b];
    *corner = c[-d - b - a] + c[-d - b + a] + c[-d + b - a] + c[-d + b + a] + c[d - b - a] +
              c[d - b + a] + c[d + b - a] + c[d + b + a];
}

/* r = v - A u (A: -8/3, 0, 1/6, 1/12), at level l. */
static NOINLINE void mg_resid(const double *u, const double *v, double *r, int l) {
    const size_t m = (size_t)1 << l, s = m + 2;
    for (size_t i3 = 1; i3 <= m; i3++)
        for (size_t i2 = 1; i2 <= m; i2++)
            for (size_t i1 = 1; i1 <= m; i1++) {
                double f, e, c;
                mg_sums(u, s, i3, i2, i1, &f, &e, &c);
                size_t q = MGI(s, i3, i2, i1);
                r[q] = v[q] - (-8.0 / 3.0 * u[q] + e / 6.0 + c / 12.0);
            }
    mg_comm3(r, l);
}

/* u += S r (S: -3/17, 1/33, -1/61, 0). */
static NOINLINE void mg_psinv(const double *r, double *u, int l) {
    const size_t m = (size_t)1 << l, s = m + 2;
    for (size_t i3 = 1; i3 <= m; i3++)
        for (size_t i2 = 1; i2 <= m; i2++)
            for (size_t i1 = 1; i1 <= m; i1++) {
                double f, e, c;
                mg_sums(r, s, i3, i2, i1, &f, &e, &c);
                size_t q = MGI(s, i3, i2, i1);
                u[q] += -3.0 / 17.0 * r[q] + f / 33.0 - e / 61.0;
            }
    mg_comm3(u, l);
}

/* Coarse (level l-1) point I = the fine 27-point average around 2I. */
static NOINLINE void mg_rprj3(const double *rf, double *rc, int l) {
    const size_t mc = (size_t)1 << (l - 1), sc = mc + 2, sf = 2 * mc + 2;
    for (size_t j3 = 1; j3 <= mc; j3++)
        for (size_t j2 = 1; j2 <= mc; j2++)
            for (size_t j1 = 1; j1 <= mc; j1++) {
                double f, e, c;
                mg_sums(rf, sf, 2 * j3, 2 * j2, 2 * j1, &f, &e, &c);
                rc[MGI(sc, j3, j2, j1)] =
                    0.5 * rf[MGI(sf, 2 * j3, 2 * j2, 2 * j1)] + 0.25 * f + 0.125 * e + 0.0625 * c;
            }
    mg_comm3(rc, l - 1);
}

/* Fine (level l) += trilinear interpolation of coarse (level l-1). */
static NOINLINE void mg_interp(const double *uc, double *uf, int l) {
    const size_t m = (size_t)1 << l, sf = m + 2, sc = m / 2 + 2;
    for (size_t i3 = 1; i3 <= m; i3++) {
        size_t a3 = i3 / 2, b3 = (i3 + 1) / 2;
        for (size_t i2 = 1; i2 <= m; i2++) {
            size_t a2 = i2 / 2, b2 = (i2 + 1) / 2;
            for (size_t i1 = 1; i1 <= m; i1++) {
                size_t a1 = i1 / 2, b1 = (i1 + 1) / 2;
                double s = uc[MGI(sc, a3, a2, a1)] + uc[MGI(sc, a3, a2, b1)] +
                           uc[MGI(sc, a3, b2, a1)] + uc[MGI(sc, a3, b2, b1)] +
                           uc[MGI(sc, b3, a2, a1)] + uc[MGI(sc, b3, a2, b1)] +
                           uc[MGI(sc, b3, b2, a1)] + uc[MGI(sc, b3, b2, b1)];
                uf[MGI(sf, i3, i2, i1)] += 0.125 * s;
            }
        }
    }
    mg_comm3(uf, l);
}

static NOINLINE void mg_zero(double *x, int l) {
    memset(x, 0, MGS(l) * MGS(l) * MGS(l) * sizeof *x);
}

static NOINLINE void mg_init(struct state *st) {
    (void)st;
    const int lt = mg_lt;
    const size_t m = (size_t)1 << lt, s = m + 2;
    uint64_t seed = UINT64_C(0x5eed00000000004d);
    for (int sign = 1; sign >= -1; sign -= 2)
        for (int c = 0; c < 10; c++) { /* NPB's zran3: +1 at 10 points, -1 at 10 others */
            size_t q;
            do
                q = MGI(s, 1 + rng_next(&seed) % m, 1 + rng_next(&seed) % m,
                        1 + rng_next(&seed) % m);
            while (mg_v[q] != 0);
            mg_v[q] = sign;
        }
    mg_comm3(mg_v, lt);
    mg_resid(mg_u + mg_off[lt], mg_v, mg_r + mg_off[lt], lt);
}

static void mg_step(struct state *st) {
    (void)st;
    const int lt = mg_lt;
#define U(l) (mg_u + mg_off[l])
#define RR(l) (mg_r + mg_off[l])
    for (int l = lt; l >= 2; l--)
        mg_rprj3(RR(l), RR(l - 1), l);
    mg_zero(U(1), 1);
    mg_psinv(RR(1), U(1), 1);
    for (int l = 2; l < lt; l++) {
        mg_zero(U(l), l);
        mg_interp(U(l - 1), U(l), l);
        mg_resid(U(l), RR(l), RR(l), l);
        mg_psinv(RR(l), U(l), l);
    }
    mg_interp(U(lt - 1), U(lt), lt);
    mg_resid(U(lt), mg_v, RR(lt), lt);
    mg_psinv(RR(lt), U(lt), lt);
    mg_resid(U(lt), mg_v, RR(lt), lt);
#undef U
#undef RR
}

/* ------------------------------------------------------------------ IS */

#define IS_BUCKETS_LOG2 10
#define IS_TESTS 5
static size_t is_n, is_maxkey;
static int is_shift;
static int32_t *is_key, *is_buff2, *is_buff1, *is_bsize, *is_bptr;
static size_t is_test[IS_TESTS];

static void is_alloc(uint64_t lg) {
    if (lg < 14 || lg > 30)
        fail("%s", "is: --size (log2 of the key count) must be 14 to 30");
    is_n = (size_t)1 << lg;
    is_maxkey = (size_t)1 << (lg - 4); /* NPB's ratio: class C sorts 2^27 keys below 2^23 */
    is_shift = (int)(lg - 4) - IS_BUCKETS_LOG2;
    is_key = region(is_n * sizeof(int32_t));
    is_buff2 = region(is_n * sizeof(int32_t));
    is_buff1 = region(is_maxkey * sizeof(int32_t));
    is_bsize = region(((size_t)1 << IS_BUCKETS_LOG2) * sizeof(int32_t));
    is_bptr = region(((size_t)1 << IS_BUCKETS_LOG2) * sizeof(int32_t));
    uint64_t s = UINT64_C(0x7e57);
    for (int t = 0; t < IS_TESTS; t++)
        is_test[t] = rng_next(&s) % is_n;
}

/* NPB's keys: the sum of 4 uniform numbers, scaled to [0, max key). */
static NOINLINE void is_init(struct state *st) {
    uint64_t s = UINT64_C(0x314159265);
    const double k = (double)is_maxkey / 4.0;
    for (size_t i = 0; i < is_n; i++) {
        double x = rng_unit(&s) + rng_unit(&s) + rng_unit(&s) + rng_unit(&s);
        is_key[i] = (int32_t)(k * x);
    }
    st->body.acc = FNV_OFFSET;
}

static NOINLINE void is_count_buckets(void) {
    memset(is_bsize, 0, ((size_t)1 << IS_BUCKETS_LOG2) * sizeof *is_bsize);
    for (size_t i = 0; i < is_n; i++)
        is_bsize[is_key[i] >> is_shift]++;
    int32_t sum = 0;
    for (size_t b = 0; b < ((size_t)1 << IS_BUCKETS_LOG2); b++) {
        is_bptr[b] = sum;
        sum += is_bsize[b];
    }
}

/* Keys into key_buff2 bucket by bucket: 1024 write streams across the array. */
static NOINLINE void is_scatter(void) {
    for (size_t i = 0; i < is_n; i++) {
        int32_t k = is_key[i];
        is_buff2[is_bptr[k >> is_shift]++] = k;
    }
}

/* Per bucket: count each key's occurrences in key_buff1, then accumulate them into ranks. */
static NOINLINE void is_rank(void) {
    size_t start = 0;
    for (size_t b = 0; b < ((size_t)1 << IS_BUCKETS_LOG2); b++) {
        size_t lo = b << is_shift, hi = (b + 1) << is_shift, end = (size_t)is_bptr[b];
        memset(is_buff1 + lo, 0, (hi - lo) * sizeof *is_buff1);
        for (size_t i = start; i < end; i++)
            is_buff1[is_buff2[i]]++;
        int32_t m = (int32_t)start;
        for (size_t k = lo; k < hi; k++) {
            m += is_buff1[k];
            is_buff1[k] = m;
        }
        start = end;
    }
}

static void is_step(struct state *st) {
    uint64_t it = st->body.step + 1;
    size_t pos = (size_t)(st->body.step % (is_n / 2));
    is_key[pos] = (int32_t)(it % is_maxkey);
    is_key[pos + is_n / 2] = (int32_t)(is_maxkey - 1 - it % is_maxkey);
    is_count_buckets();
    is_scatter();
    is_rank();
    uint64_t h = st->body.acc; /* NPB's partial verification: some keys' ranks */
    for (int t = 0; t < IS_TESTS; t++) {
        int32_t k = is_key[is_test[t]];
        uint64_t rank = k > 0 ? (uint64_t)is_buff1[k - 1] : 0;
        h = (h ^ rank) * FNV_PRIME;
    }
    st->body.acc = h;
}

/* ------------------------------------------------------------------ matrow / matcol */

#define MAT_COLS 512 /* 512 doubles: one 4 KiB page per row, as Fig. 2 assumes */
#define MAT_WORK 16 /* --work's default */
static int mat_work = MAT_WORK;
static size_t mat_rows;
static double *mat_a, *mat_b, *mat_c;

static void mat_alloc(uint64_t rows) {
    if (rows < 1 || rows > (UINT64_C(1) << 24))
        fail("%s", "matrow/matcol: --size (rows) must be 1 to 2^24");
    mat_rows = (size_t)rows;
    mat_a = region(mat_rows * MAT_COLS * sizeof(double));
    mat_b = region(mat_rows * MAT_COLS * sizeof(double));
    mat_c = region(mat_rows * MAT_COLS * sizeof(double));
}

static NOINLINE void mat_init(struct state *st) {
    (void)st;
    uint64_t s = UINT64_C(0xa11ce);
    for (size_t i = 0; i < mat_rows * MAT_COLS; i++) {
        mat_a[i] = rng_unit(&s);
        mat_b[i] = rng_unit(&s) - 0.5;
    }
}

static double mat_coef(uint64_t step) { return 1.0 / (double)(1 + step % 7); }

/* One element of C = 0.5 C + A + c g(B): g, --work Horner steps (bounded: |B| <= 0.5), is
 * the computation a real code would do per element; it sets how long a pass lasts (about
 * 0.3 s row-wise at the default size and work), to compare with checkpoint intervals. */
INLINE double mat_elem(double c_old, double a, double b, double c) {
    double t = b;
    for (int w = 0; w < mat_work; w++)
        t = 0.5 * t * b + 0.25;
    return 0.5 * c_old + a + c * t;
}

/* Row by row: each page of C is written 512 times in a row, then not again in the pass. */
static NOINLINE void mat_add_rows(double c) {
    for (size_t i = 0; i < mat_rows; i++) {
        double *cr = mat_c + i * MAT_COLS;
        const double *ar = mat_a + i * MAT_COLS, *br = mat_b + i * MAT_COLS;
        for (size_t j = 0; j < MAT_COLS; j++)
            cr[j] = mat_elem(cr[j], ar[j], br[j], c);
    }
}

/* Column by column: C's pages are written in turn, 1..R, 1..R, ..., 512 times a pass. */
static NOINLINE void mat_add_cols(double c) {
    for (size_t j = 0; j < MAT_COLS; j++)
        for (size_t i = 0; i < mat_rows; i++) {
            size_t q = i * MAT_COLS + j;
            mat_c[q] = mat_elem(mat_c[q], mat_a[q], mat_b[q], c);
        }
}

static void matrow_step(struct state *st) { mat_add_rows(mat_coef(st->body.step)); }
static void matcol_step(struct state *st) { mat_add_cols(mat_coef(st->body.step)); }

/* ------------------------------------------------------------------ the table */

struct workload {
    const char *name;
    uint64_t size, steps;             /* the default: 40-80 s on the 2-core VM */
    uint64_t small_size, small_steps; /* --small: 1-2 s, a few MB */
    const char *size_means;
    void (*alloc)(uint64_t size);
    void (*init)(struct state *st);
    void (*step)(struct state *st);
};

static const struct workload workloads[] = {
    {"bt", 112, 60, 20, 200, "grid side n (n^3 points, 120 B each)", bt_alloc, bt_init, bt_step},
    {"sp", 128, 75, 24, 300, "grid side n (n^3 points, 120 B each)", sp_alloc, sp_init, sp_step},
    {"lu", 128, 80, 24, 250, "grid side n (n^3 points, 120 B each)", lu_alloc, lu_init, lu_step},
    {"cg", 500000, 550, 6000, 2000, "matrix rows n (129 nonzeros per row)", cg_alloc, cg_init,
     cg_step},
    {"mg", 256, 170, 64, 250, "finest grid side n, a power of 2 (levels n, n/2, ..., 2)",
     mg_alloc, mg_init, mg_step},
    {"is", 26, 350, 20, 500, "log2 of the key count (keys below 2^(size-4))", is_alloc, is_init,
     is_step},
    {"matrow", 32768, 240, 256, 400, "rows R of each R x 512 matrix (one page per row)",
     mat_alloc, mat_init, matrow_step},
    {"matcol", 32768, 50, 256, 400, "rows R of each R x 512 matrix (one page per row)",
     mat_alloc, mat_init, matcol_step},
};
#define NWORKLOADS (sizeof workloads / sizeof workloads[0])

/* ------------------------------------------------------------------ options */

struct options {
    const struct workload *wl;
    uint64_t size, steps, every, stop_after, work;
    double interval, seconds;
    const char *dir;
    int json, restart, plain, small, have_size, have_steps, have_work;
};

static void usage(FILE *f) {
    fprintf(f,
            "usage: prwip_workloads WORKLOAD [options]\n"
            "  WORKLOAD: bt sp lu cg mg is matrow matcol (the PRWIP paper's NPB kernels and Fig. 2)\n"
            "  --size S         problem size (see below; default: a run of ~60 s)\n"
            "  --small          the test preset: about 1-2 s and a few MB\n"
            "  --steps N        time steps to run (deterministic: same steps, same memory)\n"
            "  --seconds T      stop after T seconds of steps instead (steps then unbounded\n"
            "                   unless --steps is given too)\n"
            "  --interval SEC   checkpoint when SEC seconds (e.g. 0.5) have passed since the\n"
            "                   previous checkpoint returned (checked between steps); 0: never\n"
            "  --every N        checkpoint after every N-th step too (0: never)\n"
            "  --dir DIR        the checkpoint store (default: ICKPT_DIR, else a temporary\n"
            "                   directory removed at the end)\n"
            "  --restart        restore the store's newest version and go on from its step\n"
            "  --stop-after K   end the process (_exit(0), no finalize) after step K, as a\n"
            "                   crash would\n"
            "  --work W         matrow, matcol: Horner steps per element (default %d): how\n"
            "                   long a pass lasts\n"
            "  --plain          no ickpt at all (mmap'd memory): the baseline without tracking\n"
            "  --json           print one JSON line at the end\n"
            "  --help\n"
            "Checkpoints are tagged with the step. The library's settings come from its\n"
            "ICKPT_* variables (ICKPT_BACKEND, ICKPT_MODE, ICKPT_PRECOPY...); with --interval,\n"
            "ICKPT_CHECKPOINT_INTERVAL is set to it when unset.\n"
            "Defaults (--small's in parentheses); what --size means:\n",
            MAT_WORK);
    for (size_t i = 0; i < NWORKLOADS; i++) {
        const struct workload *w = &workloads[i];
        fprintf(f, "  %-7s --size %" PRIu64 " (%" PRIu64 ") --steps %" PRIu64 " (%" PRIu64 "): %s\n",
                w->name, w->size, w->small_size, w->steps, w->small_steps, w->size_means);
    }
}

static uint64_t parse_u64(const char *opt, const char *s) {
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || s[0] == '-')
        fail("%s: not a non-negative integer", opt);
    return v;
}

static double parse_secs(const char *opt, const char *s) {
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno != 0 || end == s || *end != '\0' || !(v >= 0) || v > 1e9)
        fail("%s: not a number of seconds", opt);
    return v;
}

static struct options parse(int argc, char **argv) {
    enum { O_SIZE = 256, O_STEPS, O_SECONDS, O_INTERVAL, O_EVERY, O_DIR, O_STOP, O_WORK };
    static const struct option longs[] = {
        {"size", required_argument, 0, O_SIZE},
        {"steps", required_argument, 0, O_STEPS},
        {"seconds", required_argument, 0, O_SECONDS},
        {"interval", required_argument, 0, O_INTERVAL},
        {"every", required_argument, 0, O_EVERY},
        {"dir", required_argument, 0, O_DIR},
        {"stop-after", required_argument, 0, O_STOP},
        {"work", required_argument, 0, O_WORK},
        {"small", no_argument, 0, 's'},
        {"restart", no_argument, 0, 'r'},
        {"plain", no_argument, 0, 'p'},
        {"json", no_argument, 0, 'j'},
        {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0},
    };
    struct options o = {0};
    int c;
    while ((c = getopt_long(argc, argv, "h", longs, NULL)) != -1) {
        switch (c) {
        case O_SIZE: o.size = parse_u64("--size", optarg); o.have_size = 1; break;
        case O_STEPS: o.steps = parse_u64("--steps", optarg); o.have_steps = 1; break;
        case O_SECONDS: o.seconds = parse_secs("--seconds", optarg); break;
        case O_INTERVAL: o.interval = parse_secs("--interval", optarg); break;
        case O_EVERY: o.every = parse_u64("--every", optarg); break;
        case O_DIR: o.dir = optarg; break;
        case O_STOP: o.stop_after = parse_u64("--stop-after", optarg); break;
        case O_WORK: o.work = parse_u64("--work", optarg); o.have_work = 1; break;
        case 's': o.small = 1; break;
        case 'r': o.restart = 1; break;
        case 'p': o.plain = 1; break;
        case 'j': o.json = 1; break;
        case 'h': usage(stdout); exit(0);
        default: usage(stderr); exit(2);
        }
    }
    if (optind != argc - 1) {
        usage(stderr);
        exit(2);
    }
    for (size_t i = 0; i < NWORKLOADS; i++)
        if (strcmp(argv[optind], workloads[i].name) == 0)
            o.wl = &workloads[i];
    if (o.wl == NULL)
        fail("unknown workload '%s' (bt sp lu cg mg is matrow matcol)", argv[optind]);
    if (!o.have_size)
        o.size = o.small ? o.wl->small_size : o.wl->size;
    if (!o.have_steps)
        o.steps = o.seconds > 0 ? UINT64_MAX : o.small ? o.wl->small_steps : o.wl->steps;
    int is_mat = strncmp(o.wl->name, "mat", 3) == 0;
    if (o.have_work && (!is_mat || o.work > 100000))
        fail("%s", "--work is for matrow and matcol only, at most 100000");
    if (is_mat) {
        if (!o.have_work)
            o.work = MAT_WORK;
        mat_work = (int)o.work;
    }
    if (o.plain && (o.restart || o.interval > 0 || o.every > 0))
        fail("%s", "--plain takes no checkpoints: no --restart, --interval or --every");
    return o;
}

/* ------------------------------------------------------------------ main */

static char tmpdir[] = "/tmp/prwip-store-XXXXXX";
static int own_dir;

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb;
    (void)flag;
    (void)ftw;
    remove(path);
    return 0;
}

/* The temporary store of a run given no directory, removed however the run ends. */
static void rm_tmpdir(void) {
    if (own_dir)
        nftw(tmpdir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

int main(int argc, char **argv) {
    struct options o = parse(argc, argv);
    const struct workload *wl = o.wl;
    const char *dir = o.dir;
    double t_start = now();

    mem.plain = o.plain;
    if (!o.plain) {
        if (dir == NULL && (getenv("ICKPT_DIR") == NULL || getenv("ICKPT_DIR")[0] == '\0')) {
            if (o.restart)
                fail("%s", "--restart needs --dir or ICKPT_DIR");
            if (mkdtemp(tmpdir) == NULL)
                fail("cannot create %s", tmpdir);
            dir = tmpdir;
            own_dir = 1;
            atexit(rm_tmpdir);
        }
        ickpt_config cfg;
        ickpt_result r = ickpt_config_init(&cfg);
        if (r != ICKPT_OK)
            die("ickpt_config_init", r);
        cfg.dir = dir;
        /* The library's pre-copy predictor wants the time to the next checkpoint: tell it
         * ours unless the caller set it. */
        if (o.interval > 0 && getenv("ICKPT_CHECKPOINT_INTERVAL") == NULL) {
            char v[32];
            double ms = o.interval * 1e3;
            snprintf(v, sizeof v, "%.0fms", ms < 1 ? 1.0 : ms);
            setenv("ICKPT_CHECKPOINT_INTERVAL", v, 0);
        }
        if ((r = ickpt_init(&cfg)) != ICKPT_OK)
            die("ickpt_init", r);
    }
    struct state *st = region(PAGE);
    wl->alloc(o.size);

    uint64_t start_step = 0, restored_version = 0;
    double restore_s = 0;
    int restored = 0;
    if (!o.plain) {
        size_t count = 0;
        ickpt_result r = ickpt_list_versions(NULL, 0, &count);
        if (r != ICKPT_OK)
            die("ickpt_list_versions", r);
        if (o.restart) {
            uint64_t tag = 0;
            double t0 = now();
            r = ickpt_restore_latest_tagged(&restored_version, &tag);
            restore_s = now() - t0;
            if (r == ICKPT_OK) {
                if (st->magic != STATE_MAGIC || st->workload != (uint64_t)(wl - workloads) ||
                    st->size != o.size || st->param != o.work) {
                    fprintf(stderr,
                            "prwip_workloads: version %" PRIu64 " holds another workload, size or work than %s --size %" PRIu64 "\n",
                            restored_version, wl->name, o.size);
                    return 1;
                }
                if (tag != st->body.step) {
                    fprintf(stderr,
                            "prwip_workloads: version %" PRIu64 " has tag %" PRIu64
                            " but its state says step %" PRIu64 "\n",
                            restored_version, tag, st->body.step);
                    return 1;
                }
                restored = 1;
                start_step = st->body.step;
            } else if (r != ICKPT_ERR_NOT_FOUND) {
                die("ickpt_restore_latest_tagged", r);
            }
        } else if (count > 0) {
            fprintf(stderr, "prwip_workloads: a fresh run: discarding the %zu versions in %s\n",
                    count, dir ? dir : getenv("ICKPT_DIR"));
            if ((r = ickpt_discard_newer(0)) != ICKPT_OK)
                die("ickpt_discard_newer", r);
        }
    }
    if (!restored) {
        st->magic = STATE_MAGIC;
        st->workload = (uint64_t)(wl - workloads);
        st->size = o.size;
        st->param = o.work;
        st->layout = 1;
        wl->init(st);
    }
    double init_s = now() - t_start;

    /* The steps. */
    uint64_t checkpoints = 0, last_kind = 0, last_mode = UINT64_MAX;
    double ckpt_s = 0, ckpt_max = 0, wait_s = 0;
    struct ickpt_phases ph_sum = {0};
    uint64_t ph_last = 0, ph_count = 0;
    const double t_loop = now();
    double t_last = t_loop;
    while (st->body.step < o.steps && !(o.seconds > 0 && now() - t_loop >= o.seconds)) {
        wl->step(st);
        st->body.step++;
        double t = now();
        if ((o.interval > 0 && t - t_last >= o.interval) ||
            (o.every > 0 && st->body.step % o.every == 0)) {
            ickpt_checkpoint_info info;
            ickpt_result r = ickpt_checkpoint_tagged(st->body.step, &info);
            if (r != ICKPT_OK)
                die("ickpt_checkpoint", r);
            t_last = now();
            double d = t_last - t;
            ckpt_s += d;
            ckpt_max = d > ckpt_max ? d : ckpt_max;
            checkpoints++;
            last_kind = info.kind;
            last_mode = info.mode;
            struct ickpt_phases ph;
            if (ickpt_get_phases(&ph) == ICKPT_OK && ph.version != ph_last) {
                ph_last = ph.version;
                ph_count++;
                ph_sum.collect_ns += ph.collect_ns;
                ph_sum.copy_ns += ph.copy_ns;
                ph_sum.crc_ns += ph.crc_ns;
                ph_sum.release_ns += ph.release_ns;
                ph_sum.write_ns += ph.write_ns;
                ph_sum.commit_ns += ph.commit_ns;
                ph_sum.gc_ns += ph.gc_ns;
            }
        }
        if (o.stop_after > 0 && st->body.step == o.stop_after) {
            fprintf(stderr, "prwip_workloads: stopped after step %" PRIu64 "\n", st->body.step);
            _exit(0);
        }
    }
    if (!o.plain && checkpoints > 0) {
        double t = now();
        ickpt_result r = ickpt_wait(NULL);
        if (r != ICKPT_OK)
            die("ickpt_wait", r);
        wait_s = now() - t;
    }
    const double run_s = now() - t_loop;
    const uint64_t sum = checksum(st);

    ickpt_stats s = {0};
    struct ickpt_precopy pc = {0};
    if (!o.plain) {
        ickpt_result r = ickpt_get_stats(&s);
        if (r != ICKPT_OK)
            die("ickpt_get_stats", r);
        r = ickpt_get_precopy(&pc);
        if (r != ICKPT_OK)
            die("ickpt_get_precopy", r);
    }
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    static const char *const backends[] = {"auto", "mprotect", "uffd", "uffd-async"};
    const char *backend = o.plain ? "none" : s.backend < 4 ? backends[s.backend] : "?";
    const uint64_t steps_run = st->body.step - start_step;
    if (o.json) {
        const char *pre = getenv("ICKPT_PRECOPY");
        printf("{\"workload\":\"%s\",\"size\":%" PRIu64 ",\"work\":%" PRIu64 ",\"steps\":%" PRIu64
               ",\"start_step\":%" PRIu64 ",\"steps_run\":%" PRIu64
               ",\"interval\":%g,\"every\":%" PRIu64 ",\"run_s\":%.4f,\"init_s\":%.4f"
               ",\"restore_s\":%.4f,\"restored_version\":%" PRIu64 ",\"step_s\":%.6f"
               ",\"checkpoints\":%" PRIu64 ",\"ckpt_s\":%.4f,\"ckpt_max_s\":%.4f"
               ",\"wait_s\":%.4f,\"checksum\":\"%016" PRIx64 "\",\"bytes_protected\":%" PRIu64
               ",\"backend\":\"%s\",\"mode\":",
               wl->name, o.size, o.work, st->body.step, start_step, steps_run, o.interval, o.every,
               run_s, init_s, restore_s, restored_version,
               steps_run ? (run_s - ckpt_s - wait_s) / (double)steps_run : 0.0, checkpoints,
               ckpt_s, ckpt_max, wait_s, sum, mem.bytes, backend);
        if (last_mode == UINT64_MAX)
            printf("null");
        else
            printf("\"%s\"", last_mode == ICKPT_MODE_ASYNC ? "async" : "sync");
        printf(",\"precopy\":");
        if (pre == NULL)
            printf("null");
        else {
            putchar('"');
            for (const char *c = pre; *c; c++)
                if (*c >= 0x20 && *c != '"' && *c != '\\' && *c < 0x7f)
                    putchar(*c);
            putchar('"');
        }
        printf(",\"faults\":%" PRIu64 ",\"pages_written\":%" PRIu64 ",\"bytes_written\":%" PRIu64
               ",\"full_checkpoints\":%" PRIu64 ",\"incremental_checkpoints\":%" PRIu64
               ",\"failed_checkpoints\":%" PRIu64 ",\"lib_checkpoint_s\":%.4f"
               ",\"cow_pages\":%" PRIu64 ",\"wait_pages\":%" PRIu64 ",\"avoided_pages\":%" PRIu64
               ",\"after_pages\":%" PRIu64 ",\"lib_wait_s\":%.4f,\"monitor_s\":%.4f"
               ",\"pages_restored\":%" PRIu64 ",\"last_kind\":\"%s\""
               ",\"phases_versions\":%" PRIu64 ",\"phases_s\":{\"collect\":%.4f,\"copy\":%.4f"
               ",\"crc\":%.4f,\"release\":%.4f,\"write\":%.4f,\"commit\":%.4f,\"gc\":%.4f}"
               ",\"precopy_passes\":%" PRIu64 ",\"precopy_pages\":%" PRIu64
               ",\"precopy_conflicts\":%" PRIu64 ",\"precopy_copies\":%" PRIu64
               ",\"precopy_rewritten_bytes\":%" PRIu64 ",\"max_rss_kb\":%ld}\n",
               s.faults, s.pages_written, s.bytes_written, s.full_checkpoints,
               s.incremental_checkpoints, s.failed_checkpoints, (double)s.checkpoint_ns * 1e-9,
               s.cow_pages, s.wait_pages, s.avoided_pages, s.after_pages,
               (double)s.wait_ns * 1e-9, (double)s.monitor_ns * 1e-9, s.pages_restored,
               checkpoints == 0 ? "none" : last_kind == ICKPT_KIND_FULL ? "full" : "incremental",
               ph_count, ph_sum.collect_ns * 1e-9, ph_sum.copy_ns * 1e-9, ph_sum.crc_ns * 1e-9,
               ph_sum.release_ns * 1e-9, ph_sum.write_ns * 1e-9, ph_sum.commit_ns * 1e-9,
               ph_sum.gc_ns * 1e-9, pc.total_passes, pc.total_pages, pc.total_conflicts,
               pc.total_copies, pc.total_rewritten_bytes, ru.ru_maxrss);
    } else {
        printf("%s size %" PRIu64 ": steps %" PRIu64 "..%" PRIu64 " in %.3f s (%.4f s/step)"
               ", %" PRIu64 " checkpoints %.3f s, backend %s, %.1f MiB protected, %" PRIu64
               " faults, %.1f MiB written, checksum %016" PRIx64 "\n",
               wl->name, o.size, start_step, st->body.step, run_s,
               steps_run ? (run_s - ckpt_s - wait_s) / (double)steps_run : 0.0, checkpoints,
               ckpt_s, backend, (double)mem.bytes / 1048576.0, s.faults,
               (double)s.bytes_written / 1048576.0, sum);
    }
    fflush(stdout);
    if (!o.plain) {
        ickpt_result r = ickpt_finalize();
        if (r != ICKPT_OK)
            die("ickpt_finalize", r);
    } else {
        for (int i = 0; i < mem.n; i++)
            munmap(mem.p[i], mem.len[i]);
    }
    return 0;
}
