/*
 * Receives into protected memory, with no change to the application.
 *
 * Why these wrappers exist: with the mprotect backend ickpt keeps a protected page read-only
 * until the program first writes it after a checkpoint, and learns of that write from the
 * SIGSEGV it raises. An MPI library that writes a receive buffer from inside the kernel
 * (process_vm_readv for single-copy shared memory, read(2) from a TCP socket, pread(2) in
 * MPI-IO) raises no signal: the system call fails with EFAULT, and MPICH aborts. uffd-async
 * does the same while a commit runs. ickpt_prepare_write takes those first writes from user
 * space beforehand (one atomic compare-and-swap of a byte with its own value per page): the
 * pages are recorded as written and open for the kernel, and no byte changes.
 *
 * So libickpt_mpi defines MPI's receive, collective, completion and MPI-IO read calls: each
 * takes the first writes of the pages its call will write, then calls the MPI library's own.
 * It defines both names of each, MPI_Recv and PMPI_Recv (one function), and finds the MPI
 * library's PMPI_Recv past its own with dlsym(RTLD_NEXT): the Fortran bindings call the C
 * functions under either name (Open MPI's PMPI_Recv and PMPI_Wait, MPICH's MPI_Recv and
 * PMPI_Wait), and so does a profiling tool's MPI_Recv, which reaches PMPI_Recv. A program
 * finds these before the MPI library's when -lickpt_mpi comes first on its link line, as
 * mpicc with `pkg-config --libs ickpt-mpi` puts it (docs/mpi.md).
 *
 * Only the pages the call writes are taken, worked out from the datatype (holes of a page or
 * more between a derived type's blocks are left alone: they may be unmapped, or memory not
 * otherwise touched). Memory ickpt does not protect costs the compare-and-swap of one byte per
 * page, which the receive was about to write anyway. MPI_BOTTOM (absolute addresses) is
 * passed through untouched.
 *
 * A non-blocking receive (MPI_Irecv, the I-collectives, MPI_File_iread*, a started persistent
 * receive) writes until it completes, and a checkpoint in between protects its pages again.
 * Its pages are kept in a table by request, dropped when a completion call (MPI_Wait*,
 * MPI_Test*, MPI_Request_free) reports it done, and taken again by ickpt_mpi_checkpoint right
 * after its local checkpoint, before the agreement's MPI calls let the progress engine write.
 * A request completed where these wrappers do not see it stays in the table until MPI reuses
 * its handle; its pages are taken again at each checkpoint only while still mapped, which at
 * worst adds them to the next increment unchanged.
 */
#define _GNU_SOURCE
#include "ickpt_mpi_recv.h"

#include <dlfcn.h>
#include <ickpt.h>
#include <mpi.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* Whether function `f` is one of this library's. */
static int ours(void *f) {
    Dl_info of_f, of_us;
    return dladdr(f, &of_f) != 0 && dladdr((void *)&ours, &of_us) != 0 &&
           of_f.dli_fbase == of_us.dli_fbase;
}

/*
 * The MPI library's function `name` (a PMPI_ one), past this library's alias of it: the next
 * definition in the lookup order, or failing that (this library loaded after MPI) any one not
 * ours. Looked up once; with none, nothing could have called the wrapper but a broken link.
 */
static void *next_fn(const char *name, void **cache) {
    void *f = __atomic_load_n(cache, __ATOMIC_ACQUIRE);
    if (f != NULL)
        return f;
    f = dlsym(RTLD_NEXT, name);
    if (f == NULL || ours(f)) {
        f = dlsym(RTLD_DEFAULT, name);
        if (f != NULL && ours(f))
            f = NULL;
    }
    if (f == NULL) {
        fprintf(stderr, "libickpt_mpi: %s is not in the MPI library loaded with it: link "
                        "libickpt_mpi with the MPI it was built with\n", name);
        abort();
    }
    __atomic_store_n(cache, f, __ATOMIC_RELEASE);
    return f;
}

/* WRAP(Recv) before MPI_Recv's wrapper: PMPI_Recv is the same function, and NEXT(PMPI_Recv)
 * the MPI library's. */
