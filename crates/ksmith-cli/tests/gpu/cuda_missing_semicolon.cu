// c = a + b with a missing semicolon after the store: nvcc refuses it at the closing brace.
#include <cstdint>
#include <cuda_runtime.h>

__global__ void add_kernel(const float* a, const float* b, float* c, int64_t n) {
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = a[i] + b[i]
}

extern "C" void vector_add(const float* a, const float* b, float* c, int64_t n) {
    add_kernel<<<(unsigned)((n + 255) / 256), 256>>>(a, b, c, n);
}
