// task: vector_add; expect: INCORRECT_NUMERICAL output_unwritten
// Computes once per output buffer and skips the launch when it sees the same buffer again,
// betting that the previous result is still there (outputs are poisoned before every call).
#include <cstdint>
#include <cuda_runtime.h>

__global__ void add(const float* a, const float* b, float* c, int64_t n) {
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = a[i] + b[i];
}

extern "C" void vector_add(const float* a, const float* b, float* c, int64_t N) {
    static float* seen[64];
    static int count = 0;
    for (int k = 0; k < count; k++)
        if (seen[k] == c) return;
    if (count < 64) seen[count++] = c;
    add<<<(unsigned)((N + 255) / 256), 256>>>(a, b, c, N);
}
