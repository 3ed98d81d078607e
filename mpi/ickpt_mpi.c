/*
 * ickpt_mpi: coordinated global versions over ickpt's serial API (docs/design.md,
 * "Coordinated checkpoints over MPI"). Built with the MPI compiler wrapper, so one build
 * serves the MPI it was built with; libickpt itself knows nothing of MPI.
 *
 * Protocol of one global version N (sync mode):
 *   1. every rank commits its local version (ickpt_checkpoint_tagged);
 *   2. agree(): one allreduce finds the lowest rank that failed, if any; that rank's code and
 *      message are broadcast so every rank returns the same result;
 *   3. on success every rank writes its record of N (ickpt_global_commit) and agrees again;
 *      on failure the ranks that did commit discard their version (ickpt_discard_newer).
 * A restart agrees on the newest global version every rank holds a record of: ranks' newest
 * records in their local stores differ by at most one (a rank records N+1 only after every
 * rank returned from N), and each rank keeps its newest two, so the minimum of the newest is
 * present everywhere. With lower tiers (a shared directory, an object store) each rank's drain
 * runs at its own pace, and a job restarted from them after losing its nodes may find the
 * ranks' newest records far apart: before each record, the ranks pin the newest global
 * version every rank has drained (ickpt_global_pin), so that one is still on every tier.
 */
#define _GNU_SOURCE
#include "ickpt_mpi.h"
#include "ickpt_mpi_recv.h"

#include <ickpt_coord.h>

#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#define MSG_LEN 1024

/* Which collective a rank is in: all ranks must agree before any of them acts. */
enum call { CALL_INIT = 1, CALL_RESTORE, CALL_CHECKPOINT, CALL_WAIT, CALL_FINALIZE, CALL_EXCHANGE };

static const char *call_name(int c) {
    switch (c) {
    case CALL_INIT: return "ickpt_mpi_init";
    case CALL_RESTORE: return "ickpt_mpi_restore_latest";
    case CALL_CHECKPOINT: return "ickpt_mpi_checkpoint";
    case CALL_WAIT: return "ickpt_mpi_wait";
    case CALL_FINALIZE: return "ickpt_mpi_finalize";
    case CALL_EXCHANGE: return "ickpt_mpi_section_exchange";
    default: return "an unknown call";
    }
}

static struct {
    int up;             /* between a successful init and finalize */
    MPI_Comm comm;      /* ickpt's duplicate of the application's communicator */
    int rank, size;
    uint32_t mode;      /* ICKPT_MODE_* */
    int pending;        /* async: a checkpoint scheduled, not yet agreed */
    uint64_t global;    /* the newest global version (0: none yet) */
    uint64_t local;     /* this rank's version holding `global` (0: none) */
    int tiers;          /* some rank drains to lower tiers (agreed at init) */
    uint64_t pinned;    /* the global version pinned on every tier (0: none) */
} st;

static __thread char last_error[MSG_LEN];

const char *ickpt_mpi_last_error(void) { return last_error; }

static void set_error(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
}

/* A local failure: the core's message, prefixed with what was being done. */
static ickpt_result local_error(ickpt_result rc, const char *what) {
    if (rc != ICKPT_OK)
        set_error("rank %d: %s: %s", st.rank, what, ickpt_last_error());
    return rc;
}

/* An MPI call that failed: reported as ICKPT_ERR_COLLECTIVE with MPI's own message. */
static ickpt_result mpi_error(int err, const char *what) {
    char text[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(err, text, &len) != MPI_SUCCESS)
        snprintf(text, sizeof text, "MPI error %d", err);
    set_error("rank %d: %s failed: %s", st.rank, what, text);
    return ICKPT_ERR_COLLECTIVE;
}

/*
 * Make one result out of every rank's `rc`: the lowest failing rank's code and message, on
 * every rank, or ICKPT_OK. The message of a local failure must already be in last_error.
 */
