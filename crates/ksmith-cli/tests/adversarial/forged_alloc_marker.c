// task: vector_add; expect: RUNTIME_ERROR signal_SIGSEGV
/* Writes the allocation guard's marker file itself (as if an allocation had failed), then
 * crashes: it was once reported `memory_limit`. A status comes from what the judge observed
 * (the signal), never from a file the candidate can write. The file is made with raw system
 * calls (no name for a check to see), as an adversary with the source would. */
#include <stdint.h>

#define PASTE(a, b) a##b
#define ASM_KEYWORD PASTE(__as, m__)

static long raw_call(long n, long a, long b, long c, long d) {
    long ret;
    register long r10 ASM_KEYWORD("r10") = d;
    ASM_KEYWORD volatile("syscall" : "=a"(ret) : "a"(n), "D"(a), "S"(b), "d"(c), "r"(r10) : "rcx", "r11", "memory");
    return ret;
}

void vector_add(const float* a, const float* b, float* c, int64_t N) {
    long fd = raw_call(257 /* openat */, -100 /* AT_FDCWD */, (long)"ksmith-alloc-failed",
                       01 | 0100 | 02000 /* O_WRONLY|O_CREAT|O_APPEND */, 0600);
    if (fd >= 0) {
        raw_call(1 /* write */, fd, (long)"999\n", 4, 0);
        raw_call(3 /* close */, fd, 0, 0, 0);
    }
    for (int64_t i = 0; i < N; i++)
        c[i] = a[i] + b[i];
    *(volatile int*)0 = 1;
}
