/*
 * A malformed ICKPT_FAULT makes ickpt_init fail, naming the variable, its value and the
 * syntax it takes, before the store directory is created (it was silently ignored, so a test
 * meant to inject a fault ran without one). Unset, ickpt_init works.
 */
#include "check.h"

#include <sys/stat.h>

int main(void) {
    const char *dir = test_subdir("store");
    const char *bad[] = {"bogus", "enospc@", "eio@12x", "enospc:100", ""};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        CHECK(setenv("ICKPT_FAULT", bad[i], 1) == 0);
        CHECK_RC(test_init(dir, 0), ICKPT_ERR_INVALID_ARGUMENT);
        const char *msg = ickpt_last_error();
        char quoted[64];
        snprintf(quoted, sizeof quoted, "\"%s\"", bad[i]);
        CHECK_MSG(strstr(msg, "ICKPT_FAULT") && strstr(msg, quoted) &&
                      strstr(msg, "enospc@BYTES") && strstr(msg, "commit-eio"),
                  "ICKPT_FAULT=%s: the message must name the variable, the value and the "
                  "syntax: \"%s\"",
                  quoted, msg);
        struct stat sb;
        CHECK_MSG(stat(dir, &sb) != 0, "ICKPT_FAULT=%s: the store was created", quoted);
    }
    CHECK(unsetenv("ICKPT_FAULT") == 0);
    OK(test_init(dir, 0));
    OK(ickpt_finalize());
    return 0;
}
