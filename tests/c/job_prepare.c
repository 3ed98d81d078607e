/*
 * ickpt_job_prepare (ickpt_coord.h), as libickpt_mpi's rank 0 calls it: it makes the job
 * directory and its job file, accepts the same number of ranks again, and refuses another
 * number, bad arguments and a job file that is not one, each with its code and a message.
 */
#include "check.h"

#include <ickpt_coord.h>

int main(void) {
    const char *job = test_subdir("job"), *file = test_subdir("job/ickpt-job");
    char text[128];
    OK(ickpt_job_prepare(job, 3));
    FILE *f = fopen(file, "r");
    CHECK(f != NULL);
    size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[n] = '\0';
    CHECK(strcmp(text, "ickpt MPI job, format 1\nranks 3\n") == 0);
    OK(ickpt_job_prepare(job, 3));
    CHECK_RC(ickpt_job_prepare(job, 4), ICKPT_ERR_INVALID_ARGUMENT);
    CHECK(strstr(ickpt_last_error(), "a job of 3 ranks, this job has 4") != NULL);
    CHECK_RC(ickpt_job_prepare(NULL, 3), ICKPT_ERR_INVALID_ARGUMENT);
    CHECK_RC(ickpt_job_prepare(job, -1), ICKPT_ERR_INVALID_ARGUMENT);
    CHECK(strstr(ickpt_last_error(), "ranks=-1") != NULL);
    f = fopen(file, "w");
    CHECK(f != NULL);
    fputs("ickpt MPI job, format 1\nranks 3\nmore\n", f);
    fclose(f);
    CHECK_RC(ickpt_job_prepare(job, 3), ICKPT_ERR_NOT_A_STORE);
    CHECK(strstr(ickpt_last_error(), "is not an ickpt job file") != NULL);
    printf("job_prepare: ok\n");
    return 0;
}
