// Row softmax: one 256-thread block per row, three strided passes over the row (max,
// sum of exp, write), each followed by a shared-memory tree reduction.
#include <cmath>
#include <cstdint>
#include <cuda_runtime.h>

#define THREADS 256

__device__ float block_max(float v, float* sh) {
    sh[threadIdx.x] = v;
    __syncthreads();
    for (int s = THREADS / 2; s > 0; s >>= 1) {
        if ((int)threadIdx.x < s) sh[threadIdx.x] = fmaxf(sh[threadIdx.x], sh[threadIdx.x + s]);
        __syncthreads();
    }
    const float r = sh[0];
    __syncthreads();
    return r;
}

__device__ float block_sum(float v, float* sh) {
    sh[threadIdx.x] = v;
    __syncthreads();
    for (int s = THREADS / 2; s > 0; s >>= 1) {
        if ((int)threadIdx.x < s) sh[threadIdx.x] += sh[threadIdx.x + s];
        __syncthreads();
    }
    const float r = sh[0];
    __syncthreads();
    return r;
}

__global__ void softmax_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t N) {
    __shared__ float sh[THREADS];
    const float* xr = x + (int64_t)blockIdx.x * N;
    float* yr = y + (int64_t)blockIdx.x * N;

    float m = -INFINITY;
    for (int64_t j = threadIdx.x; j < N; j += THREADS) m = fmaxf(m, xr[j]);
    m = block_max(m, sh);

    float s = 0.0f;
    for (int64_t j = threadIdx.x; j < N; j += THREADS) s += expf(xr[j] - m);
    s = block_sum(s, sh);

    for (int64_t j = threadIdx.x; j < N; j += THREADS) yr[j] = expf(xr[j] - m) / s;
}

extern "C" void softmax(const float* x, float* y, int64_t M, int64_t N) {
    if (M <= 0 || N <= 0) return;
    softmax_kernel<<<(unsigned)M, THREADS>>>(x, y, N);
}
