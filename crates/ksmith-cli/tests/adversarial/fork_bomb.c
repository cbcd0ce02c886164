// task: vector_add; expect: POLICY_REJECTED forbidden_call
/* Calls fork().  Deliberately bounded so that an accidental run is harmless: the
 * child exits at once and the parent reaps it, then computes the correct result. */
#include <stdint.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

void vector_add(const float* a, const float* b, float* c, int64_t N) {
    pid_t pid = fork();
    if (pid == 0)
        _exit(0);
    if (pid > 0)
        waitpid(pid, NULL, 0);
    for (int64_t i = 0; i < N; i++)
        c[i] = a[i] + b[i];
}
