// task: vector_add; expect: RUNTIME_ERROR protocol_violation; timed
// Tries to stop the judge's clock early: at the start of every call it writes the runner's
// "done" and "finished" bytes to the timing channel (fd 4) itself, then does the work. No name
// the policy knows is used (a raw system call), so only the judge's protocol stands in the way.
#include <stdint.h>

// Token pasting hides the keyword from the source scan: the name policy is a courtesy, the
// sandbox is the boundary, and this case tests the boundary.
#define PASTE(a, b) a##b
#define ASM_KEYWORD PASTE(__as, m__)

static long raw_call(long n, long a, long b, long c) {
    long ret;
    ASM_KEYWORD volatile("syscall" : "=a"(ret) : "a"(n), "D"(a), "S"(b), "d"(c) : "rcx", "r11", "memory");
    return ret;
}

void vector_add(const float *a, const float *b, float *c, int64_t N) {
    raw_call(1 /* write */, 4, (long)"df", 2);
    for (int64_t i = 0; i < N; i++) c[i] = a[i] + b[i];
}
