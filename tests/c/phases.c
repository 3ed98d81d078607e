/*
 * ickpt_get_phases: where the newest checkpoint's time went. Not found before the first
 * commit; then the version just committed, scheduled once (nothing wrote meanwhile), with
 * the copy, write and fsync it could not do without; and a caller's shorter struct (a
 * program built with an older ickpt.h) gets exactly its own bytes, nothing past them.
 */
#include "check.h"

#include <stddef.h>

int main(void) {
    OK(test_init(test_dir(), 0));
    struct ickpt_phases p;
    CHECK_RC(ickpt_get_phases(&p), ICKPT_ERR_NOT_FOUND);
    CHECK_RC(ickpt_get_phases_sized(NULL, sizeof p), ICKPT_ERR_INVALID_ARGUMENT);

    size_t len = 64 * 4096;
    unsigned char *buf = NULL;
    OK(ickpt_malloc(1, len, (void **)&buf));
    memset(buf, 7, len);
    ickpt_checkpoint_info info;
    OK(ickpt_checkpoint(&info));
    buf[5 * 4096] = 9;
    OK(ickpt_checkpoint(&info));
    /* Committed in either mode (ICKPT_MODE=async returns once the pages are scheduled). */
    OK(ickpt_wait(&info));

    memset(&p, 0xee, sizeof p);
    OK(ickpt_get_phases(&p));
    CHECK(p.version == info.version);
    CHECK(p.attempts == 1);
    CHECK(p.copy_ns > 0 && p.write_ns > 0 && p.commit_ns > 0);
    CHECK(p.collect_ns < info.duration_ns && p.commit_ns < info.duration_ns);

    /* An older program's struct ended after `attempts`: the rest is the caller's own. */
    memset(&p, 0xee, sizeof p);
    OK(ickpt_get_phases_sized(&p, offsetof(struct ickpt_phases, collect_ns)));
    CHECK(p.version == info.version && p.attempts == 1);
    CHECK(p.collect_ns == 0xeeeeeeeeeeeeeeeeull && p.gc_ns == 0xeeeeeeeeeeeeeeeeull);

    /* A newer program's longer struct: the fields this library lacks read as zero. */
    struct {
        struct ickpt_phases known;
        uint64_t later;
    } newer;
    memset(&newer, 0xee, sizeof newer);
    OK(ickpt_get_phases_sized(&newer.known, sizeof newer));
    CHECK(newer.known.version == info.version && newer.later == 0);

    OK(ickpt_finalize());
    return 0;
}
