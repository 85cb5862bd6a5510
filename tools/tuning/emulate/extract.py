#!/usr/bin/env python3
"""Prints the anonymous-namespace part of a step file (constants, device helpers, kernels; no host launcher, whose
<<<>>> a host compiler cannot read) inside `namespace NAME`, for emulate01.cpp.   extract.py FILE.cu NAME"""
import re
import sys

s = open(sys.argv[1]).read()
a = s.index("namespace {\n") + len("namespace {\n")
b = s.index("}  // namespace\n", a)
body = s[a:b]
# A launcher inside the namespace (step 6's launch_async_pipeline template): drop its paragraph, from the blank line
# before it to the blank line after it (or the namespace's end).
while "<<<" in body:
    i = body.index("<<<")
    p, q = body.rfind("\n\n", 0, i), body.find("\n\n", i)
    body = body[: p + 1] + (body[q + 2 :] if q >= 0 else "")
# Dynamic shared memory (extern __shared__ T x[]) becomes the block's buffer that shim.h's launch() allocates.
body = re.sub(r"extern __shared__ (?:__align__\(\d+\) )?(\w+) (\w+)\[\];",
              r"\1* const \2 = reinterpret_cast<\1*>(g_dyn_smem);", body)
print("namespace " + sys.argv[2] + " {\n" + body.replace("std::invalid_argument", "std::runtime_error") + "\n}")