static ickpt_result agree(ickpt_result rc) {
    int mine = rc != ICKPT_OK ? st.rank : st.size, first = st.size;
    int err = MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, st.comm);
    if (err != MPI_SUCCESS)
        return mpi_error(err, "MPI_Allreduce (agreeing on a result)");
    if (first == st.size)
        return ICKPT_OK;
    struct {
        int code;
        char msg[MSG_LEN];
    } out;
    memset(&out, 0, sizeof out);
    if (st.rank == first) {
        out.code = (int)rc;
        snprintf(out.msg, sizeof out.msg, "%s", last_error);
    }
    err = MPI_Bcast(&out, (int)sizeof out, MPI_BYTE, first, st.comm);
    if (err != MPI_SUCCESS)
        return mpi_error(err, "MPI_Bcast (sharing a failure)");
    out.msg[MSG_LEN - 1] = '\0';
    if (st.rank != first)
        set_error("%s", out.msg);
    return (ickpt_result)out.code;
}

/*
 * The minimum and maximum over ranks of `v`, in one allreduce: (v, UINT64_MAX - v) by
 * MPI_MIN. `what` names the exchange in an error.
 */
static ickpt_result min_max(uint64_t v, uint64_t *lo, uint64_t *hi, const char *what) {
    uint64_t in[2] = {v, UINT64_MAX - v}, out[2];
    int err = MPI_Allreduce(in, out, 2, MPI_UINT64_T, MPI_MIN, st.comm);
    if (err != MPI_SUCCESS)
        return mpi_error(err, what);
    *lo = out[0];
    *hi = UINT64_MAX - out[1];
    return ICKPT_OK;
}

/* Check that every rank is in the same collective call. */
static ickpt_result same_call(enum call c) {
    uint64_t lo = 0, hi = 0;
    ickpt_result rc =
        min_max((uint64_t)c, &lo, &hi, "MPI_Allreduce (checking that all ranks are in the same call)");
    if (rc == ICKPT_OK && lo != hi) {
        set_error("rank %d is in %s, but some rank is in %s and some in %s: every rank must "
                  "make the same collective ickpt_mpi calls in the same order",
                  st.rank, call_name(c), call_name((int)lo), call_name((int)hi));
        return ICKPT_ERR_COLLECTIVE;
    }
    return rc;
}

/* The start of every collective call but init: ickpt must be up, and ranks in step. */
static ickpt_result enter(enum call c) {
    if (!st.up) {
        set_error("%s: ickpt_mpi is not initialised; call ickpt_mpi_init first", call_name(c));
        return ICKPT_ERR_NOT_INITIALIZED;
    }
    return same_call(c);
}

#ifdef ICKPT_MPI_TEST_SWITCHES
/*
 * The test kill switch, compiled only into the test build of the library (tests/mpi/run.sh
 * installs it with scripts/install-mpi.sh --test-switches, which defines
 * ICKPT_MPI_TEST_SWITCHES); the installed library has none of it, and reads no environment
 * variable. Tests kill one rank at a chosen point of the protocol:
 * ICKPT_MPI_CRASH=POINT:GLOBAL:RANK, POINT `committed` (its local version durable, before the
 * agreement) or `recorded` (its global-commit record durable, before the agreement on the
 * records). Read once, at init.
 */
enum crash_point { CRASH_NONE, CRASH_COMMITTED, CRASH_RECORDED };
static struct {
    enum crash_point point;
    uint64_t global;
    int rank;
} crash;

/*
 * Read a decimal number at *p: one digit at least, no sign, no more than `max`; *p moves past
 * it. 0 on success. (sscanf's %d and %llu take signs, leading blanks and overflow silently.)
 */
static int decimal(const char **p, uint64_t max, uint64_t *out) {
    const char *s = *p;
    uint64_t n = 0;
    if (*s < '0' || *s > '9')
        return -1;
    for (; *s >= '0' && *s <= '9'; s++) {
        uint64_t d = (uint64_t)(*s - '0');
        if (n > (max - d) / 10)
            return -1;
        n = n * 10 + d;
    }
    *p = s;
    *out = n;
    return 0;
}

/* Whether `s` starts with `prefix`; if so, *rest is what follows it. */
static int starts(const char *s, const char *prefix, const char **rest) {
    size_t n = strlen(prefix);
    if (strncmp(s, prefix, n) != 0)
        return 0;
    *rest = s + n;
    return 1;
}

