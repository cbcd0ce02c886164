// task: vector_add; expect: POLICY_REJECTED forbidden_call
// A system-call instruction of the kernel's own (inline assembly, its keyword hidden from the
// source scan by token pasting) that creates a host file where it finds /proc readable. The
// library's executable sections are decoded instruction by instruction: `syscall` is refused
// by name, whatever the source looks like, and so are `sysenter` and `int 0x80`.
#include <stdint.h>

#define PASTE(a, b) a##b
#define ASM_KEYWORD PASTE(__as, m__)

static long raw_call(long n, long a, long b, long c) {
    long ret;
    ASM_KEYWORD volatile("syscall" : "=a"(ret) : "a"(n), "D"(a), "S"(b), "d"(c) : "rcx", "r11", "memory");
    return ret;
}

void vector_add(const float *a, const float *b, float *c, int64_t N) {
    long status = raw_call(257 /* openat */, -100 /* AT_FDCWD */, (long)"/proc/self/status", 0);
    if (status >= 0) {
        raw_call(3 /* close */, status, 0, 0);
        long fd = raw_call(257, -100, (long)"/tmp/ksmith-adversarial-syscall", 0101 /* O_WRONLY|O_CREAT */);
        if (fd >= 0) raw_call(3, fd, 0, 0);
    }
    for (int64_t i = 0; i < N; i++) c[i] = a[i] + b[i];
}
