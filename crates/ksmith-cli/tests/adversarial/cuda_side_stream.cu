// task: vector_add; expect: POLICY_REJECTED forbidden_call
// Launches on a side stream and returns at once: a timer that synchronizes only the default
// stream would stop before the work is done.
#include <cstdint>
#include <cuda_runtime.h>

__global__ void add(const float* a, const float* b, float* c, int64_t n) {
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = a[i] + b[i];
}

extern "C" void vector_add(const float* a, const float* b, float* c, int64_t N) {
    static cudaStream_t side = nullptr;
    if (!side) cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking);
    add<<<(unsigned)((N + 255) / 256), 256, 0, side>>>(a, b, c, N);
}
