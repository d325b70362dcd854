/* STREAM-style triad a[i] = b[i] + q*c[i] with OpenMP, the reference `roofline measure` is held to.
 *
 * Build: gcc -O3 -fopenmp -march=native bench/triad.c -o triad   (bench/bench_measure.py does this)
 * Run:   ./triad N REPS   (N doubles per array; prints one line per repeat, then a summary line)
 *
 * Bytes are counted as STREAM counts them: three arrays of 8-byte values per element (b and c read,
 * a written); the write-allocate read of a is not counted. The arrays are first touched by the same
 * threads that stream them later (first-touch placement), and filled with non-zero values.
 */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 32L * 1024 * 1024;
    int reps = argc > 2 ? atoi(argv[2]) : 10;
    if (n < 1024 || reps < 1) {
        fprintf(stderr, "usage: triad N REPS (N >= 1024 doubles per array, REPS >= 1)\n");
        return 2;
    }
    double *a = malloc(n * sizeof(double)), *b = malloc(n * sizeof(double)), *c = malloc(n * sizeof(double));
    if (!a || !b || !c) {
        fprintf(stderr, "triad: cannot allocate 3 x %ld doubles\n", n);
        return 1;
    }
#pragma omp parallel for schedule(static)
    for (long i = 0; i < n; i++) {
        a[i] = 1.0;
        b[i] = 0.5 + (double)(i % 7) / 7.0;
        c[i] = 1.5 - (double)(i % 5) / 5.0;
    }
    const double q = 3.0;
    double best = 1e30, worst = 0.0;
    for (int r = 0; r < reps + 1; r++) { /* the first pass is a warm-up */
        double t = omp_get_wtime();
#pragma omp parallel for schedule(static)
        for (long i = 0; i < n; i++) a[i] = b[i] + q * c[i];
        t = omp_get_wtime() - t;
        if (r == 0) continue;
        if (t < best) best = t;
        if (t > worst) worst = t;
        printf("rep %d %.6f s %.3f GB/s\n", r, t, 24.0 * n / t / 1e9);
    }
    double check = 0.0;
    for (long i = 0; i < n; i += n / 16) check += a[i];
    printf("triad threads=%d n=%ld best_bytes_per_s=%.6e worst_bytes_per_s=%.6e check=%g\n", omp_get_max_threads(), n,
           24.0 * n / best, 24.0 * n / worst, check);
    free(a);
    free(b);
    free(c);
    return 0;
}
