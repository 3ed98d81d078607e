/* An unmodified AVX2 program for `ickpt run` tests: eight chaotic recurrences x = x*x + c,
 * four lanes each, computed with FMA in ymm registers that the loop keeps live for millions
 * of iterations, so a checkpoint stops the program with them in flight. The map is chaotic:
 * a lost or zeroed bit of any register (an upper half the restart failed to restore) grows
 * until the checksums differ. Each step appends the 32 values' bits to argv[1]; stdout gets a
 * final checksum once. Built with -mavx2 -mfma. */
#include <fcntl.h>
#include <immintrin.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "prog.h"

#define INNER (1L << 20)

/* The lanes' bits, taken out of the register (no store: the accumulators never need an
 * address, so the compiler keeps them in ymm registers through the loop). */
static uint64_t fold(__m256d v, uint64_t h) {
    __m256i b = _mm256_castpd_si256(v);
    h = (h ^ (uint64_t)_mm256_extract_epi64(b, 0)) * 1099511628211ull;
    h = (h ^ (uint64_t)_mm256_extract_epi64(b, 1)) * 1099511628211ull;
    h = (h ^ (uint64_t)_mm256_extract_epi64(b, 2)) * 1099511628211ull;
    h = (h ^ (uint64_t)_mm256_extract_epi64(b, 3)) * 1099511628211ull;
    return h;
}

int main(int argc, char **argv) {
    int out = open_output(argc, argv, 3, "avx OUT STEPS");
    long steps = atol(argv[2]);
    /* c in (-2, -1.5): the real Mandelbrot map's chaotic band, bounded in [-2, 2]. */
    __m256d c0 = _mm256_setr_pd(-1.90, -1.91, -1.92, -1.93);
    __m256d c1 = _mm256_setr_pd(-1.94, -1.95, -1.96, -1.97);
    __m256d c2 = _mm256_setr_pd(-1.60, -1.61, -1.62, -1.63);
    __m256d c3 = _mm256_setr_pd(-1.64, -1.65, -1.66, -1.67);
    __m256d x0 = _mm256_setr_pd(0.10, 0.11, 0.12, 0.13);
    __m256d x1 = _mm256_setr_pd(0.20, 0.21, 0.22, 0.23);
    __m256d x2 = _mm256_setr_pd(0.30, 0.31, 0.32, 0.33);
    __m256d x3 = _mm256_setr_pd(0.40, 0.41, 0.42, 0.43);
    __m256d x4 = _mm256_setr_pd(0.50, 0.51, 0.52, 0.53);
    __m256d x5 = _mm256_setr_pd(0.60, 0.61, 0.62, 0.63);
    __m256d x6 = _mm256_setr_pd(0.70, 0.71, 0.72, 0.73);
    __m256d x7 = _mm256_setr_pd(0.80, 0.81, 0.82, 0.83);
    uint64_t h = 14695981039346656037ull;
    for (long s = 0; s < steps; s++) {
        for (long k = 0; k < INNER; k++) {
            x0 = _mm256_fmadd_pd(x0, x0, c0);
            x1 = _mm256_fmadd_pd(x1, x1, c1);
            x2 = _mm256_fmadd_pd(x2, x2, c2);
            x3 = _mm256_fmadd_pd(x3, x3, c3);
            x4 = _mm256_fmadd_pd(x4, x4, c0);
            x5 = _mm256_fmadd_pd(x5, x5, c1);
            x6 = _mm256_fmadd_pd(x6, x6, c2);
            x7 = _mm256_fmadd_pd(x7, x7, c3);
        }
        uint64_t step = 14695981039346656037ull;
        step = fold(x0, step);
        step = fold(x1, step);
        step = fold(x2, step);
        step = fold(x3, step);
        step = fold(x4, step);
        step = fold(x5, step);
        step = fold(x6, step);
        step = fold(x7, step);
        h = (h ^ step) * 1099511628211ull;
        char line[64];
        int len = snprintf(line, sizeof line, "step %ld %016llx\n", s, (unsigned long long)step);
        if (write(out, line, (size_t)len) != len) {
            perror("write");
            return 1;
        }
    }
    printf("final %016llx after %ld steps\n", (unsigned long long)h, steps);
    return 0;
}
