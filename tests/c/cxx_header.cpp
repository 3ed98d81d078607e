// ickpt.h and ickpt_coord.h must be usable from C++: they compile with -Wall -Wextra -Werror
// -pedantic and their functions link with C linkage.
#include <ickpt.h>
#include <ickpt_coord.h>

#include <cstdio>
#include <cstring>

int main() {
    ickpt_config cfg;
    if (ickpt_config_init(&cfg) != ICKPT_OK || cfg.struct_size != sizeof(ickpt_config)) {
        std::fprintf(stderr, "ickpt_config_init failed from C++\n");
        return 1;
    }
    const char *v = ickpt_version();
    if (v == nullptr || std::strlen(v) == 0) {
        std::fprintf(stderr, "ickpt_version() is empty\n");
        return 1;
    }
    ickpt_result r = ickpt_finalize();
    if (r != ICKPT_ERR_NOT_INITIALIZED) {
        std::fprintf(stderr, "ickpt_finalize before init: %s\n", ickpt_result_name(r));
        return 1;
    }
    // The stats type and the stats function must both be nameable from C++.
    ickpt_stats st;
    st.faults = 12345;
    r = ickpt_get_stats(&st);
    if (r != ICKPT_ERR_NOT_INITIALIZED || st.faults != 12345) {
        std::fprintf(stderr, "ickpt_get_stats before init: %s\n", ickpt_result_name(r));
        return 1;
    }
    // And a coordination call of ickpt_coord.h.
    uint64_t global = 777;
    r = ickpt_drained_global(&global);
    if (r != ICKPT_ERR_NOT_INITIALIZED || global != 777) {
        std::fprintf(stderr, "ickpt_drained_global before init: %s\n", ickpt_result_name(r));
        return 1;
    }
    std::printf("C++ sees ickpt %s\n", v);
    return 0;
}
