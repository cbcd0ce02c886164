/* Loaded by the trusted server (ctypes): evicts one buffer from every cache level, line by
 * line, before a timed baseline call. Cold-cache timing then costs what the working set
 * needs, not a write of a buffer the size of the reported last-level cache (300 MiB on VMs
 * that own a small share of it). Returns 1 when the buffer was evicted, 0 where this
 * architecture has no user-level cache-line flush. */
#include <stddef.h>
#include <stdint.h>
#if defined(__x86_64__)
#include <immintrin.h>
#endif

int ksmith_evict(const void *p, size_t n) {
    if (!p || !n) return 1;
    uintptr_t a = (uintptr_t)p & ~(uintptr_t)63, end = (uintptr_t)p + n;
#if defined(__x86_64__)
    for (; a < end; a += 64) _mm_clflush((const void *)a);
    _mm_mfence();
    return 1;
#elif defined(__aarch64__)
    for (; a < end; a += 64) __asm__ volatile("dc civac, %0" ::"r"(a) : "memory");
    __asm__ volatile("dsb ish" ::: "memory");
    return 1;
#else
    (void)a;
    (void)end;
    return 0;
#endif
}
