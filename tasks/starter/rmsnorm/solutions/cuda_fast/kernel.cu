// RMSNorm, bandwidth-oriented: x is read from DRAM once and y written once for rows up
// to 32768 wide.
//  - N <= 1024: one warp per row (8 rows per 256-thread block), the row in registers
//    (VPT values per lane), the sum of squares reduced with warp shuffles only.
//  - 1024 < N <= 32768: one block of G = 128..1024 threads per row (<= 16..32 values per
//    thread in registers); warp shuffles, then one shared-memory exchange of the partials.
//  - Wider rows: one 1024-thread block per row, a sum-of-squares sweep and a write sweep.
//  - float4 loads/stores when N % 4 == 0 and x, w, y are 16-byte aligned; scalar coalesced
//    otherwise.  w is read through the read-only cache (it is shared by all rows).
#include <cmath>
#include <cstdint>
#include <cuda_runtime.h>

// Sum over a group of G threads (G a power of two).  G <= 32: a warp or sub-warp;
// G > 32: the whole block is the group; `red` is 32 floats of shared memory.
template <int G>
__device__ __forceinline__ float group_sum(float v, float* red) {
#pragma unroll
    for (int o = (G < 32 ? G : 32) / 2; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    if constexpr (G > 32) {
        const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
        __syncthreads();  // `red` may still be read by a previous reduction
        if (lane == 0) red[warp] = v;
        __syncthreads();
        v = lane < G / 32 ? red[lane] : 0.0f;
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    }
    return v;
}

// Register slot i of thread t covers column col_of(t, i); VEC: quads of 4 columns.
template <int G, bool VEC>
__device__ __forceinline__ int64_t col_of(int t, int i) {
    if constexpr (VEC) return 4 * ((int64_t)t + (int64_t)(i / 4) * G) + (i % 4);
    else return (int64_t)t + (int64_t)i * G;
}

template <int G>
struct RowsCfg {  // G == 32: 8 rows per 256-thread block; G > 32: one row per block
    static_assert(G == 32 || (G >= 64 && G <= 1024 && (G & (G - 1)) == 0), "G");
    static constexpr int BLOCK = G == 32 ? 256 : G;
    static constexpr int ROWS = BLOCK / G;
};

template <int G, int VPT, bool VEC>
__global__ void __launch_bounds__(RowsCfg<G>::BLOCK)
rmsnorm_rows_kernel(const float* __restrict__ x, const float* __restrict__ w, float* __restrict__ y,
                    int64_t M, int64_t N) {
    __shared__ float red[32];
    const int t = threadIdx.x % G;
    const int64_t row = (int64_t)blockIdx.x * RowsCfg<G>::ROWS + threadIdx.x / G;
    const bool valid = row < M;  // idle groups still take part in the shuffles
    const float* xr = x + (valid ? row : 0) * N;
    float* yr = y + row * N;

    float v[VPT];
    float s = 0.0f;
    if constexpr (VEC) {
#pragma unroll
        for (int q = 0; q < VPT / 4; q++) {
            const int64_t c = col_of<G, true>(t, 4 * q);
            float4 f = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
            if (valid && c < N) f = __ldg(reinterpret_cast<const float4*>(xr + c));
            v[4 * q] = f.x; v[4 * q + 1] = f.y; v[4 * q + 2] = f.z; v[4 * q + 3] = f.w;
        }
    } else {
#pragma unroll
        for (int i = 0; i < VPT; i++) {
            const int64_t c = col_of<G, false>(t, i);
            v[i] = (valid && c < N) ? __ldg(xr + c) : 0.0f;
        }
    }
#pragma unroll
    for (int i = 0; i < VPT; i++) s += v[i] * v[i];
    s = group_sum<G>(s, red);
    const float r = rsqrtf(s / (float)N + 1e-6f);
    if (!valid) return;  // after the last collective operation
    if constexpr (VEC) {
#pragma unroll
        for (int q = 0; q < VPT / 4; q++) {
            const int64_t c = col_of<G, true>(t, 4 * q);
            if (c < N) {
                const float4 g = __ldg(reinterpret_cast<const float4*>(w + c));
                *reinterpret_cast<float4*>(yr + c) = make_float4(v[4 * q] * r * g.x, v[4 * q + 1] * r * g.y,
                                                                 v[4 * q + 2] * r * g.z, v[4 * q + 3] * r * g.w);
            }
        }
    } else {
#pragma unroll
        for (int i = 0; i < VPT; i++) {
            const int64_t c = col_of<G, false>(t, i);
            if (c < N) yr[c] = v[i] * r * __ldg(w + c);
        }
    }
}

// Rows wider than 32768: two sweeps, 1024 threads per row.
template <bool VEC>
__global__ void __launch_bounds__(1024)
rmsnorm_looped_kernel(const float* __restrict__ x, const float* __restrict__ w, float* __restrict__ y, int64_t N) {
    __shared__ float red[32];
    const float* xr = x + (int64_t)blockIdx.x * N;
    float* yr = y + (int64_t)blockIdx.x * N;
    const int t = threadIdx.x;
    float s = 0.0f;
    if constexpr (VEC) {
        for (int64_t c = 4 * (int64_t)t; c < N; c += 4 * 1024) {
            const float4 f = __ldg(reinterpret_cast<const float4*>(xr + c));
            s += f.x * f.x + f.y * f.y + f.z * f.z + f.w * f.w;
        }
    } else {
        for (int64_t c = t; c < N; c += 1024) {
            const float f = __ldg(xr + c);
            s += f * f;
        }
    }
    const float r = rsqrtf(group_sum<1024>(s, red) / (float)N + 1e-6f);
    if constexpr (VEC) {
        for (int64_t c = 4 * (int64_t)t; c < N; c += 4 * 1024) {
            const float4 f = __ldg(reinterpret_cast<const float4*>(xr + c));
            const float4 g = __ldg(reinterpret_cast<const float4*>(w + c));
            *reinterpret_cast<float4*>(yr + c) = make_float4(f.x * r * g.x, f.y * r * g.y, f.z * r * g.z, f.w * r * g.w);
        }
    } else {
        for (int64_t c = t; c < N; c += 1024) yr[c] = __ldg(xr + c) * r * __ldg(w + c);
    }
}

template <int G, int VPT>
static void launch_rows(bool vec, int64_t M, int64_t N, const float* x, const float* w, float* y) {
    const unsigned grid = (unsigned)((M + RowsCfg<G>::ROWS - 1) / RowsCfg<G>::ROWS);
    if (vec) rmsnorm_rows_kernel<G, VPT, true><<<grid, RowsCfg<G>::BLOCK>>>(x, w, y, M, N);
    else rmsnorm_rows_kernel<G, VPT, false><<<grid, RowsCfg<G>::BLOCK>>>(x, w, y, M, N);
}

template <int G>
static void launch_g(int64_t per_thread, bool vec, int64_t M, int64_t N, const float* x, const float* w, float* y) {
    if (per_thread <= 4) launch_rows<G, 4>(vec, M, N, x, w, y);
    else if (per_thread <= 8) launch_rows<G, 8>(vec, M, N, x, w, y);
    else if (per_thread <= 16) launch_rows<G, 16>(vec, M, N, x, w, y);
    else launch_rows<G, 32>(vec, M, N, x, w, y);
}

extern "C" void rmsnorm(const float* x, const float* w, float* y, int64_t M, int64_t N) {
    if (M <= 0 || N <= 0) return;
    const bool vec = N % 4 == 0 && ((reinterpret_cast<uintptr_t>(x) | reinterpret_cast<uintptr_t>(w) |
                                     reinterpret_cast<uintptr_t>(y)) & 15) == 0;
    if (N <= 1024) {
        launch_g<32>((N + 31) / 32, vec, M, N, x, w, y);
    } else if (N <= 32768) {
        int64_t g = 128;
        while (g < 1024 && g * 16 < N) g *= 2;  // <= 16 values per thread, up to 32 at G = 1024
        const int64_t per = (N + g - 1) / g;
        switch (g) {
            case 128: launch_g<128>(per, vec, M, N, x, w, y); break;
            case 256: launch_g<256>(per, vec, M, N, x, w, y); break;
            case 512: launch_g<512>(per, vec, M, N, x, w, y); break;
            default: launch_g<1024>(per, vec, M, N, x, w, y); break;
        }
    } else {
        if (vec) rmsnorm_looped_kernel<true><<<(unsigned)M, 1024>>>(x, w, y, N);
        else rmsnorm_looped_kernel<false><<<(unsigned)M, 1024>>>(x, w, y, N);
    }
}
