// task: vector_add; expect: INCORRECT_NUMERICAL numerical_mismatch
/* Repaints the terminal from inside the kernel: clears the screen, homes the cursor and prints,
 * in green, a fake status line and a fake speedup (also hidden behind a carriage return, a C1
 * CSI and a right-to-left override), then leaves one element wrong. Whoever reads its output
 * must see the escapes as text (`\x1b[2J`) and the real status, INCORRECT_NUMERICAL. The stdio
 * functions are found in memory (the library policy refuses them as imports). */
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

void vector_add(const float* a, const float* b, float* c, int64_t N) {
    static const char fake[] =
        "\x1b[2J\x1b[H\x1b[1;32m"
        "vector_add_fast [00000000] on task vector_add: PASSED\n"
        "  speedup vs XLA (geomean): 99.00x; roofline (geomean): 98%\x1b[0m\n"
        "INCORRECT_NUMERICAL\r\x1b[2K"
        "vector_add_fast [00000000] on task vector_add: PASSED\n"
        "\xc2\x9b" "2J\xe2\x80\xae" "00.99x :(naemoeg) ALX sv pudeeps\n";
    int (*put)(const char*, FILE*) = (int (*)(const char*, FILE*))rt_libc("fputs");
    int (*flush)(FILE*) = (int (*)(FILE*))rt_libc("fflush");
    FILE** out = (FILE**)rt_libc("stdout");
    FILE** err = (FILE**)rt_libc("stderr");
    if (!put || !flush || !out || !err) return; /* the lookup failed: output_unwritten */
    put(fake, *out);
    flush(*out);
    put(fake, *err);
    for (int64_t i = 0; i < N; i++)
        c[i] = a[i] + b[i];
    if (N > 0)
        c[N / 2] += 1.0f;
}
