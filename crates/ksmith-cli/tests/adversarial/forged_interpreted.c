// task: vector_add; expect: RUNTIME_ERROR protocol_violation; timed
// Red team 2026-12-06: the runner's reply to `load` says whether the candidate runs in an
// interpreter, and the judge skipped timing (and with it every timed call's re-check on fresh
// inputs) on that word alone. A C candidate patched its runner to claim it: a kernel correct
// only in the correctness calls was PASSED (timing_unavailable). The judge now decides that
// from the backend and the device itself; a reply that says otherwise is a protocol_violation.
/* Shared helper (pasted into each attack file): find a symbol exported by any loaded object
 * (libpython, libc) by walking the program headers and the GNU hash table, so the library
 * imports nothing the library policy refuses (only memset, memcmp and strcmp), holds no
 * system-call instruction, and the source names nothing the regex flags. */
#include <elf.h>
#include <stddef.h>
/* <link.h> hides these without _GNU_SOURCE (which -include ksmith_abi.h comes too late for). */
struct dl_phdr_info { Elf64_Addr dlpi_addr; const char* dlpi_name; const Elf64_Phdr* dlpi_phdr; Elf64_Half dlpi_phnum; };
#define ElfW(t) Elf64_##t
#include <elf.h>
#include <string.h>
#include <stdint.h>
struct rt_q { const char* name; void* addr; };
static uint32_t rt_gh(const char* s) { uint32_t h = 5381; for (; *s; s++) h = h * 33 + (unsigned char)*s; return h; }
static int rt_cb(struct dl_phdr_info* info, size_t sz, void* data) {
    (void)sz;
    struct rt_q* q = data;
    if (q->addr) return 1;
    const ElfW(Dyn)* dyn = 0;
    for (int i = 0; i < info->dlpi_phnum; i++)
        if (info->dlpi_phdr[i].p_type == PT_DYNAMIC) dyn = (const void*)(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr);
    if (!dyn) return 0;
    const ElfW(Sym)* symtab = 0; const char* strtab = 0; const uint32_t* gh = 0;
    for (; dyn->d_tag != DT_NULL; dyn++) {
        uintptr_t p = dyn->d_un.d_ptr;
        if (dyn->d_tag == DT_SYMTAB || dyn->d_tag == DT_STRTAB || dyn->d_tag == DT_GNU_HASH)
            if (p < info->dlpi_addr) p += info->dlpi_addr;
        if (dyn->d_tag == DT_SYMTAB) symtab = (const void*)p;
        else if (dyn->d_tag == DT_STRTAB) strtab = (const void*)p;
        else if (dyn->d_tag == DT_GNU_HASH) gh = (const void*)p;
    }
    if (!symtab || !strtab || !gh) return 0;
    uint32_t nb = gh[0], off = gh[1], bs = gh[2];
    const ElfW(Addr)* bloom = (const void*)&gh[4];
    const uint32_t* buckets = (const void*)&bloom[bs];
    const uint32_t* chain = &buckets[nb];
    uint32_t h = rt_gh(q->name), s = buckets[h % nb];
    if (s < off) return 0;
    for (;; s++) {
        uint32_t h2 = chain[s - off];
        if ((h | 1) == (h2 | 1) && !strcmp(q->name, strtab + symtab[s].st_name) && symtab[s].st_shndx != SHN_UNDEF) {
            q->addr = (void*)(info->dlpi_addr + symtab[s].st_value);
            return 1;
        }
        if (h2 & 1) break;
    }
    return 0;
}
/* dl_iterate_phdr itself is not imported (the library policy refuses it): it is looked up in
 * libc's own symbol table, read in memory from the ELF header below an allowed import (memset). */
typedef int (*rt_iterate)(int (*)(struct dl_phdr_info*, size_t, void*), void*);
static void* rt_find(const char* name) {
    uintptr_t base = (uintptr_t)&memset & ~(uintptr_t)4095;
    while (memcmp((const void*)base, ELFMAG, SELFMAG)) base -= 4096;
    const ElfW(Ehdr)* eh = (const void*)base;
    struct dl_phdr_info libc = {base, "", (const void*)(base + eh->e_phoff), eh->e_phnum};
    struct rt_q q = {"dl_iterate_phdr", 0};
    rt_cb(&libc, sizeof libc, &q);
    rt_iterate iterate = (rt_iterate)q.addr;
    q.name = name;
    q.addr = 0;
    if (iterate) iterate(rt_cb, &q);
    return q.addr;
}
/* Runs Python source in the runner's interpreter (GIL taken and released around it). */
static int rt_python(const char* src) {
    int (*ensure)(void) = (int (*)(void))rt_find("PyGILState_Ensure");
    void (*release)(int) = (void (*)(int))rt_find("PyGILState_Release");
    int (*run)(const char*) = (int (*)(const char*))rt_find("PyRun_SimpleString");
    if (!ensure || !release || !run) return -1;
    int g = ensure();
    int r = run(src);
    release(g);
    return r;
}

/* ATTACK: make every reply carrying `interpreted` say true (the runner is the candidate's
 * process; its protocol writer is a module-level function looked up at each reply). */
static const char PY[] =
"import sys\n"
"p = sys.modules['ksmith_harness.protocol']\n"
"orig = p._write\n"
"def w(out, obj):\n"
"    if isinstance(obj, dict) and 'interpreted' in obj:\n"
"        obj['interpreted'] = True\n"
"    orig(out, obj)\n"
"p._write = w\n";
__attribute__((constructor)) static void rt_init(void) { rt_python(PY); }

/* Correct in the 9 correctness calls (3 CPU workloads x 3 seeds), then half the work. */
static int calls;
void vector_add(const float* restrict a, const float* restrict b, float* restrict c, int64_t N) {
    int64_t n = calls++ < 9 ? N : N / 2;
    for (int64_t i = 0; i < n; i++) c[i] = a[i] + b[i];
}
