/* CPU compute seams (runtime-impl.h) that are not ours: double-precision GEMM stays with
 * OpenBLAS (float64 graphs are rare; tests use it), single-threaded: the thread pool
 * (threadpool.c) sets OpenBLAS to one thread before the first use. tfs__sgemm is gemm.c's,
 * tfs__parallel_for threadpool.c's.
 */
#include <cblas.h>

#include "runtime/runtime-impl.h"

void tfs__dgemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha, const double *a,
                int64_t lda, const double *b, int64_t ldb, double beta, double *c, int64_t ldc)
{
    if (m <= 0 || n <= 0)
        return;
    if (k <= 0) {
        for (int64_t i = 0; i < m; i++)
            for (int64_t j = 0; j < n; j++)
                c[i * ldc + j] = beta == 0.0 ? 0.0 : beta * c[i * ldc + j];
        return;
    }
    tfs__cpu_init();
    cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
                (int)m, (int)n, (int)k, alpha, a, (int)lda, b, (int)ldb, beta, c, (int)ldc);
}
