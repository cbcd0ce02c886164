// c = a @ b: one thread per output element (16x16 thread blocks), a plain dot product
// over K from global memory (no shared-memory tiling, no register blocking).
#include <cstdint>
#include <cuda_runtime.h>

__global__ void matmul_kernel(const float* __restrict__ a, const float* __restrict__ b, float* __restrict__ c,
                              int64_t M, int64_t K, int64_t N) {
    const int64_t col = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    const int64_t row = (int64_t)blockIdx.y * blockDim.y + threadIdx.y;
    if (row >= M || col >= N) return;
    const float* ar = a + row * K;
    float acc = 0.0f;
    for (int64_t k = 0; k < K; k++) acc += ar[k] * b[k * N + col];
    c[row * N + col] = acc;
}

extern "C" void matmul(const float* a, const float* b, float* c, int64_t M, int64_t K, int64_t N) {
    if (M <= 0 || N <= 0) return;
    const dim3 block(16, 16);
    const dim3 grid((unsigned)((N + 15) / 16), (unsigned)((M + 15) / 16));
    matmul_kernel<<<grid, block>>>(a, b, c, M, K, N);
}
