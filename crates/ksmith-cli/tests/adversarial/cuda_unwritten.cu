// task: vector_add; expect: INCORRECT_NUMERICAL output_unwritten
// Correct except that the last block is never launched: the tail of c keeps whatever was there.
#include <cstdint>
#include <cuda_runtime.h>

__global__ void add(const float* a, const float* b, float* c, int64_t n) {
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = a[i] + b[i];
}

extern "C" void vector_add(const float* a, const float* b, float* c, int64_t N) {
    unsigned blocks = (unsigned)(N / 256);  // floor: the partial last block is dropped
    if (blocks) add<<<blocks, 256>>>(a, b, c, N);
}
