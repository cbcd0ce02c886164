// c = a @ b in float32 on the CUDA cores (no TF32: it would miss the tolerance).
//  - 128x128 output tile per 256-thread block, K swept 8 at a time through shared memory;
//    a is stored transposed (As[k][m]) so both operands are read as float4 rows.
//  - Register blocking: each thread accumulates an 8x8 sub-tile (two 4-row by two 4-column
//    quads, 64 columns apart, so the float4 shared-memory reads are conflict-free), 64 FMAs
//    per 4 shared-memory loads.
//  - Double-buffered shared memory with a register prefetch: the next K slice is fetched
//    from global memory while the current one is multiplied; one __syncthreads per slice.
//  - float4 global loads/stores when K % 4 == 0, N % 4 == 0 and a, b, c are 16-byte
//    aligned; otherwise scalar loads with per-element bounds checks (zero fill) and scalar
//    stores.  Edges in M, N and K are handled by zero fill and masked stores.
#include <cstdint>
#include <cuda_runtime.h>

#define BM 128
#define BN 128
#define BK 8
#define NT 256

template <bool VEC>
__global__ void __launch_bounds__(NT, 2)
sgemm_kernel(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
             int64_t M, int64_t K, int64_t N) {
    __shared__ __align__(16) float As[2][BK][BM];
    __shared__ __align__(16) float Bs[2][BK][BN];

    const int tid = threadIdx.x;
    const int tx = tid % 16, ty = tid / 16;  // compute layout: 16 x 16 threads
    const int64_t m0 = (int64_t)blockIdx.y * BM, n0 = (int64_t)blockIdx.x * BN;

    // global -> shared assignment: a tile 128 x 8 (4 consecutive k per thread),
    // b tile 8 x 128 (4 consecutive n per thread)
    const int a_row = tid / 2, a_k = (tid % 2) * 4;
    const int b_k = tid / 32, b_col = (tid % 32) * 4;
    const int64_t ga_row = m0 + a_row, gb_col = n0 + b_col;
    const float* a_ptr = A + (ga_row < M ? ga_row : 0) * K;

    float ra[4], rb[4];
    auto fetch = [&](int64_t k0) {
        const int64_t ka = k0 + a_k, kb = k0 + b_k;
        if constexpr (VEC) {  // K % 4 == 0 and N % 4 == 0: a quad is all in or all out
            float4 fa = make_float4(0.0f, 0.0f, 0.0f, 0.0f), fb = fa;
            if (ga_row < M && ka < K) fa = __ldg(reinterpret_cast<const float4*>(a_ptr + ka));
            if (kb < K && gb_col < N) fb = __ldg(reinterpret_cast<const float4*>(B + kb * N + gb_col));
            ra[0] = fa.x; ra[1] = fa.y; ra[2] = fa.z; ra[3] = fa.w;
            rb[0] = fb.x; rb[1] = fb.y; rb[2] = fb.z; rb[3] = fb.w;
        } else {
#pragma unroll
            for (int i = 0; i < 4; i++) {
                ra[i] = (ga_row < M && ka + i < K) ? __ldg(a_ptr + ka + i) : 0.0f;
                rb[i] = (kb < K && gb_col + i < N) ? __ldg(B + kb * N + gb_col + i) : 0.0f;
            }
        }
    };
    auto stash = [&](int buf) {
#pragma unroll
        for (int i = 0; i < 4; i++) As[buf][a_k + i][a_row] = ra[i];
        *reinterpret_cast<float4*>(&Bs[buf][b_k][b_col]) = make_float4(rb[0], rb[1], rb[2], rb[3]);
    };

    float acc[8][8];
#pragma unroll
    for (int i = 0; i < 8; i++)
#pragma unroll
        for (int j = 0; j < 8; j++) acc[i][j] = 0.0f;

    const int64_t nk = (K + BK - 1) / BK;
    fetch(0);
    stash(0);
    __syncthreads();
    for (int64_t kt = 0; kt < nk; kt++) {
        const int cur = (int)(kt & 1);
        if (kt + 1 < nk) fetch((kt + 1) * BK);  // in flight during the FMAs below
#pragma unroll
        for (int k = 0; k < BK; k++) {
            const float4 a0 = *reinterpret_cast<const float4*>(&As[cur][k][ty * 4]);
            const float4 a1 = *reinterpret_cast<const float4*>(&As[cur][k][64 + ty * 4]);
            const float4 b0 = *reinterpret_cast<const float4*>(&Bs[cur][k][tx * 4]);
            const float4 b1 = *reinterpret_cast<const float4*>(&Bs[cur][k][64 + tx * 4]);
            const float av[8] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w};
            const float bv[8] = {b0.x, b0.y, b0.z, b0.w, b1.x, b1.y, b1.z, b1.w};
#pragma unroll
            for (int i = 0; i < 8; i++)
#pragma unroll
                for (int j = 0; j < 8; j++) acc[i][j] = fmaf(av[i], bv[j], acc[i][j]);
        }
        // the other buffer was last read in iteration kt - 1, which ended with a barrier
        if (kt + 1 < nk) stash(cur ^ 1);
        __syncthreads();
    }

#pragma unroll
    for (int i = 0; i < 8; i++) {
        const int64_t row = m0 + (i < 4 ? ty * 4 + i : 64 + ty * 4 + (i - 4));
        if (row >= M) continue;
#pragma unroll
        for (int h = 0; h < 2; h++) {
            const int64_t col = n0 + h * 64 + tx * 4;
            float* cp = C + row * N + col;
            if constexpr (VEC) {
                if (col < N)
                    *reinterpret_cast<float4*>(cp) =
                        make_float4(acc[i][4 * h], acc[i][4 * h + 1], acc[i][4 * h + 2], acc[i][4 * h + 3]);
            } else {
#pragma unroll
                for (int j = 0; j < 4; j++)
                    if (col + j < N) cp[j] = acc[i][4 * h + j];
            }
        }
    }
}

extern "C" void matmul(const float* a, const float* b, float* c, int64_t M, int64_t K, int64_t N) {
    if (M <= 0 || N <= 0) return;
    const bool vec = K % 4 == 0 && N % 4 == 0 &&
                     ((reinterpret_cast<uintptr_t>(a) | reinterpret_cast<uintptr_t>(b) |
                       reinterpret_cast<uintptr_t>(c)) & 15) == 0;
    const dim3 grid((unsigned)((N + BN - 1) / BN), (unsigned)((M + BM - 1) / BM));
    if (vec) sgemm_kernel<true><<<grid, NT>>>(a, b, c, M, K, N);
    else sgemm_kernel<false><<<grid, NT>>>(a, b, c, M, K, N);
}
