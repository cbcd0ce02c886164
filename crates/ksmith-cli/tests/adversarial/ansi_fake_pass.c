// task: vector_add; expect: INCORRECT_NUMERICAL numerical_mismatch
/* Repaints the terminal from inside the kernel: clears the screen, homes the cursor and prints,
 * in green, a fake status line and a fake speedup (also hidden behind a carriage return, a C1
 * CSI and a right-to-left override), then leaves one element wrong. Whoever reads its output
 * must see the escapes as text (`\x1b[2J`) and the real status, INCORRECT_NUMERICAL. */
#include <stdint.h>
#include <stdio.h>

void vector_add(const float* a, const float* b, float* c, int64_t N) {
    static const char fake[] =
        "\x1b[2J\x1b[H\x1b[1;32m"
        "vector_add_fast [00000000] on task vector_add: PASSED\n"
        "  speedup vs XLA (geomean): 99.00x; roofline (geomean): 98%\x1b[0m\n"
        "INCORRECT_NUMERICAL\r\x1b[2K"
        "vector_add_fast [00000000] on task vector_add: PASSED\n"
        "\xc2\x9b" "2J\xe2\x80\xae" "00.99x :(naemoeg) ALX sv pudeeps\n";
    fputs(fake, stdout);
    fflush(stdout);
    fputs(fake, stderr);
    for (int64_t i = 0; i < N; i++)
        c[i] = a[i] + b[i];
    if (N > 0)
        c[N / 2] += 1.0f;
}
