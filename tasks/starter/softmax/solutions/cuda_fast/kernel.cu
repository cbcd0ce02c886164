// Row softmax, bandwidth-oriented: x is read from DRAM once and y written once for rows
// up to 32768 wide.
//  - N <= 1024: one warp per row (8 rows per 256-thread block); the row lives in
//    registers (VPT values per lane) and both reductions are warp shuffles only.
//  - 1024 < N <= 32768: one block of G = 128..1024 threads per row (sized so that each
//    thread holds <= 16..32 values in registers); warp shuffles, then one shared-memory
//    exchange of the per-warp partials.
//  - Wider rows: one 1024-thread block per row, online softmax (running max and rescaled
//    running sum per thread, merged across the block), then a write sweep: two reads.
//  - Loads/stores are float4 when N % 4 == 0 and x, y are 16-byte aligned (then every row
//    start is aligned), scalar coalesced otherwise; values per thread are compile-time
//    (template VPT) so the row stays in registers.
//  - exp via __expf (ex2.approx: ~2 ulp + 2^-24 |x - max| relative, far inside rtol).
#include <cmath>
#include <cstdint>
#include <cuda_runtime.h>

// Reductions over a group of G threads (G a power of two).  G <= 32: a warp or a
// sub-warp (the groups of a warp reduce independently).  G > 32: the whole block is one
// group; `red` is 32 floats of shared memory.
template <int G>
__device__ __forceinline__ float group_max(float v, float* red) {
#pragma unroll
    for (int o = (G < 32 ? G : 32) / 2; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    if constexpr (G > 32) {
        const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
        __syncthreads();  // `red` may still be read by the previous reduction
        if (lane == 0) red[warp] = v;
        __syncthreads();
        v = lane < G / 32 ? red[lane] : -INFINITY;
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    }
    return v;
}

template <int G>
__device__ __forceinline__ float group_sum(float v, float* red) {
#pragma unroll
    for (int o = (G < 32 ? G : 32) / 2; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    if constexpr (G > 32) {
        const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
        __syncthreads();
        if (lane == 0) red[warp] = v;
        __syncthreads();
        v = lane < G / 32 ? red[lane] : 0.0f;
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    }
    return v;
}

// Column of register slot i for thread t of a G-thread group.  VEC: slots come in
// float4 quads, quad q of thread t covers columns 4 * (t + q * G) .. + 3.
template <int G, bool VEC>
__device__ __forceinline__ int64_t col_of(int t, int i) {
    if constexpr (VEC) return 4 * ((int64_t)t + (int64_t)(i / 4) * G) + (i % 4);
    else return (int64_t)t + (int64_t)i * G;
}

template <int G, int VPT, bool VEC>
__device__ __forceinline__ void load_row(const float* __restrict__ xr, int64_t N, int t, bool valid,
                                         float (&v)[VPT], float fill) {
    if constexpr (VEC) {
#pragma unroll
        for (int q = 0; q < VPT / 4; q++) {
            const int64_t c = col_of<G, true>(t, 4 * q);
            float4 f = make_float4(fill, fill, fill, fill);
            if (valid && c < N) f = __ldg(reinterpret_cast<const float4*>(xr + c));  // N % 4 == 0
            v[4 * q] = f.x; v[4 * q + 1] = f.y; v[4 * q + 2] = f.z; v[4 * q + 3] = f.w;
        }
    } else {
#pragma unroll
        for (int i = 0; i < VPT; i++) {
            const int64_t c = col_of<G, false>(t, i);
            v[i] = (valid && c < N) ? __ldg(xr + c) : fill;
        }
    }
}

template <int G, int VPT, bool VEC>
__device__ __forceinline__ void store_row(float* __restrict__ yr, int64_t N, int t, const float (&v)[VPT], float scale) {
    if constexpr (VEC) {
#pragma unroll
        for (int q = 0; q < VPT / 4; q++) {
            const int64_t c = col_of<G, true>(t, 4 * q);
            if (c < N)
                *reinterpret_cast<float4*>(yr + c) =
                    make_float4(v[4 * q] * scale, v[4 * q + 1] * scale, v[4 * q + 2] * scale, v[4 * q + 3] * scale);
        }
    } else {
#pragma unroll
        for (int i = 0; i < VPT; i++) {
            const int64_t c = col_of<G, false>(t, i);
            if (c < N) yr[c] = v[i] * scale;
        }
    }
}

// One row per G-thread group: G == 32: 8 rows (warps) per 256-thread block; G > 32: the
// block is the group (one row per block, as group_max/group_sum assume).
template <int G>
struct RowsCfg {
    static_assert(G == 32 || (G >= 64 && G <= 1024 && (G & (G - 1)) == 0), "G");
    static constexpr int BLOCK = G == 32 ? 256 : G;
    static constexpr int ROWS = BLOCK / G;
};

template <int G, int VPT, bool VEC>
__global__ void __launch_bounds__(RowsCfg<G>::BLOCK)
softmax_rows_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t M, int64_t N) {
    __shared__ float red[32];
    constexpr int ROWS = RowsCfg<G>::ROWS;
    const int t = threadIdx.x % G;
    const int64_t row = (int64_t)blockIdx.x * ROWS + threadIdx.x / G;
    const bool valid = row < M;  // invalid groups still take part in the shuffles
    const int64_t base = (valid ? row : 0) * N;

    float v[VPT];
    load_row<G, VPT, VEC>(x + base, N, t, valid, v, -INFINITY);
    float m = -INFINITY;
#pragma unroll
    for (int i = 0; i < VPT; i++) m = fmaxf(m, v[i]);
    m = group_max<G>(m, red);
    if (!valid) m = 0.0f;  // keep the arithmetic of idle groups finite
    float s = 0.0f;
#pragma unroll
    for (int i = 0; i < VPT; i++) {
        v[i] = __expf(v[i] - m);  // padding slots: exp(-inf) = 0
        s += v[i];
    }
    s = group_sum<G>(s, red);
    if (valid) store_row<G, VPT, VEC>(y + base, N, t, v, 1.0f / s);
}

// Rows wider than 32768: online statistics, then a write sweep.  1024 threads per row.
template <bool VEC>
__global__ void __launch_bounds__(1024)
softmax_online_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t N) {
    __shared__ float red[32];
    const float* xr = x + (int64_t)blockIdx.x * N;
    float* yr = y + (int64_t)blockIdx.x * N;
    const int t = threadIdx.x;
    float m = -INFINITY, s = 0.0f;
    if constexpr (VEC) {
        for (int64_t c = 4 * (int64_t)t; c < N; c += 4 * 1024) {
            const float4 f = __ldg(reinterpret_cast<const float4*>(xr + c));
            const float mn = fmaxf(m, fmaxf(fmaxf(f.x, f.y), fmaxf(f.z, f.w)));
            s = s * __expf(m - mn) + __expf(f.x - mn) + __expf(f.y - mn) + __expf(f.z - mn) + __expf(f.w - mn);
            m = mn;
        }
    } else {
        for (int64_t c = t; c < N; c += 1024) {
            const float f = __ldg(xr + c);
            const float mn = fmaxf(m, f);
            s = s * __expf(m - mn) + __expf(f - mn);
            m = mn;
        }
    }
    const float mx = group_max<1024>(m, red);
    s = group_sum<1024>(m == -INFINITY ? 0.0f : s * __expf(m - mx), red);
    const float inv = 1.0f / s;
    if constexpr (VEC) {
        for (int64_t c = 4 * (int64_t)t; c < N; c += 4 * 1024) {
            const float4 f = __ldg(reinterpret_cast<const float4*>(xr + c));
            *reinterpret_cast<float4*>(yr + c) = make_float4(__expf(f.x - mx) * inv, __expf(f.y - mx) * inv,
                                                             __expf(f.z - mx) * inv, __expf(f.w - mx) * inv);
        }
    } else {
        for (int64_t c = t; c < N; c += 1024) yr[c] = __expf(__ldg(xr + c) - mx) * inv;
    }
}

