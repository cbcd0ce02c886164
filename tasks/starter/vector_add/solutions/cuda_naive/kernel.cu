// c = a + b: one thread per element, 256-thread blocks, bounds check at the tail.
#include <cstdint>
#include <cuda_runtime.h>

__global__ void vector_add_kernel(const float* __restrict__ a, const float* __restrict__ b,
                                  float* __restrict__ c, int64_t n) {
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = a[i] + b[i];
}

extern "C" void vector_add(const float* a, const float* b, float* c, int64_t N) {
    if (N <= 0) return;
    const int threads = 256;
    const int64_t blocks = (N + threads - 1) / threads;
    vector_add_kernel<<<(unsigned)blocks, threads>>>(a, b, c, N);
}
