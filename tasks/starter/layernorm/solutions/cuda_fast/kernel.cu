// LayerNorm, bandwidth-oriented: x is read from DRAM once and y written once for rows up
// to 32768 wide.
//  - N <= 1024: one warp per row (8 rows per 256-thread block), the row in registers
//    (VPT values per lane); mean and centred variance (exact two-pass statistics on the
//    register copy) are reduced with warp shuffles only.
//  - 1024 < N <= 32768: one block of G = 128..1024 threads per row (<= 16..32 values per
//    thread in registers); warp shuffles, then one shared-memory exchange of the partials.
//  - Wider rows: one 1024-thread block per row; one sweep accumulating sum(x - s) and
//    sum((x - s)^2) with the shift s = x[row, 0] (no cancellation when |mean| >> std),
//    then a write sweep.
//  - float4 loads/stores when N % 4 == 0 and all pointers are 16-byte aligned; scalar
//    coalesced otherwise.  gamma/beta go through the read-only cache.
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
layernorm_rows_kernel(const float* __restrict__ x, const float* __restrict__ gamma, const float* __restrict__ beta,
                      float* __restrict__ y, int64_t M, int64_t N) {
    __shared__ float red[32];
    const int t = threadIdx.x % G;
    const int64_t row = (int64_t)blockIdx.x * RowsCfg<G>::ROWS + threadIdx.x / G;
    const bool valid = row < M;  // idle groups still take part in the shuffles
    const float* xr = x + (valid ? row : 0) * N;
    float* yr = y + row * N;

    float v[VPT];
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
    float s = 0.0f;
#pragma unroll
    for (int i = 0; i < VPT; i++) s += v[i];  // padding slots hold 0
    const float mean = group_sum<G>(s, red) / (float)N;
    float q2 = 0.0f;
#pragma unroll
    for (int i = 0; i < VPT; i++) {
        v[i] = col_of<G, VEC>(t, i) < N ? v[i] - mean : 0.0f;
        q2 += v[i] * v[i];
    }
    const float rstd = rsqrtf(group_sum<G>(q2, red) / (float)N + 1e-5f);
    if (!valid) return;  // after the last collective operation
    if constexpr (VEC) {
#pragma unroll
        for (int q = 0; q < VPT / 4; q++) {
            const int64_t c = col_of<G, true>(t, 4 * q);
            if (c < N) {
                const float4 g = __ldg(reinterpret_cast<const float4*>(gamma + c));
                const float4 b = __ldg(reinterpret_cast<const float4*>(beta + c));
                *reinterpret_cast<float4*>(yr + c) =
                    make_float4(v[4 * q] * rstd * g.x + b.x, v[4 * q + 1] * rstd * g.y + b.y,
                                v[4 * q + 2] * rstd * g.z + b.z, v[4 * q + 3] * rstd * g.w + b.w);
            }
        }
    } else {
#pragma unroll
        for (int i = 0; i < VPT; i++) {
            const int64_t c = col_of<G, false>(t, i);
            if (c < N) yr[c] = v[i] * rstd * __ldg(gamma + c) + __ldg(beta + c);
        }
    }
}

