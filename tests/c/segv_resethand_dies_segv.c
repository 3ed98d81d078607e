/* An application handler installed with SA_RESETHAND that returns: the kernel would reset the
 * disposition before running it, so the repeated fault kills the process. ickpt chains to it
 * and must keep that behaviour (not loop through its own handler forever). */
#include "check.h"
#include <signal.h>

static void on_segv(int sig) {
    (void)sig;
    static const char msg[] = "app handler ran once\n";
    ssize_t n = write(1, msg, sizeof msg - 1);
    (void)n;
}

int main(void) {
    CHECK(set_segv_handler(on_segv, NULL, SA_RESETHAND) == 0);
    OK(test_init(test_dir(), 0));
    void *p;
    OK(ickpt_malloc(1, 4096, &p));
    memset(p, 1, 4096); /* a tracked fault, not the application's */
    fault_marker();
    write_through_null(1);
    printf("FAIL: the repeated fault did not kill the process\n");
    return 0;
}
