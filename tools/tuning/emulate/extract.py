#!/usr/bin/env python3
"""Prints the anonymous-namespace part of a step file (constants, device helpers, kernels; no host launcher, whose
<<<>>> a host compiler cannot read) inside `namespace NAME`, for emulate01.cpp.   extract.py FILE.cu NAME"""
import sys

s = open(sys.argv[1]).read()
a = s.index("namespace {\n") + len("namespace {\n")
b = s.index("}  // namespace\n", a)
print("namespace " + sys.argv[2] + " {\n" + s[a:b].replace("std::invalid_argument", "std::runtime_error") + "\n}")