/* Parse ICKPT_MPI_CRASH; 0 when unset or valid. */
static int parse_crash(void) {
    const char *v = getenv("ICKPT_MPI_CRASH");
    crash.point = CRASH_NONE;
    if (v == NULL || v[0] == '\0')
        return 0;
    const char *p = v;
    enum crash_point point = starts(v, "committed:", &p)  ? CRASH_COMMITTED
                             : starts(v, "recorded:", &p) ? CRASH_RECORDED
                                                          : CRASH_NONE;
    uint64_t g = 0, r = 0;
    if (point == CRASH_NONE || decimal(&p, (uint64_t)1 << 62, &g) != 0 || g == 0 || *p++ != ':' ||
        decimal(&p, INT32_MAX, &r) != 0 || *p != '\0') {
        set_error("rank %d: ICKPT_MPI_CRASH=%s: expected committed:GLOBAL:RANK or "
                  "recorded:GLOBAL:RANK (a test switch)",
                  st.rank, v);
        return -1;
    }
    crash.point = point;
    crash.global = g;
    crash.rank = (int)r;
    return 0;
}

/* The test switch's kill, when this is its point, global version and rank. */
static void crash_here(enum crash_point p, uint64_t global) {
    if (crash.point == p && crash.global == global && crash.rank == st.rank)
        raise(SIGKILL);
}
#else
/* The library users get: no switch to read, no kill. */
#define parse_crash() 0
#define crash_here(point, global) ((void)0)
#endif

/*
 * Collective. Agree on the job's newest global version: the newest every rank holds a record
 * of. It starts from the minimum over ranks of their newest records and walks down, each
 * rank offering its newest record not above the candidate, until all offer the same: one
 * round when the ranks' stores are their local ones (newest records at most one apart, each
 * keeping its newest two); more after a restart from lower tiers whose drains lagged (the
 * pinned version is there). No version every rank holds, while some rank holds one, means a
 * store was lost, replaced or damaged: refused, with nothing discarded. Otherwise every rank
 * discards what is newer and the count resumes from there. It leaves the result in st.global
 * and st.local; st.global 0: no global version (a first run; every rank's versions are
 * discarded).
 */
static ickpt_result settle_globals(void) {
    uint64_t mine = 0, v = 0;
    ickpt_result local = ickpt_global_latest(&mine, &v);
    if (local == ICKPT_ERR_NOT_FOUND)
        local = ICKPT_OK;
    local = local_error(local, "reading the global-commit records");
    ickpt_result rc = agree(local);
    if (rc != ICKPT_OK)
        return rc;
    uint64_t lo = 0, hi = 0;
    rc = min_max(mine, &lo, &hi, "MPI_Allreduce (the newest global version)");
    if (rc != ICKPT_OK)
        return rc;
    uint64_t agreed = lo;
    v = 0;
    for (;;) {
        uint64_t have = 0, next = 0, top = 0;
        local = ICKPT_OK;
        if (agreed > 0) {
            local = ickpt_global_at_most(agreed, &have, &v);
            if (local == ICKPT_ERR_NOT_FOUND)
                local = ICKPT_OK;
            local = local_error(local, "reading the global-commit records");
        }
        rc = agree(local);
        if (rc == ICKPT_OK)
            rc = min_max(have, &next, &top, "MPI_Allreduce (a global version every rank holds)");
        if (rc != ICKPT_OK)
            return rc;
        /* Every rank offered at most `agreed`; the least of them is `agreed` only when all are. */
        if (next == agreed)
            break;
        agreed = next;
    }
    if (agreed == 0 && hi > 0) {
        set_error("no global version is held by every rank: their newest range from %llu to %llu "
                  "(rank %d has %llu): a rank's store under the job directory was lost, replaced "
                  "or damaged; nothing was discarded. Bring that store back, or start the job in "
                  "a new directory",
                  (unsigned long long)lo, (unsigned long long)hi, st.rank,
                  (unsigned long long)mine);
        return ICKPT_ERR_CORRUPT;
    }
    if (agreed == 0)
        v = 0;
    local = local_error(ickpt_discard_newer(v), "discarding versions newer than the job's newest global one");
    rc = agree(local);
    if (rc != ICKPT_OK)
        return rc;
    st.global = agreed;
    st.local = v;
    /* A pin above the version agreed on names a number the job will record again. */
    if (st.pinned > agreed) {
        st.pinned = 0;
        ickpt_global_pin(0);
    }
    return ICKPT_OK;
}

