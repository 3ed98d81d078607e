/*
 * ickpt_config_resolve (ickpt_coord.h), which libickpt_mpi asks instead of reading the
 * environment and struct_size itself: it gives the directory, tiers and mode ickpt_init
 * runs with (ICKPT_DIR, ICKPT_SHARED_DIR, ICKPT_MODE when the config leaves them), fills
 * what a short (older) struct lacks with the defaults, and refuses what ickpt_init refuses
 * with the same code and message. The strings stay valid until the thread's next resolve.
 */
#include "check.h"

#include <ickpt_coord.h>

static unsigned char mem[4 * 4096];

/* `cfg` refused alike by resolve and by ickpt_init: the same code and message. */
static void refused_alike(const ickpt_config *cfg, const char *says) {
    ickpt_resolved_config res;
    char msg[1024];
    CHECK_RC(ickpt_config_resolve(cfg, &res), ICKPT_ERR_INVALID_ARGUMENT);
    snprintf(msg, sizeof msg, "%s", ickpt_last_error());
    CHECK_MSG(strstr(msg, says) != NULL, "resolve said: %s", msg);
    CHECK_RC(ickpt_init(cfg), ICKPT_ERR_INVALID_ARGUMENT);
    CHECK_MSG(strcmp(msg, ickpt_last_error()) == 0, "resolve: %s; init: %s", msg,
              ickpt_last_error());
}

int main(void) {
    const char *env_dir = test_subdir("from-env"), *shared = test_subdir("shared");
    setenv("ICKPT_DIR", env_dir, 1);
    setenv("ICKPT_MODE", "async", 1);
    unsetenv("ICKPT_SHARED_DIR");
    unsetenv("ICKPT_OBJECT_URL");

    /* The directory and the mode from the environment, as ickpt_init takes them. */
    ickpt_config cfg;
    OK(ickpt_config_init(&cfg));
    CHECK(cfg.dir == NULL && cfg.mode == ICKPT_MODE_SYNC);
    ickpt_resolved_config res;
    OK(ickpt_config_resolve(&cfg, &res));
    CHECK(strcmp(res.dir, env_dir) == 0);
    CHECK(res.mode == ICKPT_MODE_ASYNC);
    CHECK(res.shared_dir == NULL && res.object_url == NULL);
    CHECK(res.config != NULL && res.config->struct_size == sizeof(ickpt_config));
    CHECK(res.config->dir == res.dir && res.config->mode == ICKPT_MODE_SYNC);
    OK(ickpt_init(&cfg));
    OK(ickpt_protect(1, mem, sizeof mem));
    mem[0] = 1;
    ickpt_checkpoint_info info;
    OK(ickpt_checkpoint(&info));
    OK(ickpt_wait(&info));
    CHECK(info.mode == res.mode);
    OK(ickpt_finalize());
    size_t n = 0;
    OK(ickpt_init(res.config)); /* the resolved config opens the same store */
    OK(ickpt_list_versions(NULL, 0, &n));
    CHECK(n == 1);
    OK(ickpt_finalize());

    /* The config's own fields win; the shared tier from the environment otherwise. */
    setenv("ICKPT_MODE", "sync", 1);
    setenv("ICKPT_SHARED_DIR", shared, 1);
    cfg.dir = test_subdir("own");
    OK(ickpt_config_resolve(&cfg, &res));
    CHECK(strcmp(res.dir, cfg.dir) == 0 && res.mode == ICKPT_MODE_SYNC);
    CHECK(res.shared_dir != NULL && strcmp(res.shared_dir, shared) == 0);
    const char *kept = res.dir;
    ickpt_result_name(ICKPT_OK); /* other calls leave the strings alone */
    CHECK(strcmp(kept, cfg.dir) == 0);
    unsetenv("ICKPT_SHARED_DIR");

    /* NULL: the defaults, with ICKPT_DIR. */
    OK(ickpt_config_resolve(NULL, &res));
    CHECK(strcmp(res.dir, env_dir) == 0 && res.config->full_every == 10);

    /* A program built with the first, 24-byte ickpt_config: the fields it lacks take their
     * defaults, not zero. */
    union {
        ickpt_config cfg;
        unsigned char bytes[sizeof(ickpt_config)];
    } old;
    memset(&old, 0, sizeof old);
    old.cfg.struct_size = 24;
    old.cfg.full_every = 5;
    old.cfg.keep_chains = 2;
    old.cfg.cow_bytes = 123; /* past its 24 bytes: never read */
    OK(ickpt_config_resolve(&old.cfg, &res));
    CHECK(res.config->full_every == 5);
    CHECK(res.config->cow_bytes == 16u << 20 && res.config->acck_pieces_log2 == 6);
    CHECK(res.config->struct_size == sizeof(ickpt_config));

    /* Refused as ickpt_init refuses: a size no ickpt_config has, no directory, a bad
     * ICKPT_MODE, a bad field. */
    OK(ickpt_config_init(&cfg));
    cfg.dir = test_subdir("refused");
    cfg.struct_size = 20;
    refused_alike(&cfg, "cfg->struct_size=20");
    OK(ickpt_config_init(&cfg));
    unsetenv("ICKPT_DIR");
    refused_alike(&cfg, "set cfg->dir or ICKPT_DIR");
    cfg.dir = test_subdir("refused");
    setenv("ICKPT_MODE", "fast", 1);
    refused_alike(&cfg, "ICKPT_MODE=\"fast\"");
    unsetenv("ICKPT_MODE");
    cfg.backend = 99;
    refused_alike(&cfg, "cfg->backend=99");
    CHECK_RC(ickpt_config_resolve(&cfg, NULL), ICKPT_ERR_INVALID_ARGUMENT);
    /* A failed resolve left the last one's strings as they were. */
    CHECK(strcmp(res.dir, env_dir) == 0);
    printf("config_resolve: ok\n");
    return 0;
}
