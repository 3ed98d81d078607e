/*
 * heat: 2-D heat diffusion with a moving heat source, checkpointed with ickpt.
 *
 * The plate is one N x N grid of doubles (about 64 MiB) relaxed in place by red-black
 * Gauss-Seidel sweeps. A hot disc wanders across the plate and each iteration only relaxes
 * the band of rows around it, the way many codes refine only where something happens. So
 * between two checkpoints only a band of pages is written and an incremental checkpoint
 * stores a small fraction of what a full one does.
 *
 * Usage: heat --dir DIR --iters N --every K [--no-ckpt] [--async] [--out FILE] [--full-every F]
 *
 * --async: checkpoints are committed in the background (ickpt_checkpoint returns once the
 * pages are scheduled); each ckpt line then reports the version scheduled, and the run
 * waits for the last commit (ickpt_wait) before it ends.
 *
 * Everything the loop needs to continue lives in the grid (region 1) and in struct
 * heat_state (region 2); after a restore the run continues bit for bit as if it had never
 * stopped. The run is deterministic: no threads, no clocks in the arithmetic.
 */

#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <ickpt.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* 2896^2 doubles is 64 MiB (minus a little), big enough that a full checkpoint costs. */
#define N 2896
/* Rows relaxed on each side of the source: the band is about 7 % of the plate. */
#define BAND 96
#define SOURCE_RADIUS 24
#define SOURCE_TEMP 1.0
/* Red-black passes per iteration; more passes spread the heat further per iteration. */
#define PASSES 24
/* Source position and velocity are in 1/16 cell so that motion stays integer and exact. */
#define FIX 16

#define GRID_ID 1
#define STATE_ID 2
#define STATE_MAGIC UINT64_C(0x6865617430303031) /* "heat0001" */

struct heat_state {
    uint64_t magic;
    uint64_t n;    /* grid side, so a store from another build is refused */
    uint64_t iter; /* iterations completed */
    int64_t src_r, src_c; /* source centre, 1/FIX cell */
    int64_t vel_r, vel_c; /* source velocity, 1/FIX cell per iteration */
};

struct options {
    const char *dir;
    const char *out;
    uint64_t iters;
    uint64_t every;
    uint32_t full_every; /* 0: the library's default */
    int ckpt;
    int async;
};

static void usage(void)
{
    fprintf(stderr, "usage: heat --dir DIR --iters N --every K [--no-ckpt] [--async] "
                    "[--out FILE] [--full-every F]\n");
    exit(2);
}

static void check(const char *call, ickpt_result r)
{
    if (r != ICKPT_OK) {
        fprintf(stderr, "heat: %s: %s: %s\n", call, ickpt_result_name(r), ickpt_last_error());
        exit(1);
    }
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static uint64_t parse_u64(const char *opt, const char *s, uint64_t min, uint64_t max)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || s[0] == '-' || v < min || v > max) {
        fprintf(stderr, "heat: %s: '%s' is not a number in [%" PRIu64 ", %" PRIu64 "]\n", opt, s,
                min, max);
        exit(2);
    }
    return v;
}

static struct options parse_args(int argc, char **argv)
{
    struct options o = {.ckpt = 1};
    int have_iters = 0, have_every = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--no-ckpt") == 0) {
            o.ckpt = 0;
            continue;
        }
        if (strcmp(a, "--async") == 0) {
            o.async = 1;
            continue;
        }
        if (i + 1 >= argc)
            usage();
        const char *v = argv[++i];
        if (strcmp(a, "--dir") == 0) {
            o.dir = v;
        } else if (strcmp(a, "--out") == 0) {
            o.out = v;
        } else if (strcmp(a, "--iters") == 0) {
            o.iters = parse_u64(a, v, 0, UINT64_MAX / 2);
            have_iters = 1;
        } else if (strcmp(a, "--every") == 0) {
            o.every = parse_u64(a, v, 1, UINT64_MAX / 2);
            have_every = 1;
        } else if (strcmp(a, "--full-every") == 0) {
            o.full_every = (uint32_t)parse_u64(a, v, 1, UINT32_MAX);
        } else {
            usage();
        }
    }
    /* --every stays mandatory with --no-ckpt so both runs take the same arguments. */
    if (!have_iters || !have_every || (o.ckpt && o.dir == NULL))
        usage();
    return o;
}

