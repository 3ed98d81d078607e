/*
 * What markov.c (sequential, with program sections) and markov_mpi.c (CAPE's parallel loop)
 * share, so that both compute the same chain with the same arithmetic: the CAPE paper's Fig. 3.
 */
#ifndef MARKOV_H
#define MARKOV_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#define RAND 10000

/* Fig. 3's lines 13-22: an N×N row-stochastic matrix and a first vector from rand(). */
static void markov_init(float *m, float *v, size_t n) {
    float sum, val = 0;
    srand(1);
    for (size_t i = 0; i < n; i++) {
        sum = 0;
        for (size_t j = 0; j < n; j++, sum += val)
            m[i * n + j] = val = (float)(rand() % RAND);
        for (size_t j = 0; j < n; j++)
            m[i * n + j] /= sum;
    }
    sum = 0;
    for (size_t i = 0; i < n; i++, sum += val)
        v[i] = val = (float)(rand() % RAND);
    for (size_t i = 0; i < n; i++)
        v[i] /= sum;
}

/* Fig. 3's lines 25-29 for rows lo..hi: the next vector (v[1-k]) from this one (v[k]),
 * walking the matrix by column as printed. */
static void markov_rows(const float *m, float *v, size_t n, int k, size_t lo, size_t hi) {
    for (size_t i = lo; i < hi; i++) {
        v[(size_t)(1 - k) * n + i] = 0.f;
        for (size_t j = 0; j < n; j++)
            v[(size_t)(1 - k) * n + i] += v[(size_t)k * n + j] * m[j * n + i];
    }
}

/* FNV-1a over the vector's bytes: bit-identical results print the same number. */
static uint64_t markov_checksum(const float *v, size_t n) {
    uint64_t h = 1469598103934665603ULL;
    const unsigned char *p = (const unsigned char *)v;
    for (size_t i = 0; i < n * sizeof *v; i++)
        h = (h ^ p[i]) * 1099511628211ULL;
    return h;
}

#endif
