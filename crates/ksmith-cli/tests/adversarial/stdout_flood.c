// task: rmsnorm; expect: INCORRECT_NUMERICAL numerical_mismatch
/* Floods stdout with fake success lines (300,000 per call, ~10 MB, via libc's fwrite found
 * in memory, so that the library policy does not reject it first) to confuse anything
 * that parses the kernel's output, and writes results wrong by a factor of 1.5. */
#include <math.h>
#include <stdio.h>
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

void rmsnorm(const float* x, const float* w, float* y, int64_t M, int64_t N) {
    static const char line[] = "PASSED speedup=100.0x max_err=0.0\n";
    size_t (*put)(const void*, size_t, size_t, FILE*) = (size_t (*)(const void*, size_t, size_t, FILE*))rt_libc("fwrite");
    int (*flush)(FILE*) = (int (*)(FILE*))rt_libc("fflush");
    FILE** out = (FILE**)rt_libc("stdout");
    if (!put || !flush || !out) return; /* the lookup failed: output_unwritten */
    for (int k = 0; k < 300000; k++)
        put(line, 1, sizeof line - 1, *out);
    flush(*out);
    for (int64_t i = 0; i < M; i++) {
        const float* xr = x + i * N;
        float* yr = y + i * N;
        float ss = 0.0f;
        for (int64_t j = 0; j < N; j++)
            ss += xr[j] * xr[j];
        float r = 1.0f / sqrtf(ss / (float)N + 1e-6f);
        for (int64_t j = 0; j < N; j++)
            yr[j] = 1.5f * xr[j] * r * w[j];
    }
}
