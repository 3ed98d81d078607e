/* An unmodified program for `ickpt run` tests whose process record shrinks: it holds 1500
 * small mappings (protections alternating, so that none merge) until the file argv[2]
 * appears, then unmaps them and waits until that file is gone again. Each phase appends a
 * line to argv[1]: "mapped", "unmapped", "done". */
#include <sys/mman.h>
#include <string.h>
#include <unistd.h>

#include "prog.h"

#define MAPPINGS 1500

static void say(int out, const char *line) {
    if (write(out, line, strlen(line)) != (ssize_t)strlen(line))
        exit(1);
}

int main(int argc, char **argv) {
    int out = open_output(argc, argv, 3, "shrink OUT GO");
    static char *maps[MAPPINGS];
    /* One reservation cut into pages of alternating protection: neighbours never merge. */
    char *area = mmap(NULL, 2L * MAPPINGS * 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (area == MAP_FAILED)
        return 1;
    for (int i = 0; i < MAPPINGS; i++) {
        maps[i] = area + 2L * i * 4096;
        if (mprotect(maps[i], 4096, PROT_READ | PROT_WRITE) != 0)
            return 1;
        maps[i][0] = (char)i;
    }
    say(out, "mapped\n");
    while (access(argv[2], F_OK) != 0)
        spin(1000000);
    if (munmap(area, 2L * MAPPINGS * 4096) != 0)
        return 1;
    say(out, "unmapped\n");
    while (access(argv[2], F_OK) == 0)
        spin(1000000);
    say(out, "done\n");
    return 0;
}