ickpt_result ickpt_mpi_init(MPI_Comm comm, const ickpt_config *cfg) {
    last_error[0] = '\0';
    if (st.up) {
        set_error("ickpt_mpi_init: already initialised; call ickpt_mpi_finalize first");
        return ICKPT_ERR_ALREADY_INITIALIZED;
    }
    int inited = 0;
    MPI_Initialized(&inited);
    if (!inited) {
        set_error("ickpt_mpi_init: MPI is not initialised; call MPI_Init first");
        return ICKPT_ERR_NOT_INITIALIZED;
    }
    int err = MPI_Comm_dup(comm, &st.comm);
    if (err != MPI_SUCCESS)
        return mpi_error(err, "MPI_Comm_dup");
    MPI_Comm_rank(st.comm, &st.rank);
    MPI_Comm_size(st.comm, &st.size);
    ickpt_result rc = same_call(CALL_INIT);
    if (rc != ICKPT_OK)
        goto fail;

    /* The core resolves the caller's config as ickpt_init would (its struct_size, the
     * defaults, the ICKPT_* variables, every check): the job directory, the lower tiers
     * (job directories too: each rank drains to its own rank-NNNNN under them) and the mode.
     * A config ickpt_init would refuse is refused here, on every rank, before anything is
     * made. The strings and res.config are the core's, valid until the next resolve. */
    ickpt_resolved_config res;
    memset(&res, 0, sizeof res);
    rc = local_error(ickpt_config_resolve(cfg, &res), "ickpt_mpi_init: the configuration");
    if (rc == ICKPT_OK && parse_crash() != 0)
        rc = ICKPT_ERR_INVALID_ARGUMENT;
    const char *dir = res.dir, *shared = res.shared_dir, *object = res.object_url;
    rc = agree(rc);
    if (rc != ICKPT_OK)
        goto fail;
    rc = ICKPT_OK;
    /* Rank 0 makes the job directories, which record the number of ranks (the core's
     * ickpt_job_prepare writes and checks the job file), before any rank opens its store. */
    if (st.rank == 0) {
        rc = local_error(ickpt_job_prepare(dir, st.size), "ickpt_mpi_init");
        if (rc == ICKPT_OK && shared != NULL)
            rc = local_error(ickpt_job_prepare(shared, st.size), "ickpt_mpi_init");
    }
    rc = agree(rc);
    if (rc != ICKPT_OK)
        goto fail;
    char store[4096], shared_store[4096], object_store[4096];
    if (snprintf(store, sizeof store, "%s/rank-%05d", dir, st.rank) >= (int)sizeof store ||
        (shared != NULL && snprintf(shared_store, sizeof shared_store, "%s/rank-%05d", shared,
                                    st.rank) >= (int)sizeof shared_store) ||
        (object != NULL && snprintf(object_store, sizeof object_store, "%s/rank-%05d",
                                    object, st.rank) >= (int)sizeof object_store)) {
        set_error("rank %d: the job directory's path, the shared one's or the object URL is too "
                  "long (at most 4080 bytes)", st.rank);
        rc = ICKPT_ERR_INVALID_ARGUMENT;
    } else {
        res.config->dir = store;
        res.config->shared_dir = shared != NULL ? shared_store : NULL;
        res.config->object_url = object != NULL ? object_store : NULL;
        rc = local_error(ickpt_init(res.config), "ickpt_init");
    }
    int started = rc == ICKPT_OK; /* only this call's own ickpt_init is undone below */
    rc = agree(rc);
    if (rc != ICKPT_OK) {
        if (started)
            ickpt_finalize();
        goto fail;
    }
    /* The mode the core runs (cfg.mode, unless ICKPT_MODE overrides it). Every rank must
     * run the same, or their calls would not pair up. */
    st.mode = res.mode;
    uint64_t lo_mode = 0, hi_mode = 0;
    rc = min_max(st.mode, &lo_mode, &hi_mode, "MPI_Allreduce (the ranks' modes)");
    if (rc == ICKPT_OK && lo_mode != hi_mode) {
        set_error("the ranks run different modes (sync and async): give every rank the same "
                  "cfg.mode and ICKPT_MODE");
        rc = ICKPT_ERR_INVALID_ARGUMENT;
    }
    /* Whether the ranks pin a drained global version at each checkpoint: agreed, so the
     * exchange it takes is made by every rank or by none. */
    uint64_t lo_tiers = 0, hi_tiers = 0;
    if (rc == ICKPT_OK)
        rc = min_max(shared != NULL || object != NULL, &lo_tiers, &hi_tiers,
                     "MPI_Allreduce (whether ranks have lower tiers)");
    st.tiers = hi_tiers != 0;
    st.pinned = 0;
    if (rc != ICKPT_OK) {
        ickpt_finalize();
        goto fail;
    }
    st.pending = 0;
    /* Every rank starts from the same newest global version, with anything newer discarded,
     * whether or not the application then restores it: the next global number is then the
     * same everywhere, and no rank's stale record can outlive it. */
    rc = settle_globals();
    if (rc != ICKPT_OK) {
        ickpt_finalize();
        goto fail;
    }
    st.up = 1;
    return ICKPT_OK;
fail:
    MPI_Comm_free(&st.comm);
    return rc;
}