/* Edges are held at fixed temperatures and never written again; the interior starts as a
 * gentle gradient so that no page is trivially zero. */
static void init_grid(double *g)
{
    for (size_t i = 0; i < N; i++) {
        for (size_t j = 0; j < N; j++) {
            double v = 0.25 * (double)i / (N - 1) + 0.05 * (double)j / (N - 1);
            if (i == 0)
                v = 0.5; /* a warm top edge */
            else if (i == N - 1 || j == 0 || j == N - 1)
                v = 0.0;
            g[i * N + j] = v;
        }
    }
}

static void init_state(struct heat_state *s)
{
    s->magic = STATE_MAGIC;
    s->n = N;
    s->iter = 0;
    s->src_r = (int64_t)(N / 5) * FIX;
    s->src_c = (int64_t)(N / 7) * FIX;
    s->vel_r = 19; /* a little over one row per iteration */
    s->vel_c = 53;
}

/* Keeps the whole band, not just the disc, inside the interior. */
static void move_source(struct heat_state *s)
{
    const int64_t lo_r = (BAND + 1) * FIX, hi_r = (N - 2 - BAND) * FIX;
    const int64_t lo_c = (SOURCE_RADIUS + 1) * FIX, hi_c = (N - 2 - SOURCE_RADIUS) * FIX;
    s->src_r += s->vel_r;
    s->src_c += s->vel_c;
    if (s->src_r < lo_r || s->src_r > hi_r) {
        s->vel_r = -s->vel_r;
        s->src_r = s->src_r < lo_r ? 2 * lo_r - s->src_r : 2 * hi_r - s->src_r;
    }
    if (s->src_c < lo_c || s->src_c > hi_c) {
        s->vel_c = -s->vel_c;
        s->src_c = s->src_c < lo_c ? 2 * lo_c - s->src_c : 2 * hi_c - s->src_c;
    }
}

/* One iteration: PASSES red-black Gauss-Seidel passes over the rows near the source. The
 * disc under the source is held at SOURCE_TEMP (a Dirichlet condition), which is what makes
 * the heat flow outward from it. */
static void step(double *g, struct heat_state *s)
{
    const long sr = (long)(s->src_r / FIX), sc = (long)(s->src_c / FIX);
    const long r0 = sr - BAND, r1 = sr + BAND;
    const long rad2 = (long)SOURCE_RADIUS * SOURCE_RADIUS;

    for (int pass = 0; pass < PASSES; pass++) {
        for (long colour = 0; colour < 2; colour++) {
            for (long i = r0; i <= r1; i++) {
                double *row = g + (size_t)i * N;
                const double *up = row - N, *down = row + N;
                long di = i - sr;
                /* Columns of the disc on this row, or an empty range. */
                long dlo = 1, dhi = 0;
                if (di * di <= rad2) {
                    long w = 0;
                    while ((w + 1) * (w + 1) + di * di <= rad2)
                        w++;
                    dlo = sc - w;
                    dhi = sc + w;
                }
                for (long j = 1 + ((i + colour + 1) & 1); j < N - 1; j += 2) {
                    if (j >= dlo && j <= dhi)
                        row[j] = SOURCE_TEMP;
                    else
                        row[j] = 0.25 * (up[j] + down[j] + row[j - 1] + row[j + 1]);
                }
            }
        }
    }
    move_source(s);
    s->iter++;
}

