// task: vector_add; expect: INCORRECT_NUMERICAL numerical_mismatch
// Each attempt below is something the sandbox must refuse, tried with raw system calls so that
// no name check is involved: creating a file outside its directory, opening a network or Unix socket,
// a new user namespace, reading the host's /proc, leaving the process group, tracing its
// parent. The output is correct only if one of them worked, so a hole shows up as PASSED.
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

#define AT_FDCWD_ (-100)

static int escaped(void) {
    int n = 0;
    long fd = raw_call(257 /* openat */, AT_FDCWD_, (long)"/tmp/ksmith-adversarial-escape", 0101 /* O_WRONLY|O_CREAT */);
    if (fd >= 0) n++;
    fd = raw_call(257, AT_FDCWD_, (long)"/proc/1/cmdline", 0);
    if (fd >= 0) n++;
    if (raw_call(41 /* socket */, 2 /* AF_INET */, 1 /* SOCK_STREAM */, 0) >= 0) n++;
    // A Unix socket could reach host services on socket files (no namespace covers those).
    if (raw_call(41 /* socket */, 1 /* AF_UNIX */, 1 /* SOCK_STREAM */, 0) >= 0) n++;
    if (raw_call(272 /* unshare */, 0x10000000 /* CLONE_NEWUSER */, 0, 0) == 0) n++;
    if (raw_call(112 /* setsid */, 0, 0, 0) >= 0) n++;
    if (raw_call(101 /* ptrace */, 16 /* PTRACE_ATTACH */, raw_call(110 /* getppid */, 0, 0, 0), 0) == 0) n++;
    return n;
}

void vector_add(const float *a, const float *b, float *c, int64_t N) {
    float wrong = escaped() ? 0.0f : 1.0f;
    for (int64_t i = 0; i < N; i++) c[i] = a[i] + b[i] + wrong;
}