ickpt_result ickpt_mpi_init_f(MPI_Fint comm, const ickpt_config *cfg) {
    return ickpt_mpi_init(MPI_Comm_f2c(comm), cfg);
}

/*
 * After a failed global version, on every rank: drop whatever this rank wrote of it (its
 * version, or one its commit published before failing, and its record), so every rank's
 * newest record stays the previous global version. A discard that fails leaves a version no
 * record names (a restart discards it) and makes the next record fail on this rank, which
 * every rank then reports.
 */
static void discard_failed(void) {
    ickpt_discard_newer(st.local);
}

/*
 * With lower tiers: pin the newest global version every rank has on every tier, so that no
 * rank's commits or drain remove it while a lagging rank's lower tiers hold nothing newer.
 * Only ever raised: every record from the pin on stays on every rank (ickpt_global_pin), so
 * the new one, no older than any rank's drained record, is still everywhere. A rank that
 * cannot say how far its drain got counts as having drained nothing, and the pin stays where
 * it was. Until the slowest drain catches up, every rank keeps the records since the pin and
 * what restoring their versions reads.
 */
static ickpt_result pin_drained(void) {
    if (!st.tiers)
        return ICKPT_OK;
    uint64_t mine = 0, lo = 0, hi = 0;
    if (ickpt_drained_global(&mine) != ICKPT_OK)
        mine = 0;
    ickpt_result rc =
        min_max(mine, &lo, &hi, "MPI_Allreduce (the newest global version drained on every rank)");
    if (rc == ICKPT_OK && lo > st.pinned && ickpt_global_pin(lo) == ICKPT_OK)
        st.pinned = lo;
    return rc;
}

/*
 * Steps 2 and 3 of the protocol for this rank's committed (or failed) local version. A record
 * that fails on one rank fails the global version on all: the ranks that wrote theirs discard
 * it with the version, so every rank's newest record stays the previous one (the invariant a
 * restart relies on: ranks' newest records differ by at most one).
 */
static ickpt_result make_global(ickpt_result local, uint64_t version) {
    if (local == ICKPT_OK)
        crash_here(CRASH_COMMITTED, st.global + 1);
    ickpt_result rc = agree(local);
    if (rc != ICKPT_OK) {
        discard_failed();
        return rc;
    }
    rc = pin_drained();
    if (rc != ICKPT_OK) {
        discard_failed();
        return rc;
    }
    uint64_t next = st.global + 1;
    ickpt_result rec = local_error(ickpt_global_commit(next, version), "recording the global version");
    if (rec == ICKPT_OK)
        crash_here(CRASH_RECORDED, next);
    rc = agree(rec);
    if (rc != ICKPT_OK) {
        discard_failed();
        return rc;
    }
    st.global = next;
    st.local = version;
    return ICKPT_OK;
}

/* Async: wait for the checkpoint in flight and make it global. */
static ickpt_result finish_pending(void) {
    ickpt_checkpoint_info info;
    memset(&info, 0, sizeof info);
    ickpt_result local = local_error(ickpt_wait(&info), "committing");
    st.pending = 0;
    return make_global(local, info.version);
}