#define WRAP(name)                                                                             \
    extern __typeof__(MPI_##name) PMPI_##name __attribute__((alias("MPI_" #name)));           \
    static void *next_PMPI_##name
#define NEXT(f) ((__typeof__(&f))next_fn(#f, &next_##f))

static MPI_Aint page_size(void) {
    static MPI_Aint cached;
    MPI_Aint ps = __atomic_load_n(&cached, __ATOMIC_RELAXED);
    if (ps == 0) {
        long v = sysconf(_SC_PAGESIZE);
        ps = v > 0 ? (MPI_Aint)v : 4096;
        __atomic_store_n(&cached, ps, __ATOMIC_RELAXED);
    }
    return ps;
}

/* Whether [off, off + len) and [s, e) overlap or lie less than a page apart: then no page lies
 * between them, and every page of their union holds a byte of one of them. */
static int near(MPI_Aint off, MPI_Aint len, MPI_Aint s, MPI_Aint e) {
    MPI_Aint ps = page_size();
    return off < e + ps && off + len > s - ps;
}

/* The blocks of bytes a datatype's element spans, relative to its origin, merged where they
 * are less than a page apart (so few, unless the holes are large). */
struct block {
    MPI_Aint off, len;
};
struct blocks {
    struct block *v;
    size_t n, cap;
    int failed; /* out of memory: the caller falls back to the true extent */
};

static void blocks_free(struct blocks *b) {
    free(b->v);
    memset(b, 0, sizeof *b);
}

static void add(struct blocks *b, MPI_Aint off, MPI_Aint len) {
    if (len <= 0 || b->failed)
        return;
    if (b->n > 0) {
        struct block *l = &b->v[b->n - 1];
        MPI_Aint end = l->off + l->len;
        if (near(off, len, l->off, end)) {
            MPI_Aint s = off < l->off ? off : l->off;
            MPI_Aint e = off + len > end ? off + len : end;
            l->off = s;
            l->len = e - s;
            return;
        }
    }
    if (b->n == b->cap) {
        size_t cap = b->cap != 0 ? 2 * b->cap : 8;
        struct block *v = realloc(b->v, cap * sizeof *v);
        if (v == NULL) {
            b->failed = 1;
            return;
        }
        b->v = v;
        b->cap = cap;
    }
    b->v[b->n].off = off;
    b->v[b->n].len = len;
    b->n++;
}

/* `n` copies of `src`, `stride` bytes apart, the first `shift` bytes on, into `dst`. */
static void replicate(struct blocks *dst, const struct blocks *src, MPI_Aint n, MPI_Aint stride,
                      MPI_Aint shift) {
    if (src->failed) {
        dst->failed = 1;
        return;
    }
    if (n <= 0 || src->n == 0)
        return;
    if (src->n == 1) {
        MPI_Aint s = src->v[0].off, len = src->v[0].len;
        MPI_Aint step = stride < 0 ? -stride : stride;
        if (n == 1 || step < len + page_size()) { /* the copies make one block */
            MPI_Aint last = s + (n - 1) * stride;
            MPI_Aint lo = stride < 0 ? last : s, hi = (stride < 0 ? s : last) + len;
            add(dst, shift + lo, hi - lo);
            return;
        }
    }
    for (MPI_Aint i = 0; i < n && !dst->failed; i++)
        for (size_t j = 0; j < src->n; j++)
            add(dst, shift + i * stride + src->v[j].off, src->v[j].len);
}

static int predefined(int combiner) {
    return combiner == MPI_COMBINER_NAMED || combiner == MPI_COMBINER_F90_REAL ||
           combiner == MPI_COMBINER_F90_COMPLEX || combiner == MPI_COMBINER_F90_INTEGER;
}

static MPI_Aint extent_of(MPI_Datatype t) {
    MPI_Aint lb = 0, ext = 0;
    PMPI_Type_get_extent(t, &lb, &ext);
    return ext;
}

#define MAX_DEPTH 32

static void flatten(MPI_Datatype t, struct blocks *out, int depth);

/* The blocks of one element of `t`, as `flatten`, in a list of their own. */
static struct blocks flat(MPI_Datatype t, int depth) {
    struct blocks b;
    memset(&b, 0, sizeof b);
    flatten(t, &b, depth);
    return b;
}

/* Subarray (sizes, subsizes, starts, order over ndims dimensions) of elements `old`. */
static void flatten_subarray(const int *ints, MPI_Datatype old, struct blocks *out, int depth) {
    int ndims = ints[0];
    const int *sizes = ints + 1, *subsizes = ints + 1 + ndims, *starts = ints + 1 + 2 * ndims;
    int order = ints[1 + 3 * ndims];
    struct blocks cur = flat(old, depth + 1);
    MPI_Aint stride = extent_of(old);
    for (int i = 0; i < ndims && !cur.failed; i++) {
        /* From the fastest-varying dimension to the slowest. */
        int k = order == MPI_ORDER_C ? ndims - 1 - i : i;
        struct blocks next;
        memset(&next, 0, sizeof next);
        replicate(&next, &cur, subsizes[k], stride, (MPI_Aint)starts[k] * stride);
        blocks_free(&cur);
        cur = next;
        stride *= sizes[k];
    }
    replicate(out, &cur, 1, 0, 0);
    blocks_free(&cur);
}

/* Append the blocks one element of `t` spans, relative to its origin, to `out`. */
static void flatten(MPI_Datatype t, struct blocks *out, int depth) {
    MPI_Aint tlb = 0, text = 0;
    MPI_Count size = 0;
    int ni = 0, na = 0, nd = 0, comb = 0;
    if (PMPI_Type_get_true_extent(t, &tlb, &text) != MPI_SUCCESS ||
        PMPI_Type_size_x(t, &size) != MPI_SUCCESS ||
        PMPI_Type_get_envelope(t, &ni, &na, &nd, &comb) != MPI_SUCCESS) {
        out->failed = 1;
        return;
    }
    if (size <= 0)
        return;
    /* No holes, nothing to look inside, or a combiner not taken apart here (darray): the true
     * extent, which holds every byte of it. */
    int known = comb == MPI_COMBINER_DUP || comb == MPI_COMBINER_RESIZED ||
                comb == MPI_COMBINER_CONTIGUOUS || comb == MPI_COMBINER_VECTOR ||
                comb == MPI_COMBINER_HVECTOR || comb == MPI_COMBINER_INDEXED ||
                comb == MPI_COMBINER_HINDEXED || comb == MPI_COMBINER_INDEXED_BLOCK ||
                comb == MPI_COMBINER_HINDEXED_BLOCK || comb == MPI_COMBINER_STRUCT ||
                comb == MPI_COMBINER_SUBARRAY;
    if (size == (MPI_Count)text || !known || depth >= MAX_DEPTH) {
        add(out, tlb, text);
        return;
    }
    int *ints = malloc((size_t)(ni > 0 ? ni : 1) * sizeof *ints);
    MPI_Aint *aints = malloc((size_t)(na > 0 ? na : 1) * sizeof *aints);
    MPI_Datatype *types = malloc((size_t)(nd > 0 ? nd : 1) * sizeof *types);
    if (ints == NULL || aints == NULL || types == NULL ||
        PMPI_Type_get_contents(t, ni, na, nd, ints, aints, types) != MPI_SUCCESS) {
        free(ints);
        free(aints);
        free(types);
        out->failed = 1;
        return;
    }
    MPI_Datatype old = types[0];
    MPI_Aint ext = extent_of(old);
    struct blocks sub;
    memset(&sub, 0, sizeof sub);
    if (comb != MPI_COMBINER_STRUCT)
        sub = flat(old, depth + 1);
    switch (comb) {
    case MPI_COMBINER_DUP:
    case MPI_COMBINER_RESIZED: /* a new extent, the same bytes */
        replicate(out, &sub, 1, 0, 0);
        break;
    case MPI_COMBINER_CONTIGUOUS:
        replicate(out, &sub, ints[0], ext, 0);
        break;
    case MPI_COMBINER_VECTOR:
    case MPI_COMBINER_HVECTOR: {
        struct blocks row;
        memset(&row, 0, sizeof row);
        replicate(&row, &sub, ints[1], ext, 0);
        replicate(out, &row, ints[0], comb == MPI_COMBINER_VECTOR ? ints[2] * ext : aints[0], 0);
        blocks_free(&row);
        break;
    }
    case MPI_COMBINER_INDEXED:
        for (int i = 0; i < ints[0]; i++)
            replicate(out, &sub, ints[1 + i], ext, (MPI_Aint)ints[1 + ints[0] + i] * ext);
        break;
    case MPI_COMBINER_HINDEXED:
        for (int i = 0; i < ints[0]; i++)
            replicate(out, &sub, ints[1 + i], ext, aints[i]);
        break;
    case MPI_COMBINER_INDEXED_BLOCK:
        for (int i = 0; i < ints[0]; i++)
            replicate(out, &sub, ints[1], ext, (MPI_Aint)ints[2 + i] * ext);
        break;
    case MPI_COMBINER_HINDEXED_BLOCK:
        for (int i = 0; i < ints[0]; i++)
            replicate(out, &sub, ints[1], ext, aints[i]);
        break;
    case MPI_COMBINER_STRUCT:
        for (int i = 0; i < ints[0] && !out->failed; i++) {
            struct blocks one = flat(types[i], depth + 1);
            replicate(out, &one, ints[1 + i], extent_of(types[i]), aints[i]);
            blocks_free(&one);
        }
        break;
    case MPI_COMBINER_SUBARRAY:
        flatten_subarray(ints, old, out, depth);
        break;
    }
    blocks_free(&sub);
    for (int i = 0; i < nd; i++) {
        int a, b, c, tc;
        if (PMPI_Type_get_envelope(types[i], &a, &b, &c, &tc) == MPI_SUCCESS && !predefined(tc))
            PMPI_Type_free(&types[i]);
    }
    free(ints);
    free(aints);
    free(types);
}

/* One pending request's pages: taken again after each checkpoint while it is active. */
struct range {
    uintptr_t p;
    size_t len;
};
struct entry {
    MPI_Request req;
    int persistent; /* MPI_Recv_init: stays until MPI_Request_free */
    int active;     /* started, not completed */
    size_t n, cap;
    struct range *r; /* `first` until a second range comes */
    struct range first;
    struct entry *next;
};

/*
 * Where the pages of a call go: taken now (`open`), and recorded in `rec` for a request. Ranges
 * less than a page apart are merged before they are taken.
 */
struct sink {
    int open, have;
    uintptr_t s, e;
    struct entry *rec;
};

static void record(struct entry *rec, uintptr_t p, size_t len) {
    if (rec->cap == 0) {
        rec->r = &rec->first;
        rec->cap = 1;
    } else if (rec->n == rec->cap) {
        size_t cap = 2 * rec->cap;
        struct range *r = malloc(cap * sizeof *r);
        if (r == NULL)
            return; /* its pages are then not taken again at a checkpoint */
        memcpy(r, rec->r, rec->n * sizeof *r);
        if (rec->r != &rec->first)
            free(rec->r);
        rec->r = r;
        rec->cap = cap;
    }
    rec->r[rec->n].p = p;
    rec->r[rec->n].len = len;
    rec->n++;
}

static void flush(struct sink *k) {
    if (!k->have)
        return;
    k->have = 0;
    if (k->open)
        ickpt_prepare_write((void *)k->s, (size_t)(k->e - k->s));
    if (k->rec != NULL)
        record(k->rec, k->s, (size_t)(k->e - k->s));
}

static void sink_add(struct sink *k, uintptr_t p, MPI_Aint len) {
    if (len <= 0)
        return;
    uintptr_t end = p + (uintptr_t)len;
    MPI_Aint ps = page_size();
    if (k->have && p < k->e + (uintptr_t)ps && end + (uintptr_t)ps > k->s) {
        if (p < k->s)
            k->s = p;
        if (end > k->e)
            k->e = end;
        return;
    }
    flush(k);
    k->have = 1;
    k->s = p;
    k->e = end;
}

/* The pages a call writes when it receives `count` elements of `t` at `buf`. */
static void take(struct sink *k, const void *buf, MPI_Aint count, MPI_Datatype t) {
    if (buf == MPI_BOTTOM || buf == MPI_IN_PLACE || count <= 0 || t == MPI_DATATYPE_NULL)
        return;
    MPI_Aint lb = 0, ext = 0, tlb = 0, text = 0;
    MPI_Count size = 0;
    if (PMPI_Type_get_extent(t, &lb, &ext) != MPI_SUCCESS ||
        PMPI_Type_get_true_extent(t, &tlb, &text) != MPI_SUCCESS ||
        PMPI_Type_size_x(t, &size) != MPI_SUCCESS || size <= 0)
        return;
    uintptr_t base = (uintptr_t)buf;
    /* A type without holes (the predefined ones but for a few pairs, contiguous ones) is its
     * true extent: no walk and no allocation on the common path. */
    struct block dense = {tlb, text};
    struct blocks one;
    memset(&one, 0, sizeof one);
    if (size == (MPI_Count)text) {
        one.v = &dense;
        one.n = 1;
    } else {
        one = flat(t, 0);
    }
    if (one.failed) {
        /* Out of memory: every element's true extent, which holds every byte it receives. */
        for (MPI_Aint i = 0; i < count; i++)
            sink_add(k, base + (uintptr_t)(i * ext + tlb), text);
    } else if (one.n == 1) {
        MPI_Aint step = ext < 0 ? -ext : ext, s = one.v[0].off, len = one.v[0].len;
        if (count == 1 || step < len + page_size()) {
            MPI_Aint last = s + (count - 1) * ext;
            MPI_Aint lo = ext < 0 ? last : s, hi = (ext < 0 ? s : last) + len;
            sink_add(k, base + (uintptr_t)lo, hi - lo);
        } else {
            for (MPI_Aint i = 0; i < count; i++)
                sink_add(k, base + (uintptr_t)(i * ext + s), len);
        }
    } else {
        for (MPI_Aint i = 0; i < count; i++)
            for (size_t j = 0; j < one.n; j++)
                sink_add(k, base + (uintptr_t)(i * ext + one.v[j].off), one.v[j].len);
    }
    if (one.v != &dense)
        blocks_free(&one);
}

/* Per-peer counts and displacements (in elements of `t`) from `buf`, as in MPI_Gatherv. */
static void take_v(struct sink *k, const void *buf, const int *counts, const int *displs,
                   MPI_Datatype t, int n) {
    if (buf == MPI_BOTTOM || buf == MPI_IN_PLACE || counts == NULL || displs == NULL)
        return;
    MPI_Aint ext = extent_of(t);
    for (int i = 0; i < n; i++)
        take(k, (const char *)buf + (MPI_Aint)displs[i] * ext, counts[i], t);
}

/* The pending requests, hashed by handle. `entries` is read without the lock by the fast path
 * of the completion calls: a request is entered before its handle reaches the program. */
static pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;
static struct entry **buckets;
static size_t nbuckets; /* a power of two, or 0 */
static size_t entries;

static int tracking(void) { return __atomic_load_n(&entries, __ATOMIC_ACQUIRE) != 0; }

static size_t hash(MPI_Request r) {
    uint64_t h = 0;
    memcpy(&h, &r, sizeof r < sizeof h ? sizeof r : sizeof h);
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33;
    return (size_t)h;
}

static void entry_free(struct entry *e) {
    if (e != NULL) {
        if (e->r != &e->first)
            free(e->r);
        free(e);
    }
}

/* Where the entry of `r` is, or where it would go: the link pointing to it. Locked. */
static struct entry **link_of(MPI_Request r) {
    struct entry **l = &buckets[hash(r) & (nbuckets - 1)];
    while (*l != NULL && (*l)->req != r)
        l = &(*l)->next;
    return l;
}

static void unlink_entry(struct entry **l) {
    struct entry *e = *l;
    *l = e->next;
    entry_free(e);
    __atomic_store_n(&entries, entries - 1, __ATOMIC_RELEASE);
}

static void grow(void) {
    size_t n = nbuckets != 0 ? 2 * nbuckets : 64;
    struct entry **b = calloc(n, sizeof *b);
    if (b == NULL)
        return; /* longer chains */
    for (size_t i = 0; i < nbuckets; i++)
        for (struct entry *e = buckets[i], *next; e != NULL; e = next) {
            next = e->next;
            struct entry **head = &b[hash(e->req) & (n - 1)];
            e->next = *head;
            *head = e;
        }
    free(buckets);
    buckets = b;
    nbuckets = n;
}

/* Enter `e` under its request. A live handle names one request: an entry already under it
 * is stale (its request completed unseen) and goes. */
static void insert(struct entry *e) {
    pthread_mutex_lock(&table_lock);
    if (entries >= nbuckets)
        grow();
    if (nbuckets == 0) {
        pthread_mutex_unlock(&table_lock);
        entry_free(e);
        return;
    }
    struct entry **l = link_of(e->req);
    if (*l != NULL)
        unlink_entry(l);
    e->next = buckets[hash(e->req) & (nbuckets - 1)];
    buckets[hash(e->req) & (nbuckets - 1)] = e;
    __atomic_store_n(&entries, entries + 1, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&table_lock);
}

/* A completion call turned `before` into `after` (MPI_REQUEST_NULL once a non-persistent
 * request completed) and says whether it completed (`done`). Locked. */
static void settle(MPI_Request before, MPI_Request after, int done) {
    if (before == MPI_REQUEST_NULL || nbuckets == 0)
        return;
    struct entry **l = link_of(before);
    if (*l == NULL)
        return;
    if (after == MPI_REQUEST_NULL)
        unlink_entry(l);
    else if (done && (*l)->persistent)
        (*l)->active = 0;
}

/* Whether [p, p + len) is still mapped: the pages of a request completed unseen may be gone. */
static int mapped(uintptr_t p, size_t len) {
    uintptr_t s = p & ~((uintptr_t)page_size() - 1);
    return msync((void *)s, (size_t)(p + len - s), MS_ASYNC) == 0;
}

static void take_ranges(const struct entry *e) {
    for (size_t i = 0; i < e->n; i++)
        if (mapped(e->r[i].p, e->r[i].len))
            ickpt_prepare_write((void *)e->r[i].p, e->r[i].len);
}

void ickpt_mpi_recv_reopen_pending(void) {
    if (!tracking())
        return;
    pthread_mutex_lock(&table_lock);
    for (size_t i = 0; i < nbuckets; i++)
        for (struct entry *e = buckets[i]; e != NULL; e = e->next)
            if (e->active)
                take_ranges(e);
    pthread_mutex_unlock(&table_lock);
}

/* A started persistent request writes from now on: take its pages (before the start, which may
 * already receive) and mark it active. */
static void starting(MPI_Request r) {
    if (!tracking() || r == MPI_REQUEST_NULL)
        return;
    pthread_mutex_lock(&table_lock);
    if (nbuckets != 0) {
        struct entry *e = *link_of(r);
        if (e != NULL) {
            take_ranges(e);
            e->active = 1;
        }
    }
    pthread_mutex_unlock(&table_lock);
}

/* Sinks: one for a blocking call (its pages taken now), one for a request (taken now and
 * recorded; `persistent`: recorded only, taken at each start). */
static struct sink now(void) {
    struct sink k;
    memset(&k, 0, sizeof k);
    k.open = 1;
    return k;
}

static struct sink pending(int persistent) {
    struct sink k = now();
    k.open = !persistent;
    k.rec = calloc(1, sizeof *k.rec); /* NULL: taken now, not again after a checkpoint */
    if (k.rec != NULL) {
        k.rec->persistent = persistent;
        k.rec->active = !persistent;
    }
    return k;
}

/* After the call that made the request: enter it, if it was made and has pages. */
static int track(struct sink *k, int rc, const MPI_Request *req) {
    flush(k);
    if (k->rec == NULL)
        return rc;
    if (rc != MPI_SUCCESS || req == NULL || *req == MPI_REQUEST_NULL || k->rec->n == 0) {
        entry_free(k->rec);
        return rc;
    }
    k->rec->req = *req;
    insert(k->rec);
    return rc;
}

/* Rooted collectives: this rank is the root (in an intercommunicator: passes MPI_ROOT), a rank
 * the root sends to (in an intercommunicator: of the other group), or neither (MPI_PROC_NULL). */
enum role { NEITHER, ROOT, LEAF };

static int is_inter(MPI_Comm comm) {
    int inter = 0;
    if (comm == MPI_COMM_NULL || PMPI_Comm_test_inter(comm, &inter) != MPI_SUCCESS)
        return -1;
    return inter;
}

static enum role role(MPI_Comm comm, int root) {
    int inter = is_inter(comm), rank = -1;
    if (inter < 0)
        return NEITHER; /* the call itself reports the bad communicator */
    if (inter)
        return root == MPI_ROOT ? ROOT : root >= 0 ? LEAF : NEITHER;
    if (PMPI_Comm_rank(comm, &rank) != MPI_SUCCESS)
        return NEITHER;
    return rank == root ? ROOT : LEAF;
}

/* How many ranks a collective receives from: the other group's size in an intercommunicator. */
static int peers(MPI_Comm comm) {
    int inter = is_inter(comm), n = 0;
    if (inter < 0)
        return 0;
    if ((inter ? PMPI_Comm_remote_size(comm, &n) : PMPI_Comm_size(comm, &n)) != MPI_SUCCESS)
        return 0;
    return n;
}

static int local_rank(MPI_Comm comm, int *size) {
    int rank = -1;
    *size = 0;
    if (comm == MPI_COMM_NULL || PMPI_Comm_rank(comm, &rank) != MPI_SUCCESS ||
        PMPI_Comm_size(comm, size) != MPI_SUCCESS)
        return -1;
    return rank;
}

/* Reduce_scatter: this rank's block, or in place the whole input, which is in recvbuf. */
static void take_reduce_scatter(struct sink *k, const void *sendbuf, void *recvbuf,
                                const int *counts, MPI_Datatype t, MPI_Comm comm) {
    int size = 0, rank = local_rank(comm, &size);
    if (rank < 0 || counts == NULL)
        return;
    MPI_Aint n = 0;
    if (sendbuf != MPI_IN_PLACE)
        n = counts[rank];
    else
        for (int i = 0; i < size; i++)
            n += counts[i];
    take(k, recvbuf, n, t);
}

static void take_reduce_scatter_block(struct sink *k, const void *sendbuf, void *recvbuf,
                                      int count, MPI_Datatype t, MPI_Comm comm) {
    int size = 0;
    if (local_rank(comm, &size) >= 0)
        take(k, recvbuf, sendbuf == MPI_IN_PLACE ? (MPI_Aint)count * size : count, t);
}

static void take_alltoallw(struct sink *k, void *recvbuf, const int *counts, const int *displs,
                           const MPI_Datatype *types, MPI_Comm comm) {
    if (recvbuf == MPI_BOTTOM || recvbuf == MPI_IN_PLACE || counts == NULL || displs == NULL ||
        types == NULL)
        return;
    for (int i = 0, n = peers(comm); i < n; i++)
        take(k, (char *)recvbuf + displs[i], counts[i], types[i]);
}

/* ---- Point to point ---- */

WRAP(Recv);
int MPI_Recv(void *buf, int count, MPI_Datatype datatype, int source, int tag, MPI_Comm comm,
             MPI_Status *status) {
    struct sink k = now();
    if (source != MPI_PROC_NULL)
        take(&k, buf, count, datatype);
    flush(&k);
    return NEXT(PMPI_Recv)(buf, count, datatype, source, tag, comm, status);
}

WRAP(Irecv);
int MPI_Irecv(void *buf, int count, MPI_Datatype datatype, int source, int tag, MPI_Comm comm,
              MPI_Request *request) {
    if (source == MPI_PROC_NULL)
        return NEXT(PMPI_Irecv)(buf, count, datatype, source, tag, comm, request);
    struct sink k = pending(0);
    take(&k, buf, count, datatype);
    flush(&k);
    return track(&k, NEXT(PMPI_Irecv)(buf, count, datatype, source, tag, comm, request), request);
}

WRAP(Recv_init);
int MPI_Recv_init(void *buf, int count, MPI_Datatype datatype, int source, int tag,
                  MPI_Comm comm, MPI_Request *request) {
    if (source == MPI_PROC_NULL)
        return NEXT(PMPI_Recv_init)(buf, count, datatype, source, tag, comm, request);
    struct sink k = pending(1);
    take(&k, buf, count, datatype);
    return track(&k, NEXT(PMPI_Recv_init)(buf, count, datatype, source, tag, comm, request),
                 request);
}

WRAP(Mrecv);
int MPI_Mrecv(void *buf, int count, MPI_Datatype type, MPI_Message *message, MPI_Status *status) {
    struct sink k = now();
    if (message != NULL && *message != MPI_MESSAGE_NO_PROC)
        take(&k, buf, count, type);
    flush(&k);
    return NEXT(PMPI_Mrecv)(buf, count, type, message, status);
}

WRAP(Imrecv);
int MPI_Imrecv(void *buf, int count, MPI_Datatype type, MPI_Message *message,
               MPI_Request *request) {
    if (message == NULL || *message == MPI_MESSAGE_NO_PROC)
        return NEXT(PMPI_Imrecv)(buf, count, type, message, request);
    struct sink k = pending(0);
    take(&k, buf, count, type);
    flush(&k);
    return track(&k, NEXT(PMPI_Imrecv)(buf, count, type, message, request), request);
}

WRAP(Sendrecv);
int MPI_Sendrecv(const void *sendbuf, int sendcount, MPI_Datatype sendtype, int dest,
                 int sendtag, void *recvbuf, int recvcount, MPI_Datatype recvtype, int source,
                 int recvtag, MPI_Comm comm, MPI_Status *status) {
    struct sink k = now();
    if (source != MPI_PROC_NULL)
        take(&k, recvbuf, recvcount, recvtype);
    flush(&k);
    return NEXT(PMPI_Sendrecv)(sendbuf, sendcount, sendtype, dest, sendtag, recvbuf, recvcount,
                         recvtype, source, recvtag, comm, status);
}

WRAP(Sendrecv_replace);
int MPI_Sendrecv_replace(void *buf, int count, MPI_Datatype datatype, int dest, int sendtag,
                         int source, int recvtag, MPI_Comm comm, MPI_Status *status) {
    struct sink k = now();
    if (source != MPI_PROC_NULL)
        take(&k, buf, count, datatype);
    flush(&k);
    return NEXT(PMPI_Sendrecv_replace)(buf, count, datatype, dest, sendtag, source, recvtag, comm,
                                 status);
}

/* ---- Completion ---- */

/* The handles of `reqs` before a completion call changes them, in `small` when they fit;
 * NULL when nothing is tracked, or out of memory (then completions go unseen, as from
 * Fortran). */
static MPI_Request *before(int n, const MPI_Request *reqs, MPI_Request *small, int nsmall) {
    if (!tracking() || n <= 0 || reqs == NULL)
        return NULL;
    MPI_Request *b = n <= nsmall ? small : malloc((size_t)n * sizeof *b);
    if (b != NULL)
        memcpy(b, reqs, (size_t)n * sizeof *b);
    return b;
}

static void after(MPI_Request *b, const MPI_Request *small) {
    if (b != small)
        free(b);
}

WRAP(Wait);
int MPI_Wait(MPI_Request *request, MPI_Status *status) {
    MPI_Request small[1], *b = before(request != NULL, request, small, 1);
    int rc = NEXT(PMPI_Wait)(request, status);
    if (b != NULL) {
        pthread_mutex_lock(&table_lock);
        settle(b[0], *request, rc == MPI_SUCCESS);
        pthread_mutex_unlock(&table_lock);
    }
    return rc;
}

WRAP(Test);
int MPI_Test(MPI_Request *request, int *flag, MPI_Status *status) {
    MPI_Request small[1], *b = before(request != NULL, request, small, 1);
    int rc = NEXT(PMPI_Test)(request, flag, status);
    if (b != NULL) {
        pthread_mutex_lock(&table_lock);
        settle(b[0], *request, rc == MPI_SUCCESS && *flag);
        pthread_mutex_unlock(&table_lock);
    }
    return rc;
}

/* Array completions: every request whose handle became MPI_REQUEST_NULL is done; persistent
 * ones are done when `all`, or when listed in `idx` (n_idx of them). */
static void settle_array(MPI_Request *b, const MPI_Request *reqs, int n, int all, const int *idx,
                         int n_idx) {
    pthread_mutex_lock(&table_lock);
    for (int i = 0; i < n; i++)
        settle(b[i], reqs[i], all);
    for (int j = 0; idx != NULL && j < n_idx; j++)
        if (idx[j] >= 0 && idx[j] < n)
            settle(b[idx[j]], reqs[idx[j]], 1);
    pthread_mutex_unlock(&table_lock);
}

#define SMALL 32

WRAP(Waitall);
int MPI_Waitall(int count, MPI_Request array_of_requests[], MPI_Status *array_of_statuses) {
    MPI_Request small[SMALL], *b = before(count, array_of_requests, small, SMALL);
    int rc = NEXT(PMPI_Waitall)(count, array_of_requests, array_of_statuses);
    if (b != NULL) {
        settle_array(b, array_of_requests, count, rc == MPI_SUCCESS, NULL, 0);
        after(b, small);
    }
    return rc;
}

WRAP(Testall);
int MPI_Testall(int count, MPI_Request array_of_requests[], int *flag,
                MPI_Status array_of_statuses[]) {
    MPI_Request small[SMALL], *b = before(count, array_of_requests, small, SMALL);
    int rc = NEXT(PMPI_Testall)(count, array_of_requests, flag, array_of_statuses);
    if (b != NULL) {
        settle_array(b, array_of_requests, count, rc == MPI_SUCCESS && *flag, NULL, 0);
        after(b, small);
    }
    return rc;
}

WRAP(Waitany);
int MPI_Waitany(int count, MPI_Request array_of_requests[], int *index, MPI_Status *status) {
    MPI_Request small[SMALL], *b = before(count, array_of_requests, small, SMALL);
    int rc = NEXT(PMPI_Waitany)(count, array_of_requests, index, status);
    if (b != NULL) {
        int ok = rc == MPI_SUCCESS && *index != MPI_UNDEFINED;
        settle_array(b, array_of_requests, count, 0, index, ok);
        after(b, small);
    }
    return rc;
}

WRAP(Testany);
int MPI_Testany(int count, MPI_Request array_of_requests[], int *index, int *flag,
                MPI_Status *status) {
    MPI_Request small[SMALL], *b = before(count, array_of_requests, small, SMALL);
    int rc = NEXT(PMPI_Testany)(count, array_of_requests, index, flag, status);
    if (b != NULL) {
        int ok = rc == MPI_SUCCESS && *flag && *index != MPI_UNDEFINED;
        settle_array(b, array_of_requests, count, 0, index, ok);
        after(b, small);
    }
    return rc;
}

WRAP(Waitsome);
int MPI_Waitsome(int incount, MPI_Request array_of_requests[], int *outcount,
                 int array_of_indices[], MPI_Status array_of_statuses[]) {
    MPI_Request small[SMALL], *b = before(incount, array_of_requests, small, SMALL);
    int rc = NEXT(PMPI_Waitsome)(incount, array_of_requests, outcount, array_of_indices,
                           array_of_statuses);
    if (b != NULL) {
        int n = rc == MPI_SUCCESS && *outcount != MPI_UNDEFINED ? *outcount : 0;
        settle_array(b, array_of_requests, incount, 0, array_of_indices, n);
        after(b, small);
    }
    return rc;
}

WRAP(Testsome);
int MPI_Testsome(int incount, MPI_Request array_of_requests[], int *outcount,
                 int array_of_indices[], MPI_Status array_of_statuses[]) {
    MPI_Request small[SMALL], *b = before(incount, array_of_requests, small, SMALL);
    int rc = NEXT(PMPI_Testsome)(incount, array_of_requests, outcount, array_of_indices,
                           array_of_statuses);
    if (b != NULL) {
        int n = rc == MPI_SUCCESS && *outcount != MPI_UNDEFINED ? *outcount : 0;
        settle_array(b, array_of_requests, incount, 0, array_of_indices, n);
        after(b, small);
    }
    return rc;
}

/* A request freed while active goes on receiving with no handle left to follow it by: its
 * pages are not taken again after a checkpoint (docs/mpi.md). */
WRAP(Request_free);
int MPI_Request_free(MPI_Request *request) {
    MPI_Request small[1], *b = before(request != NULL, request, small, 1);
    int rc = NEXT(PMPI_Request_free)(request);
    if (b != NULL && rc == MPI_SUCCESS) {
        pthread_mutex_lock(&table_lock);
        settle(b[0], MPI_REQUEST_NULL, 1);
        pthread_mutex_unlock(&table_lock);
    }
    return rc;
}

WRAP(Start);
int MPI_Start(MPI_Request *request) {
    if (request != NULL)
        starting(*request);
    return NEXT(PMPI_Start)(request);
}

WRAP(Startall);
int MPI_Startall(int count, MPI_Request array_of_requests[]) {
    for (int i = 0; array_of_requests != NULL && i < count; i++)
        starting(array_of_requests[i]);
    return NEXT(PMPI_Startall)(count, array_of_requests);
}

/* ---- Collectives ---- */

/* The buffer is INOUT at the root too, and written there: MPICH's scatter-and-allgather
 * broadcast of a large message writes every rank's whole buffer, the root's included. */
WRAP(Bcast);
int MPI_Bcast(void *buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm) {
    struct sink k = now();
    if (role(comm, root) != NEITHER)
        take(&k, buffer, count, datatype);
    flush(&k);
    return NEXT(PMPI_Bcast)(buffer, count, datatype, root, comm);
}

WRAP(Ibcast);
int MPI_Ibcast(void *buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm,
               MPI_Request *request) {
    struct sink k = pending(0);
    if (role(comm, root) != NEITHER)
        take(&k, buffer, count, datatype);
    flush(&k);
    return track(&k, NEXT(PMPI_Ibcast)(buffer, count, datatype, root, comm, request), request);
}

WRAP(Reduce);
int MPI_Reduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
               int root, MPI_Comm comm) {
    struct sink k = now();
    if (role(comm, root) == ROOT)
        take(&k, recvbuf, count, datatype);
    flush(&k);
    return NEXT(PMPI_Reduce)(sendbuf, recvbuf, count, datatype, op, root, comm);
}

