/*
 * MPI writing straight into protected memory not written since the last checkpoint, with the
 * application unchanged (tests/mpi/run.sh runs it on 2 ranks with ICKPT_BACKEND=mprotect,
 * where a clean protected page is read-only and a kernel write into it fails with EFAULT):
 *
 *   recv_protected run      after checkpoint 1, each rank receives 1 MiB from the other with
 *                           MPI_Recv, a strided datatype with MPI_Sendrecv, an MPI_Allreduce
 *                           and two MPI_Bcasts; posts an MPI_Irecv and starts a persistent
 *                           receive, takes checkpoint 2, then the other rank sends and
 *                           MPI_Waitall completes them; checkpoint 3. Checks every byte, the
 *                           bytes in the datatype's holes too, and prints
 *                           "recv_protected: run: ok".
 *   recv_protected restart  a restart: restores the job's newest global version (tag 3) into
 *                           scribbled memory and checks the same bytes, so every page the MPI
 *                           calls wrote was recorded as written and is in the version. Prints
 *                           "recv_protected: restart: ok".
 *
 * Exits 0 on success; on a failed check prints it and calls MPI_Abort.
 */
#include <ickpt_mpi.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MIB (1u << 20)
/* The strided receive: BLOCKS blocks of BLOCK bytes, STRIDE apart, from byte SKEW of E. */
#define BLOCKS 16
#define BLOCK 3000
#define STRIDE 65536
#define SKEW 100

static int rank, size;