// Rows wider than 32768: shifted one-sweep statistics, then a write sweep.
template <bool VEC>
__global__ void __launch_bounds__(1024)
layernorm_looped_kernel(const float* __restrict__ x, const float* __restrict__ gamma, const float* __restrict__ beta,
                        float* __restrict__ y, int64_t N) {
    __shared__ float red[32];
    const float* xr = x + (int64_t)blockIdx.x * N;
    float* yr = y + (int64_t)blockIdx.x * N;
    const int t = threadIdx.x;
    const float shift = __ldg(xr);
    float s1 = 0.0f, s2 = 0.0f;
    if constexpr (VEC) {
        for (int64_t c = 4 * (int64_t)t; c < N; c += 4 * 1024) {
            const float4 f = __ldg(reinterpret_cast<const float4*>(xr + c));
            const float a = f.x - shift, b = f.y - shift, d = f.z - shift, e = f.w - shift;
            s1 += (a + b) + (d + e);
            s2 += (a * a + b * b) + (d * d + e * e);
        }
    } else {
        for (int64_t c = t; c < N; c += 1024) {
            const float a = __ldg(xr + c) - shift;
            s1 += a;
            s2 += a * a;
        }
    }
    const float m1 = group_sum<1024>(s1, red) / (float)N;
    const float var = fmaxf(group_sum<1024>(s2, red) / (float)N - m1 * m1, 0.0f);
    const float mean = shift + m1;
    const float rstd = rsqrtf(var + 1e-5f);
    if constexpr (VEC) {
        for (int64_t c = 4 * (int64_t)t; c < N; c += 4 * 1024) {
            const float4 f = __ldg(reinterpret_cast<const float4*>(xr + c));
            const float4 g = __ldg(reinterpret_cast<const float4*>(gamma + c));
            const float4 b = __ldg(reinterpret_cast<const float4*>(beta + c));
            *reinterpret_cast<float4*>(yr + c) =
                make_float4((f.x - mean) * rstd * g.x + b.x, (f.y - mean) * rstd * g.y + b.y,
                            (f.z - mean) * rstd * g.z + b.z, (f.w - mean) * rstd * g.w + b.w);
        }
    } else {
        for (int64_t c = t; c < N; c += 1024) yr[c] = (__ldg(xr + c) - mean) * rstd * __ldg(gamma + c) + __ldg(beta + c);
    }
}

template <int G, int VPT>
static void launch_rows(bool vec, int64_t M, int64_t N, const float* x, const float* g, const float* b, float* y) {
    const unsigned grid = (unsigned)((M + RowsCfg<G>::ROWS - 1) / RowsCfg<G>::ROWS);
    if (vec) layernorm_rows_kernel<G, VPT, true><<<grid, RowsCfg<G>::BLOCK>>>(x, g, b, y, M, N);
    else layernorm_rows_kernel<G, VPT, false><<<grid, RowsCfg<G>::BLOCK>>>(x, g, b, y, M, N);
}

template <int G>
static void launch_g(int64_t per_thread, bool vec, int64_t M, int64_t N, const float* x, const float* g,
                     const float* b, float* y) {
    if (per_thread <= 4) launch_rows<G, 4>(vec, M, N, x, g, b, y);
    else if (per_thread <= 8) launch_rows<G, 8>(vec, M, N, x, g, b, y);
    else if (per_thread <= 16) launch_rows<G, 16>(vec, M, N, x, g, b, y);
    else launch_rows<G, 32>(vec, M, N, x, g, b, y);
}

extern "C" void layernorm(const float* x, const float* gamma, const float* beta, float* y, int64_t M, int64_t N) {
    if (M <= 0 || N <= 0) return;
    const bool vec = N % 4 == 0 && ((reinterpret_cast<uintptr_t>(x) | reinterpret_cast<uintptr_t>(gamma) |
                                     reinterpret_cast<uintptr_t>(beta) | reinterpret_cast<uintptr_t>(y)) & 15) == 0;
    if (N <= 1024) {
        launch_g<32>((N + 31) / 32, vec, M, N, x, gamma, beta, y);
    } else if (N <= 32768) {
        int64_t g = 128;
        while (g < 1024 && g * 16 < N) g *= 2;  // <= 16 values per thread, up to 32 at G = 1024
        const int64_t per = (N + g - 1) / g;
        switch (g) {
            case 128: launch_g<128>(per, vec, M, N, x, gamma, beta, y); break;
            case 256: launch_g<256>(per, vec, M, N, x, gamma, beta, y); break;
            case 512: launch_g<512>(per, vec, M, N, x, gamma, beta, y); break;
            default: launch_g<1024>(per, vec, M, N, x, gamma, beta, y); break;
        }
    } else {
        if (vec) layernorm_looped_kernel<true><<<(unsigned)M, 1024>>>(x, gamma, beta, y, N);
        else layernorm_looped_kernel<false><<<(unsigned)M, 1024>>>(x, gamma, beta, y, N);
    }
}
