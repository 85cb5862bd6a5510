#!/usr/bin/env python3
"""Write the 2-D Poisson matrix (5-point Laplacian of a k x k grid, Dirichlet boundary) as a Matrix Market file:
k*k unknowns, symmetric positive definite, lower triangle stored ("symmetric"), 1-based. A test matrix for the
`cg` tool whose answer is known to converge; CG needs O(k) iterations on it.

  python3 labs/07_cg/tools/poisson_mtx.py K > poissonK.mtx
"""
import sys


def main():
    if len(sys.argv) != 2 or not sys.argv[1].isdigit() or int(sys.argv[1]) < 1:
        sys.exit(__doc__.strip().splitlines()[-1].strip().join(["usage: ", ""]))
    k = int(sys.argv[1])
    n = k * k
    lower = n + 2 * k * (k - 1)  # diagonal, west neighbours, south neighbours
    out = sys.stdout
    out.write("%%MatrixMarket matrix coordinate real symmetric\n")
    out.write(f"% 2-D Poisson, 5-point stencil on a {k} x {k} grid (labs/07_cg/tools/poisson_mtx.py)\n")
    out.write(f"{n} {n} {lower}\n")
    rows = []
    for i in range(n):
        x, y = i % k, i // k
        if y > 0:
            rows.append(f"{i + 1} {i - k + 1} -1\n")  # neighbour one grid row up: column i-k < i
        if x > 0:
            rows.append(f"{i + 1} {i} -1\n")          # neighbour to the left: column i-1
        rows.append(f"{i + 1} {i + 1} 4\n")
        if len(rows) > 65536:
            out.write("".join(rows))
            rows.clear()
    out.write("".join(rows))


if __name__ == "__main__":
    main()
