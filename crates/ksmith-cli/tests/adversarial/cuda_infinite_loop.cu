// task: vector_add; expect: TIMEOUT wall_timeout
// Thread 0 of block 0 never finishes; the volatile read keeps the compiler from removing the loop.
#include <cstdint>
#include <cuda_runtime.h>

__global__ void add(const float* a, const float* b, float* c, int64_t n, volatile int* stop) {
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i == 0)
        while (*stop == 0) {
        }
    if (i < n) c[i] = a[i] + b[i];
}

extern "C" void vector_add(const float* a, const float* b, float* c, int64_t N) {
    static int* stop = nullptr;
    if (!stop) {
        cudaMalloc(&stop, sizeof(int));
        cudaMemset(stop, 0, sizeof(int));
    }
    add<<<(unsigned)((N + 255) / 256), 256>>>(a, b, c, N, stop);
}
