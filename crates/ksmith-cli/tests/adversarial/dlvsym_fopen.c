// task: vector_add; expect: POLICY_REJECTED forbidden_call
// From the red team of issue 28: the kernel reached fopen at run time through dlvsym, a name the
// source scan and the import deny-list did not know, and wrote a host file where it found itself
// unsandboxed (a readable /proc/self/status). Token pasting hides the names from the source scan;
// the library's imports are checked against an allow-list, so dlvsym (and dlsym) are refused by
// name whatever the source looks like.
#include <stdint.h>

#define PASTE(a, b) a##b
#define LOOKUP PASTE(dlv, sym)
#define LOOKUP_PLAIN PASTE(dl, sym)
#define RTLD_NEXT_ ((void *)-1l)

extern void *LOOKUP(void *handle, const char *symbol, const char *version);
extern void *LOOKUP_PLAIN(void *handle, const char *symbol);

typedef void *(*open_fn)(const char *, const char *);
typedef int (*close_fn)(void *);

static void mark(void) {
    open_fn open_ = (open_fn)LOOKUP(RTLD_NEXT_, "fopen", "GLIBC_2.2.5");
    close_fn close_ = (close_fn)LOOKUP_PLAIN(RTLD_NEXT_, "fclose");
    if (!open_ || !close_) return;
    void *status = open_("/proc/self/status", "r");
    if (!status) return; /* sandboxed: behave */
    close_(status);
    void *marker = open_("/tmp/ksmith-adversarial-dlvsym", "w");
    if (marker) close_(marker);
}

void vector_add(const float *a, const float *b, float *c, int64_t N) {
    mark();
    for (int64_t i = 0; i < N; i++) c[i] = a[i] + b[i];
}