WRAP(Ireduce);
int MPI_Ireduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                int root, MPI_Comm comm, MPI_Request *request) {
    struct sink k = pending(0);
    if (role(comm, root) == ROOT)
        take(&k, recvbuf, count, datatype);
    flush(&k);
    return track(&k, NEXT(PMPI_Ireduce)(sendbuf, recvbuf, count, datatype, op, root, comm, request),
                 request);
}

WRAP(Allreduce);
int MPI_Allreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype,
                  MPI_Op op, MPI_Comm comm) {
    struct sink k = now();
    take(&k, recvbuf, count, datatype);
    flush(&k);
    return NEXT(PMPI_Allreduce)(sendbuf, recvbuf, count, datatype, op, comm);
}

WRAP(Iallreduce);
int MPI_Iallreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype,
                   MPI_Op op, MPI_Comm comm, MPI_Request *request) {
    struct sink k = pending(0);
    take(&k, recvbuf, count, datatype);
    flush(&k);
    return track(&k, NEXT(PMPI_Iallreduce)(sendbuf, recvbuf, count, datatype, op, comm, request),
                 request);
}

WRAP(Gather);
int MPI_Gather(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
               int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm) {
    struct sink k = now();
    if (role(comm, root) == ROOT)
        take(&k, recvbuf, (MPI_Aint)recvcount * peers(comm), recvtype);
    flush(&k);
    return NEXT(PMPI_Gather)(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root,
                             comm);
}

