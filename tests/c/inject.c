/*
 * ickpt_inject from C (CAPE's inject): a delta file, built here byte by byte
 * as docs/FORMAT.md ("Word deltas", "Delta files") lays it out, lands in the protected region
 * exactly; the next checkpoint stores the pages it changed; a missing file, a damaged one and
 * one for a region of another length are refused with memory unchanged.
 */
#include "check.h"

static unsigned char mem[2 * 4096] __attribute__((aligned(4096)));

/* CRC-32C (Castagnoli), bit by bit: small, and independent of ickpt's own. */
static uint32_t crc32c(const unsigned char *p, size_t n) {
    uint32_t c = 0xFFFFFFFFu;
    for (size_t i = 0; i < n; i++) {
        c ^= p[i];
        for (int k = 0; k < 8; k++)
            c = (c >> 1) ^ (0x82F63B78u & (0u - (c & 1)));
    }
    return ~c;
}

static size_t put64(unsigned char *b, size_t at, uint64_t v) {
    for (int i = 0; i < 8; i++)
        b[at + i] = (unsigned char)(v >> (8 * i));
    return at + 8;
}

static size_t put32(unsigned char *b, size_t at, uint32_t v) {
    for (int i = 0; i < 4; i++)
        b[at + i] = (unsigned char)(v >> (8 * i));
    return at + 4;
}

/* A delta of region 1 (`length` bytes): one single-data word at 100 and a run of two words at
 * 4096. Returns the file's length. */
static size_t build(unsigned char *f, uint64_t length) {
    unsigned char rec[64];
    size_t r = 0;
    r = put64(rec, r, 100 | 0); /* single data */
    memcpy(rec + r, "\xEF\xBE\xAD\xDE", 4);
    r += 4;
    r = put64(rec, r, 4096 | 1); /* several successive data */
    r = put32(rec, r, 2);
    memcpy(rec + r, "ABCDEFGH", 8);
    r += 8;
    size_t at = 0;
    memcpy(f, "ICKPTDLT", 8);
    at = 8;
    f[at++] = 1; /* format 1 */
    f[at++] = 0;
    f[at++] = 0; /* reserved */
    f[at++] = 0;
    at = put32(f, at, 4096); /* page size */
    at = put32(f, at, 1);    /* regions */
    at = put32(f, at, 0);    /* reserved */
    at = put64(f, at, 1);    /* saves */
    at = put64(f, at, 1);    /* region id */
    at = put64(f, at, length);
    at = put64(f, at, r); /* bytes of records */
    at = put64(f, at, 0); /* reserved */
    memcpy(f + at, rec, r);
    at += r;
    at = put32(f, at, crc32c(f, at));
    at = put32(f, at, 0);
    return at;
}

static void write_file(const char *path, const unsigned char *b, size_t n) {
    FILE *fp = fopen(path, "wb");
    CHECK(fp != NULL);
    CHECK(fwrite(b, 1, n, fp) == n);
    CHECK(fclose(fp) == 0);
}

int main(void) {
    ickpt_config cfg;
    OK(ickpt_config_init(&cfg));
    cfg.dir = test_subdir("store");
    OK(ickpt_init(&cfg));
    OK(ickpt_protect(1, mem, sizeof mem));
    memset(mem, 0x11, sizeof mem);
    ickpt_checkpoint_info info;
    OK(ickpt_checkpoint(&info));

    unsigned char f[256];
    size_t n = build(f, sizeof mem);
    const char *path = test_subdir("delta");
    write_file(path, f, n);
    unsigned char want[sizeof mem];
    memcpy(want, mem, sizeof mem);
    memcpy(want + 100, "\xEF\xBE\xAD\xDE", 4);
    memcpy(want + 4096, "ABCDEFGH", 8);
    OK(ickpt_inject(path));
    CHECK_MSG(memcmp(mem, want, sizeof mem) == 0, "injected words differ");
    OK(ickpt_checkpoint(&info));
    CHECK_MSG(info.kind == ICKPT_KIND_INCREMENTAL && info.pages == 2,
              "the increment after an inject stored %llu pages", (unsigned long long)info.pages);

    /* Refusals leave memory as it was. */
    CHECK_RC(ickpt_inject(test_subdir("no-such-delta")), ICKPT_ERR_NOT_FOUND);
    f[n - 12] ^= 0x01; /* a byte of the records: the checksum fails */
    write_file(path, f, n);
    CHECK_RC(ickpt_inject(path), ICKPT_ERR_CORRUPT);
    CHECK_MSG(strstr(ickpt_last_error(), path) != NULL, "%s", ickpt_last_error());
    n = build(f, sizeof mem + 4);
    write_file(path, f, n);
    CHECK_RC(ickpt_inject(path), ICKPT_ERR_REGION_MISMATCH);
    CHECK_MSG(memcmp(mem, want, sizeof mem) == 0, "a refused inject changed memory");
    CHECK_RC(ickpt_inject(NULL), ICKPT_ERR_INVALID_ARGUMENT);
    OK(ickpt_finalize());
    return 0;
}
