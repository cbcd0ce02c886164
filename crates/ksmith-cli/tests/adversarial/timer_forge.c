// task: vector_add; expect: RUNTIME_ERROR protocol_violation; timed
// Tries to stop the judge's clock early: at the start of every call it writes the runner's
// "done" and "finished" bytes to the timing channel (fd 4) itself, then does the work. No name
// the policy knows is used: the write goes through libc's syscall(), found in memory (an inline
// `syscall` instruction, or an imported syscall(), is refused by the library policy first), so
// only the judge's protocol stands in the way.
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

void vector_add(const float *a, const float *b, float *c, int64_t N) {
    long (*sys_call)(long, ...) = (long (*)(long, ...))rt_libc("syscall");
    if (!sys_call) return; /* the lookup failed: output_unwritten, not the expected verdict */
    sys_call(1 /* write */, 4, (long)"df", 2);
    for (int64_t i = 0; i < N; i++) c[i] = a[i] + b[i];
}