ickpt_result ickpt_mpi_checkpoint(uint64_t tag) {
    ickpt_result rc = enter(CALL_CHECKPOINT);
    if (rc != ICKPT_OK)
        return rc;
    if (st.pending) {
        rc = finish_pending();
        if (rc != ICKPT_OK)
            return rc;
    }
    ickpt_checkpoint_info info;
    memset(&info, 0, sizeof info);
    ickpt_result local = local_error(ickpt_checkpoint_tagged(tag, &info), "checkpoint");
    /* The checkpoint protected the buffers of pending receives again; the agreement below
     * runs MPI's progress engine, which may write into them from the kernel. */
    ickpt_mpi_recv_reopen_pending();
    if (st.mode == ICKPT_MODE_SYNC)
        return make_global(local, info.version);
    rc = agree(local);
    if (rc != ICKPT_OK) {
        if (local == ICKPT_OK)
            ickpt_wait(NULL);
        discard_failed();
        return rc;
    }
    st.pending = 1;
    return ICKPT_OK;
}

ickpt_result ickpt_mpi_wait(void) {
    ickpt_result rc = enter(CALL_WAIT);
    if (rc != ICKPT_OK || !st.pending)
        return rc;
    return finish_pending();
}

ickpt_result ickpt_mpi_restore_latest(uint64_t *global, uint64_t *tag) {
    ickpt_result rc = enter(CALL_RESTORE);
    if (rc != ICKPT_OK)
        return rc;
    ickpt_result local = ICKPT_OK;
    if (global == NULL || tag == NULL) {
        set_error("rank %d: ickpt_mpi_restore_latest: %s is NULL", st.rank,
                  global == NULL ? "global" : "tag");
        local = ICKPT_ERR_INVALID_ARGUMENT;
    } else if (st.pending) {
        set_error("rank %d: ickpt_mpi_restore_latest while a checkpoint is in flight: call "
                  "ickpt_mpi_wait first",
                  st.rank);
        local = ICKPT_ERR_INVALID_ARGUMENT;
    }
    rc = agree(local);
    if (rc != ICKPT_OK)
        return rc;
    rc = settle_globals();
    if (rc != ICKPT_OK)
        return rc;
    if (st.global == 0) {
        set_error("no global version to restore (a first run): not every rank of the job has "
                  "recorded one");
        return ICKPT_ERR_NOT_FOUND;
    }
    uint64_t t = 0;
    local = local_error(ickpt_restore(st.local), "restoring");
    if (local == ICKPT_OK)
        local = local_error(ickpt_version_tag(st.local, &t), "reading the tag");
    rc = agree(local);
    if (rc != ICKPT_OK)
        return rc;
    *global = st.global;
    *tag = t;
    return ICKPT_OK;
}

ickpt_result ickpt_mpi_finalize(void) {
    ickpt_result rc = enter(CALL_FINALIZE);
    /* Ranks in another call stay up: tearing this one down alone would hang them. */
    if (rc == ICKPT_ERR_NOT_INITIALIZED || rc == ICKPT_ERR_COLLECTIVE)
        return rc;
    if (rc == ICKPT_OK && st.pending)
        rc = finish_pending();
    st.pending = 0;
    ickpt_result fin = local_error(ickpt_finalize(), "ickpt_finalize");
    if (rc == ICKPT_OK)
        rc = agree(fin);
    MPI_Comm_free(&st.comm);
    st.up = 0;
    return rc;
}

ickpt_result ickpt_mpi_global(uint64_t *global, uint64_t *version) {
    if (global == NULL || version == NULL) {
        set_error("ickpt_mpi_global: %s is NULL", global == NULL ? "global" : "version");
        return ICKPT_ERR_INVALID_ARGUMENT;
    }
    if (!st.up) {
        set_error("ickpt_mpi_global: ickpt_mpi is not initialised; call ickpt_mpi_init first");
        return ICKPT_ERR_NOT_INITIALIZED;
    }
    *global = st.global;
    *version = st.local;
    return ICKPT_OK;
}

