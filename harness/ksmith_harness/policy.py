"""Static policy for Python candidates (Triton and Pallas), run by the trusted side on the AST.

The candidate is parsed, never imported, here. Rules:
- anywhere: no process, file, network, FFI or import machinery (os, subprocess, socket, ctypes,
  importlib, ...), no open/exec/eval/compile/__import__, no host callbacks from device code
  (jax.pure_callback, io_callback, jax.debug.callback), no import of the task's reference;
- host code (everything outside the kernel bodies): may allocate, reshape and launch, but may not
  do the work with library math: jnp.dot / matmul / einsum, jax.nn, jax.lax dot and conv,
  numpy and torch equivalents, vendor BLAS/DNN entry points;
- no side streams (torch.cuda.Stream, torch.cuda.stream, cupy streams): timing synchronizes the
  device, but a launch on a side stream must not escape the checks either.
Kernel bodies are functions decorated with triton.jit (Triton) or passed to pl.pallas_call
(Pallas, by name or through functools.partial); math inside them is the point.
"""

import ast

FORBIDDEN_MODULES = {
    "os",
    "sys",
    "subprocess",
    "socket",
    "ctypes",
    "cffi",
    "importlib",
    "pathlib",
    "shutil",
    "multiprocessing",
    "threading",
    "signal",
    "pickle",
    "marshal",
    "builtins",
    "io",
    "urllib",
    "http",
    "requests",
    "reference",
    "ksmith_harness",
}
FORBIDDEN_BUILTINS = {"open", "exec", "eval", "compile", "__import__", "globals", "setattr", "getattr", "breakpoint", "input"}
FORBIDDEN_ANYWHERE = {
    "jax.pure_callback",
    "jax.experimental.io_callback",
    "jax.debug.callback",
    "jax.experimental.host_callback",
    "torch.cuda.Stream",
    "torch.cuda.stream",
    "torch.cuda.ExternalStream",
    "cupy.cuda.Stream",
    "triton.runtime.driver",
}
# Library math that does the work when called from host code.
MATH_ROOTS = ("jax.numpy", "jax.lax", "jax.nn", "jax.scipy", "numpy", "torch", "cupy", "scipy")
MATH_NAMES = {
    "dot",
    "matmul",
    "einsum",
    "tensordot",
    "inner",
    "outer",
    "vdot",
    "kron",
    "dot_general",
    "batch_matmul",
    "bmm",
    "mm",
    "mv",
    "addmm",
    "baddbmm",
    "linear",
    "conv",
    "conv_general_dilated",
    "conv1d",
    "conv2d",
    "conv3d",
    "conv_transpose",
    "softmax",
    "log_softmax",
    "logsumexp",
    "layer_norm",
    "rms_norm",
    "group_norm",
    "scaled_dot_product_attention",
    "dot_product_attention",
    "gelu",
    "silu",
    "cumsum",
    "sort",
    "argsort",
    "fft",
}
WHOLE_MODULES = ("jax.numpy.linalg", "numpy.linalg", "torch.linalg", "torch.nn.functional", "torch.ops", "jax.scipy", "scipy")


def _dotted(node):
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


