/* LD_PRELOAD'ed into the untrusted runner: records failed allocations (RLIMIT_AS reached) in a
 * marker file in the sandbox directory, so a crash after malloc returned NULL is reported as
 * memory_limit rather than a bare segfault. Allocation behaviour is otherwise unchanged. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);

static void note(size_t n) {
    int saved = errno;
    int fd = open("ksmith-alloc-failed", O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (fd >= 0) {
        char buf[64];
        int len = snprintf(buf, sizeof buf, "%zu\n", n);
        if (len > 0) (void)!write(fd, buf, (size_t)len);
        close(fd);
    }
    errno = saved;
}

void *malloc(size_t n) {
    void *p = __libc_malloc(n);
    if (!p && n) note(n);
    return p;
}

void *calloc(size_t a, size_t b) {
    void *p = __libc_calloc(a, b);
    if (!p && a && b) note(a * b);
    return p;
}

void *realloc(void *q, size_t n) {
    void *p = __libc_realloc(q, n);
    if (!p && n) note(n);
    return p;
}

void *memalign(size_t al, size_t n) {
    void *p = __libc_memalign(al, n);
    if (!p && n) note(n);
    return p;
}

void *aligned_alloc(size_t al, size_t n) { return memalign(al, n); }

int posix_memalign(void **out, size_t al, size_t n) {
    void *p = __libc_memalign(al, n);
    if (!p) {
        if (n) note(n);
        return ENOMEM;
    }
    *out = p;
    return 0;
}

/* Wakes the CPUs the candidate's OpenMP team will run on, just before a timed call (outside the
 * judge's clock): on a VM an idle virtual CPU may be descheduled by the host, and the first
 * parallel region after an idle gap then waits milliseconds for it. */
#include <time.h>
void ksmith_warm(long ns) {
#pragma omp parallel
    {
        struct timespec a, b;
        clock_gettime(CLOCK_MONOTONIC, &a);
        do {
            clock_gettime(CLOCK_MONOTONIC, &b);
        } while ((b.tv_sec - a.tv_sec) * 1000000000L + (b.tv_nsec - a.tv_nsec) < ns);
    }
}