static void write_grid(const char *path, const double *g)
{
    FILE *f = fopen(path, "wb");
    if (f == NULL || fwrite(g, sizeof(double), (size_t)N * N, f) != (size_t)N * N ||
        fclose(f) != 0) {
        fprintf(stderr, "heat: %s: %s\n", path, strerror(errno));
        exit(1);
    }
}

int main(int argc, char **argv)
{
    struct options o = parse_args(argc, argv);
    const size_t grid_bytes = (size_t)N * N * sizeof(double);

    /* Plain malloc on purpose: the grid stands for memory an existing code already owns,
     * which ickpt_protect tracks at whatever alignment malloc chose. */
    double *grid = malloc(grid_bytes);
    if (grid == NULL) {
        fprintf(stderr, "heat: cannot allocate %zu bytes\n", grid_bytes);
        return 1;
    }

    struct heat_state *st;
    struct heat_state plain_state;
    int restored = 0;
    if (o.ckpt) {
        ickpt_config cfg;
        check("ickpt_config_init", ickpt_config_init(&cfg));
        cfg.dir = o.dir;
        if (o.full_every != 0)
            cfg.full_every = o.full_every;
        if (o.async)
            cfg.mode = ICKPT_MODE_ASYNC;
        check("ickpt_init", ickpt_init(&cfg));
        check("ickpt_protect", ickpt_protect(GRID_ID, grid, grid_bytes));
        void *p;
        check("ickpt_malloc", ickpt_malloc(STATE_ID, sizeof *st, &p));
        st = p;

        uint64_t v;
        double t0 = now_s();
        ickpt_result r = ickpt_restore_latest(&v);
        if (r == ICKPT_OK) {
            double ms = (now_s() - t0) * 1e3;
            if (st->magic != STATE_MAGIC || st->n != N) {
                fprintf(stderr, "heat: version %" PRIu64 " in %s is not a heat state for N=%d\n",
                        v, o.dir, N);
                return 1;
            }
            printf("restored version=%" PRIu64 " iter=%" PRIu64 " ms=%.1f\n", v, st->iter, ms);
            fflush(stdout);
            restored = 1;
        } else if (r != ICKPT_ERR_NOT_FOUND) {
            check("ickpt_restore_latest", r);
        }
    } else {
        st = &plain_state;
    }
    if (!restored) {
        init_grid(grid);
        init_state(st);
    }

    double t_start = now_s();
    while (st->iter < o.iters) {
        step(grid, st);
        if (o.ckpt && st->iter % o.every == 0) {
            ickpt_checkpoint_info info;
            double t0 = now_s();
            check("ickpt_checkpoint", ickpt_checkpoint(&info));
            double ms = (now_s() - t0) * 1e3;
            printf("ckpt version=%" PRIu64 " kind=%s pages=%" PRIu64 " bytes=%" PRIu64
                   " ms=%.1f iter=%" PRIu64 "\n",
                   info.version, info.kind == ICKPT_KIND_FULL ? "full" : "incremental",
                   info.pages, info.bytes, ms, st->iter);
            /* The driver reacts to each line as it comes (it kills us mid-run). */
            fflush(stdout);
        }
    }
    if (o.ckpt && o.async)
        check("ickpt_wait", ickpt_wait(NULL)); /* the last version is durable before "done" */
    double seconds = now_s() - t_start;

    if (o.out != NULL)
        write_grid(o.out, grid);
    printf("done iters=%" PRIu64 " seconds=%.3f\n", st->iter, seconds);
    fflush(stdout);

    if (o.ckpt) {
        ickpt_stats stats;
        check("ickpt_get_stats", ickpt_get_stats(&stats));
        static const char *const backends[] = {"auto", "mprotect", "uffd", "uffd-async"};
        printf("tracking backend=%s first-write faults=%" PRIu64 "\n",
               stats.backend < 4 ? backends[stats.backend] : "?", stats.faults);
        /* Unprotect the grid before handing it back to malloc. */
        check("ickpt_finalize", ickpt_finalize());
    }
    free(grid);
    return 0;
}