/*
 * CAPE's merge and inject across ranks: every rank's section delta (ickpt_section_take) goes
 * to every rank (one MPI_Allgather of the sizes, one MPI_Allgatherv of the bytes), and each
 * rank injects them all in rank order with one ickpt_inject_deltas, which checks every delta
 * before it writes any. A failure after the take leaves this rank's words in its next save
 * but no longer in a take: the loop's state across ranks is then undefined (as after any
 * failed collective), and the program stops the section.
 */
ickpt_result ickpt_mpi_section_exchange(ickpt_section_info *info) {
    ickpt_result rc = enter(CALL_EXCHANGE);
    if (rc != ICKPT_OK)
        return rc;
    void *mine = NULL;
    size_t len = 0;
    ickpt_section_info took;
    memset(&took, 0, sizeof took);
    ickpt_result local =
        local_error(ickpt_section_take(&mine, &len, &took), "ickpt_section_take");
    if (local == ICKPT_OK && len > (size_t)INT_MAX) {
        set_error("rank %d: its section changed %zu bytes of deltas, more than one MPI message "
                  "carries here (%d)",
                  st.rank, len, INT_MAX);
        local = ICKPT_ERR_INVALID_ARGUMENT;
    }
    rc = agree(local);
    if (rc != ICKPT_OK) {
        ickpt_delta_free(mine, len);
        return rc;
    }
    int *counts = calloc((size_t)st.size, sizeof *counts);
    int *displs = calloc((size_t)st.size, sizeof *displs);
    int n = (int)len, err;
    unsigned char *all = NULL;
    local = ICKPT_OK;
    if (counts == NULL || displs == NULL) {
        set_error("rank %d: out of memory for %d ranks' sizes", st.rank, st.size);
        local = ICKPT_ERR_INTERNAL;
    }
    rc = agree(local);
    if (rc == ICKPT_OK) {
        err = MPI_Allgather(&n, 1, MPI_INT, counts, 1, MPI_INT, st.comm);
        rc = err == MPI_SUCCESS ? ICKPT_OK : mpi_error(err, "MPI_Allgather (delta sizes)");
    }
    if (rc == ICKPT_OK) {
        long long total = 0;
        for (int r = 0; r < st.size; r++) {
            displs[r] = (int)total;
            total += counts[r];
        }
        local = ICKPT_OK;
        if (total > INT_MAX) {
            set_error("rank %d: the ranks' deltas make %lld bytes, more than one MPI_Allgatherv "
                      "carries here",
                      st.rank, total);
            local = ICKPT_ERR_INVALID_ARGUMENT;
        } else if ((all = malloc(total > 0 ? (size_t)total : 1)) == NULL) {
            set_error("rank %d: out of memory for %lld bytes of deltas", st.rank, total);
            local = ICKPT_ERR_INTERNAL;
        }
        rc = agree(local);
    }
    if (rc == ICKPT_OK) {
        err = MPI_Allgatherv(mine, n, MPI_BYTE, all, counts, displs, MPI_BYTE, st.comm);
        rc = err == MPI_SUCCESS ? ICKPT_OK : mpi_error(err, "MPI_Allgatherv (deltas)");
    }
    if (rc == ICKPT_OK) {
        /* Every rank's, its own too, in rank order: where two ranks wrote one word, every
         * rank ends with the higher rank's value. All are checked before any is written. */
        const void **ptrs = calloc((size_t)st.size, sizeof *ptrs);
        size_t *lens = calloc((size_t)st.size, sizeof *lens);
        if (ptrs == NULL || lens == NULL) {
            set_error("rank %d: out of memory for %d ranks' deltas", st.rank, st.size);
            local = ICKPT_ERR_INTERNAL;
        } else {
            for (int r = 0; r < st.size; r++) {
                ptrs[r] = all + displs[r];
                lens[r] = (size_t)counts[r];
            }
            local = local_error(ickpt_inject_deltas(ptrs, lens, (size_t)st.size),
                                "injecting the ranks' deltas");
        }
        free(ptrs);
        free(lens);
        rc = agree(local);
    }
    free(all);
    free(displs);
    free(counts);
    ickpt_delta_free(mine, len);
    if (rc == ICKPT_OK && info != NULL)
        *info = took;
    return rc;
}
