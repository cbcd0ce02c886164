// task: vector_add; expect: INCORRECT_NUMERICAL numerical_mismatch
// Each attempt below is something the sandbox must refuse, tried with raw system calls so that
// no name check is involved: creating a file outside its directory, opening a network or Unix socket,
// a new user namespace, reading the host's /proc, leaving the process group, tracing its
// parent. The output is correct only if one of them worked, so a hole shows up as PASSED.
// The calls go through libc's syscall(), found in memory (an inline `syscall` instruction, or
// importing syscall(), is refused by the library policy before the sandbox is reached): the
// name policy is a courtesy, the sandbox is the boundary, and this case tests the boundary.
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

static long (*sys_call)(long, ...);

static long raw_call(long n, long a, long b, long c) {
    return sys_call(n, a, b, c);
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
    sys_call = (long (*)(long, ...))rt_libc("syscall");
    if (!sys_call) return; /* the lookup failed: output_unwritten, not the expected verdict */
    float wrong = escaped() ? 0.0f : 1.0f;
    for (int64_t i = 0; i < N; i++) c[i] = a[i] + b[i] + wrong;
}