class _Scanner(ast.NodeVisitor):
    def __init__(self, backend):
        self.backend = backend
        self.aliases = {}
        self.kernels = set()
        self.problems = []
        self.in_kernel = 0

    def add(self, node, message):
        self.problems.append({"line": getattr(node, "lineno", 0), "message": message})

    def resolve(self, node):
        name = _dotted(node)
        if name is None:
            return None
        head, _, rest = name.partition(".")
        full = self.aliases.get(head, head)
        return f"{full}.{rest}" if rest else full

    def visit_Import(self, node):
        for a in node.names:
            root = a.name.split(".")[0]
            if root in FORBIDDEN_MODULES:
                self.add(node, f"import of `{a.name}` is not allowed in a kernel module")
            self.aliases[a.asname or root] = a.name if a.asname else root
        self.generic_visit(node)

    def visit_ImportFrom(self, node):
        mod = node.module or ""
        if node.level or mod.split(".")[0] in FORBIDDEN_MODULES:
            self.add(node, f"import from `{'.' * node.level}{mod}` is not allowed in a kernel module")
        for a in node.names:
            self.aliases[a.asname or a.name] = f"{mod}.{a.name}" if mod else a.name
            self._check_name(node, f"{mod}.{a.name}", importing=True)
        self.generic_visit(node)

    def _check_name(self, node, full, importing=False):
        if full in FORBIDDEN_ANYWHERE or any(full.startswith(f + ".") for f in FORBIDDEN_ANYWHERE):
            self.add(node, f"`{full}` is not allowed (host callbacks and side streams escape the judge)")
            return
        if self.in_kernel or importing:
            return
        last = full.rsplit(".", 1)[-1]
        root_ok = any(full == r or full.startswith(r + ".") for r in MATH_ROOTS)
        whole = any(full == m or full.startswith(m + ".") for m in WHOLE_MODULES)
        if root_ok and (last in MATH_NAMES or whole):
            self.add(node, f"host code calls `{full}`: library math must not do the work outside the kernel")

    def visit_Call(self, node):
        if isinstance(node.func, ast.Name) and node.func.id in FORBIDDEN_BUILTINS and node.func.id not in self.aliases:
            self.add(node, f"`{node.func.id}()` is not allowed in a kernel module")
        full = self.resolve(node.func)
        if full:
            self._check_name(node, full)
        self.generic_visit(node)

    def visit_BinOp(self, node):
        if isinstance(node.op, ast.MatMult) and not self.in_kernel:
            self.add(node, "host code uses `@` (matrix multiply): the work must happen in the kernel")
        self.generic_visit(node)

    def visit_Attribute(self, node):
        full = self.resolve(node)
        if full and (full in FORBIDDEN_ANYWHERE):
            self.add(node, f"`{full}` is not allowed (host callbacks and side streams escape the judge)")
        if isinstance(node.value, ast.Name) and node.attr.startswith("__") and node.attr != "__name__":
            self.add(node, f"dunder attribute `{node.attr}` is not allowed in a kernel module")
        self.generic_visit(node)

    def visit_FunctionDef(self, node):
        is_kernel = node.name in self.kernels or any(self._is_jit(d) for d in node.decorator_list)
        self.in_kernel += is_kernel
        self.generic_visit(node)
        self.in_kernel -= is_kernel

    visit_AsyncFunctionDef = visit_FunctionDef

    def _is_jit(self, dec):
        target = dec.func if isinstance(dec, ast.Call) else dec
        full = self.resolve(target) or ""
        return full.startswith("triton.") and full.rsplit(".", 1)[-1] in ("jit", "autotune", "heuristics")


def _pallas_kernels(tree):
    """Names of functions passed to pallas_call (directly or through functools.partial)."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and (_dotted(node.func) or "").endswith("pallas_call") and node.args:
            arg = node.args[0]
            if isinstance(arg, ast.Call) and (_dotted(arg.func) or "").endswith("partial") and arg.args:
                arg = arg.args[0]
            if isinstance(arg, ast.Name):
                names.add(arg.id)
    return names


def check(sources, backend):
    """Returns (syntax_errors, violations): lists of {file, line, column?, message}."""
    syntax, problems = [], []
    for name, text in sources:
        try:
            tree = ast.parse(text, filename=name)
        except SyntaxError as e:
            syntax.append({"file": name, "line": e.lineno or 0, "column": e.offset or 0, "message": e.msg})
            continue
        except (MemoryError, RecursionError, ValueError) as e:
            # The parser's own limits (nesting past its stack, null bytes): the source's fault.
            syntax.append({"file": name, "line": 0, "column": 0, "message": f"cannot be parsed: {_limit(e)}"})
            continue
        try:
            problems += [{"file": name, **p} for p in _scan(tree, backend)]
        except RecursionError:
            syntax.append({"file": name, "line": 0, "column": 0, "message": "nested too deeply for the policy check"})
    return syntax, problems


def _limit(e):
    """What a parser limit says, or its type when it says nothing (a MemoryError)."""
    return str(e) or type(e).__name__


def _scan(tree, backend):
    """The policy's findings on one parsed file."""
    s = _Scanner(backend)
    # Aliases first (imports may follow their use in function bodies).
    for node in ast.walk(tree):
        if isinstance(node, ast.Import | ast.ImportFrom):
            for a in node.names:
                if isinstance(node, ast.Import):
                    s.aliases[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
                else:
                    s.aliases[a.asname or a.name] = f"{node.module or ''}.{a.name}"
    s.kernels = _pallas_kernels(tree) if backend == "pallas" else set()
    s.visit(tree)
    return s.problems
