// task: vector_add; expect: POLICY_REJECTED forbidden_call
// Lets cuBLAS do the work (c = a, then c += 1 * b): vendor libraries must not do the work.
#include <cstdint>
#include <cublas_v2.h>
#include <cuda_runtime.h>

extern "C" void vector_add(const float* a, const float* b, float* c, int64_t N) {
    static cublasHandle_t h = nullptr;
    if (!h) cublasCreate(&h);
    const float one = 1.0f;
    cudaMemcpy(c, a, N * sizeof(float), cudaMemcpyDeviceToDevice);
    cublasSaxpy(h, (int)N, &one, b, 1, c, 1);
}
