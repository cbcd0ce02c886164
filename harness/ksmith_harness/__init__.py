"""KernelSmith's Python harness: trusted reference/baseline server and untrusted runner.

The Rust side drives both over JSON lines (one request, one reply). PROTOCOL changes whenever
a message changes shape; HARNESS_VERSION whenever results could change. The Rust side adds the
digest of these files to it (environment fingerprint, reference cache), so an edit that forgot to
bump the version still never reuses an older harness's results.
"""

PROTOCOL = 4
HARNESS_VERSION = "0.3.1"