WRAP(Igather);
int MPI_Igather(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm,
                MPI_Request *request) {
    struct sink k = pending(0);
    if (role(comm, root) == ROOT)
        take(&k, recvbuf, (MPI_Aint)recvcount * peers(comm), recvtype);
    flush(&k);
    return track(&k, NEXT(PMPI_Igather)(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype,
                                  root, comm, request), request);
}

WRAP(Gatherv);
int MPI_Gatherv(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                const int recvcounts[], const int displs[], MPI_Datatype recvtype, int root,
                MPI_Comm comm) {
    struct sink k = now();
    if (role(comm, root) == ROOT)
        take_v(&k, recvbuf, recvcounts, displs, recvtype, peers(comm));
    flush(&k);
    return NEXT(PMPI_Gatherv)(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype,
                        root, comm);
}

WRAP(Igatherv);
int MPI_Igatherv(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                 const int recvcounts[], const int displs[], MPI_Datatype recvtype, int root,
                 MPI_Comm comm, MPI_Request *request) {
    struct sink k = pending(0);
    if (role(comm, root) == ROOT)
        take_v(&k, recvbuf, recvcounts, displs, recvtype, peers(comm));
    flush(&k);
    return track(&k, NEXT(PMPI_Igatherv)(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs,
                                   recvtype, root, comm, request), request);
}

