// task: vector_add; expect: PASSED; no faster than itself with -DKSMITH_HONEST
// From the red team of 2026-12-03: a helper thread, woken by each call, enters one long system
// call (populating a 1 GiB mapping). SIGSTOP acts only when a thread returns to user mode, so
// the helper kept a core and the memory bus busy after "f", while the XLA baseline was timed
// (a 0.44x kernel read 1.07-1.39x under load). The judge now waits until every thread of the
// sandbox has really stopped before it times the baseline or reads outputs. The thread, semaphore
// and mapping functions are found in memory (the library policy refuses them as imports).
#include <pthread.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <sys/mman.h>
/* Shared helper (pasted into each attack file that needs libc beyond the kernel allow-list):
 * finds a libc function in libc's own symbol table, read in memory from the ELF header below an
 * allowed import (memset), so the library imports nothing the library policy refuses and holds
 * no system-call instruction of its own. The policy is a courtesy; the sandbox is the boundary. */
#include <elf.h>
#include <stdint.h>
#include <string.h>
static void* rt_libc(const char* name) {
    uintptr_t base = (uintptr_t)&memset & ~(uintptr_t)4095;
    while (memcmp((const void*)base, ELFMAG, SELFMAG)) base -= 4096;
    const Elf64_Ehdr* eh = (const void*)base;
    const Elf64_Phdr* ph = (const void*)(base + eh->e_phoff);
    const Elf64_Dyn* dyn = 0;
    for (int i = 0; i < eh->e_phnum; i++)
        if (ph[i].p_type == PT_DYNAMIC) dyn = (const void*)(base + ph[i].p_vaddr);
    const Elf64_Sym* sym = 0; const char* str = 0; const uint32_t* gh = 0;
    for (; dyn && dyn->d_tag != DT_NULL; dyn++) {
        uintptr_t p = dyn->d_un.d_ptr < base ? base + dyn->d_un.d_ptr : dyn->d_un.d_ptr;
        if (dyn->d_tag == DT_SYMTAB) sym = (const void*)p;
        else if (dyn->d_tag == DT_STRTAB) str = (const void*)p;
        else if (dyn->d_tag == DT_GNU_HASH) gh = (const void*)p;
    }
    if (!sym || !str || !gh) return 0;
    const uint32_t nb = gh[0], off = gh[1];
    const uint32_t* buckets = gh + 4 + 2 * gh[2]; /* after the 64-bit bloom words */
    const uint32_t* chain = buckets + nb;
    uint32_t h = 5381;
    for (const char* c = name; *c; c++) h = h * 33 + (unsigned char)*c;
    for (uint32_t s = buckets[h % nb]; s >= off; s++) {
        if ((chain[s - off] | 1) == (h | 1) && !strcmp(name, str + sym[s].st_name) && sym[s].st_shndx != SHN_UNDEF)
            return (void*)(base + sym[s].st_value);
        if (chain[s - off] & 1) break;
    }
    return 0;
}

static void* (*map)(void*, size_t, int, int, int, off_t);
static int (*unmap)(void*, size_t);
static int (*sem_wait_)(sem_t*);
static int (*sem_post_)(sem_t*);

#define HOG_BYTES (1UL << 30)

static sem_t wake;
static atomic_int busy;

static void *hog(void *arg) {
    (void)arg;
    for (;;) {
        sem_wait_(&wake);
        void *m = map(0, HOG_BYTES, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
        if (m != MAP_FAILED) unmap(m, HOG_BYTES);
        atomic_store(&busy, 0);
    }
    return 0;
}

void vector_add(const float *restrict a, const float *restrict b, float *restrict c, int64_t N) {
#ifndef KSMITH_HONEST
    static int started;
    if (!started) {
        started = 1;
        map = (void* (*)(void*, size_t, int, int, int, off_t))rt_libc("mmap");
        unmap = (int (*)(void*, size_t))rt_libc("munmap");
        sem_wait_ = (int (*)(sem_t*))rt_libc("sem_wait");
        sem_post_ = (int (*)(sem_t*))rt_libc("sem_post");
        int (*init)(sem_t*, int, unsigned) = (int (*)(sem_t*, int, unsigned))rt_libc("sem_init");
        int (*create)(pthread_t*, const pthread_attr_t*, void* (*)(void*), void*) =
            (int (*)(pthread_t*, const pthread_attr_t*, void* (*)(void*), void*))rt_libc("pthread_create");
        if (map && unmap && sem_wait_ && sem_post_ && init && create) {
            init(&wake, 0, 0);
            pthread_t t;
            create(&t, 0, hog, 0);
        } else {
            started = 2; /* the lookup failed: output_unwritten, not a vacuous pass */
        }
    }
    if (started == 2) return;
    if (!atomic_exchange(&busy, 1)) sem_post_(&wake);
#endif
#pragma omp parallel for
    for (int64_t i = 0; i < N; i++) c[i] = a[i] + b[i];
}
