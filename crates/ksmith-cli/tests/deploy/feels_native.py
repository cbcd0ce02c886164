"""Run by tests/deploy.rs on an export of vector_add: the package has a version, help() on a
kernel is about that kernel and lists its members, and a fallback warns once per reason."""

import pydoc
import re
import warnings

import jax.numpy as jnp
import ksmith_kernels as kk

assert re.fullmatch(r"0\.1\.0\+ks[0-9a-f]{12}", kk.__version__), kk.__version__
assert "__version__" in kk.__all__

doc = pydoc.render_doc(kk.vector_add, renderer=pydoc.plaintext)
head = doc.splitlines()[0]
assert "vector_add in module ksmith_kernels" in head, head
assert "Kernel in module" not in head, head
for member in ("vector_add.unchecked(a, b, **axes)", "vector_add.reference(a, b)", "vector_add.why_not(a, b, **axes)", "vector_add.status()"):
    assert member in doc, (member, doc)
assert kk.vector_add.__name__ == "vector_add"

small = jnp.ones((1000,), jnp.float32)
other = jnp.ones((2000,), jnp.float32)
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    # Outside the validated shapes, three times and at two sizes: one warning for the reason.
    for x in (small, small, other):
        assert float(kk.vector_add(x, x)[0]) == 2.0
    # Another dtype: another reason, one more warning.
    for _ in range(2):
        try:
            kk.vector_add(small.astype(jnp.float64), small.astype(jnp.float64))
        except TypeError:
            pass

        @kk.apply("vector_add")
        def mine(a, b):
            return a + b

        mine(small.astype(jnp.int32), small.astype(jnp.int32))
fallbacks = [w for w in caught if issubclass(w.category, kk.FallbackWarning)]
messages = [str(w.message) for w in fallbacks]
assert len(fallbacks) == 2, messages
assert "outside the validated range" in messages[0], messages
assert "int32" in messages[1], messages
assert all(m.startswith("ksmith_kernels.vector_add: ") for m in messages), messages
# Warned at the caller's line, not inside the runtime.
assert all(w.filename == __file__ for w in fallbacks), [w.filename for w in fallbacks]
print("feels native ok")