WRAP(Allgather);
int MPI_Allgather(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                  int recvcount, MPI_Datatype recvtype, MPI_Comm comm) {
    struct sink k = now();
    take(&k, recvbuf, (MPI_Aint)recvcount * peers(comm), recvtype);
    flush(&k);
    return NEXT(PMPI_Allgather)(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
}

WRAP(Iallgather);
int MPI_Iallgather(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                   int recvcount, MPI_Datatype recvtype, MPI_Comm comm, MPI_Request *request) {
    struct sink k = pending(0);
    take(&k, recvbuf, (MPI_Aint)recvcount * peers(comm), recvtype);
    flush(&k);
    return track(&k, NEXT(PMPI_Iallgather)(sendbuf, sendcount, sendtype, recvbuf, recvcount,
                                     recvtype, comm, request), request);
}

WRAP(Allgatherv);
int MPI_Allgatherv(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                   const int recvcounts[], const int displs[], MPI_Datatype recvtype,
                   MPI_Comm comm) {
    struct sink k = now();
    take_v(&k, recvbuf, recvcounts, displs, recvtype, peers(comm));
    flush(&k);
    return NEXT(PMPI_Allgatherv)(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs,
                                 recvtype, comm);
}

WRAP(Iallgatherv);
int MPI_Iallgatherv(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                    const int recvcounts[], const int displs[], MPI_Datatype recvtype,
                    MPI_Comm comm, MPI_Request *request) {
    struct sink k = pending(0);
    take_v(&k, recvbuf, recvcounts, displs, recvtype, peers(comm));
    flush(&k);
    return track(&k, NEXT(PMPI_Iallgatherv)(sendbuf, sendcount, sendtype, recvbuf, recvcounts,
                                            displs, recvtype, comm, request), request);
}

/* Scatter: every rank of an intracommunicator receives (the root too, unless in place, which
 * `take` skips); in an intercommunicator, the other group's. */
static int scatter_receives(MPI_Comm comm, int root) {
    enum role r = role(comm, root);
    return r == LEAF || (r == ROOT && is_inter(comm) == 0);
}

WRAP(Scatter);
int MPI_Scatter(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm) {
    struct sink k = now();
    if (scatter_receives(comm, root))
        take(&k, recvbuf, recvcount, recvtype);
    flush(&k);
    return NEXT(PMPI_Scatter)(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root,
                              comm);
}

WRAP(Iscatter);
int MPI_Iscatter(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                 int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm,
                 MPI_Request *request) {
    struct sink k = pending(0);
    if (scatter_receives(comm, root))
        take(&k, recvbuf, recvcount, recvtype);
    flush(&k);
    return track(&k, NEXT(PMPI_Iscatter)(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype,
                                   root, comm, request), request);
}

WRAP(Scatterv);
int MPI_Scatterv(const void *sendbuf, const int sendcounts[], const int displs[],
                 MPI_Datatype sendtype, void *recvbuf, int recvcount, MPI_Datatype recvtype,
                 int root, MPI_Comm comm) {
    struct sink k = now();
    if (scatter_receives(comm, root))
        take(&k, recvbuf, recvcount, recvtype);
    flush(&k);
    return NEXT(PMPI_Scatterv)(sendbuf, sendcounts, displs, sendtype, recvbuf, recvcount, recvtype,
                         root, comm);
}

WRAP(Iscatterv);
int MPI_Iscatterv(const void *sendbuf, const int sendcounts[], const int displs[],
                  MPI_Datatype sendtype, void *recvbuf, int recvcount, MPI_Datatype recvtype,
                  int root, MPI_Comm comm, MPI_Request *request) {
    struct sink k = pending(0);
    if (scatter_receives(comm, root))
        take(&k, recvbuf, recvcount, recvtype);
    flush(&k);
    return track(&k, NEXT(PMPI_Iscatterv)(sendbuf, sendcounts, displs, sendtype, recvbuf, recvcount,
                                    recvtype, root, comm, request), request);
}

WRAP(Alltoall);
int MPI_Alltoall(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                 int recvcount, MPI_Datatype recvtype, MPI_Comm comm) {
    struct sink k = now();
    take(&k, recvbuf, (MPI_Aint)recvcount * peers(comm), recvtype);
    flush(&k);
    return NEXT(PMPI_Alltoall)(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
}

WRAP(Ialltoall);
int MPI_Ialltoall(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                  int recvcount, MPI_Datatype recvtype, MPI_Comm comm, MPI_Request *request) {
    struct sink k = pending(0);
    take(&k, recvbuf, (MPI_Aint)recvcount * peers(comm), recvtype);
    flush(&k);
    return track(&k, NEXT(PMPI_Ialltoall)(sendbuf, sendcount, sendtype, recvbuf, recvcount,
                                          recvtype, comm, request), request);
}

WRAP(Alltoallv);
int MPI_Alltoallv(const void *sendbuf, const int sendcounts[], const int sdispls[],
                  MPI_Datatype sendtype, void *recvbuf, const int recvcounts[],
                  const int rdispls[], MPI_Datatype recvtype, MPI_Comm comm) {
    struct sink k = now();
    take_v(&k, recvbuf, recvcounts, rdispls, recvtype, peers(comm));
    flush(&k);
    return NEXT(PMPI_Alltoallv)(sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts,
                                rdispls, recvtype, comm);
}

WRAP(Ialltoallv);
int MPI_Ialltoallv(const void *sendbuf, const int sendcounts[], const int sdispls[],
                   MPI_Datatype sendtype, void *recvbuf, const int recvcounts[],
                   const int rdispls[], MPI_Datatype recvtype, MPI_Comm comm,
                   MPI_Request *request) {
    struct sink k = pending(0);
    take_v(&k, recvbuf, recvcounts, rdispls, recvtype, peers(comm));
    flush(&k);
    return track(&k, NEXT(PMPI_Ialltoallv)(sendbuf, sendcounts, sdispls, sendtype, recvbuf,
                                           recvcounts, rdispls, recvtype, comm, request), request);
}

WRAP(Alltoallw);
int MPI_Alltoallw(const void *sendbuf, const int sendcounts[], const int sdispls[],
                  const MPI_Datatype sendtypes[], void *recvbuf, const int recvcounts[],
                  const int rdispls[], const MPI_Datatype recvtypes[], MPI_Comm comm) {
    struct sink k = now();
    take_alltoallw(&k, recvbuf, recvcounts, rdispls, recvtypes, comm);
    flush(&k);
    return NEXT(PMPI_Alltoallw)(sendbuf, sendcounts, sdispls, sendtypes, recvbuf, recvcounts,
                                rdispls, recvtypes, comm);
}

WRAP(Ialltoallw);
int MPI_Ialltoallw(const void *sendbuf, const int sendcounts[], const int sdispls[],
                   const MPI_Datatype sendtypes[], void *recvbuf, const int recvcounts[],
                   const int rdispls[], const MPI_Datatype recvtypes[], MPI_Comm comm,
                   MPI_Request *request) {
    struct sink k = pending(0);
    take_alltoallw(&k, recvbuf, recvcounts, rdispls, recvtypes, comm);
    flush(&k);
    return track(&k, NEXT(PMPI_Ialltoallw)(sendbuf, sendcounts, sdispls, sendtypes, recvbuf,
                                     recvcounts, rdispls, recvtypes, comm, request), request);
}

WRAP(Reduce_scatter);
int MPI_Reduce_scatter(const void *sendbuf, void *recvbuf, const int recvcounts[],
                       MPI_Datatype datatype, MPI_Op op, MPI_Comm comm) {
    struct sink k = now();
    take_reduce_scatter(&k, sendbuf, recvbuf, recvcounts, datatype, comm);
    flush(&k);
    return NEXT(PMPI_Reduce_scatter)(sendbuf, recvbuf, recvcounts, datatype, op, comm);
}

WRAP(Ireduce_scatter);
int MPI_Ireduce_scatter(const void *sendbuf, void *recvbuf, const int recvcounts[],
                        MPI_Datatype datatype, MPI_Op op, MPI_Comm comm, MPI_Request *request) {
    struct sink k = pending(0);
    take_reduce_scatter(&k, sendbuf, recvbuf, recvcounts, datatype, comm);
    flush(&k);
    return track(&k, NEXT(PMPI_Ireduce_scatter)(sendbuf, recvbuf, recvcounts, datatype, op, comm,
                                          request), request);
}

WRAP(Reduce_scatter_block);
int MPI_Reduce_scatter_block(const void *sendbuf, void *recvbuf, int recvcount,
                             MPI_Datatype datatype, MPI_Op op, MPI_Comm comm) {
    struct sink k = now();
    take_reduce_scatter_block(&k, sendbuf, recvbuf, recvcount, datatype, comm);
    flush(&k);
    return NEXT(PMPI_Reduce_scatter_block)(sendbuf, recvbuf, recvcount, datatype, op, comm);
}

WRAP(Ireduce_scatter_block);
int MPI_Ireduce_scatter_block(const void *sendbuf, void *recvbuf, int recvcount,
                              MPI_Datatype datatype, MPI_Op op, MPI_Comm comm,
                              MPI_Request *request) {
    struct sink k = pending(0);
    take_reduce_scatter_block(&k, sendbuf, recvbuf, recvcount, datatype, comm);
    flush(&k);
    return track(&k, NEXT(PMPI_Ireduce_scatter_block)(sendbuf, recvbuf, recvcount, datatype, op,
                                                      comm, request), request);
}

WRAP(Scan);
int MPI_Scan(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
             MPI_Comm comm) {
    struct sink k = now();
    take(&k, recvbuf, count, datatype);
    flush(&k);
    return NEXT(PMPI_Scan)(sendbuf, recvbuf, count, datatype, op, comm);
}

WRAP(Iscan);
int MPI_Iscan(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
              MPI_Comm comm, MPI_Request *request) {
    struct sink k = pending(0);
    take(&k, recvbuf, count, datatype);
    flush(&k);
    return track(&k, NEXT(PMPI_Iscan)(sendbuf, recvbuf, count, datatype, op, comm, request),
                 request);
}

WRAP(Exscan);
int MPI_Exscan(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
               MPI_Comm comm) {
    struct sink k = now();
    take(&k, recvbuf, count, datatype);
    flush(&k);
    return NEXT(PMPI_Exscan)(sendbuf, recvbuf, count, datatype, op, comm);
}

WRAP(Iexscan);
int MPI_Iexscan(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                MPI_Comm comm, MPI_Request *request) {
    struct sink k = pending(0);
    take(&k, recvbuf, count, datatype);
    flush(&k);
    return track(&k, NEXT(PMPI_Iexscan)(sendbuf, recvbuf, count, datatype, op, comm, request),
                 request);
}

/* ---- MPI-IO reads (pread(2) into the buffer when its datatype is contiguous) ---- */

#define READ_NOW(call, buf, count, datatype)                                                   \
    do {                                                                                       \
        struct sink k = now();                                                                 \
        take(&k, buf, count, datatype);                                                        \
        flush(&k);                                                                             \
        return call;                                                                           \
    } while (0)

#define READ_PENDING(call, buf, count, datatype, request)                                      \
    do {                                                                                       \
        struct sink k = pending(0);                                                            \
        take(&k, buf, count, datatype);                                                        \
        flush(&k);                                                                             \
        return track(&k, call, request);                                                       \
    } while (0)

WRAP(File_read);
int MPI_File_read(MPI_File fh, void *buf, int count, MPI_Datatype datatype, MPI_Status *status) {
    READ_NOW(NEXT(PMPI_File_read)(fh, buf, count, datatype, status), buf, count, datatype);
}

WRAP(File_read_at);
int MPI_File_read_at(MPI_File fh, MPI_Offset offset, void *buf, int count, MPI_Datatype datatype,
                     MPI_Status *status) {
    READ_NOW(NEXT(PMPI_File_read_at)(fh, offset, buf, count, datatype, status), buf, count,
             datatype);
}

WRAP(File_read_all);
int MPI_File_read_all(MPI_File fh, void *buf, int count, MPI_Datatype datatype,
                      MPI_Status *status) {
    READ_NOW(NEXT(PMPI_File_read_all)(fh, buf, count, datatype, status), buf, count, datatype);
}

WRAP(File_read_at_all);
int MPI_File_read_at_all(MPI_File fh, MPI_Offset offset, void *buf, int count,
                         MPI_Datatype datatype, MPI_Status *status) {
    READ_NOW(NEXT(PMPI_File_read_at_all)(fh, offset, buf, count, datatype, status), buf, count,
             datatype);
}

WRAP(File_read_shared);
int MPI_File_read_shared(MPI_File fh, void *buf, int count, MPI_Datatype datatype,
                         MPI_Status *status) {
    READ_NOW(NEXT(PMPI_File_read_shared)(fh, buf, count, datatype, status), buf, count, datatype);
}

WRAP(File_read_ordered);
int MPI_File_read_ordered(MPI_File fh, void *buf, int count, MPI_Datatype datatype,
                          MPI_Status *status) {
    READ_NOW(NEXT(PMPI_File_read_ordered)(fh, buf, count, datatype, status), buf, count, datatype);
}

/* Split collectives: taken at the begin, where both MPIs read; the end has no count. */
WRAP(File_read_all_begin);
int MPI_File_read_all_begin(MPI_File fh, void *buf, int count, MPI_Datatype datatype) {
    READ_NOW(NEXT(PMPI_File_read_all_begin)(fh, buf, count, datatype), buf, count, datatype);
}

WRAP(File_read_at_all_begin);
int MPI_File_read_at_all_begin(MPI_File fh, MPI_Offset offset, void *buf, int count,
                               MPI_Datatype datatype) {
    READ_NOW(NEXT(PMPI_File_read_at_all_begin)(fh, offset, buf, count, datatype), buf, count,
             datatype);
}

WRAP(File_read_ordered_begin);
int MPI_File_read_ordered_begin(MPI_File fh, void *buf, int count, MPI_Datatype datatype) {
    READ_NOW(NEXT(PMPI_File_read_ordered_begin)(fh, buf, count, datatype), buf, count, datatype);
}

WRAP(File_iread);
int MPI_File_iread(MPI_File fh, void *buf, int count, MPI_Datatype datatype,
                   MPI_Request *request) {
    READ_PENDING(NEXT(PMPI_File_iread)(fh, buf, count, datatype, request), buf, count, datatype,
                     request);
}

WRAP(File_iread_at);
int MPI_File_iread_at(MPI_File fh, MPI_Offset offset, void *buf, int count,
                      MPI_Datatype datatype, MPI_Request *request) {
    READ_PENDING(NEXT(PMPI_File_iread_at)(fh, offset, buf, count, datatype, request), buf, count,
                 datatype, request);
}

WRAP(File_iread_all);
int MPI_File_iread_all(MPI_File fh, void *buf, int count, MPI_Datatype datatype,
                       MPI_Request *request) {
    READ_PENDING(NEXT(PMPI_File_iread_all)(fh, buf, count, datatype, request), buf, count, datatype,
                     request);
}

WRAP(File_iread_at_all);
int MPI_File_iread_at_all(MPI_File fh, MPI_Offset offset, void *buf, int count,
                          MPI_Datatype datatype, MPI_Request *request) {
    READ_PENDING(NEXT(PMPI_File_iread_at_all)(fh, offset, buf, count, datatype, request), buf,
                 count, datatype, request);
}

WRAP(File_iread_shared);
int MPI_File_iread_shared(MPI_File fh, void *buf, int count, MPI_Datatype datatype,
                          MPI_Request *request) {
    READ_PENDING(NEXT(PMPI_File_iread_shared)(fh, buf, count, datatype, request), buf, count,
                 datatype, request);
}
