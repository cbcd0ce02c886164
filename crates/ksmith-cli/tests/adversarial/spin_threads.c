// task: softmax; expect: PASSED; no faster than itself with -DKSMITH_HONEST
// The fast softmax, plus (unless KSMITH_HONEST) four threads started on the first call that spin
// forever: while the XLA baseline is timed they would steal its cores and inflate the speedup.
// The judge stops every process of the sandbox outside the candidate's own timed calls.
// pthread_create is found in memory (the library policy refuses it as an import).
#include <math.h>
#include <pthread.h>
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

static volatile unsigned long sink;

static void *spin(void *arg) {
    (void)arg;
    for (;;) sink++;
    return 0;
}

void softmax(const float *x, float *y, int64_t M, int64_t N) {
#ifndef KSMITH_HONEST
    static int started;
    if (started == 2) return;
    if (!started) {
        started = 2;
        for (int i = 0; i < 4; i++) {
            pthread_t t;
            int (*create)(pthread_t*, const pthread_attr_t*, void* (*)(void*), void*) =
                (int (*)(pthread_t*, const pthread_attr_t*, void* (*)(void*), void*))rt_libc("pthread_create");
            if (!create) return; /* the lookup failed: output_unwritten, not a vacuous pass */
            create(&t, 0, spin, 0);
        }
        started = 1;
    }
#endif
#pragma omp parallel for
    for (int64_t i = 0; i < M; i++) {
        const float *r = x + i * N;
        float *o = y + i * N;
        float m = -INFINITY;
        for (int64_t j = 0; j < N; j++) m = r[j] > m ? r[j] : m;
        float s = 0.0f;
        for (int64_t j = 0; j < N; j++) {
            o[j] = expf(r[j] - m);
            s += o[j];
        }
        float inv = 1.0f / s;
        for (int64_t j = 0; j < N; j++) o[j] *= inv;
    }
}
