// task: vector_add; expect: RUNTIME_ERROR
// Every thread also writes 1 TiB past the end of c: an illegal address on the device, reported
// by the CUDA runtime at the next synchronization.
#include <cstdint>
#include <cuda_runtime.h>

__global__ void add(const float* a, const float* b, float* c, int64_t n) {
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        c[i] = a[i] + b[i];
        c[i + ((int64_t)1 << 38)] = 0.0f;
    }
}

extern "C" void vector_add(const float* a, const float* b, float* c, int64_t N) {
    add<<<(unsigned)((N + 255) / 256), 256>>>(a, b, c, N);
}
