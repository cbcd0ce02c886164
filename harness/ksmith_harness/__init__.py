"""KernelSmith's Python harness: trusted reference/baseline server and untrusted runner.

The Rust side drives both over JSON lines (one request, one reply). PROTOCOL changes whenever
a message changes shape; HARNESS_VERSION whenever results could change (it keys the caches).
"""

PROTOCOL = 4
HARNESS_VERSION = "0.3.0"