template <int G, int VPT>
static void launch_rows(bool vec, int64_t M, int64_t N, const float* x, float* y) {
    constexpr int ROWS = RowsCfg<G>::ROWS;
    const unsigned grid = (unsigned)((M + ROWS - 1) / ROWS);
    const int block = RowsCfg<G>::BLOCK;
    if (vec) softmax_rows_kernel<G, VPT, true><<<grid, block>>>(x, y, M, N);
    else softmax_rows_kernel<G, VPT, false><<<grid, block>>>(x, y, M, N);
}

template <int G>
static void launch_g(int64_t per_thread, bool vec, int64_t M, int64_t N, const float* x, float* y) {
    if (per_thread <= 4) launch_rows<G, 4>(vec, M, N, x, y);
    else if (per_thread <= 8) launch_rows<G, 8>(vec, M, N, x, y);
    else if (per_thread <= 16) launch_rows<G, 16>(vec, M, N, x, y);
    else launch_rows<G, 32>(vec, M, N, x, y);
}

extern "C" void softmax(const float* x, float* y, int64_t M, int64_t N) {
    if (M <= 0 || N <= 0) return;
    const bool vec = N % 4 == 0 && ((reinterpret_cast<uintptr_t>(x) | reinterpret_cast<uintptr_t>(y)) & 15) == 0;
    if (N <= 1024) {
        launch_g<32>((N + 31) / 32, vec, M, N, x, y);
    } else if (N <= 32768) {
        int64_t g = 128;
        while (g < 1024 && g * 16 < N) g *= 2;  // <= 16 values per thread, up to 32 at G = 1024
        const int64_t per = (N + g - 1) / g;
        switch (g) {
            case 128: launch_g<128>(per, vec, M, N, x, y); break;
            case 256: launch_g<256>(per, vec, M, N, x, y); break;
            case 512: launch_g<512>(per, vec, M, N, x, y); break;
            default: launch_g<1024>(per, vec, M, N, x, y); break;
        }
    } else {
        if (vec) softmax_online_kernel<true><<<(unsigned)M, 1024>>>(x, y, N);
        else softmax_online_kernel<false><<<(unsigned)M, 1024>>>(x, y, N);
    }
}
