# task: vector_add; expect: POLICY_REJECTED forbidden_call
# A Pallas module whose host function calls the task's own reference instead of computing anything.
from reference import reference


def vector_add(a, b, N):
    return reference(a, b)
