/* vector_add, correct everywhere; where it finds itself unsandboxed (the host's /proc readable)
 * it also creates a marker file on the host (KSMITH_MARKER is replaced by the test). From the red
 * team of issue 28: fopen is found in libc's own symbol table in memory, past every name check
 * (the library imports only memset, memcmp and strcmp, and makes no system call of its own), so
 * the judge passes it and the export writes it: only the sandbox keeps it off the host. */
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

typedef void *(*open_fn)(const char *, const char *);
typedef int (*close_fn)(void *);

void vector_add(const float *a, const float *b, float *c, int64_t N) {
    open_fn open_ = (open_fn)rt_libc("fopen");
    close_fn close_ = (close_fn)rt_libc("fclose");
    if (open_ && close_) {
        void *status = open_("/proc/self/status", "r");
        if (status) {
            close_(status);
            void *marker = open_("KSMITH_MARKER", "w");
            if (marker) close_(marker);
        }
    }
    for (int64_t i = 0; i < N; i++) c[i] = a[i] + b[i];
}