#define CHECK(cond, ...)                                                                    \
    do {                                                                                    \
        if (!(cond)) {                                                                      \
            fprintf(stderr, "recv_protected: rank %d: %s:%d: check failed: %s: ", rank,      \
                    __FILE__, __LINE__, #cond);                                             \
            fprintf(stderr, __VA_ARGS__);                                                   \
            fprintf(stderr, " (last error: %s)\n", ickpt_mpi_last_error());                \
            MPI_Abort(MPI_COMM_WORLD, 3);                                                   \
        }                                                                                   \
    } while (0)
#define CK(call) CHECK((call) == ICKPT_OK, "%s", #call)
#define MPI_CK(call) CHECK((call) == MPI_SUCCESS, "%s", #call)

/* Byte i of what rank `from` sends for buffer `tag` ('0': what a rank writes before the
 * first checkpoint). */
static uint8_t pattern(int tag, int from, size_t i) {
    uint32_t z = (uint32_t)i * 2654435761u + (uint32_t)tag * 40503u + (uint32_t)from * 9973u;
    return (uint8_t)(z >> 13 ^ z >> 24);
}

static void fill(uint8_t *p, size_t n, int tag, int from) {
    for (size_t i = 0; i < n; i++)
        p[i] = pattern(tag, from, i);
}

/* Word i of a rank's contribution to the allreduce, and of the sum. */
static uint32_t addend(int r, size_t i) { return (uint32_t)i * 3u + (uint32_t)r * 7u + 1u; }
static uint32_t sum(size_t i) {
    uint32_t s = 0;
    for (int r = 0; r < size; r++)
        s += addend(r, i);
    return s;
}

/* The protected buffers: A (MPI_Recv; malloc'd, so not page-aligned), E (strided
 * MPI_Sendrecv), C (MPI_Allreduce), D (two MPI_Bcasts, one half each), F (MPI_Irecv across a
 * checkpoint), G (persistent receive across a checkpoint). */
static uint8_t *A, *E, *D, *F, *G;
static uint32_t *C;
#define C_WORDS (MIB / sizeof(uint32_t))

static void protect_all(void) {
    A = malloc(MIB);
    E = malloc(MIB);
    CHECK(A != NULL && E != NULL, "out of memory");
    void *c = NULL, *d = NULL, *f = NULL, *g = NULL;
    CK(ickpt_protect(1, A, MIB));
    CK(ickpt_protect(2, E, MIB));
    CK(ickpt_malloc(3, MIB, &c));
    CK(ickpt_malloc(4, MIB, &d));
    CK(ickpt_malloc(5, MIB, &f));
    CK(ickpt_malloc(6, MIB, &g));
    C = c;
    D = d;
    F = f;
    G = g;
}

/* Whether byte i of E is one the strided receive wrote, and which byte of the message. */
static int in_block(size_t i, size_t *at) {
    if (i < SKEW)
        return 0;
    size_t b = (i - SKEW) / STRIDE, j = (i - SKEW) % STRIDE;
    if (b >= BLOCKS || j >= BLOCK)
        return 0;
    *at = b * BLOCK + j;
    return 1;
}

/* Every byte as the run leaves it (and a restart must find it). */
static void verify(const char *when) {
    int peer = 1 - rank;
    for (size_t i = 0; i < MIB; i++) {
        size_t at = 0;
        CHECK(A[i] == pattern('A', peer, i), "%s: MPI_Recv: byte %zu is %u, want %u", when, i,
              A[i], pattern('A', peer, i));
        uint8_t e = in_block(i, &at) ? pattern('E', peer, at) : pattern('0', rank, i);
        CHECK(E[i] == e, "%s: MPI_Sendrecv (strided): byte %zu is %u, want %u", when, i, E[i], e);
        int root = i < MIB / 2 ? 1 : 0;
        CHECK(D[i] == pattern('D', root, i), "%s: MPI_Bcast from rank %d: byte %zu is %u, want %u",
              when, root, i, D[i], pattern('D', root, i));
        CHECK(F[i] == pattern('F', peer, i), "%s: MPI_Irecv across a checkpoint: byte %zu is %u, "
              "want %u", when, i, F[i], pattern('F', peer, i));
        CHECK(G[i] == pattern('G', peer, i), "%s: persistent receive across a checkpoint: byte "
              "%zu is %u, want %u", when, i, G[i], pattern('G', peer, i));
    }
    for (size_t i = 0; i < C_WORDS; i++)
        CHECK(C[i] == sum(i), "%s: MPI_Allreduce: word %zu is %u, want %u", when, i, C[i], sum(i));
}

static void run(void) {
    int peer = 1 - rank;
    uint64_t global = 0, tag = 0;
    ickpt_result r = ickpt_mpi_restore_latest(&global, &tag);
    CHECK(r == ICKPT_ERR_NOT_FOUND, "a first run found global version %llu",
          (unsigned long long)global);
    /* Everything written before checkpoint 1, so every page is clean (read-only) after it. */
    uint8_t *out = malloc(MIB);
    uint32_t *words = malloc(MIB);
    CHECK(out != NULL && words != NULL, "out of memory");
    fill(A, MIB, '0', rank);
    fill(E, MIB, '0', rank);
    fill(F, MIB, '0', rank);
    fill(G, MIB, '0', rank);
    /* D: the half this rank broadcasts (rank 1 the first, rank 0 the second), the other
     * half what it had. */
    for (size_t i = 0; i < MIB; i++)
        D[i] = (i < MIB / 2) == (rank == 1) ? pattern('D', rank, i) : pattern('0', rank, i);
    memset(C, 0, MIB);
    CK(ickpt_mpi_checkpoint(1));

    /* MPI_Recv of 1 MiB into clean protected memory: rank 0 first, then rank 1. */
    fill(out, MIB, 'A', rank);
    for (int turn = 0; turn < 2; turn++) {
        if (rank == turn)
            MPI_CK(MPI_Recv(A, MIB, MPI_BYTE, peer, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        else
            MPI_CK(MPI_Send(out, MIB, MPI_BYTE, peer, 1, MPI_COMM_WORLD));
    }

    /* A strided datatype whose holes (62 KiB) span whole pages the receive must not touch. */
    MPI_Datatype strided;
    MPI_CK(MPI_Type_vector(BLOCKS, BLOCK, STRIDE, MPI_BYTE, &strided));
    MPI_CK(MPI_Type_commit(&strided));
    fill(out, BLOCKS * BLOCK, 'E', rank);
    MPI_CK(MPI_Sendrecv(out, BLOCKS * BLOCK, MPI_BYTE, peer, 2, E + SKEW, 1, strided, peer, 2,
                        MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    MPI_CK(MPI_Type_free(&strided));

    for (size_t i = 0; i < C_WORDS; i++)
        words[i] = addend(rank, i);
    MPI_CK(MPI_Allreduce(words, C, (int)C_WORDS, MPI_UINT32_T, MPI_SUM, MPI_COMM_WORLD));

    MPI_CK(MPI_Bcast(D, MIB / 2, MPI_BYTE, 1, MPI_COMM_WORLD));
    MPI_CK(MPI_Bcast(D + MIB / 2, MIB / 2, MPI_BYTE, 0, MPI_COMM_WORLD));

    /* Receives pending across a checkpoint, which protects their pages again; the other rank
     * sends only after it, so the data lands after it. */
    MPI_Request reqs[2];
    MPI_CK(MPI_Irecv(F, MIB, MPI_BYTE, peer, 3, MPI_COMM_WORLD, &reqs[0]));
    MPI_CK(MPI_Recv_init(G, MIB, MPI_BYTE, peer, 4, MPI_COMM_WORLD, &reqs[1]));
    MPI_CK(MPI_Start(&reqs[1]));
    CK(ickpt_mpi_checkpoint(2));
    fill(out, MIB, 'F', rank);
    MPI_CK(MPI_Send(out, MIB, MPI_BYTE, peer, 3, MPI_COMM_WORLD));
    fill(out, MIB, 'G', rank);
    MPI_CK(MPI_Send(out, MIB, MPI_BYTE, peer, 4, MPI_COMM_WORLD));
    MPI_Status statuses[2]; /* not MPI_STATUSES_IGNORE: MPICH's (MPI_Status *)1 trips gcc 12 */
    MPI_CK(MPI_Waitall(2, reqs, statuses));
    MPI_CK(MPI_Request_free(&reqs[1]));

    CK(ickpt_mpi_checkpoint(3));
    verify("run");
    free(out);
    free(words);
    if (rank == 0)
        printf("recv_protected: run: ok\n");
}

static void restart(void) {
    /* Scribbled over, so only the restore can bring the bytes back. */
    memset(A, 0xee, MIB);
    memset(E, 0xee, MIB);
    memset(C, 0xee, MIB);
    memset(D, 0xee, MIB);
    memset(F, 0xee, MIB);
    memset(G, 0xee, MIB);
    uint64_t global = 0, tag = 0;
    CK(ickpt_mpi_restore_latest(&global, &tag));
    CHECK(tag == 3, "restored global version %llu with tag %llu, want tag 3",
          (unsigned long long)global, (unsigned long long)tag);
    verify("restart");
    if (rank == 0)
        printf("recv_protected: restart: ok (global version %llu)\n", (unsigned long long)global);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    const char *mode = argc > 1 ? argv[1] : "";
    CHECK(size == 2, "run it on 2 ranks, not %d", size);
    CHECK(strcmp(mode, "run") == 0 || strcmp(mode, "restart") == 0,
          "usage: recv_protected run|restart, not '%s'", mode);
    CK(ickpt_mpi_init(MPI_COMM_WORLD, NULL));
    protect_all();
    if (strcmp(mode, "run") == 0)
        run();
    else
        restart();
    CK(ickpt_mpi_finalize());
    MPI_Finalize();
    return 0;
}
