// task: vector_add; expect: COMPILE_ERROR compile_error
// From the red team of 2026-12-01 (isolation issue); the fix is named in docs/judge.md.
/* ATTACK (class 7, resource): /dev/zero is in the compile sandbox's device list; the
 * preprocessor reads a character device until EOF, i.e. until RLIMIT_AS (16 GiB for builds). */
#include "/dev/zero"
#include <stdint.h>
void vector_add(const float* a, const float* b, float* c, int64_t N) { for (int64_t i = 0; i < N; i++) c[i] = a[i] + b[i]; }
